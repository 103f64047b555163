//go:build e2e

package federation_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/deploy"
)

// Issue 43: fail-static for outages of the members' own control planes. When a member's API
// server comes back from a pause longer than its node controller's grace period, the node
// controller finds every node lease stale, marks the nodes NotReady and clears Ready on their
// pods (MarkPodsNotReady) while the pods keep serving; the kubelets assert Ready again once they
// are heard. Every scenario runs under load through the VIP and counts failed requests.

// readinessSeen is what a test saw of the pods' readiness and of the federation's answer to it.
type readinessSeen struct {
	// markedNotReady: pods not Ready with their containers ready (the node controller's mark).
	markedNotReady bool
	// unobserved: the template said some member reported pods whose readiness is unobserved.
	unobserved bool
}

// watchReadiness polls, once a second until stopped, for pods marked not Ready by their node
// controller in the members and for the federation's ReadinessUnobserved answer.
func (w *world) watchReadiness(members ...string) (stop func() readinessSeen) {
	done := make(chan struct{})
	out := make(chan readinessSeen, 1)
	go func() {
		var seen readinessSeen
		defer func() { out <- seen }()
		for {
			for _, m := range members {
				list := &corev1.PodList{}
				if err := w.members[m].List(w.ctx, list, client.InNamespace(w.ex.Namespace)); err == nil {
					for _, p := range list.Items {
						var ready, containers bool
						for _, c := range p.Status.Conditions {
							ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
							containers = containers || (c.Type == corev1.ContainersReady && c.Status == corev1.ConditionTrue)
						}
						seen.markedNotReady = seen.markedNotReady || (!ready && containers && p.DeletionTimestamp == nil)
					}
				}
			}
			members, _, _ := unstructured.NestedSlice(w.template().Object, "status", "members")
			for _, m := range members {
				mm, _ := m.(map[string]any)
				if n, _ := mm["unobservedCandidates"].(int64); n > 0 {
					seen.unobserved = true
				}
			}
			select {
			case <-done:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return func() readinessSeen { close(done); return <-out }
}

// allReadyRegistered tells, without asserting, whether every Ready pod of the members is
// registered and nothing else is.
func (w *world) allReadyRegistered(members ...string) bool {
	for _, m := range members {
		pods := w.readyPods(m)
		if len(pods) == 0 || fmt.Sprint(pods) != fmt.Sprint(w.registered(m)) {
			return false
		}
	}
	return true
}

// setContainersReady writes a member's pods' ContainersReady and Ready as the kubelet does when
// their readiness probes fail (both False) or pass again (both True).
func (w *world) setContainersReady(member string, ready bool) {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	list := &corev1.PodList{}
	w.g.Expect(w.members[member].List(w.ctx, list, client.InNamespace(w.ex.Namespace), client.MatchingLabels{"app": "web"})).To(Succeed())
	for _, p := range list.Items {
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": corev1.ContainersReady, "status": status, "lastTransitionTime": metav1.Now()},
			map[string]any{"type": corev1.PodReady, "status": status, "lastTransitionTime": metav1.Now()},
		}}})
		w.g.Expect(w.members[member].Status().Patch(w.ctx, &p, client.RawPatch(types.StrategicMergePatchType, patch))).To(Succeed())
	}
}

func TestMemberControlPlaneOutage(t *testing.T) {
	w := newWorld(t)
	g := w.g
	w.ex = deploy.Example{Namespace: "e2e-readiness", VIP: fmt.Sprintf("127.5.%d.%d", rand.IntN(250), rand.IntN(250)+1), Port: 80, Replicas: 4, Members: []string{"m1", "m2"}}
	g.Expect(w.ex.Apply(w.ctx, w.karmada, lbfed)).To(Succeed())
	w.bound(g)
	w.settled(g)
	t.Logf("grace period %s; load: one request every %s through %s:%d", grace, loadInterval, w.ex.VIP, w.ex.Port)

	t.Run("(a) every member's API server paused 150 s", func(t *testing.T) {
		g := NewWithT(t)
		w.settled(g)
		const paused, after = 150 * time.Second, time.Minute
		l := w.startLoad(paused + after + 4*time.Minute)
		defer l.Stop()
		watch := w.watchReadiness("m1", "m2")
		resume := w.pause("m1-apiserver", "m2-apiserver")
		defer resume()
		time.Sleep(paused)
		// Evidence the control plane lost the members: Karmada says so.
		lost := w.clusterReady("m1") != "True" && w.clusterReady("m2") != "True"
		resume()
		resumed := time.Now()
		// marked: when the node controllers' mark was first seen; back: the first moment after it
		// that every pod is Ready again and registered.
		var marked, back time.Duration
		for time.Since(resumed) < after {
			switch {
			case marked == 0 && len(w.readyPods("m1"))+len(w.readyPods("m2")) < w.ex.Replicas:
				marked = time.Since(resumed)
			case marked != 0 && back == 0 && len(w.readyPods("m1"))+len(w.readyPods("m2")) == w.ex.Replicas && w.allReadyRegistered("m1", "m2"):
				back = time.Since(resumed)
			}
			time.Sleep(time.Second)
		}
		seen := watch()
		w.settled(g)
		if back == 0 {
			back = time.Since(resumed)
		}
		res := l.Stop()
		t.Logf("both members' API servers paused %s; %s; Karmada saw both lost: %v; pods marked not Ready by their node controllers: %v (seen %s after the resume), reported unobserved: %v; every pod Ready and registered again %s after the resume",
			paused, res, lost, seen.markedNotReady, marked.Round(time.Second), seen.unobserved, back.Round(time.Second))
		g.Expect(lost).To(BeTrue(), "Karmada lost both members while paused")
		g.Expect(seen.markedNotReady).To(BeTrue(), "the node controllers marked the serving pods not Ready on their return")
		g.Expect(seen.unobserved).To(BeTrue(), "the members reported them as unobserved, and the federation kept them")
		g.Expect(res.Failed).To(BeZero(), "no request fails during the outage nor in the minute after")
		g.Expect(res.ByMember).To(And(HaveKey("m1"), HaveKey("m2")))
	})

	t.Run("(b) one member's API server paused 150 s while the other serves", func(t *testing.T) {
		g := NewWithT(t)
		w.settled(g)
		// Karmada takes ≈ 85 s to see a paused API server (its probes hang rather than fail),
		// then the grace period runs.
		const paused = 150 * time.Second
		l := w.startLoad(paused + 5*time.Minute)
		defer l.Stop()
		resume := w.pause("m1-apiserver")
		defer resume()
		var withdrawn bool
		for end := time.Now().Add(paused); time.Now().Before(end); time.Sleep(time.Second) {
			withdrawn = withdrawn || w.memberStates()["m1"] == memberWithdrawn
		}
		resume()
		resumed := time.Now()
		w.settled(g)
		back := time.Since(resumed)
		res := l.Stop()
		t.Logf("m1's API server paused %s; %s; m1 withdrawn while paused: %v; all Ready pods registered again %s after the resume", paused, res, withdrawn, back.Round(time.Second))
		g.Expect(withdrawn).To(BeTrue(), "FailStatic withdraws the lost member while another serves")
		g.Expect(res.Failed).To(BeZero())
		g.Expect(w.memberStates()).To(HaveKeyWithValue("m1", memberContributing))
	})

	t.Run("(c) a member's kwok stopped: nodes NotReady, pods marked not Ready while serving", func(t *testing.T) {
		g := NewWithT(t)
		w.settled(g)
		const stopped = 2 * time.Minute
		before := w.registered("m1")
		l := w.startLoad(stopped + 5*time.Minute)
		defer l.Stop()
		s := w.startSampler(stopped + time.Minute)
		defer s.stop()
		watch := w.watchReadiness("m1")
		resume := w.pause("m1-kwok")
		defer resume()
		time.Sleep(stopped)
		resume()
		resumed := time.Now()
		w.settled(g)
		back := time.Since(resumed)
		seen, samples, res := watch(), s.stop(), l.Stop()
		// How long m1's backends stayed on the device once its pods were marked not Ready.
		var kept, gone time.Time
		for _, smp := range samples {
			on := true
			for _, a := range before {
				on = on && smp.device[ipOf(a)]
			}
			if on {
				kept = smp.at
			} else if gone.IsZero() && !kept.IsZero() {
				gone = smp.at
			}
		}
		t.Logf("m1's kwok stopped %s; %s; pods marked not Ready: %v, reported unobserved: %v; m1's backends last all on the device at %s, first missing at %s; all registered again %s after kwok resumed",
			stopped, res, seen.markedNotReady, seen.unobserved, kept.Format("15:04:05"), gone.Format("15:04:05"), back.Round(time.Second))
		g.Expect(seen.markedNotReady).To(BeTrue(), "m1's node controller marked its serving pods not Ready")
		g.Expect(seen.unobserved).To(BeTrue())
		g.Expect(res.Failed).To(BeZero(), "kept for the grace period, then drained while m2 serves")
	})

	t.Run("(d) pods really failing in one member are withdrawn", func(t *testing.T) {
		g := NewWithT(t)
		w.settled(g)
		l := w.startLoad(5 * time.Minute)
		defer l.Stop()
		// The pod responder stops answering for a pod whose containers are not ready, as a
		// process failing its readiness probe may: requests to m1 fail until the device stops
		// sending to it.
		failed := time.Now()
		w.setContainersReady("m1", false)
		defer w.setContainersReady("m1", true)
		g.Eventually(func() []string { return w.registered("m1") }, wait, 100*time.Millisecond).Should(BeEmpty(), "their readiness probes failed: withdrawn")
		out := time.Since(failed)
		g.Expect(w.conditionStatus(lbcfv1beta1.BackendGroupReadinessPanic)).NotTo(Equal("True"), "half of the pods is not a collapse")
		time.Sleep(5 * time.Second)
		mid := l.Stop()
		l2 := w.startLoad(5 * time.Minute)
		defer l2.Stop()
		w.setContainersReady("m1", true)
		w.settled(g)
		res := l2.Stop()
		t.Logf("m1's pods' containers not ready: withdrawn %s later; %s; after their return: %s", out.Round(100*time.Millisecond), mid, res)
		g.Expect(out).To(BeNumerically("<", 10*time.Second), "withdrawn as before the panic threshold: at once")
		g.Expect(mid.Failed).To(BeNumerically("<=", int((out+2*time.Second)/loadInterval)), "failures only until the withdrawal reached the device")
		g.Expect(res.Failed).To(BeZero())
	})
}
