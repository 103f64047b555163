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
	"k8s.io/client-go/kubernetes"

	"github.com/lbfed/lbfed/e2e/localup"
	"github.com/lbfed/lbfed/e2e/localup/podresponder"
	"github.com/lbfed/lbfed/e2e/localup/testenv"
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
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "example.invalid/c:1",
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
