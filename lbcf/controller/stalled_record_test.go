package controller_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// notEligibleCounter is the standalone source, counting the generateBackendAddr requests it
// refused because the backend was not eligible: evidence the record reconciler looked.
type notEligibleCounter struct {
	controller.LocalSource
	refused atomic.Int32
}

func (c *notEligibleCounter) GenerateRequest(ctx context.Context, br *lbcfv1beta1.BackendRecord) (*driver.PodBackendInRequest, *driver.ServiceBackendInRequest, bool, error) {
	pod, svc, ok, err := c.LocalSource.GenerateRequest(ctx, br)
	if !ok && err == nil {
		c.refused.Add(1)
	}
	return pod, svc, ok, err
}

// A record without an address that the deregister policy keeps while its pod is not Ready (a
// controller finds one after a restart, or when the pod flapped between the record's creation
// and its first reconcile) is registered as soon as the pod is Ready again — not on some resync
// an hour later, and not never.
func TestKeptRecordWithoutAddressIsRegisteredWhenEligible(t *testing.T) {
	e := newEnv(t)
	g := e.g
	src := &notEligibleCounter{}
	e.startMode(fastOptions(), func(ctx context.Context, mgr ctrl.Manager, o controller.Options) error {
		src.LocalSource = controller.LocalSource{Reader: mgr.GetClient()}
		return controller.SetupEngine(ctx, mgr, o, src.LocalSource, src, time.Hour, controller.LocalWatches(mgr.GetClient())...)
	})
	e.driverObj("mem")
	e.lb("lb1", "mem")
	id := e.lbID("lb1")
	p := e.pod("web-0", "web", "10.1.0.1")
	e.setPod(p, corev1.PodRunning, false, "10.1.0.1")
	policy := lbcfv1beta1.DeregisterIfNotRunning
	bg := e.podGroup("web", []string{"lb1"}, []int32{80}, func(bg *lbcfv1beta1.BackendGroup) { bg.Spec.DeregisterPolicy = &policy })
	g.Eventually(func() int64 { return e.group("web").Status.ObservedGeneration }, wait).Should(Equal(bg.Generation))
	g.Expect(e.records("web")).To(BeEmpty(), "a not-Ready pod gets no record")

	// The record as the controller left it: created while the pod was Ready, no address yet.
	lb := &lbcfv1beta1.LoadBalancer{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "lb1"}, lb)).To(Succeed())
	g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
	g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(bg), bg)).To(Succeed())
	yes := true
	br := &lbcfv1beta1.BackendRecord{
		ObjectMeta: metav1.ObjectMeta{
			Name: lbcfv1beta1.PodRecordName("lb1", "web", string(p.UID), 80, "TCP"), Namespace: e.ns,
			Labels: map[string]string{lbcfv1beta1.LabelDriverName: "mem", lbcfv1beta1.LabelLBName: "lb1",
				lbcfv1beta1.LabelGroupName: "web", lbcfv1beta1.LabelPodName: "web-0"},
			Finalizers: []string{lbcfv1beta1.FinalizerDeregisterBackend},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: lbcfv1beta1.APIVersion, Kind: lbcfv1beta1.KindBackendGroup,
				Name: bg.Name, UID: bg.UID, Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: lbcfv1beta1.BackendRecordSpec{LBName: "lb1", LBDriver: "mem", LBInfo: lb.Status.LBInfo, Parameters: bg.Spec.Parameters,
			PodBackendInfo: &lbcfv1beta1.PodBackendRecord{Name: "web-0", Port: lbcfv1beta1.PortSelector{Port: 80, Protocol: "TCP"}}},
	}
	g.Expect(e.c.Create(e.ctx, br)).To(Succeed())
	g.Eventually(src.refused.Load, wait).Should(BeNumerically(">=", 1), "the record was reconciled while its pod was not Ready")
	g.Expect(e.records("web")).To(HaveLen(1), "IfNotRunning keeps the record of a Running pod")

	e.setPod(p, corev1.PodRunning, true, "10.1.0.1")
	g.Eventually(e.backends(id), wait).Should(ConsistOf("10.1.0.1:80"))
	g.Eventually(func() int32 { return e.group("web").Status.RegisteredBackends }, wait).Should(Equal(int32(1)))
}
