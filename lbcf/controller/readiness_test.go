package controller_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// gatedPod creates a pod with lbfed's readiness gate whose containers are ready (ContainersReady)
// while Ready waits for the gate, as a kubelet reports it.
func (e *env) gatedPod(name, app, ip string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}, NodeName: "node-1",
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: lbcfv1beta1.PodConditionBackendRegistered}}},
	}
	e.g.Expect(e.c.Create(e.ctx, p)).To(Succeed())
	e.setContainersReady(p, true, ip)
	return p
}

// setContainersReady sets phase Running, the IP and ContainersReady, leaving other conditions
// (the gate's) alone.
func (e *env) setContainersReady(p *corev1.Pod, ready bool, ip string) {
	e.t.Helper()
	e.g.Eventually(func(g Gomega) {
		cur := &corev1.Pod{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(p), cur)).To(Succeed())
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		cur.Status.Phase, cur.Status.PodIP, cur.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
		conds := []corev1.PodCondition{{Type: corev1.ContainersReady, Status: st}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		for _, c := range cur.Status.Conditions {
			if c.Type != corev1.ContainersReady && c.Type != corev1.PodReady {
				conds = append(conds, c)
			}
		}
		cur.Status.Conditions = conds
		g.Expect(e.c.Status().Update(e.ctx, cur)).To(Succeed())
	}, wait).Should(Succeed())
}

// gate returns the pod's readiness-gate condition ("" status when absent).
func (e *env) gate(name string) func(g Gomega) corev1.PodCondition {
	return func(g Gomega) corev1.PodCondition {
		p := &corev1.Pod{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, p)).To(Succeed())
		for _, c := range p.Status.Conditions {
			if string(c.Type) == lbcfv1beta1.PodConditionBackendRegistered {
				return c
			}
		}
		return corev1.PodCondition{}
	}
}

func TestReadinessGateStandalone(t *testing.T) {
	e := newEnv(t)
	e.start(fastOptions())
	g := e.g
	e.driverObj("mem")
	e.lb("lb1", "mem")
	id1 := e.lbID("lb1")
	// Eligible on ContainersReady: Ready itself waits for the gate.
	e.gatedPod("web-0", "web", "10.1.0.1")
	e.pod("web-1", "web", "10.1.0.2") // no gate: never touched
	e.podGroup("web", []string{"lb1", "lb2"}, []int32{80})
	g.Eventually(e.backends(id1), wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.2:80"))
	// Registered on lb1 only: lb2 does not exist yet.
	g.Eventually(e.gate("web-0"), wait).Should(And(HaveField("Status", corev1.ConditionFalse),
		HaveField("Reason", "NotRegistered"), HaveField("Message", ContainSubstring("waiting for load balancer lb2"))))

	e.lb("lb2", "mem")
	id2 := e.lbID("lb2")
	g.Eventually(e.backends(id2), wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.2:80"))
	g.Eventually(e.gate("web-0"), wait).Should(And(HaveField("Status", corev1.ConditionTrue), HaveField("Reason", "Registered")))
	g.Expect(e.gate("web-1")(g).Type).To(BeEmpty(), "a pod without the gate gets no condition")

	// Containers not ready: deregistered, and the gate says so.
	p0 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "web-0"}}
	e.setContainersReady(p0, false, "10.1.0.1")
	g.Eventually(e.backends(id1), wait).Should(ConsistOf("10.1.0.2:80"))
	g.Eventually(e.gate("web-0"), wait).Should(HaveField("Status", corev1.ConditionFalse))

	// A gated pod no group selects has nothing to wait for.
	e.gatedPod("other-0", "other", "10.1.0.9")
	g.Eventually(e.gate("other-0"), wait).Should(And(HaveField("Status", corev1.ConditionTrue), HaveField("Reason", "NotSelected")))
}

func TestReadinessGateMember(t *testing.T) {
	e := newEnv(t)
	startMember(e, 0)
	g := e.g
	e.gatedPod("web-0", "web", "10.1.0.1")
	e.podGroup("web", []string{"lb1"}, []int32{80})
	items := func(g Gomega, n int) []string {
		bg := e.group("web")
		g.Expect(bg.Status.Candidates).NotTo(BeNil())
		g.Expect(bg.Status.Candidates.Items).To(HaveLen(n))
		return bg.Status.Candidates.Items
	}
	var first []string
	g.Eventually(func(g Gomega) {
		first = items(g, 1)
		g.Expect(first[0]).To(HaveSuffix("|Rr"), "ContainersReady makes a gated pod a ready candidate")
	}, wait).Should(Succeed())

	answer := func(it []string, registered ...bool) {
		t.Helper()
		reg := lbcfv1beta1.Registration{"m1": lbcfv1beta1.NewMemberRegistration(it, func(i int) bool { return registered[i] })}
		g.Eventually(func() error {
			bg := e.group("web")
			bg.Annotations = map[string]string{lbcfv1beta1.AnnotationRegistered: reg.String()}
			return e.c.Update(e.ctx, bg)
		}, wait).Should(Succeed())
	}
	// An answer about a report the member never made changes nothing …
	answer([]string{"p|someone-else|00000000|10.9.9.9|80t|0|Rr"}, true)
	// … while an answer about its report, not registered yet, is read (evidence the member acts).
	answer(first, false)
	g.Eventually(e.gate("web-0"), wait).Should(And(HaveField("Status", corev1.ConditionFalse),
		HaveField("Message", ContainSubstring("waiting for the federation"))))

	// In a rollout the member reports again (web-1 arrives) before the federation answers
	// about the report that had web-0: the older answer is still understood.
	e.gatedPod("web-1", "web", "10.1.0.2")
	g.Eventually(func(g Gomega) { items(g, 2) }, wait).Should(Succeed())
	answer(first, true)
	g.Eventually(e.gate("web-0"), wait).Should(HaveField("Status", corev1.ConditionTrue))
	// web-1's gate says why it waits (Eventually: under load its reconcile may trail web-0's),
	// and it stays not registered however long the answer about the older report stands.
	g.Eventually(e.gate("web-1"), wait).Should(And(HaveField("Status", corev1.ConditionFalse),
		HaveField("Message", ContainSubstring("not in this member's report"))))
	g.Consistently(e.gate("web-1"), time.Second).ShouldNot(HaveField("Status", corev1.ConditionTrue))

	var second []string
	g.Eventually(func(g Gomega) { second = items(g, 2) }, wait).Should(Succeed())
	answer(second, true, true)
	g.Eventually(e.gate("web-1"), wait).Should(HaveField("Status", corev1.ConditionTrue))
}
