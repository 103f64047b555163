package v1beta1

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Golden values computed outside Go (md5 of the original's format strings), so records created
// by the original LBCF keep their names under lbfed.
func TestRecordNamesMatchTheOriginal(t *testing.T) {
	g := NewWithT(t)
	g.Expect(PodRecordName("a-lb", "web", "3f2a1b4c-1111-4222-8333-444455556666", 80, "TCP")).To(Equal("7ddfd53dafde48a6adf47b8a89d21187"))
	g.Expect(ServiceRecordName("a-lb", "svc", "web", 80, "TCP", "node-1")).To(Equal("9f3ebc3ee844744078eefcdd7efa920f"))
	g.Expect(StaticRecordName("a-lb", "static", "1.1.1.1:80")).To(Equal("bbd3b0fa1ff4a799210f3b25c044b5de"))
}

func TestStaticAddrLabelValue(t *testing.T) {
	for _, addr := range []string{"1.1.1.1", "1.1.1.1:80", "opaque|value with spaces", "x.example.com", string(make([]byte, 100))} {
		v := StaticAddrLabelValue(addr)
		if errs := validation.IsValidLabelValue(v); len(errs) != 0 {
			t.Errorf("StaticAddrLabelValue(%q) = %q is not a label value: %v", addr, v, errs)
		}
	}
	if got := StaticAddrLabelValue("1.1.1.1"); got != "1.1.1.1" {
		t.Errorf("a valid label value must be kept, got %q", got)
	}
}

func TestSpecAccessors(t *testing.T) {
	g := NewWithT(t)
	lbName := "old"
	legacy := BackendGroupSpec{LBName: &lbName, Pods: &PodBackend{Port: &PortSelector{PortNumber: ptr(int32(8080))}}}
	g.Expect(legacy.GetLoadBalancers()).To(Equal([]string{"old"}))
	g.Expect(legacy.Pods.GetPortSelectors()).To(HaveLen(1))
	g.Expect(legacy.Pods.GetPortSelectors()[0].GetPort()).To(Equal(int32(8080)))
	g.Expect(legacy.Pods.GetPortSelectors()[0].GetProtocol()).To(Equal("TCP"))
	g.Expect(legacy.GetDeregisterPolicy()).To(Equal(DeregisterIfNotReady))
	g.Expect(legacy.BackendType()).To(Equal(BackendTypePod))
	var w *DeregisterWebhookSpec
	g.Expect(w.GetFailurePolicy()).To(Equal(FailurePolicyDoNothing))

	modern := BackendGroupSpec{LBName: &lbName, LoadBalancers: []string{"a", "b"}, Static: []string{"x"}}
	g.Expect(modern.GetLoadBalancers()).To(Equal([]string{"a", "b"}))
	g.Expect(modern.BackendType()).To(Equal(BackendTypeStatic))

	lb := LoadBalancer{}
	lb.Namespace = "kube-system"
	g.Expect(lb.IsAllowedFor("kube-system")).To(BeTrue())
	g.Expect(lb.IsAllowedFor("default")).To(BeFalse())
	lb.Spec.Scope = []string{"default"}
	g.Expect(lb.IsAllowedFor("kube-system")).To(BeFalse(), "a scope applies to the LB's own namespace too")
	g.Expect(lb.IsAllowedFor("default")).To(BeTrue())
	lb.Spec.Scope = []string{"*"}
	g.Expect(lb.IsAllowedFor("anything")).To(BeTrue())

	d := LoadBalancerDriver{}
	g.Expect(d.IsDraining()).To(BeFalse())
	d.Labels = map[string]string{DriverDrainingLabel: "True"}
	g.Expect(d.IsDraining()).To(BeTrue())
	g.Expect(d.WebhookTimeout("ensureBackend").Duration).To(Equal(DefaultWebhookTimeout))

	var p *EnsurePolicyConfig
	g.Expect(p.IsAlways()).To(BeFalse())
	g.Expect(p.Period()).To(Equal(DefaultEnsurePeriod))
	g.Expect(ReasonOperationInProgressLegacy.IsOperationInProgress()).To(BeTrue())
}

func ptr[T any](v T) *T { return &v }
