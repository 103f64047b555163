//go:build e2e

package federation_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/devicestate"
	"github.com/lbfed/lbfed/testinfra/traffic"
)

// Issue 15: rollouts across clusters drop no request. The simulated Alteon is faithful (no
// silent reselection; a dead server is failed only by its health check, 2 s × 4), the members'
// pods behave like a kubelet's (readiness gates; a terminating pod serves through its preStop,
// then stops answering), and load goes through the VIP while Deployments roll on Karmada.

const preStop = 10 // seconds: well above the deletion-to-drain time measured here

// rolloutWorld is one example (namespace, VIP) under test.
type rolloutWorld struct {
	*world
	name string
	// restartedAt is the template annotation of the last restart: the members' Deployments
	// must carry it before their rollout counts as settled (not the state before it arrived).
	restartedAt string
}

func newRollout(t *testing.T, ns string, gated bool) *rolloutWorld {
	w := newWorld(t)
	ps := 0
	if gated {
		ps = preStop
	}
	w.ex = deploy.Example{Namespace: ns, VIP: fmt.Sprintf("127.4.%d.%d", rand.IntN(250), rand.IntN(250)+1), Port: 80, Replicas: 8,
		Members: []string{"m1", "m2"}, ReadinessGate: gated, PreStopSeconds: ps}
	w.g.Expect(w.ex.Apply(w.ctx, w.karmada, lbfed)).To(Succeed())
	return &rolloutWorld{world: w, name: ns}
}

// pods lists the example's pods in a member.
func (w *rolloutWorld) pods(g Gomega, member string) []corev1.Pod {
	list := &corev1.PodList{}
	g.Expect(w.members[member].List(w.ctx, list, client.InNamespace(w.ex.Namespace), client.MatchingLabels{"app": "web"})).To(Succeed())
	return list.Items
}

// settledAt waits until every member runs want[member] Ready pods of the Deployment's current
// template and nothing else, each registered (and only those), with the readiness gate or without
// (gated nil: either — pods created before their BackendGroup reached the member have none).
func (w *rolloutWorld) settledAt(want map[string]int, gated *bool) {
	w.t.Helper()
	w.g.Eventually(func(g Gomega) {
		for member, n := range want {
			dep := &appsv1.Deployment{}
			g.Expect(w.members[member].Get(w.ctx, client.ObjectKey{Namespace: w.ex.Namespace, Name: "web"}, dep)).To(Succeed())
			g.Expect(dep.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"]).To(Equal(w.restartedAt), member+": the restart reached it")
			g.Expect(dep.Status.ObservedGeneration).To(Equal(dep.Generation), member)
			g.Expect(dep.Status.UpdatedReplicas).To(BeEquivalentTo(n), member)
			g.Expect(dep.Status.AvailableReplicas).To(BeEquivalentTo(n), member)
			pods := w.pods(g, member)
			g.Expect(pods).To(HaveLen(n), member+": no pod left terminating")
			for _, p := range pods {
				if gated != nil {
					g.Expect(hasGate(&p)).To(Equal(*gated), "%s/%s readiness gate", member, p.Name)
				}
			}
			g.Expect(w.registered(member)).To(Equal(w.readyPods(member)), member)
		}
	}, wait, time.Second).Should(Succeed())
}

func hasGate(p *corev1.Pod) bool {
	for _, g := range p.Spec.ReadinessGates {
		if string(g.ConditionType) == lbcfv1beta1.PodConditionBackendRegistered {
			return true
		}
	}
	return false
}

// restart rolls the Deployment on Karmada as `kubectl rollout restart` does.
func (w *rolloutWorld) restart() {
	w.t.Helper()
	w.restartedAt = time.Now().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, w.restartedAt)
	dep := &appsv1.Deployment{}
	dep.Namespace, dep.Name = w.ex.Namespace, "web"
	w.g.Expect(w.karmada.Patch(w.ctx, dep, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// underLoad runs f with load through the VIP and returns the load's result and f's duration.
func (w *rolloutWorld) underLoad(f func()) (traffic.Result, time.Duration) {
	l := w.startLoad(10 * time.Minute)
	time.Sleep(2 * time.Second) // load running before the change
	start := time.Now()
	f()
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	r := l.Stop()
	w.g.Expect(r.Sent).To(BeNumerically(">", 100), "the load ran")
	w.g.Expect(r.ByMember).To(And(HaveKey("m1"), HaveKey("m2")), "both members served during the test")
	return r, took
}

// drainWatch records, for every pod IP that a member deletes, when the deletion was seen and when
// the master unit stopped choosing it (membership not enabled, or gone).
type drainWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	del    map[string]time.Time // pod IP -> deletion seen
	out    map[string]time.Time // pod IP -> out of rotation
}

func (w *rolloutWorld) watchDrains() *drainWatch {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	d := &drainWatch{cancel: cancel, done: make(chan struct{}), del: map[string]time.Time{}, out: map[string]time.Time{}}
	go func() {
		defer close(d.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			now := time.Now()
			for member := range w.members {
				list := &corev1.PodList{}
				if err := w.members[member].List(ctx, list, client.InNamespace(w.ex.Namespace), client.MatchingLabels{"app": "web"}); err == nil {
					d.mu.Lock()
					for _, p := range list.Items {
						if p.DeletionTimestamp != nil && p.Status.PodIP != "" {
							if _, ok := d.del[p.Status.PodIP]; !ok {
								d.del[p.Status.PodIP] = now
							}
						}
					}
					d.mu.Unlock()
				}
			}
			if rotation, err := w.inRotation(ctx); err == nil {
				d.mu.Lock()
				for ip := range d.del {
					if _, done := d.out[ip]; !done && !rotation[ip] {
						d.out[ip] = time.Now()
					}
				}
				d.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	return d
}

// latencies stops the watch and returns deletion → out of rotation, sorted.
func (d *drainWatch) latencies() []time.Duration {
	d.cancel()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []time.Duration
	for ip, t := range d.del {
		if o, ok := d.out[ip]; ok {
			out = append(out, o.Sub(t))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// inRotation returns the IPs the master unit may choose for a new connection.
func (w *rolloutWorld) inRotation(ctx context.Context) (map[string]bool, error) {
	c, err := w.masterClient()
	if err != nil {
		return nil, err
	}
	return devicestate.InRotation(ctx, c)
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// gateWatch records when each backend's record turned Registered on Karmada and when its pod's
// readiness-gate condition turned True in its member (both as observed by this process).
type gateWatch struct {
	cancel     context.CancelFunc
	done       chan struct{}
	mu         sync.Mutex
	registered map[string]time.Time // member/pod -> record Registered seen
	gated      map[string]time.Time // member/pod -> condition True seen
	answers    map[string]bool      // distinct lbfed.io/registered values seen on the template
}

func (w *rolloutWorld) watchGates() *gateWatch {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	gw := &gateWatch{cancel: cancel, done: make(chan struct{}), registered: map[string]time.Time{}, gated: map[string]time.Time{}, answers: map[string]bool{}}
	go func() {
		defer close(gw.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			list := &lbcfv1beta1.BackendRecordList{}
			if err := w.karmada.List(ctx, list, client.InNamespace(w.ex.Namespace)); err == nil {
				now := time.Now()
				gw.mu.Lock()
				for _, br := range list.Items {
					if br.IsRegistered() && br.Spec.PodBackendInfo != nil {
						k := br.Labels[lbcfv1beta1.LabelCluster] + "/" + br.Spec.PodBackendInfo.Name
						if _, ok := gw.registered[k]; !ok {
							gw.registered[k] = now
						}
					}
				}
				gw.mu.Unlock()
			}
			bg := &lbcfv1beta1.BackendGroup{}
			if err := w.karmada.Get(ctx, client.ObjectKey{Namespace: w.ex.Namespace, Name: "web"}, bg); err == nil {
				gw.mu.Lock()
				gw.answers[bg.Annotations[lbcfv1beta1.AnnotationRegistered]] = true
				gw.mu.Unlock()
			}
			for member, mc := range w.members {
				pods := &corev1.PodList{}
				if err := mc.List(ctx, pods, client.InNamespace(w.ex.Namespace)); err != nil {
					continue
				}
				now := time.Now()
				gw.mu.Lock()
				for _, p := range pods.Items {
					for _, c := range p.Status.Conditions {
						if string(c.Type) == lbcfv1beta1.PodConditionBackendRegistered && c.Status == corev1.ConditionTrue {
							if _, ok := gw.gated[member+"/"+p.Name]; !ok {
								gw.gated[member+"/"+p.Name] = now
							}
						}
					}
				}
				gw.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	return gw
}

// latencies stops the watch and returns Registered → condition True for backends seen both ways.
func (gw *gateWatch) latencies() []time.Duration {
	gw.cancel()
	<-gw.done
	gw.mu.Lock()
	defer gw.mu.Unlock()
	var out []time.Duration
	for k, r := range gw.registered {
		if c, ok := gw.gated[k]; ok {
			out = append(out, max(0, c.Sub(r)))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func TestZeroDowntimeRollouts(t *testing.T) {
	gated := newRollout(t, "e2e-rollout", true)
	base := newRollout(t, "e2e-rollout-base", false)
	both := map[string]int{"m1": 4, "m2": 4}
	yes, no := true, false
	gated.settledAt(both, nil)
	base.settledAt(both, &no)
	figures := map[string]string{}
	defer func() {
		keys := make([]string, 0, len(figures))
		for k := range figures {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.Logf("FIGURE %s: %s", k, figures[k])
		}
	}()

	t.Run("(a) a rolling restart with the gate and the drain drops nothing", func(t *testing.T) {
		w := &rolloutWorld{world: &world{t: t, g: NewWithT(t), ctx: gated.ctx, topo: gated.topo, karmada: gated.karmada, members: gated.members, ex: gated.ex}, restartedAt: gated.restartedAt}
		defer func() { gated.restartedAt = w.restartedAt }()
		drains, gates := w.watchDrains(), w.watchGates()
		r, took := w.underLoad(func() {
			w.restart()
			w.settledAt(both, &yes)
		})
		d, gl := drains.latencies(), gates.latencies() // both watches stopped
		// The first value seen is the one before the rollout.
		figures["(a) registration answers written during the rollout"] = fmt.Sprintf("%d new lbfed.io/registered values seen (sampled every 50 ms) for 16 pod changes (8 new, 8 old)", len(gates.answers)-1)
		figures["(a) gated rollout"] = fmt.Sprintf("%s in %s", r, took.Round(100*time.Millisecond))
		figures["(a) terminating → out of rotation"] = fmt.Sprintf("n=%d p50=%s p99=%s max=%s", len(d), percentile(d, .5), percentile(d, .99), percentile(d, 1))
		figures["(a) Registered → pod condition"] = fmt.Sprintf("n=%d p50=%s p99=%s max=%s", len(gl), percentile(gl, .5), percentile(gl, .99), percentile(gl, 1))
		w.g.Expect(r.Failed).To(BeZero(), r.String())
		w.g.Expect(d).To(HaveLen(8), "every old pod was seen leaving the device's rotation")
		w.g.Expect(percentile(d, 1)).To(BeNumerically("<", preStop*time.Second), "drained while still serving")
		w.g.Expect(gl).NotTo(BeEmpty())
	})

	t.Run("(b) scaling one member from 4 to 1 drops nothing", func(t *testing.T) {
		w := &rolloutWorld{world: &world{t: t, g: NewWithT(t), ctx: gated.ctx, topo: gated.topo, karmada: gated.karmada, members: gated.members, ex: gated.ex}, restartedAt: gated.restartedAt}
		defer func() { gated.restartedAt = w.restartedAt }()
		r, took := w.underLoad(func() {
			w.scale(5, map[string]int{"m1": 1, "m2": 4})
			w.settledAt(map[string]int{"m1": 1, "m2": 4}, &yes)
		})
		figures["(b) scale m1 4→1"] = fmt.Sprintf("%s in %s", r, took.Round(100*time.Millisecond))
		w.g.Expect(r.Failed).To(BeZero(), r.String())
	})

	t.Run("(c) the same rollout without gate and drain drops requests (baseline)", func(t *testing.T) {
		w := &rolloutWorld{world: &world{t: t, g: NewWithT(t), ctx: base.ctx, topo: base.topo, karmada: base.karmada, members: base.members, ex: base.ex}, restartedAt: base.restartedAt}
		defer func() { base.restartedAt = w.restartedAt }()
		r, took := w.underLoad(func() {
			w.restart()
			w.settledAt(both, &no)
		})
		figures["(c) baseline rollout"] = fmt.Sprintf("%s in %s", r, took.Round(100*time.Millisecond))
		// The test bed shows what production shows: pods that stop answering before they are
		// out of the device's rotation cost requests.
		w.g.Expect(r.Failed).To(BeNumerically(">", 0), "the faithful data plane shows the baseline's failures: "+r.String())
	})

	t.Run("(e) a process gone without grace costs requests until the health check fails it", func(t *testing.T) {
		w := &rolloutWorld{world: &world{t: t, g: NewWithT(t), ctx: base.ctx, topo: base.topo, karmada: base.karmada, members: base.members, ex: base.ex}, restartedAt: base.restartedAt}
		defer func() { base.restartedAt = w.restartedAt }()
		pods := w.pods(w.g, "m1")
		w.g.Expect(pods).NotTo(BeEmpty())
		victim := pods[0]
		l := w.startLoad(5 * time.Minute)
		time.Sleep(2 * time.Second)
		w.annotatePod("m1", victim.Name, "true")
		killed := time.Now()
		// Device defaults: failed after 4 checks 2 s apart; then nothing fails any more.
		time.Sleep(12 * time.Second)
		first := l.Stop()
		window := time.Since(killed)
		l = w.startLoad(5 * time.Minute)
		time.Sleep(10 * time.Second)
		after := l.Stop()
		w.annotatePod("m1", victim.Name, "")
		figures["(e) process gone, until failed by the health check"] = fmt.Sprintf("%s (the %s after the kill)", first, window.Round(100*time.Millisecond))
		figures["(e) process gone, afterwards"] = after.String()
		w.g.Expect(first.Failed).To(BeNumerically(">", 0), "the dead process cost requests: "+first.String())
		w.g.Expect(after.Failed).To(BeZero(), "the health check took it out: "+after.String())
		w.g.Expect(after.Sent).To(BeNumerically(">", 100))
	})
}

// scale sets the Deployment's replicas on Karmada and the members' weights of its placement.
func (w *rolloutWorld) scale(replicas int, weights map[string]int) {
	w.t.Helper()
	pp := &unstructured.Unstructured{}
	pp.SetAPIVersion("policy.karmada.io/v1alpha1")
	pp.SetKind("PropagationPolicy")
	w.g.Expect(w.karmada.Get(w.ctx, client.ObjectKey{Namespace: w.ex.Namespace, Name: "web"}, pp)).To(Succeed())
	var list []any
	members := make([]string, 0, len(weights))
	for m := range weights {
		members = append(members, m)
	}
	sort.Strings(members)
	for _, m := range members {
		list = append(list, map[string]any{"targetCluster": map[string]any{"clusterNames": []any{m}}, "weight": int64(weights[m])})
	}
	w.g.Expect(unstructured.SetNestedSlice(pp.Object, list, "spec", "placement", "replicaScheduling", "weightPreference", "staticWeightList")).To(Succeed())
	w.g.Expect(w.karmada.Update(w.ctx, pp)).To(Succeed())
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	dep := &appsv1.Deployment{}
	dep.Namespace, dep.Name = w.ex.Namespace, "web"
	w.g.Expect(w.karmada.Patch(w.ctx, dep, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// annotatePod sets (or, with "", removes) the pod responder's stopped annotation on a member pod.
func (w *rolloutWorld) annotatePod(member, pod, stopped string) {
	w.t.Helper()
	var v any = stopped
	if stopped == "" {
		v = nil
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, "podresponder.lbfed.io/stopped", jsonValue(v))
	p := &corev1.Pod{}
	p.Namespace, p.Name = w.ex.Namespace, pod
	err := w.members[member].Patch(w.ctx, p, client.RawPatch(types.MergePatchType, []byte(patch)))
	if !apierrors.IsNotFound(err) {
		w.g.Expect(err).NotTo(HaveOccurred())
	}
}

func jsonValue(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%q", strings.TrimSpace(fmt.Sprint(v)))
}
