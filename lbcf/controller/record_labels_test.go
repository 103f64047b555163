package controller_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// TestWholeRecordWritesKeepTheBackendLabel: the record cache does not keep a record's backend
// label (lbcf.tkestack.io/backend-pod, -backend-static-addr: derived from the spec), so the
// engine's writes of whole records — the group's spec update, the finalizer's removal from a
// record another finalizer holds — must put it back, or they remove it from the record.
func TestWholeRecordWritesKeepTheBackendLabel(t *testing.T) {
	e := newEnv(t)
	e.start(fastOptions())
	g := e.g
	e.driverObj("mem")
	e.lb("lb1", "mem")
	id := e.lbID("lb1")
	pod := e.pod("web-0", "web", "10.1.0.1")
	e.podGroup("web", []string{"lb1"}, []int32{80})
	static := &lbcfv1beta1.BackendGroup{}
	static.Name, static.Namespace = "static", e.ns
	static.Spec = lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb1"}, Static: []string{"192.0.2.1:80"}}
	g.Expect(e.c.Create(e.ctx, static)).To(Succeed())
	g.Eventually(e.backends(id), wait).Should(ConsistOf("10.1.0.1:80", "192.0.2.1:80"))

	labelsOf := map[string]map[string]string{}
	for _, grp := range []string{"web", "static"} {
		g.Eventually(func() []lbcfv1beta1.BackendRecord { return e.records(grp) }, wait).Should(HaveLen(1))
		br := e.records(grp)[0]
		g.Expect(br.Labels).To(HaveLen(4), "driver, load balancer, group and backend")
		labelsOf[grp] = br.Labels
		// Another finalizer keeps the record once lbfed has removed its own.
		patch := []byte(`{"metadata":{"finalizers":["` + lbcfv1beta1.FinalizerDeregisterBackend + `","test.lbfed.io/hold"]}}`)
		g.Expect(e.c.Patch(e.ctx, &br, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	}
	g.Expect(labelsOf["web"]).To(HaveKeyWithValue(lbcfv1beta1.LabelPodName, "web-0"))
	g.Expect(labelsOf["static"]).To(HaveKeyWithValue(lbcfv1beta1.LabelStaticAddr, lbcfv1beta1.StaticAddrLabelValue("192.0.2.1:80")))

	// The group writes new parameters into its records (an update of the whole record).
	for _, grp := range []string{"web", "static"} {
		bg := e.group(grp)
		e.update(bg, func() { bg.Spec.Parameters = map[string]string{"weight": "5"} })
		g.Eventually(func(g Gomega) {
			br := e.records(grp)[0]
			g.Expect(br.Spec.Parameters).To(Equal(map[string]string{"weight": "5"}))
			g.Expect(br.Labels).To(Equal(labelsOf[grp]))
		}, wait).Should(Succeed())
	}

	// Deregistered: lbfed removes its finalizer (an update of the whole record); the other holds.
	g.Expect(e.c.Delete(e.ctx, pod)).To(Succeed())
	g.Expect(e.c.Delete(e.ctx, static)).To(Succeed())
	g.Eventually(e.backends(id), wait).Should(BeEmpty())
	for _, grp := range []string{"web", "static"} {
		g.Eventually(func(g Gomega) {
			list := &lbcfv1beta1.BackendRecordList{}
			g.Expect(e.c.List(e.ctx, list, client.InNamespace(e.ns))).To(Succeed())
			var br *lbcfv1beta1.BackendRecord
			for i := range list.Items {
				if list.Items[i].Spec.LBName == "lb1" && list.Items[i].Labels[lbcfv1beta1.LabelGroupName] == grp {
					br = &list.Items[i]
				}
			}
			g.Expect(br).NotTo(BeNil())
			g.Expect(br.Finalizers).To(Equal([]string{"test.lbfed.io/hold"}))
			g.Expect(br.Labels).To(Equal(labelsOf[grp]))
			g.Expect(br.Status.BackendAddr).NotTo(BeEmpty())
		}, wait).Should(Succeed())
	}
	list := &lbcfv1beta1.BackendRecordList{}
	g.Expect(e.c.List(e.ctx, list, client.InNamespace(e.ns))).To(Succeed())
	for i := range list.Items {
		list.Items[i].Finalizers = nil
		g.Expect(client.IgnoreNotFound(e.c.Update(e.ctx, &list.Items[i]))).To(Succeed())
	}
}
