//go:build kind

package kind_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/devicestate"
	"github.com/lbfed/lbfed/testinfra/traffic"
)

// Issue 45: the traffic guarantees measured on the local topology's kubelet model, again where
// the kubelet, container runtime, kube-proxy and pod network are real. Load: one request every
// 20 ms through the VIP, each on a new connection.

const preStop = 10 // seconds, as README advises

func (e *env) guarantees(figures map[string]string) {
	t := e.t
	gated := &example{NS: "kind-rollout", VIP: "10.20.0.110", Replicas: 8, Gated: true, PreStop: preStop}
	base := &example{NS: "kind-rollout-base", VIP: "10.20.0.111", Replicas: 8}
	e.create(gated)
	e.create(base)
	both := map[string]int{"m1": 4, "m2": 4}
	yes, no := true, false
	e.settledAt(gated, both, &yes)
	e.settledAt(base, both, &no)

	t.Run("(1a) a rolling restart with gate and preStop drops nothing", func(t *testing.T) {
		e := e.withT(t)
		w := e.watchBackends(gated.NS)
		r, took := e.underLoad(gated.VIP, func() {
			e.restart(gated)
			e.settledAt(gated, both, &yes)
		})
		lat := w.stop()
		figures["(1a) gated rollout, 8 pods over 2 members"] = fmt.Sprintf("%s in %s", r, took.Round(100*time.Millisecond))
		figures["(1a) containers ready → on the device"] = lat.summary(lat.toDevice)
		figures["(1a) on the device → gate condition True"] = lat.summary(lat.toGate)
		figures["(1a) pod deleted → out of the device's rotation"] = lat.summary(lat.toDrained)
		g := NewWithT(t)
		g.Expect(r.Failed).To(BeZero(), r.String())
		g.Expect(lat.toDrained).To(HaveLen(8), "every old pod was seen leaving the device's rotation")
		g.Expect(traffic.Percentile(lat.toDrained, 1)).To(BeNumerically("<", preStop*time.Second), "drained while still serving")
		g.Expect(lat.toGate).NotTo(BeEmpty())
	})

	t.Run("(1b) scaling one member from 4 to 1 drops nothing", func(t *testing.T) {
		e := e.withT(t)
		r, took := e.underLoad(gated.VIP, func() {
			e.scale(gated, 5, map[string]int{"m1": 1, "m2": 4})
			e.settledAt(gated, map[string]int{"m1": 1, "m2": 4}, &yes)
		})
		figures["(1b) scale m1 4→1"] = fmt.Sprintf("%s in %s", r, took.Round(100*time.Millisecond))
		NewWithT(t).Expect(r.Failed).To(BeZero(), r.String())
	})

	t.Run("(1c) the same rollout without gate and preStop (baseline)", func(t *testing.T) {
		e := e.withT(t)
		r, took := e.underLoad(base.VIP, func() {
			e.restart(base)
			e.settledAt(base, both, &no)
		})
		figures["(1c) baseline rollout"] = fmt.Sprintf("%s in %s", r, took.Round(100*time.Millisecond))
		// A real kubelet sends SIGTERM at once: the responder stops accepting, while the device
		// still chooses it until lbfed's deregistration reaches it.
		NewWithT(t).Expect(r.Failed).To(BeNumerically(">", 0), "the baseline shows what the gate and the drain prevent: "+r.String())
	})

	t.Run("(1d) a container killed inside its node costs requests until it is out", func(t *testing.T) {
		e := e.withT(t)
		g := NewWithT(t)
		pods := e.pods(g, base.NS, "m1")
		g.Expect(pods).NotTo(BeEmpty())
		victim := pods[0]
		l := traffic.Start("http://"+base.VIP+"/", traffic.Interval, 5*time.Minute)
		defer l.Stop()
		time.Sleep(2 * time.Second)
		g.Expect(e.killContainer("m1", base.NS, victim.Name)).To(Succeed())
		killed := time.Now()
		time.Sleep(12 * time.Second)
		first := l.Stop()
		l = traffic.Start("http://"+base.VIP+"/", traffic.Interval, 5*time.Minute)
		defer l.Stop()
		time.Sleep(10 * time.Second)
		after := l.Stop()
		var last time.Duration
		for _, at := range first.FailedAt {
			last = max(last, at.Sub(killed))
		}
		figures["(1d) container killed, first 12 s"] = fmt.Sprintf("%s; last failure %s after the kill", first, last.Round(100*time.Millisecond))
		figures["(1d) container killed, the 10 s after"] = after.String()
		g.Expect(after.Failed).To(BeZero(), "out of rotation (the kubelet restarts it, lbfed or the health check took it out): "+after.String())
		// The device's health check fails a dead server after 4 checks 2 s apart: the failures end
		// by then, whatever noticed first.
		g.Expect(last).To(BeNumerically("<", 10*time.Second))
		e.settledAt(base, both, nil)
	})

	t.Run("(2a) every member cut from Karmada 3 min keeps every backend", func(t *testing.T) {
		e := e.withT(t)
		g := NewWithT(t)
		before := map[string][]string{"m1": e.registered(demoNS, "m1"), "m2": e.registered(demoNS, "m2")}
		l := traffic.Start("http://"+demoVIP+"/", traffic.Interval, 10*time.Minute)
		defer l.Stop()
		restore := e.cut("m1", "m2")
		defer restore()
		cut := time.Now()
		var lost time.Duration
		for time.Since(cut) < 3*time.Minute {
			if lost == 0 && e.clusterReady("m1") != "True" && e.clusterReady("m2") != "True" {
				lost = time.Since(cut)
			}
			time.Sleep(2 * time.Second)
		}
		states := e.memberStates(demoNS, "web")
		device, err := e.deviceIPs()
		g.Expect(err).NotTo(HaveOccurred())
		restore()
		restored := time.Now()
		e.demoSettled(g)
		back := time.Since(restored)
		r := l.Stop()
		figures["(2a) every member cut 3 min"] = fmt.Sprintf("%s; Karmada saw both lost after %s; at the end of the cut: members %v; all back %s after the restore",
			r, lost.Round(time.Second), states, back.Round(time.Second))
		g.Expect(lost).NotTo(BeZero(), "Karmada lost both members")
		g.Expect(states).To(Equal(map[string]string{"m1": string(lbcfv1beta1.MemberHeld), "m2": string(lbcfv1beta1.MemberHeld)}), "held by the floor")
		for m, addrs := range before {
			for _, a := range addrs {
				g.Expect(device).To(HaveKey(ipOf(a)), "%s's %s stays on the device", m, a)
			}
		}
		g.Expect(r.Failed).To(BeZero(), r.String())
	})

	t.Run("(2b) one member cut while the other serves is withdrawn after grace and returns from a fresh report", func(t *testing.T) {
		e := e.withT(t)
		g := NewWithT(t)
		e.demoSettled(g)
		m1 := e.registered(demoNS, "m1")
		l := traffic.Start("http://"+demoVIP+"/", traffic.Interval, 15*time.Minute)
		defer l.Stop()
		restore := e.cut("m1")
		defer restore()
		cut := time.Now()
		g.Eventually(func(g Gomega) {
			device, err := e.deviceIPs()
			g.Expect(err).NotTo(HaveOccurred())
			for _, a := range m1 {
				g.Expect(device).NotTo(HaveKey(ipOf(a)))
			}
		}, 6*time.Minute, 2*time.Second).Should(Succeed(), "m1's real servers leave the device after the grace period")
		withdrawn := time.Since(cut)
		state := e.memberStates(demoNS, "web")["m1"]
		restore()
		restored := time.Now()
		sawRecovering := false
		g.Eventually(func(g Gomega) {
			st := e.memberStates(demoNS, "web")["m1"]
			sawRecovering = sawRecovering || st == string(lbcfv1beta1.MemberRecovering)
			g.Expect(st).To(Equal(string(lbcfv1beta1.MemberContributing)))
		}, 6*time.Minute, time.Second).Should(Succeed())
		e.demoSettled(g)
		back := time.Since(restored)
		r := l.Stop()
		figures["(2b) m1 cut"] = fmt.Sprintf("%s; m1 withdrawn from the device %s after the cut (state %s); back %s after the restore (Recovering seen: %v)",
			r, withdrawn.Round(time.Second), state, back.Round(time.Second), sawRecovering)
		g.Expect(state).To(Equal(string(lbcfv1beta1.MemberWithdrawn)))
		g.Expect(r.Failed).To(BeZero(), r.String())
		g.Expect(e.eventReasons(demoNS, "web")).To(ContainElements("MemberWithdrawn", "MemberRestored"))
	})

	t.Run("(3) the leader deleted during 1,000 backend changes: the standby leads, nothing lost", func(t *testing.T) {
		e := e.withT(t)
		e.leaderFailover(figures, leaderDeleted)
	})

	t.Run("(3) the leader's node paused during 1,000 backend changes: the standby leads, nothing lost", func(t *testing.T) {
		e := e.withT(t)
		e.leaderFailover(figures, leaderPaused)
	})

	t.Run("(4) member lbcf-controller and Karmada's controller-manager restarted under load", func(t *testing.T) {
		e := e.withT(t)
		g := NewWithT(t)
		e.demoSettled(g)
		uids := e.recordUIDs(demoNS)
		var back, live, out time.Duration
		kept := 0
		start := time.Now()
		r, took := e.underLoad(demoVIP, func() {
			e.deletePods(g, e.members["m1"], "lbfed-system", client.MatchingLabels{"app.kubernetes.io/instance": lbfedRelease, "app.kubernetes.io/component": "member"})
			e.deletePods(g, e.host, "karmada-system", client.MatchingLabels{"app": "karmada-controller-manager"})
			back = time.Since(start)
			after := e.recordUIDs(demoNS)
			for k, uid := range uids {
				if after[k] == uid {
					kept++
				}
			}
			// Karmada's status path is back once a change goes round it: one more demo pod,
			// placed by Karmada, registered from its member's report.
			e.scaleDemo(g, 5)
			live = time.Since(start)
			// From then on a deleted pod is out of the rotation before its preStop (10 s) ends.
			pods := e.pods(g, demoNS, "m1")
			g.Expect(pods).NotTo(BeEmpty())
			g.Expect(e.members["m1"].Delete(e.ctx, &pods[0])).To(Succeed())
			deleted, ip := time.Now(), pods[0].Status.PodIP
			g.Eventually(func(g Gomega) {
				rotation, err := e.inRotation(e.ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(rotation).NotTo(HaveKey(ip))
			}, 3*time.Minute, 100*time.Millisecond).Should(Succeed())
			out = time.Since(deleted)
			e.scaleDemo(g, 4)
		})
		figures["(4) restarts under load"] = fmt.Sprintf("%s in %s; restarted pods Ready %s after their deletion (member lease acquired %s, Karmada's %s); %d of %d records unchanged; a change went round Karmada again %s after the deletion; a pod deleted then was out of the device's rotation %s later (preStop 10 s)",
			r, took.Round(time.Second), back.Round(100*time.Millisecond),
			e.leaseAcquired(e.members["m1"], "lbfed-system", "lbcf-controller-member", start), e.leaseAcquired(e.karmada, "karmada-system", "karmada-controller-manager", start),
			kept, len(uids), live.Round(100*time.Millisecond), out.Round(100*time.Millisecond))
		g.Expect(r.Failed).To(BeZero(), r.String())
		g.Expect(kept).To(Equal(len(uids)), "nothing re-registered from stale data across the restarts")
	})
}

// scaleDemo sets the demo Deployment's replicas on Karmada and waits until that many backends are
// registered from the members' reports, and the demo is settled.
func (e *env) scaleDemo(g Gomega, n int32) {
	d := &appsv1.Deployment{}
	g.Expect(e.karmada.Get(e.ctx, client.ObjectKey{Namespace: demoNS, Name: "web"}, d)).To(Succeed())
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &n
	g.Expect(e.karmada.Patch(e.ctx, d, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(len(e.registered(demoNS, "m1")) + len(e.registered(demoNS, "m2"))).To(Equal(int(n)))
	}, 6*time.Minute, time.Second).Should(Succeed())
	e.demoSettled(g)
}

// backendWatch records, per pod of a namespace in either member, when this process first saw its
// containers ready, its IP in the master unit's rotation, and its gate condition True; and, for
// every pod deleted, when the deletion was seen and when its IP left the rotation.
type backendWatch struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	ready   map[string]time.Time // member/pod → containers ready
	ip      map[string]string    // member/pod → pod IP
	device  map[string]time.Time // member/pod → in rotation
	gate    map[string]time.Time // member/pod → gate condition True
	deleted map[string]time.Time // pod IP → deletion seen
	out     map[string]time.Time // pod IP → out of rotation
}

func (e *env) watchBackends(ns string) *backendWatch {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	w := &backendWatch{cancel: cancel, done: make(chan struct{}), ready: map[string]time.Time{}, ip: map[string]string{}, device: map[string]time.Time{},
		gate: map[string]time.Time{}, deleted: map[string]time.Time{}, out: map[string]time.Time{}}
	// Pods already there when the watch starts are not new.
	existing := map[string]bool{}
	for m, c := range e.members {
		list := &corev1.PodList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err == nil {
			for _, p := range list.Items {
				existing[m+"/"+p.Name] = true
			}
		}
	}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			for m, c := range e.members {
				list := &corev1.PodList{}
				if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
					continue
				}
				now := time.Now()
				w.mu.Lock()
				for _, p := range list.Items {
					k := m + "/" + p.Name
					if p.DeletionTimestamp != nil && p.Status.PodIP != "" {
						if _, ok := w.deleted[p.Status.PodIP]; !ok {
							w.deleted[p.Status.PodIP] = now
						}
					}
					if existing[k] {
						continue
					}
					for _, cond := range p.Status.Conditions {
						if cond.Status != corev1.ConditionTrue {
							continue
						}
						if _, ok := w.ready[k]; !ok && cond.Type == corev1.ContainersReady {
							w.ready[k], w.ip[k] = now, p.Status.PodIP
						}
						if _, ok := w.gate[k]; !ok && string(cond.Type) == lbcfv1beta1.PodConditionBackendRegistered {
							w.gate[k] = now
						}
					}
				}
				w.mu.Unlock()
			}
			if rotation, err := e.inRotation(ctx); err == nil {
				now := time.Now()
				w.mu.Lock()
				for k, ip := range w.ip {
					if _, ok := w.device[k]; !ok && rotation[ip] {
						w.device[k] = now
					}
				}
				for ip := range w.deleted {
					if _, ok := w.out[ip]; !ok && !rotation[ip] {
						w.out[ip] = now
					}
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	return w
}

// backendLatencies are what a backendWatch measured, each sorted.
type backendLatencies struct {
	toDevice, toGate, toDrained []time.Duration
}

func (l backendLatencies) summary(d []time.Duration) string {
	return fmt.Sprintf("n=%d p50=%s p99=%s max=%s", len(d), traffic.Percentile(d, .5).Round(10*time.Millisecond),
		traffic.Percentile(d, .99).Round(10*time.Millisecond), traffic.Percentile(d, 1).Round(10*time.Millisecond))
}

func (w *backendWatch) stop() backendLatencies {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	var out backendLatencies
	for k, r := range w.ready {
		if d, ok := w.device[k]; ok {
			out.toDevice = append(out.toDevice, max(0, d.Sub(r)))
			if gt, ok := w.gate[k]; ok {
				out.toGate = append(out.toGate, max(0, gt.Sub(d)))
			}
		}
	}
	for ip, t := range w.deleted {
		if o, ok := w.out[ip]; ok {
			out.toDrained = append(out.toDrained, o.Sub(t))
		}
	}
	for _, s := range [][]time.Duration{out.toDevice, out.toGate, out.toDrained} {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	}
	return out
}

// killContainer kills the responder's process of a pod from inside its node, as a crash does:
// the pod stays Ready until the kubelet notices.
func (e *env) killContainer(member, ns, pod string) error {
	n := "lbfed-" + member + "-control-plane"
	id, err := node(n, "crictl", "ps", "-q", "--name", "web", "--label", "io.kubernetes.pod.name="+pod, "--label", "io.kubernetes.pod.namespace="+ns)
	if err != nil {
		return fmt.Errorf("crictl ps: %v: %s", err, id)
	}
	id = strings.TrimSpace(id)
	pid, err := node(n, "crictl", "inspect", "-o", "go-template", "--template", "{{.info.pid}}", id)
	if err != nil {
		return fmt.Errorf("crictl inspect %s: %v: %s", id, err, pid)
	}
	if out, err := node(n, "kill", "-9", strings.TrimSpace(pid)); err != nil {
		return fmt.Errorf("kill %s: %v: %s", pid, err, out)
	}
	return nil
}

// cut makes the members' API servers unreachable from the host cluster (Karmada's components
// and lbfed-controller) while their pods keep serving: the host node drops what it sends or
// forwards to a member node's API port. The returned func restores them (idempotent).
func (e *env) cut(members ...string) (restore func()) {
	e.t.Helper()
	var rules [][]string
	for _, m := range members {
		for _, chain := range []string{"OUTPUT", "FORWARD"} {
			rules = append(rules, []string{chain, "-d", e.nodeIP[m], "-p", "tcp", "--dport", "6443", "-j", "DROP"})
		}
	}
	for _, r := range rules {
		out, err := node(hostNode, append([]string{"iptables", "-I"}, r...)...)
		NewWithT(e.t).Expect(err).NotTo(HaveOccurred(), out)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, r := range rules {
				if out, err := node(hostNode, append([]string{"iptables", "-D"}, r...)...); err != nil {
					e.t.Errorf("restore %v: %v: %s", r, err, out)
				}
			}
		})
	}
}

// clusterReady returns the Ready condition status of a Karmada Cluster.
func (e *env) clusterReady(name string) string {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.karmada.io", Version: "v1alpha1", Kind: "Cluster"})
	if err := e.karmada.Get(e.ctx, client.ObjectKey{Name: name}, u); err != nil {
		return "Error: " + err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			s, _ := m["status"].(string)
			return s
		}
	}
	return "Unknown"
}

// memberStates returns status.members[].name → state of a BackendGroup template.
func (e *env) memberStates(ns, name string) map[string]string {
	bg := &lbcfv1beta1.BackendGroup{}
	out := map[string]string{}
	if err := e.karmada.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, bg); err != nil {
		return out
	}
	for _, m := range bg.Status.Members {
		out[m.Name] = string(m.State)
	}
	return out
}

// eventReasons lists the reasons of the Karmada events about a BackendGroup template.
func (e *env) eventReasons(ns, name string) []string {
	list := &corev1.EventList{}
	if err := e.karmada.List(e.ctx, list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == "BackendGroup" && ev.InvolvedObject.Name == name {
			out = append(out, ev.Reason)
		}
	}
	return out
}

// deviceIPs lists the master unit's real servers.
func (e *env) deviceIPs() (map[string]bool, error) {
	c, err := e.master()
	if err != nil {
		return nil, err
	}
	return devicestate.RealServerIPs(e.ctx, c)
}

func ipOf(addr string) string { return strings.Split(addr, ":")[0] }

// demoSettled waits until both Clusters are Ready and every Ready demo pod of both members is
// registered, on the records and on the device.
func (e *env) demoSettled(g Gomega) {
	g.Eventually(func(g Gomega) {
		g.Expect(e.clusterReady("m1")).To(Equal("True"))
		g.Expect(e.clusterReady("m2")).To(Equal("True"))
		device, err := e.deviceIPs()
		g.Expect(err).NotTo(HaveOccurred())
		for _, m := range []string{"m1", "m2"} {
			pods := e.readyPods(demoNS, m)
			g.Expect(pods).NotTo(BeEmpty())
			g.Expect(e.registered(demoNS, m)).To(Equal(pods))
			for _, p := range pods {
				g.Expect(device).To(HaveKey(ipOf(p)))
			}
		}
	}, 6*time.Minute, time.Second).Should(Succeed())
}

// leaseAcquired says when a leader-election lease was last acquired, relative to since.
func (e *env) leaseAcquired(c client.Client, ns, name string, since time.Time) string {
	l := &coordinationv1.Lease{}
	if err := c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, l); err != nil {
		return err.Error()
	}
	if l.Spec.AcquireTime == nil {
		return "never"
	}
	return fmt.Sprintf("%s after the deletions", l.Spec.AcquireTime.Sub(since).Round(100*time.Millisecond))
}

// recordUIDs returns each record of a namespace (by name) and its UID.
func (e *env) recordUIDs(ns string) map[string]types.UID {
	list := &lbcfv1beta1.BackendRecordList{}
	out := map[string]types.UID{}
	if err := e.karmada.List(e.ctx, list, client.InNamespace(ns)); err == nil {
		for _, br := range list.Items {
			out[br.Name] = br.UID
		}
	}
	return out
}

// deletePods deletes the pods matching labels and waits until as many are Ready again.
func (e *env) deletePods(g Gomega, c client.Client, ns string, match client.MatchingLabels) {
	list := &corev1.PodList{}
	g.Expect(c.List(e.ctx, list, client.InNamespace(ns), match)).To(Succeed())
	g.Expect(list.Items).NotTo(BeEmpty(), "pods %v in %s", match, ns)
	old := map[string]bool{}
	for i := range list.Items {
		old[list.Items[i].Name] = true
		g.Expect(c.Delete(e.ctx, &list.Items[i])).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		l := &corev1.PodList{}
		g.Expect(c.List(e.ctx, l, client.InNamespace(ns), match)).To(Succeed())
		n := 0
		for _, p := range l.Items {
			g.Expect(old).NotTo(HaveKey(p.Name), "the old pods are gone")
			if podReady(&p) {
				n++
			}
		}
		g.Expect(n).To(Equal(len(old)))
	}, 3*time.Minute, time.Second).Should(Succeed())
}

// How the leader goes in leaderFailover.
type leaderLoss int

const (
	// leaderDeleted: its pod deleted (SIGTERM: the lease is released).
	leaderDeleted leaderLoss = iota
	// leaderPaused: its node paused for pauseFor, as far as the one-node host cluster allows
	// (pauseLeaderNode): the lease runs out, then the old leader resumes.
	leaderPaused
)

// pauseFor: past the lease (15 s) and its renew deadline, under the node monitor's grace period
// (40 s and more), so that the node is not marked NotReady with the Karmada pods beside it.
const pauseFor = 30 * time.Second

// leaderFailover: a static group on its own LoadBalancer gets 500 addresses, then loses them: 1,000
// backend changes. Its leader is lost (how) once about half the first 500 are registered. The
// standby must lead within the lease, every address end up registered on both units, then none.
func (e *env) leaderFailover(figures map[string]string, how leaderLoss) {
	g := NewWithT(e.t)
	const n = 500
	ns, vip, octet, label := "kind-churn", "10.20.0.120", 250, "(3) leader failover during 1,000 changes"
	if how == leaderPaused {
		ns, vip, octet, label = "kind-churn-paused", "10.20.0.121", 252, "(3) leader's node paused during 1,000 changes"
	}
	var addrs []string
	for i := range n {
		addrs = append(addrs, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 12, byte(octet + i/250), byte(i%250 + 1)}), 8080).String())
	}
	var static strings.Builder
	for _, a := range addrs {
		fmt.Fprintf(&static, "  - %q\n", a)
	}
	// The demo's namespace, driver and LoadBalancer, on a VIP of its own.
	var lbObjs []*unstructured.Unstructured
	for _, u := range e.demo(&example{NS: ns, VIP: vip}, "backendgroup.yaml") {
		switch u.GetKind() {
		case "LoadBalancer":
			u.SetName("churn-vip")
			fallthrough
		case "Namespace", "LoadBalancerDriver":
			lbObjs = append(lbObjs, u)
		}
	}
	g.Expect(e.applyObjects(e.karmada, lbObjs)).To(Succeed())
	g.Eventually(func(g Gomega) {
		lb := &lbcfv1beta1.LoadBalancer{}
		g.Expect(e.karmada.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "churn-vip"}, lb)).To(Succeed())
		g.Expect(lb.IsCreated()).To(BeTrue())
	}, 2*time.Minute, time.Second).Should(Succeed())

	leader := func() string {
		l := &coordinationv1.Lease{}
		if err := e.karmada.Get(e.ctx, client.ObjectKey{Namespace: lbfedNS, Name: "lbfed-controller-federation"}, l); err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return strings.SplitN(*l.Spec.HolderIdentity, "_", 2)[0]
	}
	registered := func() int {
		list := &lbcfv1beta1.BackendRecordList{}
		if err := e.karmada.List(e.ctx, list, client.InNamespace(ns)); err != nil {
			return -1
		}
		c := 0
		for _, br := range list.Items {
			if br.IsRegistered() && br.DeletionTimestamp == nil {
				c++
			}
		}
		return c
	}
	churnIPs := func(port int) (map[string]bool, error) {
		all, err := devicestate.RealServerIPs(e.ctx, e.unit(port))
		if err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for ip := range all {
			if strings.HasPrefix(ip, fmt.Sprintf("10.12.%d.", octet)) || strings.HasPrefix(ip, fmt.Sprintf("10.12.%d.", octet+1)) {
				out[ip] = true
			}
		}
		return out, nil
	}

	first := leader()
	g.Expect(first).NotTo(BeEmpty())
	start := time.Now()
	g.Expect(e.apply(e.karmada, fmt.Sprintf(`
apiVersion: lbcf.tkestack.io/v1beta1
kind: BackendGroup
metadata: {name: churn, namespace: %s}
spec:
  loadBalancers: [churn-vip]
  static:
%s`, ns, static.String()))).To(Succeed())
	g.Eventually(registered, 5*time.Minute, 100*time.Millisecond).Should(BeNumerically(">=", n/2))
	half := time.Since(start)
	pod := &corev1.Pod{}
	g.Expect(e.host.Get(e.ctx, client.ObjectKey{Namespace: lbfedNS, Name: first}, pod)).To(Succeed())
	restarts := restartCount(pod)
	lossText := "deleted"
	var resume func() error
	lost := time.Now()
	if how == leaderDeleted {
		g.Expect(e.host.Delete(e.ctx, pod)).To(Succeed())
	} else {
		var err error
		resume, err = pauseLeaderNode(hostNode, pod)
		g.Expect(err).NotTo(HaveOccurred())
		e.t.Cleanup(func() { _ = resume() }) // a failure below must not leave the node frozen
		lossText = fmt.Sprintf("on a node paused %s (resumed, it exited and restarted as a standby)", pauseFor)
	}
	var next string
	g.Eventually(func() string { next = leader(); return next }, time.Minute, 100*time.Millisecond).ShouldNot(Or(BeEmpty(), Equal(first)))
	takeover := time.Since(lost)
	if resume != nil {
		time.Sleep(time.Until(lost.Add(pauseFor)))
		g.Expect(resume()).To(Succeed())
		// Resumed, the old leader finds its lease gone and exits; its kubelet starts it again, as a
		// standby: the leader stays the one that took over.
		g.Eventually(func(g Gomega) {
			p := &corev1.Pod{}
			g.Expect(e.host.Get(e.ctx, client.ObjectKey{Namespace: lbfedNS, Name: first}, p)).To(Succeed())
			g.Expect(restartCount(p)).To(BeNumerically(">", restarts), "the resumed old leader exited")
		}, 2*time.Minute, time.Second).Should(Succeed())
		g.Expect(leader()).To(Equal(next))
	}
	g.Eventually(registered, 5*time.Minute, time.Second).Should(Equal(n))
	added := time.Since(start)
	for _, port := range []int{8443, 8444} {
		g.Eventually(func(g Gomega) {
			ips, err := churnIPs(port)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ips).To(HaveLen(n), "unit :%d has every address", port)
		}, 2*time.Minute, 2*time.Second).Should(Succeed())
	}

	// The other 500 changes: every address goes.
	start = time.Now()
	bg := &lbcfv1beta1.BackendGroup{}
	g.Expect(e.karmada.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "churn"}, bg)).To(Succeed())
	g.Expect(e.karmada.Delete(e.ctx, bg)).To(Succeed())
	g.Eventually(func(g Gomega) {
		list := &lbcfv1beta1.BackendRecordList{}
		g.Expect(e.karmada.List(e.ctx, list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}, 5*time.Minute, time.Second).Should(Succeed())
	for _, port := range []int{8443, 8444} {
		g.Eventually(func(g Gomega) {
			ips, err := churnIPs(port)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ips).To(BeEmpty(), "no orphan real server on unit :%d", port)
		}, 2*time.Minute, 2*time.Second).Should(Succeed())
	}
	removed := time.Since(start)
	figures[label] = fmt.Sprintf("leader %s %s after %d registered (%s); %s led %s later (lease 15 s); all %d registered %s after the change, on both units; all removed in %s, no orphan on either unit",
		first, lossText, n/2, half.Round(100*time.Millisecond), next, takeover.Round(100*time.Millisecond), n, added.Round(100*time.Millisecond), removed.Round(100*time.Millisecond))
	g.Expect(takeover).To(BeNumerically("<", 30*time.Second), "the standby leads within the lease (15 s) and its retry")
	lb := &lbcfv1beta1.LoadBalancer{}
	g.Expect(e.karmada.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "churn-vip"}, lb)).To(Succeed())
	g.Expect(e.karmada.Delete(e.ctx, lb)).To(Succeed())
}

func restartCount(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// pauseLeaderNode does to pod what pausing its node (docker pause) does to it, without pausing
// the Karmada control plane that shares the one node of the host cluster: the pod's cgroup frozen
// (docker pause freezes a node's cgroups) and the node's kubelet stopped (SIGSTOP), so nobody
// probes or restarts the frozen containers; TCP connections stay open, unanswered. resume undoes
// both (once; later calls do nothing).
func pauseLeaderNode(nodeName string, pod *corev1.Pod) (resume func() error, err error) {
	ids, err := node(nodeName, "crictl", "ps", "-q", "--label", "io.kubernetes.pod.uid="+string(pod.UID))
	if err != nil {
		return nil, fmt.Errorf("containers of %s: %v: %s", pod.Name, err, ids)
	}
	id := strings.TrimSpace(strings.SplitN(strings.TrimSpace(ids), "\n", 2)[0])
	if id == "" {
		return nil, fmt.Errorf("no running container of %s", pod.Name)
	}
	pid, err := node(nodeName, "crictl", "inspect", "-o", "go-template", "--template", "{{.info.pid}}", id)
	if err != nil {
		return nil, fmt.Errorf("pid of %s: %v: %s", id, err, pid)
	}
	cg, err := node(nodeName, "cat", "/proc/"+strings.TrimSpace(pid)+"/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroup of %s: %v: %s", pod.Name, err, cg)
	}
	// The pod's cgroup (the container's parent), frozen by the v1 freezer where the node has one
	// (a hybrid hierarchy), else by cgroup v2's cgroup.freeze.
	var file, frozen, thawed string
	for _, line := range strings.Split(strings.TrimSpace(cg), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		dir := path.Dir(parts[2])
		switch {
		case parts[1] == "freezer":
			file, frozen, thawed = "/sys/fs/cgroup/freezer"+dir+"/freezer.state", "FROZEN", "THAWED"
		case parts[0] == "0" && parts[1] == "" && file == "":
			file, frozen, thawed = "/sys/fs/cgroup"+dir+"/cgroup.freeze", "1", "0"
		}
	}
	if file == "" {
		return nil, fmt.Errorf("no freezer for %s in %s", pod.Name, cg)
	}
	freeze := func(v string) error {
		if out, err := node(nodeName, "sh", "-c", "echo "+v+" > "+file); err != nil {
			return fmt.Errorf("%s=%s: %v: %s", file, v, err, out)
		}
		return nil
	}
	if err := freeze(frozen); err != nil {
		return nil, err
	}
	if out, err := node(nodeName, "pkill", "-STOP", "-x", "kubelet"); err != nil {
		return nil, errors.Join(fmt.Errorf("stop the kubelet: %v: %s", err, out), freeze(thawed))
	}
	var once sync.Once
	return func() error {
		var err error
		once.Do(func() {
			_, errKubelet := node(nodeName, "pkill", "-CONT", "-x", "kubelet")
			err = errors.Join(errKubelet, freeze(thawed))
		})
		return err
	}, nil
}
