package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// TestReadinessUnobserved: a pod is flagged only when nothing but the control plane says it is
// not Ready — its containers were ready at the kubelet's last report, and its node is not heard
// from or its Ready condition contradicts what the kubelet computes from containers and gates.
func TestReadinessUnobserved(t *testing.T) {
	cond := func(typ corev1.PodConditionType, ok bool) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		return corev1.PodCondition{Type: typ, Status: s}
	}
	pod := func(mutate func(*corev1.Pod), conds ...corev1.PodCondition) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: conds}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	gated := func(p *corev1.Pod) {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	}
	for _, tc := range []struct {
		name         string
		pod          *corev1.Pod
		nodeObserved bool
		want         bool
	}{
		{"Ready pod", pod(nil, cond(corev1.ContainersReady, true), cond(corev1.PodReady, true)), false, false},
		{"node controller cleared Ready, node lost", pod(nil, cond(corev1.ContainersReady, true), cond(corev1.PodReady, false)), false, true},
		{"node controller cleared Ready, node back, kubelet not yet", pod(nil, cond(corev1.ContainersReady, true), cond(corev1.PodReady, false)), true, true},
		{"containers not ready: the kubelet's own answer", pod(nil, cond(corev1.ContainersReady, false), cond(corev1.PodReady, false)), false, false},
		{"no ContainersReady at all (a hand-written status)", pod(nil, cond(corev1.PodReady, false)), false, false},
		{"a foreign gate not True holds it", pod(gated, cond(corev1.ContainersReady, true), cond(corev1.PodReady, false), cond("example.com/gate", false)), true, false},
		{"a foreign gate True: Ready False is not the kubelet's", pod(gated, cond(corev1.ContainersReady, true), cond(corev1.PodReady, false), cond("example.com/gate", true)), true, true},
		{"a foreign gate not True, node lost", pod(gated, cond(corev1.ContainersReady, true), cond(corev1.PodReady, false), cond("example.com/gate", false)), false, true},
		{"being deleted", pod(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }, cond(corev1.ContainersReady, true), cond(corev1.PodReady, false)), false, false},
		{"not running", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }, cond(corev1.ContainersReady, true), cond(corev1.PodReady, false)), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readinessUnobserved(tc.pod, tc.nodeObserved); got != tc.want {
				t.Errorf("readinessUnobserved = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeObserved(t *testing.T) {
	node := func(ready corev1.ConditionStatus, taints ...string) *corev1.Node {
		n := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
		for _, k := range taints {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoExecute})
		}
		return n
	}
	g := NewWithT(t)
	g.Expect(nodeObserved(node(corev1.ConditionTrue))).To(BeTrue())
	g.Expect(nodeObserved(node(corev1.ConditionUnknown))).To(BeFalse())
	g.Expect(nodeObserved(node(corev1.ConditionFalse))).To(BeFalse())
	g.Expect(nodeObserved(node(corev1.ConditionTrue, taintNodeUnreachable))).To(BeFalse(), "Ready again, but the taint says the controller has not caught up")
	g.Expect(nodeObserved(node(corev1.ConditionTrue, taintNodeNotReady))).To(BeFalse())
	g.Expect(nodeObserved(node(corev1.ConditionTrue, "dedicated"))).To(BeTrue())
}

// TestKeptPods walks the decisions of keptPods: unobserved pods within the grace period, then
// the floor and the member-loss policy; the panic threshold and its window over what the
// deregister policy lets go.
func TestKeptPods(t *testing.T) {
	const grace, window = time.Minute, 10 * time.Second
	type pod struct {
		ready, unobserved, deleting, noRecord bool
		// fresh: unobserved since now; otherwise since long before the grace period.
		fresh bool
		// gone: let go for readiness alone a moment ago (its records are gone).
		gone bool
	}
	ready := pod{ready: true}
	notReady := pod{}
	unobserved := pod{unobserved: true}
	for _, tc := range []struct {
		name        string
		pods        []pod
		annotations map[string]string
		threshold   float64
		policy      lbcfv1beta1.MemberLossPolicy
		kept        []int // indexes of the pods kept
		held        heldPods
	}{
		{name: "nothing not Ready", pods: []pod{ready, ready}, threshold: 0.5},
		{name: "one of four not Ready goes", pods: []pod{ready, ready, ready, notReady}, threshold: 0.5},
		{name: "two of four (exactly half) go", pods: []pod{ready, ready, notReady, notReady}, threshold: 0.5},
		{name: "three of four: panic, all stay", pods: []pod{ready, notReady, notReady, notReady}, threshold: 0.5,
			kept: []int{1, 2, 3}, held: heldPods{panic: 3, registered: 4, threshold: 0.5}},
		{name: "pods let go within the window count: panic", pods: []pod{ready, {gone: true, noRecord: true}, {gone: true, noRecord: true}, notReady}, threshold: 0.5,
			kept: []int{3}, held: heldPods{panic: 1, registered: 4, threshold: 0.5}},
		{name: "one let go within the window, one more may go", pods: []pod{ready, ready, {gone: true, noRecord: true}, notReady}, threshold: 0.5},
		{name: "let go, then Ready again: no longer lost", pods: []pod{ready, {ready: true, gone: true}, {ready: true, gone: true}, notReady}, threshold: 0.5},
		{name: "the last pod stays", pods: []pod{notReady}, threshold: 0.5, kept: []int{0}, held: heldPods{panic: 1, registered: 1, threshold: 0.5}},
		{name: "threshold off", pods: []pod{notReady, notReady}, threshold: 0},
		{name: "annotation turns it off", pods: []pod{notReady, notReady}, threshold: 0.5,
			annotations: map[string]string{lbcfv1beta1.AnnotationReadinessPanicThreshold: "0"}},
		{name: "annotation sets it", pods: []pod{ready, ready, ready, notReady}, threshold: 0,
			annotations: map[string]string{lbcfv1beta1.AnnotationReadinessPanicThreshold: "20%"},
			kept:        []int{3}, held: heldPods{panic: 1, registered: 4, threshold: 0.2}},
		{name: "a bad annotation keeps the flag's", pods: []pod{notReady}, threshold: 0.5,
			annotations: map[string]string{lbcfv1beta1.AnnotationReadinessPanicThreshold: "lots"},
			kept:        []int{0}, held: heldPods{panic: 1, registered: 1, threshold: 0.5}},
		{name: "the deregister policy keeps first", pods: []pod{ready, notReady, notReady, notReady}, threshold: 0.5,
			annotations: map[string]string{}, kept: []int{1, 2, 3}},
		{name: "pods being deleted are gone, and do not count", pods: []pod{{deleting: true}, {deleting: true}, {deleting: true}, ready}, threshold: 0.5},
		{name: "pods without records are not registered", pods: []pod{{noRecord: true}, {noRecord: true}, notReady, ready, ready}, threshold: 0.5},
		{name: "unobserved within the grace period stay", pods: []pod{ready, {unobserved: true, fresh: true}, {unobserved: true, fresh: true}}, threshold: 0,
			kept: []int{1, 2}, held: heldPods{unobservedInGrace: 2, requeue: grace}},
		{name: "unobserved past grace go while another serves", pods: []pod{ready, unobserved}, threshold: 0},
		{name: "unobserved past grace stay when none serves (floor)", pods: []pod{unobserved, unobserved}, threshold: 0,
			kept: []int{0, 1}, held: heldPods{unobservedFloor: 2}},
		{name: "policy Keep keeps them", pods: []pod{ready, unobserved}, threshold: 0,
			annotations: map[string]string{lbcfv1beta1.AnnotationMemberLossPolicy: "Keep"}, kept: []int{1}, held: heldPods{unobservedKept: 1}},
		{name: "policy Withdraw lets them go even at the floor", pods: []pod{unobserved, unobserved}, threshold: 0, policy: lbcfv1beta1.MemberLossWithdraw},
		{name: "past grace and released by the floor, the panic threshold still applies", pods: []pod{ready, unobserved, unobserved, unobserved}, threshold: 0.5,
			kept: []int{1, 2, 3}, held: heldPods{panic: 3, registered: 4, threshold: 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &backendGroupReconciler{Options: Options{Readiness: Readiness{UnobservedGrace: grace, PanicWindow: window, Policy: tc.policy, PanicThreshold: tc.threshold}}}
			r.Defaults()
			bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1", Annotations: tc.annotations}}
			if tc.name == "the deregister policy keeps first" {
				p := lbcfv1beta1.DeregisterIfNotRunning
				bg.Spec.DeregisterPolicy = &p
			}
			var backends []Backend
			var old []*Backend
			records := map[string]bool{}
			for i, p := range tc.pods {
				b := Backend{Kind: lbcfv1beta1.CandidatePod, Name: fmt.Sprintf("web-%d", i), UID: fmt.Sprintf("u%d", i), HasIP: true,
					IPs: []string{fmt.Sprintf("10.0.0.%d", i+1)}, Phase: corev1.PodRunning, Ready: p.ready, ReadinessUnobserved: p.unobserved, Deleting: p.deleting}
				// Two ports: a pod counts once.
				for _, port := range []int32{80, 443} {
					b.Port = lbcfv1beta1.PortSelector{Port: port}
					backends = append(backends, b)
				}
				if !p.noRecord {
					records[podIdentity(&b)] = true
				}
				if !p.ready && !p.fresh {
					old = append(old, &b)
				}
			}
			// The pods not Ready for long were seen so by an earlier reconcile; those gone were
			// let go a moment ago.
			r.readinessClock.update(bg, old, time.Now().Add(-time.Hour))
			var gone []*Backend
			for i, p := range tc.pods {
				if p.gone {
					gone = append(gone, &backends[2*i])
				}
			}
			r.readinessClock.letGo(bg.UID, gone, time.Now().Add(-time.Second))
			kept, held := r.keptPods(context.Background(), bg, backends, func(b *Backend) bool { return records[podIdentity(b)] })
			var got []int
			for i := range tc.pods {
				if kept[fmt.Sprintf("/web-%d/u%d", i, i)] {
					got = append(got, i)
				}
			}
			g.Expect(got).To(Equal(tc.kept))
			// What is let go now counts for the next reconciles, with the threshold on.
			effective := tc.threshold
			if v, err := lbcfv1beta1.ParseReadinessPanicThreshold(tc.annotations[lbcfv1beta1.AnnotationReadinessPanicThreshold]); err == nil {
				effective = v
			}
			if effective > 0 {
				notEligible := map[string]bool{}
				for i := range backends {
					if !backends[i].Eligible() {
						notEligible[podIdentity(&backends[i])] = true
					}
				}
				recent := r.readinessClock.recentlyGone(bg.UID, time.Now().Add(-window), notEligible)
				for i, p := range tc.pods {
					id := fmt.Sprintf("/web-%d/u%d", i, i)
					wasLost := !p.ready && !p.deleting && !p.noRecord && !slices.Contains(tc.kept, i) && held.panic == 0 && !p.unobserved
					if wasLost || (p.gone && !p.ready) {
						g.Expect(recent).To(HaveKey(id), "pod %d is remembered as let go", i)
					} else {
						g.Expect(recent).NotTo(HaveKey(id), "pod %d", i)
					}
				}
			}
			g.Expect(held.requeue).To(BeNumerically("~", tc.held.requeue, time.Second))
			held.requeue, tc.held.requeue = 0, 0
			g.Expect(held).To(Equal(tc.held))
		})
	}
}

// TestReadinessClock: a pod's times run from the first reconcile that saw it not Ready (or its
// readiness unobserved), and start again once it was Ready (or observed) between; pods let go are
// remembered for the window while they stay not eligible.
func TestReadinessClock(t *testing.T) {
	g := NewWithT(t)
	var c readinessClock
	bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-1"}}
	b := &Backend{Kind: lbcfv1beta1.CandidatePod, Name: "web-0", UID: "u0", ReadinessUnobserved: true}
	id := podIdentity(b)
	t0 := time.Now().Add(-time.Hour)
	g.Expect(c.update(bg, []*Backend{b}, t0)).To(HaveKeyWithValue(id, notReadySince{t0, t0}))
	g.Expect(c.update(bg, []*Backend{b}, t0.Add(time.Second))).To(HaveKeyWithValue(id, notReadySince{t0, t0}), "still since the first sight")
	observed := *b
	observed.ReadinessUnobserved = false
	g.Expect(c.update(bg, []*Backend{&observed}, t0.Add(2*time.Second))).To(HaveKeyWithValue(id, notReadySince{notReady: t0}), "observed, still not Ready")
	t3 := t0.Add(3 * time.Second)
	g.Expect(c.update(bg, []*Backend{b}, t3)).To(HaveKeyWithValue(id, notReadySince{t0, t3}), "unobserved again: a new grace period")
	g.Expect(c.update(bg, nil, t0.Add(4*time.Second))).To(BeEmpty())
	g.Expect(c.m).NotTo(HaveKey(bg.UID), "a group with nothing to remember is forgotten")
	t5 := t0.Add(5 * time.Second)
	g.Expect(c.update(bg, []*Backend{b}, t5)).To(HaveKeyWithValue(id, notReadySince{t5, t5}), "Ready between: all anew")

	c.letGo(bg.UID, []*Backend{b}, t5)
	g.Expect(c.recentlyGone(bg.UID, t0, map[string]bool{id: true})).To(HaveKeyWithValue(id, t5))
	g.Expect(c.recentlyGone(bg.UID, t5.Add(time.Second), map[string]bool{id: true})).To(BeEmpty(), "let go before the window")
	c.letGo(bg.UID, []*Backend{b}, t5)
	g.Expect(c.recentlyGone(bg.UID, t0, map[string]bool{})).To(BeEmpty(), "eligible again, or deleted: no longer lost")
	c.update(bg, nil, t5)
	g.Expect(c.m).To(BeEmpty())
	c.letGo(bg.UID, []*Backend{b}, t5)
	c.forget(bg.UID)
	g.Expect(c.m).To(BeEmpty())
}
