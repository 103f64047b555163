package federation_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lbfed/lbfed/federation"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// unobservedReport is a member's current report in which every pod that is not Ready is so on its
// control plane's evidence alone (its node lost, or Ready cleared by the node lifecycle
// controller while its containers are ready).
func unobservedReport(pods ...pod) *runtime.RawExtension {
	cands := candidates(pods...)
	for i := range cands {
		cands[i].Unobserved = !cands[i].Ready
	}
	return reportOf("", nil, 1, 1, false, cands)
}

// Issue 43: both members' API servers paused; once they resumed, their node controllers marked
// every pod not Ready while the pods served, and the federation emptied the VIP. Pods whose
// readiness their member could not observe are now kept like members Karmada cannot observe:
// for the grace period, then by the floor while nothing else serves; a member that reports them
// Ready again restores the group, and the status, events and metrics say all along what is kept.
func TestPodsUnobservedByTheirMemberAreKept(t *testing.T) {
	e := newEnv(t, 2*time.Second)
	g := e.g
	m1, m2 := e.twoServingMembers()
	all := e.backends()

	down := func(pods []pod) []pod {
		out := append([]pod(nil), pods...)
		for i := range out {
			out[i].ready = false
		}
		return out
	}
	e.setReports(map[string]*runtime.RawExtension{"m1": unobservedReport(down(m1)...), "m2": unobservedReport(down(m2)...)})
	marked := time.Now()
	g.Eventually(func(g Gomega) {
		for _, m := range []string{"m1", "m2"} {
			st := e.member(g, m)
			g.Expect(st.State).To(Equal(lbcfv1beta1.MemberContributing))
			g.Expect(st.Reason).To(Equal(federation.ReasonReadinessUnobserved))
			g.Expect(st.UnobservedCandidates).To(Equal(int32(2)))
		}
		g.Expect(e.condition(g, lbcfv1beta1.BackendGroupReadinessUnobserved)).To(HaveField("Status", metav1.ConditionTrue))
	}, wait).Should(Succeed())
	g.Expect(e.backends()).To(ConsistOf(all), "kept within the grace period")
	g.Expect(e.gauge("lbfed_cluster_unobserved_candidates", map[string]string{"cluster": e.ns + "-m1"})).To(Equal(2.0))
	g.Eventually(func(g Gomega) []string { return e.events(g, "MemberReadinessUnobserved") }, wait).Should(HaveLen(2))

	// Past the grace period nothing else serves: the floor keeps all of them.
	g.Eventually(func(g Gomega) string { return e.condition(g, lbcfv1beta1.BackendGroupReadinessUnobserved).Reason }, wait).
		Should(Equal("NoOtherBackendEligible"))
	g.Expect(time.Since(marked)).To(BeNumerically(">=", 2*time.Second))
	g.Consistently(e.backends, time.Second).Should(ConsistOf(all))

	// m1's kubelets assert Ready again: m1 serves, so m2's pods, past their grace period, go.
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": unobservedReport(down(m2)...)})
	g.Eventually(e.backends, wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.2:80"))
	// m1 was Contributing all along (reason ReadinessUnobserved): wait for the reason, which the
	// status write after the registrations carries.
	g.Eventually(func(g Gomega) string {
		st := e.member(g, "m1")
		g.Expect(st.State).To(Equal(lbcfv1beta1.MemberContributing))
		return st.Reason
	}, wait).Should(Equal("Reporting"))
	g.Eventually(func(g Gomega) []string { return e.events(g, "MemberReadinessObserved") }, wait).ShouldNot(BeEmpty())

	// m2's too: the group is back to exactly the Ready pods, from the fresh reports.
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": report(nil, 1, 1, false, m2...)})
	g.Eventually(e.backends, wait).Should(ConsistOf(all))
	g.Eventually(func(g Gomega) metav1.ConditionStatus {
		return e.condition(g, lbcfv1beta1.BackendGroupReadinessUnobserved).Status
	}, wait).Should(Equal(metav1.ConditionFalse))
	g.Expect(e.gauge("lbfed_cluster_unobserved_candidates", map[string]string{"cluster": e.ns + "-m2"})).To(Equal(0.0))
}
