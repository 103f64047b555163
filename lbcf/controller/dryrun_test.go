package controller_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
)

// In dry-run mode only drivers that accept it are called, with dryRun: true, and nothing is
// written: not the LoadBalancer's status, not a record.
func TestDryRun(t *testing.T) {
	e := newEnv(t)
	g := e.g
	refusing := memdriver.New()
	e.driverObj("mem", func(d *lbcfv1beta1.LoadBalancerDriver) { d.Spec.AcceptDryRunCall = true })
	e.lb("lb1", "mem")
	e.lb("lb-new", "mem")
	// lb1 was created before the controller switched to dry-run.
	lb := &lbcfv1beta1.LoadBalancer{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "lb1"}, lb)).To(Succeed())
	lb.Status.LBInfo = map[string]string{memdriver.LBIDKey: "lb-x"}
	lb.Status.Conditions = []lbcfv1beta1.LoadBalancerCondition{{Type: lbcfv1beta1.LBCreated, Status: lbcfv1beta1.ConditionTrue},
		{Type: lbcfv1beta1.LBAttributesSynced, Status: lbcfv1beta1.ConditionTrue}}
	g.Expect(e.c.Status().Update(e.ctx, lb)).To(Succeed())
	// A second driver that does not accept dry-run calls.
	other := newEnv(t)
	_ = refusing
	d2 := &lbcfv1beta1.LoadBalancerDriver{}
	d2.Name, d2.Namespace = "no-dry", e.ns
	d2.Spec.DriverType, d2.Spec.URL = "Webhook", other.url
	g.Expect(e.c.Create(e.ctx, d2)).To(Succeed())
	e.lb("lb-other", "no-dry")

	opts := fastOptions()
	opts.DryRun = true
	e.start(opts)
	e.pod("web-0", "web", "10.1.0.1")
	e.podGroup("web", []string{"lb1"}, []int32{80})

	g.Eventually(func() int { return e.drv.CountCalls(driver.CreateLoadBalancer) }, wait).Should(BeNumerically(">=", 1))
	g.Consistently(func() []lbcfv1beta1.BackendRecord { return e.records("web") }, 2*time.Second).Should(BeEmpty())
	for _, c := range e.drv.Calls() {
		if r, ok := c.Request.(*driver.CreateLoadBalancerRequest); ok {
			g.Expect(r.DryRun).To(BeTrue())
		}
	}
	g.Expect(e.drv.LoadBalancers()).To(BeEmpty(), "dry-run calls change nothing on the driver")
	fresh := &lbcfv1beta1.LoadBalancer{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "lb-new"}, fresh)).To(Succeed())
	g.Expect(fresh.Status.Conditions).To(BeEmpty(), "no status is written")
	g.Expect(fresh.Finalizers).To(BeEmpty(), "no finalizer is written")
	g.Expect(other.drv.Calls()).To(BeEmpty(), "drivers that do not accept dry-run calls are not called")
	g.Expect(e.group("web").Status.Backends).To(BeZero())
}
