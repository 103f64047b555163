package controller

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	scheme := runtime.NewScheme()
	g.Expect(lbcfv1beta1.AddToScheme(scheme)).To(Succeed())
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&lbcfv1beta1.BackendRecord{}, indexRecordLBAddr, recordLBAddrIndex).
		WithObjects(me, rec("same", "lb1", addr), rec("other-addr", "lb1", otherAddr), rec("other-lb", otherLB, addr),
			rec("no-addr", "lb1", "")).
		Build()
	r := &BackendRecordReconciler{Client: c}

	// The bucket holds all three records with an address besides me...
	list := &lbcfv1beta1.BackendRecordList{}
	g.Expect(c.List(context.Background(), list, client.MatchingFields{indexRecordLBAddr: bucket})).To(Succeed())
	g.Expect(list.Items).To(HaveLen(4))
	// ...and sameAddr keeps the one of the same key.
	others, err := r.sameAddr(context.Background(), me)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(others).To(HaveLen(1))
	g.Expect(others[0].Name).To(Equal("same"))
}
