package controller

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// The address index holds buckets (lbAddrBucket), not keys: records of another address or
// another load balancer that fall in the same bucket are not the same address.
func TestSameAddrKeepsOnlyTheKeyOfTheBucket(t *testing.T) {
	g := NewWithT(t)
	const addr = "10.1.0.1:80"
	bucket := lbAddrBucket(lbAddrKey("ns", "lb1", addr))
	// Another address and another load balancer whose keys land in the same bucket.
	var otherAddr, otherLB string
	for i := 0; otherAddr == "" || otherLB == ""; i++ {
		if a := fmt.Sprintf("10.2.%d.%d:80", i/256, i%256); otherAddr == "" && lbAddrBucket(lbAddrKey("ns", "lb1", a)) == bucket {
			otherAddr = a
		}
		if lb := fmt.Sprintf("lb-%d", i); otherLB == "" && lbAddrBucket(lbAddrKey("ns", lb, addr)) == bucket {
			otherLB = lb
		}
	}
	rec := func(name, lb, addr string) *lbcfv1beta1.BackendRecord {
		return &lbcfv1beta1.BackendRecord{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
			Spec:       lbcfv1beta1.BackendRecordSpec{LBName: lb, LBInfo: map[string]string{"id": "device"}},
			Status:     lbcfv1beta1.BackendRecordStatus{BackendAddr: addr},
		}
	}
	me := rec("me", "lb1", addr)
	all := []*lbcfv1beta1.BackendRecord{me, rec("same", "lb1", addr), rec("other-addr", "lb1", otherAddr), rec("other-lb", otherLB, addr), rec("no-addr", "lb1", "")}

	// The informer's store, as the controllers' cache of every namespace has it...
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{indexRecordLBAddr: recordLBAddrIndex})
	// ...and the field index of a cache of some namespaces.
	scheme := runtime.NewScheme()
	g.Expect(lbcfv1beta1.AddToScheme(scheme)).To(Succeed())
	fields := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&lbcfv1beta1.BackendRecord{}, indexRecordLBAddr, func(o client.Object) []string {
		keys, _ := recordLBAddrIndex(o)
		return keys
	})
	for _, o := range all {
		g.Expect(store.Add(o)).To(Succeed())
		fields = fields.WithObjects(o.DeepCopy())
	}
	for _, tc := range []struct {
		name  string
		addrs addrBuckets
	}{{"informer store", storeBuckets{store}}, {"field index", listBuckets{fields.Build()}}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			// The bucket holds all four records with an address...
			bucketed, err := tc.addrs.bucket(context.Background(), bucket)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(bucketed).To(HaveLen(4))
			// ...and sameAddr keeps the other one of the same key.
			r := &backendRecordReconciler{addrs: tc.addrs}
			others, err := r.sameAddr(context.Background(), me)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(others).To(HaveLen(1))
			g.Expect(others[0].Name).To(Equal("same"))
		})
	}
	// The store's records are read in place, not copied.
	others, err := (&backendRecordReconciler{addrs: storeBuckets{store}}).sameAddr(context.Background(), me)
	g.Expect(err).NotTo(HaveOccurred())
	same, _, _ := store.GetByKey("ns/same")
	g.Expect(others).To(ConsistOf(BeIdenticalTo(same)))
}
