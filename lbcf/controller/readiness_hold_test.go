package controller_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
)

// setReadiness writes a pod's Ready and ContainersReady conditions: both as the kubelet does, or
// Ready alone cleared as the node lifecycle controller's MarkPodsNotReady does.
func (e *env) setReadiness(name string, ready, containers bool) {
	e.t.Helper()
	status := func(b bool) corev1.ConditionStatus {
		if b {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	e.g.Eventually(func() error {
		cur := &corev1.Pod{}
		if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, cur); err != nil {
			return err
		}
		cur.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: status(containers)},
			{Type: corev1.PodReady, Status: status(ready)},
		}
		return e.c.Status().Update(e.ctx, cur)
	}, wait).Should(Succeed())
}

func (e *env) condition(group, typ string) func() metav1.Condition {
	return func() metav1.Condition {
		if c := meta.FindStatusCondition(e.group(group).Status.Conditions, typ); c != nil {
			return *c
		}
		return metav1.Condition{}
	}
}

// readyPods creates n pods app=web, Running and Ready with their containers ready, and a group
// over them on lb1; it returns the memdriver ID of lb1 once all n are registered.
func (e *env) readyPods(n int, mutate ...func(*lbcfv1beta1.BackendGroup)) string {
	e.t.Helper()
	e.driverObj("mem")
	e.lb("lb1", "mem")
	id := e.lbID("lb1")
	for i := range n {
		e.pod(fmt.Sprintf("web-%d", i), "web", fmt.Sprintf("10.1.0.%d", i+1))
		e.setReadiness(fmt.Sprintf("web-%d", i), true, true)
	}
	e.podGroup("web", []string{"lb1"}, []int32{80}, mutate...)
	e.g.Eventually(e.backends(id), wait).Should(HaveLen(n))
	return id
}

// TestReadinessUnobservedKeepsPods: pods made not Ready by the node lifecycle controller (Ready
// cleared, containers ready) keep their registration for the grace period, then by the floor
// while no other backend is eligible; when some come back, the panic threshold holds the rest
// while they are more than its share, and they go once they are not. Status, events and the
// group's conditions say so at each step.
func TestReadinessUnobservedKeepsPods(t *testing.T) {
	e := newEnv(t)
	opts := fastOptions()
	opts.Readiness = controller.Readiness{UnobservedGrace: 3 * time.Second, PanicThreshold: 0.5}
	e.start(opts)
	id := e.readyPods(4)
	all := e.drv.BackendAddrs(id)

	// Every member's API server paused, then its node controller marks the pods not Ready.
	for i := range 4 {
		e.setReadiness(fmt.Sprintf("web-%d", i), false, true)
	}
	marked := time.Now()
	e.g.Eventually(e.condition("web", lbcfv1beta1.BackendGroupReadinessUnobserved), wait).Should(And(
		HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "WithinGracePeriod"), HaveField("Message", ContainSubstring("4 registered pods"))))
	e.g.Expect(e.drv.BackendAddrs(id)).To(ConsistOf(all), "kept within the grace period")
	e.g.Eventually(e.events(lbcfv1beta1.BackendGroupReadinessUnobserved), wait).ShouldNot(BeEmpty())

	// Past the grace period no other backend is eligible: the floor keeps them.
	e.g.Eventually(e.condition("web", lbcfv1beta1.BackendGroupReadinessUnobserved), wait).Should(HaveField("Reason", "NoOtherBackendEligible"))
	e.g.Expect(time.Since(marked)).To(BeNumerically(">=", 3*time.Second), "not before the grace period ended")
	e.g.Expect(e.drv.BackendAddrs(id)).To(ConsistOf(all))

	// One pod's kubelet asserts Ready again: the floor lets the other three go, which is more
	// than half of the four registered pods: the panic threshold keeps them.
	e.setReadiness("web-0", true, true)
	e.g.Eventually(e.condition("web", lbcfv1beta1.BackendGroupReadinessPanic), wait).Should(And(
		HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("3 of 4 registered pods"))))
	e.g.Expect(e.drv.BackendAddrs(id)).To(ConsistOf(all))
	e.g.Eventually(e.events(lbcfv1beta1.BackendGroupReadinessPanic), wait).ShouldNot(BeEmpty())

	// A second pod back: two of four is not more than half: the two left go.
	e.setReadiness("web-1", true, true)
	e.g.Eventually(e.backends(id), wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.2:80"))
	e.g.Eventually(e.condition("web", lbcfv1beta1.BackendGroupReadinessPanic), wait).Should(And(
		HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "BelowThreshold")))
	e.g.Eventually(e.events(lbcfv1beta1.BackendGroupReadinessPanic+"Over"), wait).ShouldNot(BeEmpty())
	e.g.Expect(e.condition("web", lbcfv1beta1.BackendGroupReadinessUnobserved)()).To(HaveField("Status", metav1.ConditionFalse))
}

// TestReadinessPanicThreshold: pods really not Ready (their containers not ready) are
// deregistered as the deregister policy says, a pod failing alone at once; but pods turning not
// Ready one after the other within the panic window take at most the threshold's share of the
// group off the front end, and the rest stay. The group's annotation sets the threshold, 0 turns
// it off.
func TestReadinessPanicThreshold(t *testing.T) {
	e := newEnv(t)
	opts := fastOptions()
	opts.Readiness = controller.Readiness{PanicThreshold: 0.5}
	e.start(opts)
	id := e.readyPods(6)

	// One of six: deregistered at once, nothing held.
	e.setReadiness("web-5", false, false)
	e.g.Eventually(e.backends(id), wait).Should(HaveLen(5))
	e.g.Expect(meta.FindStatusCondition(e.group("web").Status.Conditions, lbcfv1beta1.BackendGroupReadinessPanic)).To(BeNil(), "never acted, no condition")

	// Then the others, one after the other: with the one before, at most three of six go.
	for i := range 5 {
		e.setReadiness(fmt.Sprintf("web-%d", i), false, false)
		time.Sleep(200 * time.Millisecond)
	}
	e.g.Eventually(e.condition("web", lbcfv1beta1.BackendGroupReadinessPanic), wait).Should(HaveField("Status", metav1.ConditionTrue))
	e.g.Consistently(func() int { return len(e.drv.BackendAddrs(id)) }, 2*time.Second).Should(BeNumerically(">=", 3), "the front end's health checks decide for the rest")
	held := len(e.drv.BackendAddrs(id))
	e.g.Expect(e.condition("web", lbcfv1beta1.BackendGroupReady)()).To(HaveField("Status", metav1.ConditionTrue), "nothing expected is missing")

	// The group turns the threshold off: they go at once.
	bg := e.group("web")
	e.update(bg, func() { bg.Annotations = map[string]string{lbcfv1beta1.AnnotationReadinessPanicThreshold: "0"} })
	e.g.Eventually(e.backends(id), wait).Should(BeEmpty())
	e.g.Eventually(e.condition("web", lbcfv1beta1.BackendGroupReadinessPanic), wait).Should(HaveField("Status", metav1.ConditionFalse))
	t.Logf("six pods turned not Ready one after the other: %d stayed registered", held)
}
