package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

func TestRecentWrites(t *testing.T) {
	g := NewWithT(t)
	w := newRecentWrites()
	t0 := time.Now()
	rec := func(deleting bool) *lbcfv1beta1.BackendRecord {
		br := &lbcfv1beta1.BackendRecord{}
		if deleting {
			br.DeletionTimestamp = &metav1.Time{Time: t0}
		}
		return br
	}
	w.wrote("g", "created", false, t0)
	w.wrote("g", "deleted", true, t0)
	w.wrote("other", "x", false, t0)

	// The cache shows neither write yet: both stay pending, the group comes back when they expire.
	pending, next := w.settle("g", map[string]*lbcfv1beta1.BackendRecord{"deleted": rec(false)}, t0.Add(time.Second))
	g.Expect(pending).To(HaveLen(2))
	g.Expect(pending["deleted"].deleted).To(BeTrue())
	g.Expect(next).To(Equal(recentWriteTTL - time.Second))

	// The cache shows the created record and the deleted one deleting: nothing pending.
	pending, next = w.settle("g", map[string]*lbcfv1beta1.BackendRecord{"created": rec(false), "deleted": rec(true)}, t0.Add(2*time.Second))
	g.Expect(pending).To(BeEmpty())
	g.Expect(next).To(BeZero())

	// A write the cache never confirms expires.
	pending, _ = w.settle("other", nil, t0.Add(recentWriteTTL))
	g.Expect(pending).To(BeEmpty())
	g.Expect(w.m).To(BeEmpty())

	// A deleted record gone from the cache is confirmed too.
	w.wrote("g", "gone", true, t0)
	pending, _ = w.settle("g", nil, t0.Add(time.Second))
	g.Expect(pending).To(BeEmpty())

	// Groups never reconciled again are pruned by later writes.
	w.wrote("deleted-group", "x", false, t0)
	w.wrote("g", "y", false, t0.Add(2*recentWriteTTL))
	g.Expect(w.m).NotTo(HaveKey(BeEquivalentTo("deleted-group")))
}
