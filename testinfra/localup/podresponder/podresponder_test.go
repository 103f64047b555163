package podresponder_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/podresponder"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// Pods here are driven by hand — status written by the test instead of kwok — so every state
// the responder reacts to is set exactly. Without kube-controller-manager nobody creates the
// "default" service account, hence no ServiceAccount admission.
func TestMain(m *testing.M) {
	testenv.Main(m, localup.ClusterOptions{
		Name:          "pr",
		APIServerArgs: []string{"--disable-admission-plugins=ServiceAccount"},
	})
}

type fixture struct {
	t       *testing.T
	cs      kubernetes.Interface
	ns      string
	network netip.Prefix
	port    int
	r       *podresponder.Responder
}

func setup(t *testing.T) *fixture {
	cfg := testenv.Config(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "pr-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	ports, err := localup.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		t: t, cs: cs, ns: ns.Name, port: ports[0],
		network: netip.PrefixFrom(netip.AddrFrom4([4]byte{127, 200, byte(rand.IntN(256)), 0}), 24),
	}
	f.r, err = podresponder.Start(t.Context(), podresponder.Options{Config: cfg, Cluster: "pr", Network: f.network, Namespace: ns.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.r.Stop)
	return f
}

func (f *fixture) ip(last byte) netip.Addr {
	b := f.network.Addr().As4()
	b[3] = last
	return netip.AddrFrom4(b)
}

// pod creates a pod with one TCP and one UDP port and sets its status.
func (f *fixture) pod(name string, ip netip.Addr, ready bool) {
	f.t.Helper()
	f.podWith(name, ip, ready, nil)
}

// podWith is pod with the container's lifecycle hooks.
func (f *fixture) podWith(name string, ip netip.Addr, ready bool, lifecycle *corev1.Lifecycle) {
	f.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		// Bound to a node (that no kubelet runs): the apiserver would delete an unbound pod at once.
		Spec: corev1.PodSpec{NodeName: "pr-node", Containers: []corev1.Container{{
			Name: "c", Image: "example.invalid/c:1", Lifecycle: lifecycle,
			Ports: []corev1.ContainerPort{{ContainerPort: int32(f.port)}, {ContainerPort: int32(f.port), Protocol: corev1.ProtocolUDP}},
		}}},
	}
	created, err := f.cs.CoreV1().Pods(f.ns).Create(f.t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.setStatus(created, ip, ready)
}

func (f *fixture) setStatus(pod *corev1.Pod, ip netip.Addr, ready bool) {
	f.t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		PodIP:      ip.String(),
		PodIPs:     []corev1.PodIP{{IP: ip.String()}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
	}
	if _, err := f.cs.CoreV1().Pods(f.ns).UpdateStatus(f.t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) setReady(name string, ready bool) {
	f.t.Helper()
	pod, err := f.cs.CoreV1().Pods(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.setStatus(pod, netip.MustParseAddr(pod.Status.PodIP), ready)
}

// get returns the answer at ip, or the dial error.
func (f *fixture) get(ip netip.Addr) (podresponder.Answer, error) {
	var a podresponder.Answer
	hc := &http.Client{Timeout: time.Second}
	resp, err := hc.Get(fmt.Sprintf("http://%s/x", netip.AddrPortFrom(ip, uint16(f.port))))
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&a)
	return a, err
}

func TestServesReadyPodsOnly(t *testing.T) {
	g := NewWithT(t)
	f := setup(t)
	f.pod("ready", f.ip(1), true)
	f.pod("unready", f.ip(2), false)
	f.pod("outside", netip.MustParseAddr("127.201.0.1"), true)

	g.Eventually(func() (podresponder.Answer, error) { return f.get(f.ip(1)) }).WithTimeout(10 * time.Second).
		Should(Equal(podresponder.Answer{Cluster: "pr", Namespace: f.ns, Pod: "ready", IP: f.ip(1).String(), Port: f.port, Path: "/x"}))
	g.Consistently(func() []podresponder.Endpoint { return f.r.Endpoints() }).WithTimeout(500*time.Millisecond).
		Should(Equal([]podresponder.Endpoint{{Namespace: f.ns, Pod: "ready", Addr: netip.AddrPortFrom(f.ip(1), uint16(f.port))}}),
			"only the Ready pod inside the network, and only its TCP port")
	_, err := f.get(f.ip(2))
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))

	// Readiness flips open and close the socket.
	f.setReady("unready", true)
	g.Eventually(func() error { _, err := f.get(f.ip(2)); return err }).WithTimeout(10 * time.Second).Should(Succeed())
	f.setReady("ready", false)
	g.Eventually(func() error { _, err := f.get(f.ip(1)); return err }).WithTimeout(10 * time.Second).
		Should(MatchError(ContainSubstring("connection refused")))

	// Deleted: gone.
	g.Expect(f.cs.CoreV1().Pods(f.ns).Delete(t.Context(), "unready", *metav1.NewDeleteOptions(0))).To(Succeed())
	g.Eventually(func() error { _, err := f.get(f.ip(2)); return err }).WithTimeout(10 * time.Second).
		Should(MatchError(ContainSubstring("connection refused")))
	g.Eventually(f.r.Endpoints).WithTimeout(10 * time.Second).Should(BeEmpty())
}

func TestRetriesWhenAddressIsTaken(t *testing.T) {
	g := NewWithT(t)
	f := setup(t)
	squatter, err := net.Listen("tcp", netip.AddrPortFrom(f.ip(3), uint16(f.port)).String())
	g.Expect(err).NotTo(HaveOccurred())
	f.pod("late", f.ip(3), true)

	g.Eventually(f.r.Errors).WithTimeout(10 * time.Second).Should(HaveKeyWithValue(f.ns+"/late", MatchError(ContainSubstring("address already in use"))))
	squatter.Close()
	g.Eventually(func() (podresponder.Answer, error) { return f.get(f.ip(3)) }).WithTimeout(15 * time.Second).
		Should(HaveField("Pod", "late"))
	g.Expect(f.r.Errors()).To(BeEmpty())
}

func TestStopClosesListeners(t *testing.T) {
	g := NewWithT(t)
	f := setup(t)
	f.pod("p", f.ip(4), true)
	g.Eventually(func() error { _, err := f.get(f.ip(4)); return err }).WithTimeout(10 * time.Second).Should(Succeed())
	f.r.Stop()
	f.r.Stop() // idempotent
	_, err := f.get(f.ip(4))
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
}

// TestStoppedAnnotation: the annotation is a process that died unnoticed: the pod stays Ready in
// the API while its sockets refuse connections, and answers again once the annotation goes.
func TestStoppedAnnotation(t *testing.T) {
	g := NewWithT(t)
	f := setup(t)
	f.pod("crashed", f.ip(5), true)
	f.pod("healthy", f.ip(6), true)
	g.Eventually(func() error { _, err := f.get(f.ip(5)); return err }).WithTimeout(10 * time.Second).Should(Succeed())

	f.annotate("crashed", map[string]any{"podresponder.lbfed.io/stopped": "true"})
	g.Eventually(func() error { _, err := f.get(f.ip(5)); return err }).WithTimeout(10 * time.Second).
		Should(MatchError(ContainSubstring("connection refused")))
	pod, err := f.cs.CoreV1().Pods(f.ns).Get(t.Context(), "crashed", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pod.Status.Conditions).To(ContainElement(HaveField("Status", corev1.ConditionTrue)), "still Ready in the API")
	g.Expect(f.get(f.ip(6))).To(HaveField("Pod", "healthy"), "other pods are not affected")

	f.annotate("crashed", map[string]any{"podresponder.lbfed.io/stopped": nil})
	g.Eventually(func() (podresponder.Answer, error) { return f.get(f.ip(5)) }).WithTimeout(10 * time.Second).
		Should(HaveField("Pod", "crashed"))
}

func (f *fixture) annotate(name string, annotations map[string]any) {
	f.t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if _, err := f.cs.CoreV1().Pods(f.ns).Patch(f.t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// TestTerminatingPods: the responder is the pod's process: a deleted pod with a preStop hook
// keeps answering until its containers stop (the kubelet's status says so; nobody plays the
// kubelet here); one without a hook stops at once, as its process gets SIGTERM right away.
func TestTerminatingPods(t *testing.T) {
	g := NewWithT(t)
	f := setup(t)
	hook := &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
	f.podWith("hooked", f.ip(7), true, hook)
	f.podWith("plain", f.ip(8), true, nil)
	for _, ip := range []netip.Addr{f.ip(7), f.ip(8)} {
		g.Eventually(func() error { _, err := f.get(ip); return err }).WithTimeout(10 * time.Second).Should(Succeed())
	}

	for _, name := range []string{"plain", "hooked"} {
		g.Expect(f.cs.CoreV1().Pods(f.ns).Delete(t.Context(), name, metav1.DeleteOptions{})).To(Succeed())
	}
	g.Eventually(func() error { _, err := f.get(f.ip(8)); return err }).WithTimeout(10*time.Second).
		Should(MatchError(ContainSubstring("connection refused")), "no hook: stops at once")
	pod, err := f.cs.CoreV1().Pods(f.ns).Get(t.Context(), "hooked", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pod.DeletionTimestamp).NotTo(BeNil())
	g.Expect(f.get(f.ip(7))).To(HaveField("Pod", "hooked"), "its preStop hook runs: still answering")

	// The kubelet reports the containers stopped.
	pod.Status.Phase = corev1.PodFailed
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}, {Type: corev1.ContainersReady, Status: corev1.ConditionFalse}}
	_, err = f.cs.CoreV1().Pods(f.ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error { _, err := f.get(f.ip(7)); return err }).WithTimeout(10 * time.Second).
		Should(MatchError(ContainSubstring("connection refused")))
}

// TestExit: Exit is the kubelet's SIGTERM after the preStop hook: the sockets are closed when it
// returns, and stay closed while the pod's status still says its containers are ready.
func TestExit(t *testing.T) {
	g := NewWithT(t)
	f := setup(t)
	hook := &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
	f.podWith("exiting", f.ip(10), true, hook)
	f.pod("witness", f.ip(11), true)
	for _, ip := range []netip.Addr{f.ip(10), f.ip(11)} {
		g.Eventually(func() error { _, err := f.get(ip); return err }).WithTimeout(10 * time.Second).Should(Succeed())
	}

	live, err := f.cs.CoreV1().Pods(f.ns).Get(t.Context(), "exiting", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	f.r.Exit(live)
	g.Expect(f.get(f.ip(10))).To(HaveField("Pod", "exiting"), "a pod not being deleted has no process to end")

	g.Expect(f.cs.CoreV1().Pods(f.ns).Delete(t.Context(), "exiting", metav1.DeleteOptions{})).To(Succeed())
	deleted, err := f.cs.CoreV1().Pods(f.ns).Get(t.Context(), "exiting", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	f.r.Exit(deleted)
	_, err = f.get(f.ip(10))
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")), "closed when Exit returns")

	// Later events for the pod do not bring it back: the witness's annotation, made after the
	// exited pod's, being handled shows the responder has been through both.
	f.annotate("exiting", map[string]any{"touched": "1"})
	f.annotate("witness", map[string]any{podresponder.StoppedAnnotation: "true"})
	g.Eventually(func() error { _, err := f.get(f.ip(11)); return err }).WithTimeout(10 * time.Second).
		Should(MatchError(ContainSubstring("connection refused")))
	_, err = f.get(f.ip(10))
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
}

// TestContainersReadyDecides: a pod whose containers are ready answers even when Ready is False
// (a readiness gate not yet True): the process runs whatever the gates say.
func TestContainersReadyDecides(t *testing.T) {
	g := NewWithT(t)
	f := setup(t)
	f.pod("gated", f.ip(9), false)
	pod, err := f.cs.CoreV1().Pods(f.ns).Get(t.Context(), "gated", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}
	_, err = f.cs.CoreV1().Pods(f.ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() (podresponder.Answer, error) { return f.get(f.ip(9)) }).WithTimeout(10 * time.Second).Should(HaveField("Pod", "gated"))
}
