package federation

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

func countedRecord(uid, cluster string, registered, deleting bool, created time.Time) *lbcfv1beta1.BackendRecord {
	br := &lbcfv1beta1.BackendRecord{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid), CreationTimestamp: metav1.NewTime(created)}}
	if cluster != "" {
		br.Labels = map[string]string{lbcfv1beta1.LabelCluster: cluster}
	}
	if registered {
		br.Status.Conditions = []lbcfv1beta1.BackendRecordCondition{{Type: lbcfv1beta1.BackendRegistered, Status: lbcfv1beta1.ConditionTrue}}
	}
	if deleting {
		now := metav1.Now()
		br.DeletionTimestamp = &now
	}
	return br
}

// The record gauges follow a record's life as the informer delivers it: created (pending),
// registered, deleting, deleted; records without a cluster are not federated ones.
func TestRecordCountsFollowTheInformer(t *testing.T) {
	g := NewWithT(t)
	c := newRecordCounts()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	old := time.Now().Add(-time.Minute)
	gauges := func() string {
		mfs, err := reg.Gather()
		g.Expect(err).NotTo(HaveOccurred())
		out := ""
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				v := m.GetGauge().GetValue()
				if mf.GetName() == "lbfed_cluster_unregistered_oldest_seconds" {
					v = float64(int(v/10) * 10) // tens of seconds
				}
				out += fmt.Sprintf("%s{%s}=%g ", mf.GetName(), m.GetLabel()[0].GetValue(), v)
			}
		}
		return out
	}
	add := func(o any) { c.apply(o, 1) }
	update := func(o, n any) { c.apply(o, -1); c.apply(n, 1) }
	del := func(o any) {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		c.apply(o, -1)
	}

	a := countedRecord("a", "m1", false, false, old)
	b := countedRecord("b", "m1", false, false, time.Now())
	x := countedRecord("x", "m2", false, false, time.Now())
	local := countedRecord("l", "", true, false, old)
	for _, o := range []any{a, b, x, local} {
		add(o)
	}
	g.Expect(gauges()).To(Equal("lbfed_cluster_unregistered_backends{m1}=2 lbfed_cluster_unregistered_backends{m2}=1 " +
		"lbfed_cluster_unregistered_oldest_seconds{m1}=60 lbfed_cluster_unregistered_oldest_seconds{m2}=0 "))

	a2 := countedRecord("a", "m1", true, false, old)
	update(a, a2)
	update(x, x) // a resync
	g.Expect(gauges()).To(Equal("lbfed_cluster_registered_backends{m1}=1 lbfed_cluster_unregistered_backends{m1}=1 lbfed_cluster_unregistered_backends{m2}=1 " +
		"lbfed_cluster_unregistered_oldest_seconds{m1}=0 lbfed_cluster_unregistered_oldest_seconds{m2}=0 "))

	// Deleting: a registered record counts until it is deregistered; a pending one stops at once.
	a3 := countedRecord("a", "m1", true, true, old)
	update(a2, a3)
	x2 := countedRecord("x", "m2", false, true, x.CreationTimestamp.Time)
	update(x, x2)
	g.Expect(gauges()).To(Equal("lbfed_cluster_registered_backends{m1}=1 lbfed_cluster_unregistered_backends{m1}=1 lbfed_cluster_unregistered_oldest_seconds{m1}=0 "))
	a4 := countedRecord("a", "m1", false, true, old)
	update(a3, a4)
	del(a4)
	del(toolscache.DeletedFinalStateUnknown{Key: "ns/x", Obj: x2})
	del(b)
	del(local)
	g.Expect(gauges()).To(BeEmpty())
	g.Expect(testutil.CollectAndCount(c)).To(Equal(0))
}

// A scrape costs nothing that grows with the registered records (it listed every one of them).
func BenchmarkRecordGaugesScrape(b *testing.B) {
	c := newRecordCounts()
	now := time.Now()
	for i := 0; i < 100000; i++ {
		c.apply(countedRecord(fmt.Sprint(i), fmt.Sprintf("m%d", i%2+1), true, false, now), 1)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
