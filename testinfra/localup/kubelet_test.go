package localup

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/lbfed/lbfed/testinfra/localup/binaries"
	"github.com/lbfed/lbfed/testinfra/localup/podresponder"
)

// kubeletCluster is one cluster with fake nodes and the pod responder, shared by the tests of
// the kubelet model and stopped by TestMain. kube-controller-manager lifts the nodes'
// not-ready taint; no ServiceAccount admission, so pods can be created before it has made the
// "default" account.
var kubeletCluster struct {
	once sync.Once
	c    *Cluster
	err  error
}

// requireBinaries locates the built upstream binaries; without them the test skips, or fails
// when integration tests are required (LBFED_REQUIRE_INTEGRATION=1).
func requireBinaries(t *testing.T) *binaries.Set {
	t.Helper()
	bins, err := binaries.Locate("")
	if err != nil {
		if os.Getenv("LBFED_REQUIRE_INTEGRATION") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return bins
}

func fakeNodeCluster(t *testing.T) *Cluster {
	t.Helper()
	bins := requireBinaries(t)
	kubeletCluster.once.Do(func() {
		kubeletCluster.c, kubeletCluster.err = StartCluster(context.Background(), ClusterOptions{
			Name: "kubelet", Binaries: bins, ControllerManager: true, FakeNodes: 2, PodResponder: true,
			APIServerArgs: []string{"--disable-admission-plugins=ServiceAccount"},
		})
	})
	if err := kubeletCluster.err; err != nil {
		t.Fatal(err)
	}
	return kubeletCluster.c
}

func stopFakeNodeCluster(failed bool) {
	if c := kubeletCluster.c; c != nil {
		if failed {
			c.KeepRunDir()
			fmt.Fprintln(os.Stderr, "kubelet test cluster logs kept in", c.LogDir())
		}
		_ = c.Stop()
	}
}

type podFixture struct {
	t  *testing.T
	c  *Cluster
	cs kubernetes.Interface
	ns string
	hc *http.Client
}

func newPodFixture(t *testing.T) *podFixture {
	c := fakeNodeCluster(t)
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kl-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	// A new connection per request, as a load balancer's health check or a fresh client would.
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	return &podFixture{t: t, c: c, cs: cs, ns: ns.Name, hc: hc}
}

func webContainer(name string, port int32) corev1.Container {
	return corev1.Container{Name: name, Image: "example.invalid/web:1", Ports: []corev1.ContainerPort{{ContainerPort: port}}}
}

func (f *podFixture) create(pod *corev1.Pod) {
	f.t.Helper()
	pod.Namespace = f.ns
	if _, err := f.cs.CoreV1().Pods(f.ns).Create(f.t.Context(), pod, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *podFixture) get(name string) (*corev1.Pod, error) {
	return f.cs.CoreV1().Pods(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// conditions returns a pod's condition statuses by type.
func (f *podFixture) conditions(name string) (map[corev1.PodConditionType]corev1.ConditionStatus, error) {
	pod, err := f.get(name)
	if err != nil {
		return nil, err
	}
	out := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range pod.Status.Conditions {
		out[c.Type] = c.Status
	}
	return out, nil
}

// setGate sets a readiness gate condition as a load-balancer controller would.
func (f *podFixture) setGate(name string, gate corev1.PodConditionType, status corev1.ConditionStatus) {
	f.t.Helper()
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
		"type": gate, "status": status, "lastTransitionTime": metav1.Now(),
	}}}})
	if _, err := f.cs.CoreV1().Pods(f.ns).Patch(f.t.Context(), name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		f.t.Fatal(err)
	}
}

// answer asks the pod's process at ip:port who it is.
func (f *podFixture) answer(ip string, port int32) (podresponder.Answer, error) {
	var a podresponder.Answer
	resp, err := f.hc.Get(fmt.Sprintf("http://%s:%d/", ip, port))
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	return a, json.NewDecoder(resp.Body).Decode(&a)
}

// running waits until the pod has an IP and answers there, and returns the IP.
func (f *podFixture) running(name string, port int32) string {
	f.t.Helper()
	var ip string
	NewWithT(f.t).Eventually(func(g Gomega) {
		pod, err := f.get(name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
		ip = pod.Status.PodIP
		a, err := f.answer(ip, port)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.Pod).To(Equal(name))
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	return ip
}

// TestReadinessGates: a gated pod is Ready only once its containers are ready and every gate
// condition is True, as the kubelet computes it; pods without gates are Ready at once.
func TestReadinessGates(t *testing.T) {
	g := NewWithT(t)
	f := newPodFixture(t)
	const gateA, gateB, gateX = corev1.PodConditionType("a.example/lb"), corev1.PodConditionType("b.example/lb"), corev1.PodConditionType("x.example/lb")
	gated := func(name string, gates ...corev1.PodConditionType) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{webContainer("web", 8080)}}}
		for _, gate := range gates {
			pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: gate})
		}
		return pod
	}
	f.create(gated("plain"))
	f.create(gated("two-gates", gateA, gateB))
	f.create(gated("one-gate", gateX))

	g.Eventually(f.conditions).WithArguments("plain").WithTimeout(time.Minute).Should(And(
		HaveKeyWithValue(corev1.PodReady, corev1.ConditionTrue),
		HaveKeyWithValue(corev1.ContainersReady, corev1.ConditionTrue),
		HaveKeyWithValue(corev1.PodInitialized, corev1.ConditionTrue),
		HaveKeyWithValue(corev1.PodScheduled, corev1.ConditionTrue),
	), "a pod without gates is Ready as soon as its containers are")
	for _, name := range []string{"two-gates", "one-gate"} {
		g.Eventually(f.conditions).WithArguments(name).WithTimeout(time.Minute).Should(And(
			HaveKeyWithValue(corev1.ContainersReady, corev1.ConditionTrue),
			HaveKeyWithValue(corev1.PodInitialized, corev1.ConditionTrue),
			HaveKeyWithValue(corev1.PodReady, corev1.ConditionFalse),
		), "%s: containers ready, gates not set: not Ready", name)
		conds, err := f.conditions(name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(conds).NotTo(HaveKey(gateA), "nobody but the gate's controller sets a gate condition")
		g.Expect(conds).NotTo(HaveKey(gateX))
	}
	// The process runs whatever the gates say: a load balancer can check it before admitting it.
	f.running("two-gates", 8080)

	// One gate of two True: still not Ready. The single-gated pod, patched after it, turning
	// Ready shows the status loop has handled both patches.
	f.setGate("two-gates", gateA, corev1.ConditionTrue)
	f.setGate("one-gate", gateX, corev1.ConditionTrue)
	g.Eventually(f.conditions).WithArguments("one-gate").WithTimeout(30 * time.Second).Should(HaveKeyWithValue(corev1.PodReady, corev1.ConditionTrue))
	g.Expect(f.conditions("two-gates")).To(HaveKeyWithValue(corev1.PodReady, corev1.ConditionFalse))

	f.setGate("two-gates", gateB, corev1.ConditionTrue)
	g.Eventually(f.conditions).WithArguments("two-gates").WithTimeout(30 * time.Second).Should(HaveKeyWithValue(corev1.PodReady, corev1.ConditionTrue))

	// A gate back to False takes Ready with it; containers stay ready.
	f.setGate("two-gates", gateA, corev1.ConditionFalse)
	g.Eventually(f.conditions).WithArguments("two-gates").WithTimeout(30 * time.Second).Should(And(
		HaveKeyWithValue(corev1.PodReady, corev1.ConditionFalse),
		HaveKeyWithValue(corev1.ContainersReady, corev1.ConditionTrue),
	))
	f.setGate("two-gates", gateA, corev1.ConditionTrue)
	g.Eventually(f.conditions).WithArguments("two-gates").WithTimeout(30 * time.Second).Should(HaveKeyWithValue(corev1.PodReady, corev1.ConditionTrue))
}

// markPodNotReady sets a pod's Ready condition False and nothing else, as the node lifecycle
// controller's MarkPodsNotReady does for the pods of a node it stopped hearing from.
func (f *podFixture) markPodNotReady(name string) {
	f.t.Helper()
	pod, err := f.get(name)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == corev1.PodReady {
			c.Status, c.LastTransitionTime = corev1.ConditionFalse, metav1.Now()
		}
	}
	if _, err := f.cs.CoreV1().Pods(f.ns).UpdateStatus(f.t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// TestReadinessReassertedAfterNodeController: the node lifecycle controller clears Ready of the
// pods of a node it lost (leaving ContainersReady), and the kubelet, once heard again, puts its
// own view back: a pod with readiness gates at once (HandlePodReconcile), one without at its next
// periodic status sync (the status manager's needsReconcile, every 10 s). Before this model did
// the latter, a pod without gates stayed not Ready for ever after a member's outage (issue 43).
func TestReadinessReassertedAfterNodeController(t *testing.T) {
	g := NewWithT(t)
	f := newPodFixture(t)
	const gate = corev1.PodConditionType("a.example/lb")
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: corev1.PodSpec{Containers: []corev1.Container{webContainer("web", 8080)}}}
	gated := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gated"}, Spec: corev1.PodSpec{Containers: []corev1.Container{webContainer("web", 8080)},
		ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate}}}}
	f.create(plain)
	f.create(gated)
	f.running("gated", 8080)
	f.setGate("gated", gate, corev1.ConditionTrue)
	for _, name := range []string{"plain", "gated"} {
		g.Eventually(f.conditions).WithArguments(name).WithTimeout(time.Minute).Should(HaveKeyWithValue(corev1.PodReady, corev1.ConditionTrue))
	}

	for _, name := range []string{"plain", "gated"} {
		f.markPodNotReady(name)
	}
	marked := time.Now()
	g.Expect(f.conditions("plain")).To(And(HaveKeyWithValue(corev1.PodReady, corev1.ConditionFalse), HaveKeyWithValue(corev1.ContainersReady, corev1.ConditionTrue)))
	g.Eventually(f.conditions).WithArguments("gated").WithTimeout(5*time.Second).WithPolling(50*time.Millisecond).
		Should(HaveKeyWithValue(corev1.PodReady, corev1.ConditionTrue), "a gated pod's Ready is reconciled at once")
	g.Eventually(f.conditions).WithArguments("plain").WithTimeout(kubeletStatusSyncPeriod+10*time.Second).WithPolling(100*time.Millisecond).
		Should(HaveKeyWithValue(corev1.PodReady, corev1.ConditionTrue), "a pod without gates gets Ready back at the kubelet's next status sync")
	t.Logf("Ready of the pod without gates back %s after the node controller cleared it (status sync period %s)", time.Since(marked).Round(100*time.Millisecond), kubeletStatusSyncPeriod)
}

// termination is what a test saw of a pod from its deletion on.
type termination struct {
	// servedWhileTerminating: an answer from the pod after the delete call returned, while it
	// is still in the API with a deletionTimestamp and Ready; servedUnready: the same, not Ready.
	servedWhileTerminating, servedUnready bool
	goneAtOnce                            bool          // not found at the first look after the delete call
	refused                               time.Duration // delete → first refused connection (or another pod answering)
	gone                                  time.Duration // delete → object not found
}

// watchTermination polls the pod and its socket from the delete call on until it is gone.
func (f *podFixture) watchTermination(name, ip string, port int32, del metav1.DeleteOptions) (termination, error) {
	var out termination
	start := time.Now()
	if err := f.cs.CoreV1().Pods(f.ns).Delete(f.t.Context(), name, del); err != nil {
		return out, err
	}
	for first := true; time.Since(start) < 2*time.Minute; first = false {
		pod, err := f.get(name)
		switch {
		case apierrors.IsNotFound(err):
			if out.gone == 0 {
				out.gone = time.Since(start)
				out.goneAtOnce = first
			}
		case err != nil:
			return out, err
		}
		// Once the pod is gone kwok may give its IP to a pod of another subtest: only an
		// answer naming this pod is this pod's.
		a, dialErr := f.answer(ip, port)
		served := dialErr == nil && a.Pod == name
		if out.refused == 0 && (dialErr == nil && a.Pod != name || dialErr != nil && strings.Contains(dialErr.Error(), "connection refused")) {
			out.refused = time.Since(start)
		}
		if served && out.refused == 0 && err == nil && pod.DeletionTimestamp != nil {
			if podCondition(pod, corev1.PodReady) == corev1.ConditionTrue {
				out.servedWhileTerminating = true
			} else {
				out.servedUnready = true
			}
		}
		if out.gone != 0 && out.refused != 0 {
			return out, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return out, fmt.Errorf("pod %s still there or answering 2 minutes after its deletion: %+v", name, out)
}

// TestTermination: a deleted pod keeps answering while its preStop hook runs (the longest
// across containers, at most its grace period), then stops answering and leaves the API.
func TestTermination(t *testing.T) {
	sleepHook := func(s int64) *corev1.Lifecycle {
		return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: s}}}
	}
	execHook := func(cmd ...string) *corev1.Lifecycle {
		return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}}
	}
	tests := []struct {
		name       string
		hooks      []*corev1.Lifecycle // one container per entry
		podGrace   int64               // the pod's terminationGracePeriodSeconds; 0: 30 s
		grace      *int64              // delete option; nil: the pod's
		hold       time.Duration       // how long it must keep answering
		forceClean bool                // grace 0: gone with the delete call itself
	}{
		{name: "sleep action", hooks: []*corev1.Lifecycle{sleepHook(3)}, hold: 3 * time.Second},
		{name: "exec sleep", hooks: []*corev1.Lifecycle{execHook("sleep", "3")}, hold: 3 * time.Second},
		{name: "exec sh -c", hooks: []*corev1.Lifecycle{execHook("/bin/sh", "-c", "sleep 3")}, hold: 3 * time.Second},
		{name: "longest container", hooks: []*corev1.Lifecycle{execHook("sh", "-c", "sleep 1"), sleepHook(3)}, hold: 3 * time.Second},
		{name: "capped by grace period", hooks: []*corev1.Lifecycle{sleepHook(3500)}, podGrace: 3600, grace: ptr.To[int64](3), hold: 3 * time.Second},
		{name: "no preStop", hooks: []*corev1.Lifecycle{nil}},
		{name: "force delete", hooks: []*corev1.Lifecycle{sleepHook(3500)}, podGrace: 3600, grace: ptr.To[int64](0), forceClean: true},
	}
	f := newPodFixture(t)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			f := *f
			f.t = t
			name := fmt.Sprintf("p%d", i)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
			if tc.podGrace > 0 {
				pod.Spec.TerminationGracePeriodSeconds = ptr.To(tc.podGrace)
			}
			for j, hook := range tc.hooks {
				c := webContainer(fmt.Sprintf("c%d", j), int32(8080+j))
				c.Lifecycle = hook
				pod.Spec.Containers = append(pod.Spec.Containers, c)
			}
			f.create(pod)
			ip := f.running(name, 8080)

			seen, err := f.watchTermination(name, ip, 8080, metav1.DeleteOptions{GracePeriodSeconds: tc.grace})
			g.Expect(err).NotTo(HaveOccurred())
			t.Logf("%s: refused after %v, gone after %v (hold %v)", tc.name, seen.refused, seen.gone, tc.hold)
			g.Expect(seen.servedUnready).To(BeFalse(), "conditions are left as they are while the process runs")
			if tc.hold > 0 {
				g.Expect(seen.servedWhileTerminating).To(BeTrue(), "answers while terminating, still Ready")
				g.Expect(seen.refused).To(BeNumerically(">=", tc.hold), "answers for the whole preStop hook")
				g.Expect(seen.gone).To(BeNumerically(">=", tc.hold), "stays in the API while its containers stop")
			}
			if tc.forceClean {
				g.Expect(seen.goneAtOnce).To(BeTrue(), "a forced delete removes the object at once")
			}
			// Every port of the pod is closed, not only the one watched (or, the IP given to
			// another pod since, answers for that one).
			for j := range tc.hooks {
				a, err := f.answer(ip, int32(8080+j))
				if err == nil {
					g.Expect(a.Pod).NotTo(Equal(name), "port %d still answers", 8080+j)
				} else {
					g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
				}
			}
		})
	}
}

// TestRollingUpdateWaitsForGates runs a Deployment rollout (maxUnavailable 0) on gated pods, the
// test playing the load balancer's controller that sets the gate: a new pod whose gate is not
// set holds the rollout back with every old pod still serving; once it is set, an old pod is
// scaled down and keeps answering through its preStop hook.
func TestRollingUpdateWaitsForGates(t *testing.T) {
	g := NewWithT(t)
	f := newPodFixture(t)
	const gate = corev1.PodConditionType("lb.example/registered")
	labels := map[string]string{"app": "web"}
	web := webContainer("web", 8080)
	web.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}}}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{web}, ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate}}},
			},
		},
	}
	deployments := f.cs.AppsV1().Deployments(f.ns)
	_, err := deployments.Create(t.Context(), dep, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	pods := func() []corev1.Pod {
		list, err := f.cs.CoreV1().Pods(f.ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
		g.Expect(err).NotTo(HaveOccurred())
		return list.Items
	}
	// admit sets the gate of every pod whose containers are ready, as the load balancer's
	// controller would once the pod is registered; it returns how many it admitted.
	admit := func() int {
		n := 0
		for _, pod := range pods() {
			if pod.DeletionTimestamp == nil && podCondition(&pod, corev1.ContainersReady) == corev1.ConditionTrue && podCondition(&pod, gate) != corev1.ConditionTrue {
				f.setGate(pod.Name, gate, corev1.ConditionTrue)
				n++
			}
		}
		return n
	}
	status := func() (appsv1.DeploymentStatus, error) {
		d, err := deployments.Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil || d.Status.ObservedGeneration != d.Generation {
			return appsv1.DeploymentStatus{}, fmt.Errorf("deployment not observed yet: %v", err)
		}
		return d.Status, nil
	}

	// Containers ready, gate not set: nothing is available.
	g.Eventually(func() int {
		n := 0
		for _, pod := range pods() {
			if podCondition(&pod, corev1.ContainersReady) == corev1.ConditionTrue {
				n++
			}
		}
		return n
	}).WithTimeout(time.Minute).Should(Equal(2))
	g.Eventually(status).WithTimeout(30 * time.Second).Should(And(HaveField("Replicas", int32(2)), HaveField("ReadyReplicas", int32(0))))
	g.Expect(admit()).To(Equal(2))
	g.Eventually(status).WithTimeout(30 * time.Second).Should(HaveField("ReadyReplicas", int32(2)))
	old := pods()

	// Roll: the surge pod comes up, its gate unset, and the rollout waits with both old pods
	// serving. The controller counting it (updated, unavailable) shows it looked at it.
	_, err = deployments.Patch(t.Context(), "web", types.MergePatchType, []byte(`{"spec":{"template":{"metadata":{"annotations":{"rev":"2"}}}}}`), metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(status).WithTimeout(30 * time.Second).Should(And(HaveField("UpdatedReplicas", int32(1)), HaveField("UnavailableReplicas", int32(1)), HaveField("ReadyReplicas", int32(2))))
	g.Eventually(func() int {
		n := 0
		for _, pod := range pods() {
			if pod.Labels["pod-template-hash"] != old[0].Labels["pod-template-hash"] && podCondition(&pod, corev1.ContainersReady) == corev1.ConditionTrue {
				n++
			}
		}
		return n
	}).WithTimeout(time.Minute).Should(Equal(1))
	for _, pod := range old {
		now, err := f.get(pod.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(now.DeletionTimestamp).To(BeNil(), "old pod %s kept while the new one is not admitted", pod.Name)
		g.Expect(f.answer(pod.Status.PodIP, 8080)).To(HaveField("Pod", pod.Name))
	}

	// Admitted: one old pod goes, answering through its preStop hook.
	g.Expect(admit()).To(Equal(1))
	var leaving corev1.Pod
	g.Eventually(func() bool {
		for _, pod := range old {
			if now, err := f.get(pod.Name); err == nil && now.DeletionTimestamp != nil {
				leaving = *now
				return true
			}
		}
		return false
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	g.Expect(f.answer(leaving.Status.PodIP, 8080)).To(HaveField("Pod", leaving.Name), "a scaled-down pod serves through its preStop hook")

	// The rest of the rollout, admitting each new pod as it comes.
	g.Eventually(func() (appsv1.DeploymentStatus, error) {
		admit()
		return status()
	}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(And(
		HaveField("UpdatedReplicas", int32(2)), HaveField("ReadyReplicas", int32(2)), HaveField("Replicas", int32(2))))
	g.Eventually(func() []string {
		var names []string
		for _, pod := range pods() {
			names = append(names, pod.Name)
		}
		return names
	}).WithTimeout(time.Minute).Should(And(Not(ContainElement(old[0].Name)), Not(ContainElement(old[1].Name))), "old pods leave the API once stopped")
}
