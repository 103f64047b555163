package controller_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Group names longer than a label value (63 characters) are hashed in the records' labels; the
// record's own name and its generateBackendAddr check must use the real name.
func TestLongGroupNameRegistersPods(t *testing.T) {
	e := newEnv(t)
	g := e.g
	e.start(fastOptions())
	e.driverObj("mem")
	e.lb("lb1", "mem")
	id := e.lbID("lb1")
	name := "web-" + strings.Repeat("x", 196)
	g.Expect(name).To(HaveLen(200))
	p := e.pod("web-0", "web", "10.1.0.1")
	e.podGroup(name, []string{"lb1"}, []int32{80}, func(bg *lbcfv1beta1.BackendGroup) {
		bg.Spec.Pods.ByLabel.Selector = map[string]string{"app": "web"}
	})
	g.Eventually(e.backends(id), wait).Should(ConsistOf("10.1.0.1:80"))
	g.Eventually(func() int32 { return e.group(name).Status.RegisteredBackends }, wait).Should(Equal(int32(1)))
	list := &lbcfv1beta1.BackendRecordList{}
	g.Expect(e.c.List(e.ctx, list, client.InNamespace(e.ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	g.Expect(list.Items[0].Name).To(Equal(lbcfv1beta1.PodRecordName("lb1", name, string(p.UID), 80, "TCP")))
	g.Expect(e.c.Delete(e.ctx, p)).To(Succeed())
	g.Eventually(e.backends(id), wait).Should(BeEmpty())
}
