//go:build e2e

package federation_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lbfed/lbfed/elb/radware/alteon"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = lbcfv1beta1.AddToScheme(s)
	return s
}()

type world struct {
	t       *testing.T
	g       Gomega
	ctx     context.Context
	topo    *localup.Topology
	karmada client.Client
	members map[string]client.Client
	ex      deploy.Example
}

func newWorld(t *testing.T) *world {
	topo := testenv.Topology(t)
	w := &world{t: t, g: NewWithT(t), ctx: context.Background(), topo: topo, members: map[string]client.Client{}}
	var err error
	w.karmada, err = client.New(topo.KarmadaConfig(), client.Options{Scheme: scheme})
	w.g.Expect(err).NotTo(HaveOccurred())
	for _, m := range topo.Members() {
		c, err := client.New(m.RESTConfig(), client.Options{Scheme: scheme})
		w.g.Expect(err).NotTo(HaveOccurred())
		w.members[m.Name()] = c
	}
	return w
}

// pause stops (SIGSTOP) the named processes of the topology; the returned func resumes them and
// is safe to call twice.
func (w *world) pause(names ...string) (resume func()) {
	for _, n := range names {
		w.g.Expect(syscall.Kill(w.process(n).PID(), syscall.SIGSTOP)).To(Succeed(), "pause %s", n)
	}
	resumed := false
	return func() {
		if resumed {
			return
		}
		resumed = true
		for _, n := range names {
			if err := syscall.Kill(w.process(n).PID(), syscall.SIGCONT); err != nil {
				w.t.Errorf("resume %s: %v", n, err)
			}
		}
	}
}

// readyPods returns "ip:port" of the example's Ready pods in a member.
func (w *world) readyPods(member string) []string {
	out, err := deploy.ReadyBackends(w.ctx, w.members[member], w.ex.Namespace)
	if err != nil {
		return nil
	}
	return out
}

// registered returns the backend addresses registered for a member (its Registered records on
// the Karmada API server).
func (w *world) registered(member string) []string {
	list := &lbcfv1beta1.BackendRecordList{}
	if err := w.karmada.List(w.ctx, list, client.InNamespace(w.ex.Namespace), client.MatchingLabels{lbcfv1beta1.LabelCluster: member}); err != nil {
		return nil
	}
	out := []string{}
	for _, br := range list.Items {
		if br.IsRegistered() && br.DeletionTimestamp == nil {
			out = append(out, br.Status.BackendAddr)
		}
	}
	sort.Strings(out)
	return out
}

// clustersBehindVIP sends n requests through the VIP and returns which members answered.
func (w *world) clustersBehindVIP(n int) map[string]int {
	seen := map[string]int{}
	// One connection per request: an L4 balancer sends a whole connection to one backend.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < n; i++ {
		rsp, err := hc.Get(fmt.Sprintf("http://%s:%d/", w.ex.VIP, w.ex.Port))
		if err != nil {
			continue
		}
		var body struct {
			Cluster string `json:"cluster"`
		}
		_ = json.NewDecoder(rsp.Body).Decode(&body)
		rsp.Body.Close()
		seen[body.Cluster]++
	}
	return seen
}

// deviceWeights reads the real servers of the simulated pair's master unit: IP → weight.
func (w *world) deviceWeights(g Gomega) map[string]int {
	rsp, err := http.Get(lbfed.AlteonControl + "/roles")
	g.Expect(err).NotTo(HaveOccurred())
	roles := map[string]string{}
	g.Expect(json.NewDecoder(rsp.Body).Decode(&roles)).To(Succeed())
	rsp.Body.Close()
	url := ""
	for name, role := range roles {
		if role == "master" {
			url = lbfed.AlteonURLs[0]
			if strings.HasSuffix(name, "-b") {
				url = lbfed.AlteonURLs[1]
			}
		}
	}
	g.Expect(url).NotTo(BeEmpty(), "a master unit: %v", roles)
	c, err := alteon.NewClient(alteon.Config{URL: url, User: "admin", Password: lbfed.AlteonPassword, Attempts: 1})
	g.Expect(err).NotTo(HaveOccurred())
	rows, err := c.List(w.ctx, alteon.TableRealServer)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]int{}
	for _, r := range rows {
		out[r.Str("IpAddr")] = r.Int("Weight")
	}
	return out
}

func (w *world) process(name string) *localup.Process {
	for _, p := range w.topo.Processes() {
		if p.Name == name {
			return p
		}
	}
	for _, m := range w.topo.Members() {
		for _, p := range m.Processes() {
			if p.Name == name {
				return p
			}
		}
	}
	w.t.Fatalf("no process %s", name)
	return nil
}

// metric sums the samples of a federation metric whose labels contain every match.
func metric(url, name string, match ...string) float64 {
	rsp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer rsp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(rsp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(line, m)
		}
		if ok {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	_, _ = io.Copy(io.Discard, rsp.Body)
	return sum
}

const wait = 2 * time.Minute

// memberNames are the topology's members, m1 first: the Push members, then the Pull one(s).
func (w *world) memberNames() []string {
	var out []string
	for _, m := range w.topo.Members() {
		out = append(out, m.Name())
	}
	return out
}

// pullMember is the topology's (first) Pull-mode member, or nil.
func (w *world) pullMember() *localup.Cluster {
	for _, m := range w.topo.Members() {
		if m.SyncMode() == localup.SyncModePull {
			return m
		}
	}
	return nil
}

// haveKeys matches a map holding every one of keys.
func haveKeys(keys ...string) OmegaMatcher {
	var ms []OmegaMatcher
	for _, k := range keys {
		ms = append(ms, HaveKey(k))
	}
	return And(ms...)
}

// readyPodCount is the number of the example's Ready pods over every member.
func (w *world) readyPodCount() int {
	n := 0
	for _, m := range w.ex.Members {
		n += len(w.readyPods(m))
	}
	return n
}

// allRegistered is every member's registered backends.
func (w *world) allRegistered() []string {
	var out []string
	for _, m := range w.ex.Members {
		out = append(out, w.registered(m)...)
	}
	return out
}

// TestFederatedLoadBalancing runs over every member of the topology: the Push members and the
// Pull member beside them (m3, joined by karmada-agent), which reports through its agent — and
// whose agent can stop while its member keeps running.
func TestFederatedLoadBalancing(t *testing.T) {
	w := newWorld(t)
	g := w.g
	members := w.memberNames()
	g.Expect(len(members)).To(BeNumerically(">=", 2))
	w.ex = deploy.Example{Namespace: "e2e-web", VIP: fmt.Sprintf("127.3.%d.%d", rand.IntN(250), rand.IntN(250)+1), Port: 80, Replicas: 4, Members: members}
	g.Expect(w.ex.Apply(w.ctx, w.karmada, lbfed)).To(Succeed())

	matches := func(member string) func(g Gomega) {
		return func(g Gomega) {
			pods := w.readyPods(member)
			g.Expect(pods).NotTo(BeEmpty())
			g.Expect(w.registered(member)).To(Equal(pods))
		}
	}
	t.Run("every Ready pod of every member is registered on the one VIP", func(t *testing.T) {
		g := NewWithT(t)
		for _, m := range members {
			g.Eventually(matches(m), wait, time.Second).Should(Succeed(), "member %s", m)
		}
		g.Expect(w.readyPodCount()).To(Equal(4))
		g.Eventually(func() map[string]int { return w.clustersBehindVIP(40) }, wait, time.Second).Should(haveKeys(members...),
			"traffic through the VIP reaches pods of every member")
		g.Expect(metric(lbfed.FederationMetrics, "webhook_calls", `webhook_name="createLoadBalancer"`, w.ex.Namespace+"/radware")).To(Equal(1.0),
			"the load balancer is created once, whatever the number of members")
	})

	t.Run("scaling adds exactly the new member's backends", func(t *testing.T) {
		g := NewWithT(t)
		before := map[string][]string{}
		for _, m := range members {
			before[m] = w.registered(m)
		}
		dep := &appsv1.Deployment{}
		g.Expect(w.karmada.Get(w.ctx, client.ObjectKey{Namespace: w.ex.Namespace, Name: "web"}, dep)).To(Succeed())
		five := int32(5)
		dep.Spec.Replicas = &five
		g.Expect(w.karmada.Update(w.ctx, dep)).To(Succeed())
		g.Eventually(w.readyPodCount, wait, time.Second).Should(Equal(5))
		for _, m := range members {
			g.Eventually(matches(m), wait, time.Second).Should(Succeed(), "member %s", m)
		}
		var grown []string
		for _, m := range members {
			if len(w.registered(m)) != len(before[m]) {
				grown = append(grown, m)
			}
		}
		g.Expect(grown).To(HaveLen(1), "one member got the new replica")
		for _, m := range members {
			if m == grown[0] {
				g.Expect(w.registered(m)).To(HaveLen(len(before[m]) + 1))
				g.Expect(w.registered(m)).To(ContainElements(before[m]))
			} else {
				g.Expect(w.registered(m)).To(Equal(before[m]), "the other members' backends are untouched (%s)", m)
			}
		}
	})

	t.Run("a member pod turning NotReady is deregistered", func(t *testing.T) {
		g := NewWithT(t)
		list := &corev1.PodList{}
		g.Expect(w.members["m1"].List(w.ctx, list, client.InNamespace(w.ex.Namespace), client.MatchingLabels{"app": "web"})).To(Succeed())
		g.Expect(list.Items).NotTo(BeEmpty())
		p := list.Items[0]
		// As the kubelet reports a failing readiness probe: the containers and the pod not ready
		// (Ready cleared alone is the node controller's mark, held as unobserved).
		for i, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				p.Status.Conditions[i].Status = corev1.ConditionFalse
			}
		}
		g.Expect(w.members["m1"].Status().Update(w.ctx, &p)).To(Succeed())
		g.Eventually(w.registered, wait).WithArguments("m1").ShouldNot(ContainElement(p.Status.PodIP + ":8080"))

		// Ready again: registered again (and m1 keeps a Ready pod for the cases below — with
		// three members it may have only this one).
		g.Expect(w.members["m1"].Get(w.ctx, client.ObjectKeyFromObject(&p), &p)).To(Succeed())
		for i, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				p.Status.Conditions[i].Status = corev1.ConditionTrue
			}
		}
		g.Expect(w.members["m1"].Status().Update(w.ctx, &p)).To(Succeed())
		g.Eventually(w.registered, wait).WithArguments("m1").Should(ContainElement(p.Status.PodIP + ":8080"))
	})

	// Member i (from 0) gets weight 2i+1: m1 keeps the template's 1, the others are overridden.
	weight := func(i int) int { return 2*i + 1 }
	t.Run("a per-cluster weight set by an OverridePolicy reaches the device", func(t *testing.T) {
		g := NewWithT(t)
		var rules strings.Builder
		for i, m := range members[1:] {
			fmt.Fprintf(&rules, `
  - targetCluster: {clusterNames: [%s]}
    overriders:
      plaintext:
      - {path: /spec/parameters/weight, operator: replace, value: "%d"}`, m, weight(i+1))
		}
		op := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(fmt.Sprintf(`
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata: {name: web-weight, namespace: %s}
spec:
  resourceSelectors:
  - {apiVersion: lbcf.tkestack.io/v1beta1, kind: BackendGroup, name: web}
  overrideRules:%s
`, w.ex.Namespace, rules.String())), &op.Object)).To(Succeed())
		g.Expect(deploy.Apply(w.ctx, w.karmada, op)).To(Succeed())
		g.Eventually(func(g Gomega) {
			weights := w.deviceWeights(g)
			for i, m := range members {
				pods := w.readyPods(m)
				g.Expect(pods).NotTo(BeEmpty(), m)
				for _, addr := range pods {
					g.Expect(weights).To(HaveKeyWithValue(strings.Split(addr, ":")[0], weight(i)), "%s's weight reaches its real servers", m)
				}
			}
		}, wait, time.Second).Should(Succeed())
	})

	t.Run("an Alteon HA failover while backends change loses nothing", func(t *testing.T) {
		g := NewWithT(t)
		rsp, err := http.Post(lbfed.AlteonControl+"/failover", "", nil)
		g.Expect(err).NotTo(HaveOccurred())
		rsp.Body.Close()
		g.Expect(rsp.StatusCode).To(Equal(http.StatusOK))
		dep := &appsv1.Deployment{}
		g.Expect(w.karmada.Get(w.ctx, client.ObjectKey{Namespace: w.ex.Namespace, Name: "web"}, dep)).To(Succeed())
		six := int32(6)
		dep.Spec.Replicas = &six
		g.Expect(w.karmada.Update(w.ctx, dep)).To(Succeed())
		g.Eventually(w.readyPodCount, wait, time.Second).Should(BeNumerically(">=", 5))
		g.Eventually(func(g Gomega) {
			for _, m := range members {
				matches(m)(g)
			}
			weights := w.deviceWeights(g)
			for _, addr := range w.allRegistered() {
				g.Expect(weights).To(HaveKey(strings.Split(addr, ":")[0]), "every registered backend is on the new master")
			}
		}, wait, time.Second).Should(Succeed())
		g.Eventually(func() map[string]int { return w.clustersBehindVIP(40) }, wait, time.Second).Should(haveKeys(members...),
			"traffic through the VIP after the failover")
	})

	// The others serve while one member is lost: FailStatic withdraws it after the grace period.
	others := func(lost string) []string {
		var out []string
		for _, m := range members {
			if m != lost {
				out = append(out, m)
			}
		}
		return out
	}
	// heal re-reports a member's pods Ready where its node lifecycle controller marked them
	// NotReady while the member was lost (node leases ran out, and it re-marks them until the
	// nodes are Ready again); kwok does not re-report them as a kubelet would.
	heal := func(g Gomega, member string) {
		list := &corev1.PodList{}
		g.Expect(w.members[member].List(w.ctx, list, client.InNamespace(w.ex.Namespace), client.MatchingLabels{"app": "web"})).To(Succeed())
		for i := range list.Items {
			p := &list.Items[i]
			for j, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
					p.Status.Conditions[j].Status = corev1.ConditionTrue
					_ = w.members[member].Status().Update(w.ctx, p)
				}
			}
		}
	}

	t.Run("a member whose API server stops is deregistered after the grace period, and comes back", func(t *testing.T) {
		g := NewWithT(t)
		resume := w.pause("m2-apiserver")
		defer resume()
		g.Eventually(w.registered, 3*time.Minute, time.Second).WithArguments("m2").Should(BeEmpty())
		g.Eventually(func() map[string]int { return w.clustersBehindVIP(20) }, wait, time.Second).Should(And(haveKeys(others("m2")...), Not(HaveKey("m2"))))
		resume()
		g.Eventually(func(g Gomega) {
			heal(g, "m2")
			matches("m2")(g)
		}, 4*time.Minute, 2*time.Second).Should(Succeed())
	})

	// Pull mode only: the member runs on, but nothing reports it any more. Karmada marks the
	// Cluster not Ready when the agent's lease runs out (karmada-controller-manager, ≈ 40 s),
	// the federation withdraws the member after its grace period while the others serve, and
	// registers it again from the agent's reports once the agent runs again.
	t.Run("a Pull member whose karmada-agent stops is deregistered after the grace period, and comes back", func(t *testing.T) {
		pull := w.pullMember()
		if pull == nil {
			t.Skip("no Pull member in this topology")
		}
		g := NewWithT(t)
		name := pull.Name()
		g.Expect(w.registered(name)).NotTo(BeEmpty())
		resume := w.pause("karmada-agent-" + name)
		defer resume()
		g.Eventually(w.registered, 3*time.Minute, time.Second).WithArguments(name).Should(BeEmpty())
		g.Expect(w.readyPods(name)).NotTo(BeEmpty(), "the member itself runs on: only its agent stopped")
		g.Eventually(func() map[string]int { return w.clustersBehindVIP(20) }, wait, time.Second).Should(And(haveKeys(others(name)...), Not(HaveKey(name))))
		resume()
		g.Eventually(func(g Gomega) {
			heal(g, name)
			matches(name)(g)
		}, 4*time.Minute, 2*time.Second).Should(Succeed())
		g.Eventually(func() map[string]int { return w.clustersBehindVIP(40) }, wait, time.Second).Should(haveKeys(members...))
	})

	t.Run("deleting the group deregisters all, deleting the load balancer removes it once", func(t *testing.T) {
		g := NewWithT(t)
		bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: w.ex.Namespace, Name: "web"}}
		all := w.allRegistered()
		g.Expect(all).NotTo(BeEmpty())
		g.Expect(w.karmada.Delete(w.ctx, bg)).To(Succeed())
		g.Eventually(func() []string { return w.allRegistered() }, wait, time.Second).Should(BeEmpty())
		lb := &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: w.ex.Namespace, Name: "web-vip"}}
		g.Expect(w.karmada.Delete(w.ctx, lb)).To(Succeed())
		g.Eventually(func() bool {
			return w.karmada.Get(w.ctx, client.ObjectKeyFromObject(lb), &lbcfv1beta1.LoadBalancer{}) != nil
		}, wait, time.Second).Should(BeTrue())
		g.Expect(metric(lbfed.FederationMetrics, "webhook_calls", `webhook_name="deleteLoadBalancer"`, w.ex.Namespace+"/radware")).To(Equal(1.0))
		g.Expect(w.clustersBehindVIP(3)).To(BeEmpty(), "the VIP is gone from the device")
		weights := w.deviceWeights(g)
		for _, addr := range all {
			g.Expect(weights).NotTo(HaveKey(strings.Split(addr, ":")[0]), "no real server left behind")
		}
	})
}
