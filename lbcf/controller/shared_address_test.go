package controller_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
)

// Two backends with one address on one load balancer (pods of overlapping pod CIDRs, here two
// pods given the same IP): the first to go must not take the address off the device while the
// other's record still says Registered. The last holder deregisters it.
func TestSharedAddressIsDeregisteredByTheLastHolder(t *testing.T) {
	e := newEnv(t)
	g := e.g
	e.start(fastOptions())
	e.driverObj("mem")
	e.lb("lb1", "mem")
	id := e.lbID("lb1")
	p0 := e.pod("web-0", "web", "10.1.0.1")
	p1 := e.pod("web-1", "web", "10.1.0.1")
	e.pod("web-2", "web", "10.1.0.2")
	e.podGroup("web", []string{"lb1"}, []int32{80})
	g.Eventually(func() int32 { return e.group("web").Status.RegisteredBackends }, wait).Should(Equal(int32(3)))
	g.Expect(e.backends(id)()).To(ConsistOf("10.1.0.1:80", "10.1.0.2:80"))

	g.Expect(e.c.Delete(e.ctx, p0)).To(Succeed())
	g.Eventually(func() []lbcfv1beta1.BackendRecord { return e.records("web") }, wait).Should(HaveLen(2), "web-0's record is gone")
	g.Expect(e.backends(id)()).To(ConsistOf("10.1.0.1:80", "10.1.0.2:80"), "web-1's record still holds 10.1.0.1:80")
	// Events are written by the recorder's broadcaster, after the record's finalizer is gone.
	g.Eventually(e.events("SharedAddrKept"), wait).ShouldNot(BeEmpty(), "the skipped deregistration is told")

	// Reported on the records and the group while both held it (checked on what is left).
	p3 := e.pod("web-3", "web", "10.1.0.2")
	g.Eventually(func(g Gomega) {
		var dup []string
		for _, br := range e.records("web") {
			if c := br.Status.Condition(controller.DuplicateAddress); c != nil && c.Status == lbcfv1beta1.ConditionTrue {
				dup = append(dup, br.Spec.PodBackendInfo.Name)
			}
		}
		g.Expect(dup).To(ConsistOf("web-2", "web-3"))
	}, wait).Should(Succeed())
	g.Eventually(e.events("DuplicateAddress"), wait).ShouldNot(BeEmpty())
	g.Eventually(func() []metav1.Condition { return e.group("web").Status.Conditions }, wait).Should(ContainElement(And(
		HaveField("Type", controller.GroupDuplicateAddresses), HaveField("Status", metav1.ConditionTrue))))

	// The last holder deregisters.
	g.Expect(e.c.Delete(e.ctx, p1)).To(Succeed())
	g.Eventually(e.backends(id), wait).Should(ConsistOf("10.1.0.2:80"))
	g.Expect(e.c.Delete(e.ctx, p3)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(e.records("web")).To(HaveLen(1))
		g.Expect(e.records("web")[0].Status.Condition(controller.DuplicateAddress)).To(Or(BeNil(), HaveField("Status", lbcfv1beta1.ConditionFalse)))
	}, wait).Should(Succeed(), "a record left alone with its address says so")
	g.Expect(e.backends(id)()).To(ConsistOf("10.1.0.2:80"))
}

// A pod deleted while another pod with its address is being registered (kwok and overlapping
// pod CIDRs reuse addresses; the soak met it after a leader change, when one group pass created
// the new pod's record and deleted the old one's): the old record decides to deregister before
// the new one says Registered, and its call reaches the driver after the new one's ensure. The
// address must end on the device, held by the record that says Registered — whether the
// deregistration removed it at once or drained it first and let go on a later call.
func TestSharedAddressSurvivesADeregistrationThatRacedItsRegistration(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault memdriver.Fault
	}{
		{"removed at once", memdriver.Fault{Latency: 4 * time.Second}},
		{"drained, then let go", memdriver.Fault{Latency: 4 * time.Second, Drain: 1, RetryDelay: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			g := e.g
			e.start(fastOptions())
			e.driverObj("mem")
			e.lb("lb1", "mem")
			id := e.lbID("lb1")
			p0 := e.pod("web-0", "web", "10.1.0.1")
			e.podGroup("web", []string{"lb1"}, []int32{80})
			g.Eventually(e.backends(id), wait).Should(ConsistOf("10.1.0.1:80"))

			// web-1's ensure is held 2 s in the driver; web-0's deregistration, decided meanwhile,
			// reaches the driver 4 s after it is sent: after the ensure.
			e.drv.ResetCalls()
			e.drv.Inject(driver.EnsureBackend, memdriver.Fault{Latency: 2 * time.Second})
			e.pod("web-1", "web", "10.1.0.1")
			g.Eventually(func() int { n, _ := e.drv.InFlight(driver.EnsureBackend); return n }, wait).Should(Equal(1))
			e.drv.Inject(driver.DeregisterBackend, tc.fault)
			g.Expect(e.c.Delete(e.ctx, p0)).To(Succeed())
			g.Eventually(func() []lbcfv1beta1.BackendRecord { return e.records("web") }, wait).Should(HaveLen(1), "web-0's record is gone")

			// The race happened: web-0's deregistration of the address reached the driver after
			// web-1's ensure of it (the calls since web-1 was made).
			var ensured, deregistered time.Time
			for _, c := range e.drv.Calls(driver.EnsureBackend, driver.DeregisterBackend) {
				if c.Request.(*driver.BackendOperationRequest).BackendAddr != "10.1.0.1:80" {
					continue
				}
				if c.Webhook == driver.EnsureBackend && ensured.IsZero() {
					ensured = c.At
				}
				if c.Webhook == driver.DeregisterBackend && deregistered.IsZero() {
					deregistered = c.At
				}
			}
			g.Expect(ensured).NotTo(BeZero())
			g.Expect(deregistered.After(ensured)).To(BeTrue(), "web-0's deregistration (%s) reached the driver after web-1's ensure (%s)", deregistered, ensured)

			g.Eventually(e.backends(id), wait).Should(ConsistOf("10.1.0.1:80"), "web-1's record says Registered: the device holds its address")
			g.Expect(e.records("web")[0].IsRegistered()).To(BeTrue())
			g.Consistently(e.backends(id), 3*time.Second).Should(ConsistOf("10.1.0.1:80"))
		})
	}
}
