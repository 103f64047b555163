package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/member"
)

// startMember runs lbcf/member on the engine's test environment: member mode is the engine's
// LocalSource and readiness gates behind another BackendGroup reconciler.
func startMember(e *env, budget int) {
	e.startMode(fastOptions(), func(ctx context.Context, mgr ctrl.Manager, o controller.Options) error {
		return member.Setup(ctx, mgr, o, budget)
	})
}

func TestMemberReportsCandidatesAndNothingElse(t *testing.T) {
	e := newEnv(t)
	startMember(e, 0)
	g := e.g
	// A driver and load balancer in a member are ignored: the federation calls drivers.
	e.driverObj("mem")
	e.lb("lb1", "mem")
	p0 := e.pod("web-0", "web", "10.1.0.1")
	e.pod("web-1", "web", "10.1.0.2")
	e.podGroup("web", []string{"lb1"}, []int32{80, 443})

	decoded := func(g Gomega) []lbcfv1beta1.Candidate {
		bg := e.group("web")
		g.Expect(bg.Status.Candidates).NotTo(BeNil())
		c, err := bg.Status.Candidates.Decode()
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	g.Eventually(func(g Gomega) {
		c := decoded(g)
		g.Expect(c).To(HaveLen(4))
		bg := e.group("web")
		g.Expect(bg.Status.Backends).To(Equal(int32(4)))
		g.Expect(bg.Status.ObservedGeneration).To(Equal(bg.Generation))
		g.Expect(meta.IsStatusConditionTrue(bg.Status.Conditions, lbcfv1beta1.BackendGroupReady)).To(BeTrue())
		g.Expect(meta.IsStatusConditionFalse(bg.Status.Conditions, lbcfv1beta1.BackendGroupCandidatesTruncated)).To(BeTrue())
		g.Expect(bg.Status.Candidates.Parameters).To(Equal(map[string]string{"weight": "1"}))
	}, wait).Should(Succeed())
	c := decoded(g)
	g.Expect(c[0]).To(And(HaveField("Kind", lbcfv1beta1.CandidatePod), HaveField("IPs", []string{"10.1.0.1"}),
		HaveField("Phase", corev1.PodRunning), HaveField("Ready", true), HaveField("UID", lbcfv1beta1.ShortUID(p0.UID))))

	// Not ready: still a candidate, flagged, no longer counted as a backend.
	e.setPod(p0, corev1.PodRunning, false, "10.1.0.1")
	g.Eventually(func() int32 { return e.group("web").Status.Backends }, wait).Should(Equal(int32(2)))
	g.Expect(decoded(g)).To(HaveLen(4))

	// Nothing else: no driver call, no record, no load balancer status.
	g.Expect(e.drv.Calls()).To(BeEmpty())
	g.Expect(e.records("web")).To(BeEmpty())
	lb := &lbcfv1beta1.LoadBalancer{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "lb1"}, lb)).To(Succeed())
	g.Expect(lb.Status.Conditions).To(BeEmpty())
	g.Expect(lb.Finalizers).To(BeEmpty())

	// An irrelevant pod change writes nothing, so Karmada sees no spurious change.
	rv := e.group("web").ResourceVersion
	cur := &corev1.Pod{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(p0), cur)).To(Succeed())
	cur.Annotations = map[string]string{"touched": "yes"}
	cur.Labels["unrelated"] = "x"
	g.Expect(e.c.Update(e.ctx, cur)).To(Succeed())
	g.Consistently(func() string { return e.group("web").ResourceVersion }, 2*time.Second).Should(Equal(rv))
}

func TestMemberSaysWhenCandidatesAreTruncated(t *testing.T) {
	e := newEnv(t)
	startMember(e, 200) // room for five of the eight entries
	g := e.g
	for i := 0; i < 8; i++ {
		p := e.pod("web-"+itoa(int32(i)), "web", "10.1.0."+itoa(int32(i+1)))
		if i%2 == 1 {
			e.setPod(p, corev1.PodRunning, false, "10.1.0."+itoa(int32(i+1)))
		}
	}
	e.podGroup("web", []string{"lb1"}, []int32{80})
	g.Eventually(func(g Gomega) {
		bg := e.group("web")
		cond := meta.FindStatusCondition(bg.Status.Conditions, lbcfv1beta1.BackendGroupCandidatesTruncated)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(cond.Message).To(ContainSubstring("Split the BackendGroup"))
		g.Expect(bg.Status.Candidates.Total).To(Equal(int32(8)))
		items, err := bg.Status.Candidates.Decode()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(len(items)).To(BeNumerically("<", 8))
		ready := 0
		for _, it := range items {
			if it.Ready {
				ready++
			}
		}
		g.Expect(ready).To(Equal(4), "every Ready candidate is kept before any other")
	}, wait).Should(Succeed())
}

// Issue 12: the federation tells a member its share of the group's binding and asks for reports
// made after a member's return, both through the template's annotations (propagated by Karmada).
func TestMemberFollowsFederationAnnotations(t *testing.T) {
	e := newEnv(t)
	startMember(e, 0) // the default budget has room for all eight
	g := e.g
	for i := 0; i < 8; i++ {
		e.pod("web-"+itoa(int32(i)), "web", "10.1.0."+itoa(int32(i+1)))
	}
	e.podGroup("web", []string{"lb1"}, []int32{80})
	g.Eventually(func(g Gomega) {
		bg := e.group("web")
		g.Expect(meta.IsStatusConditionFalse(bg.Status.Conditions, lbcfv1beta1.BackendGroupCandidatesTruncated)).To(BeTrue())
		g.Expect(bg.Status.ReportRequest).To(BeEmpty())
	}, wait).Should(Succeed())

	// The federation shares the binding among many members: 200 bytes each, and asks for a fresh
	// report. Annotations change no generation: the member must react to them all the same.
	bg := e.group("web")
	e.update(bg, func() {
		bg.Annotations = map[string]string{lbcfv1beta1.AnnotationCandidatesBudget: "200", lbcfv1beta1.AnnotationReportRequest: "1764000000123"}
	})
	g.Eventually(func(g Gomega) {
		bg := e.group("web")
		g.Expect(bg.Status.ReportRequest).To(Equal("1764000000123"))
		cond := meta.FindStatusCondition(bg.Status.Conditions, lbcfv1beta1.BackendGroupCandidatesTruncated)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(cond.Message).To(ContainSubstring("more than 200 bytes"))
	}, wait).Should(Succeed())
}

// Issue 43: a member reports which of its not-Ready pods are so on its control plane's evidence
// alone: their node unheard (Ready not True, or the unreachable/not-ready taint) with their
// containers ready, or Ready cleared while the containers are ready (the node lifecycle
// controller's MarkPodsNotReady, before the kubelet asserts it again). A pod whose containers are
// not ready is the kubelet's own answer and is not flagged.
func TestMemberSaysWhenReadinessIsUnobserved(t *testing.T) {
	e := newEnv(t)
	startMember(e, 0)
	g := e.g
	nodeName := e.ns + "-node"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	g.Expect(e.c.Create(e.ctx, node)).To(Succeed())
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), node) })
	setNode := func(ready corev1.ConditionStatus, taints ...corev1.Taint) {
		cur := &corev1.Node{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKey{Name: nodeName}, cur)).To(Succeed())
		cur.Spec.Taints = taints
		g.Expect(e.c.Update(e.ctx, cur)).To(Succeed())
		cur.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		g.Expect(e.c.Status().Update(e.ctx, cur)).To(Succeed())
	}
	setNode(corev1.ConditionTrue)
	for i, name := range []string{"web-0", "web-1"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}, NodeName: nodeName}}
		g.Expect(e.c.Create(e.ctx, p)).To(Succeed())
		e.setPod(p, corev1.PodRunning, true, "10.1.0."+itoa(int32(i+1)))
		e.setReadiness(name, true, true)
	}
	e.podGroup("web", []string{"lb1"}, []int32{80})
	flags := func(g Gomega) map[string][2]bool { // name → Ready, Unobserved
		bg := e.group("web")
		g.Expect(bg.Status.Candidates).NotTo(BeNil())
		items, err := bg.Status.Candidates.Decode()
		g.Expect(err).NotTo(HaveOccurred())
		out := map[string][2]bool{}
		for _, c := range items {
			out[c.Name] = [2]bool{c.Ready, c.Unobserved}
		}
		return out
	}
	g.Eventually(flags, wait).Should(Equal(map[string][2]bool{"web-0": {true, false}, "web-1": {true, false}}))

	// The node is lost: the node controller taints it and clears Ready of its pods; web-1's
	// containers had failed before (the kubelet's own answer).
	setNode(corev1.ConditionUnknown, corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute})
	e.setReadiness("web-1", false, false)
	e.setReadiness("web-0", false, true)
	g.Eventually(flags, wait).Should(Equal(map[string][2]bool{"web-0": {false, true}, "web-1": {false, false}}))
	g.Expect(e.group("web").Status.Backends).To(BeZero(), "neither is eligible: the federation decides what to keep")

	// The node is back, the kubelet has not yet asserted web-0's readiness: still unobserved.
	setNode(corev1.ConditionTrue)
	g.Consistently(flags, 2*time.Second).Should(Equal(map[string][2]bool{"web-0": {false, true}, "web-1": {false, false}}))
	// Then it does.
	e.setReadiness("web-0", true, true)
	g.Eventually(flags, wait).Should(Equal(map[string][2]bool{"web-0": {true, false}, "web-1": {false, false}}))
}
