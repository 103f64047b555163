package federation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/federation"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// twoServingMembers makes the world with members m1 (pods a, b) and m2 (c, d), all registered.
func (e *env) twoServingMembers() (m1, m2 []pod) {
	e.world("m1", "m2")
	m1 = []pod{{"a", "10.1.0.1", true}, {"b", "10.1.0.2", true}}
	m2 = []pod{{"c", "10.2.0.1", true}, {"d", "10.2.0.2", true}}
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": report(nil, 1, 1, false, m2...)})
	e.g.Eventually(e.backends, wait).Should(HaveLen(4))
	return m1, m2
}

// ensuredSince returns the addresses ensureBackend was called for from call index n on.
func (e *env) ensuredSince(n int) []string {
	var out []string
	for _, c := range e.drv.Calls(driver.EnsureBackend)[n:] {
		out = append(out, c.Request.(*driver.BackendOperationRequest).BackendAddr)
	}
	return out
}

// Defect 1 of issue 12: a member back from an outage was re-registered at once from the report
// remembered before it, whose pod IPs may belong to other pods by now.
func TestRecoveryOnlyFromFreshReport(t *testing.T) {
	e := newEnv(t, 2*time.Second)
	g := e.g
	m1, m2 := e.twoServingMembers()

	e.cluster("m2", false)
	g.Eventually(e.backends, wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.2:80"), "withdrawn after grace while m1 serves")
	g.Eventually(func(g Gomega) {
		m := e.member(g, "m2")
		g.Expect(m.State).To(Equal(lbcfv1beta1.MemberWithdrawn))
		g.Expect(m.Reason).To(Equal("ClusterNotReady"))
		g.Expect(m.Since.IsZero()).To(BeFalse())
		c := e.condition(g, lbcfv1beta1.BackendGroupMembersWithdrawn)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring(e.ns + "-m2 (ClusterNotReady"))
	}, wait).Should(Succeed())
	g.Expect(e.gauge("lbfed_member_groups", map[string]string{"cluster": e.ns + "-m2", "state": "Withdrawn"})).To(Equal(1.0))

	// m2 returns; Karmada still holds its report from before the outage. While the controller
	// is seen acting (it asks for a fresh report and registers a new pod of m1), nothing of m2
	// comes back.
	calls := len(e.drv.Calls(driver.EnsureBackend))
	e.cluster("m2", true)
	m1 = append(m1, pod{"e", "10.1.0.3", true})
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": report(nil, 1, 1, false, m2...)})
	// Two reconciles close together may each ask (the second before its cache shows the first):
	// the request is the one that stays.
	var req, seen string
	g.Eventually(func(g Gomega) {
		m := e.member(g, "m2")
		g.Expect(m.State).To(Equal(lbcfv1beta1.MemberRecovering))
		g.Expect(e.template(g).Annotations[lbcfv1beta1.AnnotationReportRequest]).To(Equal(m.Request))
		last := seen
		seen = m.Request
		g.Expect(m.Request).To(Equal(last), "the same request on two reads 300 ms apart")
		req = m.Request
	}, wait, 300*time.Millisecond).Should(Succeed())
	g.Eventually(e.backends, wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.2:80", "10.1.0.3:80"))
	g.Consistently(e.backends, 2*time.Second).Should(HaveLen(3))

	// A report of m2 made before the request (echoing an older one) restores nothing either.
	older, _ := strconv.ParseInt(req, 10, 64)
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": reportFor(strconv.FormatInt(older-1, 10), nil, 1, 1, false, m2...)})
	m1 = append(m1, pod{"f", "10.1.0.4", true})
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": reportFor(strconv.FormatInt(older-1, 10), nil, 1, 1, false, m2...)})
	g.Eventually(e.backends, wait).Should(HaveLen(4))
	g.Consistently(e.backends, time.Second).Should(HaveLen(4))

	// The fresh report: pod c was replaced meanwhile (new IP); only what it says is registered.
	m2 = []pod{{"c2", "10.2.0.9", true}, {"d", "10.2.0.2", true}}
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": reportFor(req, nil, 1, 1, false, m2...)})
	g.Eventually(e.backends, wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.2:80", "10.1.0.3:80", "10.1.0.4:80", "10.2.0.9:80", "10.2.0.2:80"))
	g.Expect(e.ensuredSince(calls)).NotTo(ContainElement("10.2.0.1:80"), "the pre-outage IP is never registered again")
	g.Eventually(e.memberState("m2"), wait).Should(Equal(lbcfv1beta1.MemberContributing))
}

// Defect 2 of issue 12: a missing ResourceBinding, or one placing the group nowhere, deregistered
// every record of the group at once.
func TestBindingLossKeepsBackends(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(e *env)
	}{
		{"binding deleted", func(e *env) {
			e.g.Expect(e.c.Delete(e.ctx, &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: e.rb.Name}})).To(Succeed())
		}},
		{"binding with no clusters", func(e *env) { e.setTargets() }},
		{"Cluster objects deleted", func(e *env) {
			for _, m := range []string{"m1", "m2"} {
				e.g.Expect(e.c.Delete(e.ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + m}})).To(Succeed())
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 2*time.Second)
			g := e.g
			m1, m2 := e.twoServingMembers()
			deregs := e.drv.CountCalls(driver.DeregisterBackend)

			tc.lose(e)
			// The controller notices, waits out the grace period, and then holds every member: no
			// member is observed to serve.
			reason := "BindingMissing"
			if tc.name == "Cluster objects deleted" {
				reason = "ClusterGone"
			} else {
				g.Eventually(func(g Gomega) metav1.ConditionStatus {
					return e.condition(g, lbcfv1beta1.BackendGroupBindingMissing).Status
				}, wait).Should(Equal(metav1.ConditionTrue))
			}
			g.Eventually(func(g Gomega) string { return e.member(g, "m1").Message }, wait).Should(ContainSubstring(reason))
			g.Eventually(func(g Gomega) {
				for _, m := range []string{"m1", "m2"} {
					st := e.member(g, m)
					g.Expect(st.State).To(Equal(lbcfv1beta1.MemberHeld), m)
					g.Expect(st.Reason).To(Equal("NoOtherMemberServes"), m)
				}
				g.Expect(e.condition(g, lbcfv1beta1.BackendGroupFailStatic).Status).To(Equal(metav1.ConditionTrue))
			}, wait).Should(Succeed())
			g.Expect(e.backends()).To(HaveLen(4))
			g.Expect(e.drv.CountCalls(driver.DeregisterBackend)).To(Equal(deregs))

			// The binding (or the Clusters) come back: the group follows its reports again.
			switch tc.name {
			case "Cluster objects deleted":
				e.cluster("m1", true)
				e.cluster("m2", true)
			case "binding deleted":
				e.rb = &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: e.rb.Name, Namespace: e.ns}, Spec: e.rb.Spec}
				g.Expect(e.c.Create(e.ctx, e.rb)).To(Succeed())
			default:
				e.setTargets("m1", "m2")
			}
			m1 = append(m1, pod{"e", "10.1.0.3", true})
			e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": report(nil, 1, 1, false, m2...)})
			g.Eventually(e.backends, wait).Should(HaveLen(5))
			if reason == "BindingMissing" {
				g.Eventually(func(g Gomega) metav1.ConditionStatus {
					return e.condition(g, lbcfv1beta1.BackendGroupBindingMissing).Status
				}, wait).Should(Equal(metav1.ConditionFalse))
			}
			g.Eventually(e.memberState("m1"), wait).Should(Equal(lbcfv1beta1.MemberContributing))
			g.Expect(e.drv.CountCalls(driver.DeregisterBackend)).To(Equal(deregs))
		})
	}
}

// The member-loss policies: FailStatic keeps every member when all are unobserved at once and
// withdraws one only while another serves; Withdraw always withdraws; Keep never does.
func TestMemberLossPolicies(t *testing.T) {
	e := newEnv(t, 2*time.Second)
	g := e.g
	e.twoServingMembers()

	// Both members unobserved (a control-plane fault): both held past the grace period.
	e.cluster("m1", false)
	e.cluster("m2", false)
	g.Eventually(func(g Gomega) {
		for _, m := range []string{"m1", "m2"} {
			g.Expect(e.member(g, m).State).To(Equal(lbcfv1beta1.MemberHeld), m)
		}
		c := e.condition(g, lbcfv1beta1.BackendGroupFailStatic)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(And(ContainSubstring(e.ns+"-m1"), ContainSubstring(e.ns+"-m2")))
	}, wait).Should(Succeed())
	g.Expect(e.backends()).To(HaveLen(4))
	g.Expect(e.gauge("lbfed_member_groups", map[string]string{"cluster": e.ns + "-m1", "state": "Held"})).To(Equal(1.0))
	g.Eventually(func(g Gomega) []string { return e.events(g, "MemberHeld") }, wait).Should(HaveLen(2))

	// m1 comes back and serves: m2, still unobserved past grace, is withdrawn now.
	e.cluster("m1", true)
	g.Eventually(e.backends, wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.2:80"))
	g.Eventually(e.memberState("m2"), wait).Should(Equal(lbcfv1beta1.MemberWithdrawn))
	g.Eventually(func(g Gomega) []string { return e.events(g, "MemberWithdrawn") }, wait).Should(HaveLen(1))

	// Policy Keep on the group: m1 unobserved too is kept while m2 stays withdrawn (it is not
	// brought back from its pre-outage report).
	e.annotate(lbcfv1beta1.AnnotationMemberLossPolicy, "Keep")
	e.cluster("m1", false)
	g.Eventually(func(g Gomega) string { return e.member(g, "m1").Reason }, wait).Should(Equal("PolicyKeep"))
	g.Expect(e.backends()).To(ConsistOf("10.1.0.1:80", "10.1.0.2:80"))

	// Policy Withdraw: the floor is off, m1 goes too and the VIP is empty (the documented cost).
	e.annotate(lbcfv1beta1.AnnotationMemberLossPolicy, "Withdraw")
	g.Eventually(e.backends, wait).Should(BeEmpty())
	g.Eventually(e.memberState("m1"), wait).Should(Equal(lbcfv1beta1.MemberWithdrawn))
}

// annotate sets an annotation on the template.
func (e *env) annotate(k, v string) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{k: v}}})
	e.g.Expect(e.c.Patch(e.ctx, &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: e.bg.Name}}, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	// The federation reconciles groups on spec and label changes; nudge it as a user's edit of
	// the group would.
	e.g.Eventually(func() error {
		bg := &lbcfv1beta1.BackendGroup{}
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(e.bg), bg); err != nil {
			return err
		}
		if bg.Labels == nil {
			bg.Labels = map[string]string{}
		}
		bg.Labels["test-nudge"] = strconv.FormatInt(time.Now().UnixNano(), 10)
		return e.c.Update(e.ctx, bg)
	}, wait).Should(Succeed())
}

// events returns the notes of the template's events with the given reason.
func (e *env) events(g Gomega, reason string) []string {
	list := &corev1.EventList{}
	g.Expect(e.c.List(e.ctx, list, client.InNamespace(e.ns))).To(Succeed())
	var out []string
	for _, ev := range list.Items {
		if ev.Reason == reason && ev.InvolvedObject.Name == e.bg.Name {
			out = append(out, ev.Message)
		}
	}
	return out
}

// Defect 3 of issue 12: each member's candidate budget was a fixed third of the binding's, so
// with four or more members near budget the ResourceBinding passed etcd's limit and Karmada's
// status collection stalled. The federation now tells members their share; 20 members each at
// that share fit in one binding on a real API server, and the truncation is on the template.
func TestCandidateBudgetForTwentyMembers(t *testing.T) {
	e := newEnv(t, 2*time.Second)
	g := e.g
	var members []string
	for i := 0; i < 20; i++ {
		members = append(members, fmt.Sprintf("m%02d", i))
	}
	e.world(members...)
	var share int
	g.Eventually(func(g Gomega) {
		v := e.template(g).Annotations[lbcfv1beta1.AnnotationCandidatesBudget]
		n, err := strconv.Atoi(v)
		g.Expect(err).NotTo(HaveOccurred(), "budget annotation %q", v)
		share = n
	}, wait).Should(Succeed())
	g.Expect(share).To(Equal(federation.DefaultCandidatesBudget / 20))

	// Each member over its share: 3,000 pods, encoded to the share as a member controller does.
	// They are not Ready: this test is about the binding, not about registering 20,000 backends.
	items := map[string]*runtime.RawExtension{}
	for i, m := range members {
		var cands []lbcfv1beta1.Candidate
		for p := 0; p < 3000; p++ {
			name := fmt.Sprintf("web-5dbb8574c-%05d", p)
			cands = append(cands, lbcfv1beta1.Candidate{Kind: lbcfv1beta1.CandidatePod, Name: name, UID: lbcfv1beta1.ShortUID(types.UID(m + name)),
				IPs: []string{fmt.Sprintf("10.%d.%d.%d", i, p/250, p%250)}, Port: 8080, Protocol: corev1.ProtocolTCP, Phase: corev1.PodRunning, NodeName: "node-1"})
		}
		enc, truncated := lbcfv1beta1.EncodeCandidates(map[string]string{"weight": "10"}, cands, share)
		g.Expect(truncated).To(BeTrue())
		raw, _ := json.Marshal(map[string]any{
			"candidates": enc, "backends": len(cands), "observedGeneration": 1, "generation": 1, "resourceTemplateGeneration": 1,
			"conditions": []metav1.Condition{
				{Type: lbcfv1beta1.BackendGroupReady, Status: metav1.ConditionTrue, Reason: "CandidatesReported", Message: "3000 candidates, 0 ready", LastTransitionTime: metav1.Now(), ObservedGeneration: 1},
				{Type: lbcfv1beta1.BackendGroupCandidatesTruncated, Status: metav1.ConditionTrue, Reason: "OverBudget", LastTransitionTime: metav1.Now(), ObservedGeneration: 1,
					Message: fmt.Sprintf("3000 candidates need more than %d bytes; %d reported, Ready ones first. Split the BackendGroup.", share, len(enc.Items))},
			},
		})
		items[m] = &runtime.RawExtension{Raw: raw}
	}
	// Karmada's write of the binding status: accepted by the API server and etcd.
	e.setReports(items)
	rb := &workv1alpha2.ResourceBinding{}
	g.Expect(e.c.Get(context.Background(), client.ObjectKeyFromObject(e.rb), rb)).To(Succeed())
	size, _ := json.Marshal(rb)
	t.Logf("binding with 20 members at their share: %d bytes (etcd limit 1,572,864)", len(size))
	g.Expect(len(size)).To(BeNumerically("<", 1536*1024))

	// Truncation is visible on the template, naming the members.
	g.Eventually(func(g Gomega) {
		c := e.condition(g, lbcfv1beta1.BackendGroupCandidatesTruncated)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(And(ContainSubstring(e.ns+"-m00"), ContainSubstring(e.ns+"-m19")))
		g.Expect(e.member(g, "m07").Truncated).To(BeTrue())
	}, wait).Should(Succeed())
	g.Expect(e.gauge("lbfed_cluster_candidates_truncated", map[string]string{"cluster": e.ns + "-m03"})).To(Equal(1.0))
}
