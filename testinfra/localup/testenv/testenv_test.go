package testenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/lbfed/lbfed/lbcf/api/crd"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/podresponder"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

func TestMain(m *testing.M) {
	crds, err := crd.CRDs()
	if err != nil {
		panic(err)
	}
	testenv.Main(m, localup.ClusterOptions{
		Name:              "tenv",
		ControllerManager: true,
		FakeNodes:         2,
		PodResponder:      true,
		CRDs:              crds,
	})
}

func clientset(t *testing.T) *kubernetes.Clientset {
	cs, err := kubernetes.NewForConfig(testenv.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// namespace creates a namespace for one test: tests share the cluster.
func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	return ns.Name
}

func TestClusterBasics(t *testing.T) {
	g := NewWithT(t)
	c := testenv.Cluster(t)
	cs := clientset(t)

	v, err := cs.Discovery().ServerVersion()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.GitVersion).To(Equal("v1.35.3"), "binaries carry their version stamps")

	// The kubeconfig file reaches the same cluster, with the cluster's name as context.
	kc, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kc.Host).To(Equal(c.Host()))
	raw, err := clientcmd.LoadFromFile(c.KubeconfigPath())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw.CurrentContext).To(Equal("tenv"))

	// lbfed's CRDs were installed and are served.
	res, err := cs.Discovery().ServerResourcesForGroupVersion("lbcf.tkestack.io/v1beta1")
	g.Expect(err).NotTo(HaveOccurred())
	var kinds []string
	for _, r := range res.APIResources {
		kinds = append(kinds, r.Kind)
	}
	g.Expect(kinds).To(ContainElements("BackendGroup", "LoadBalancer", "LoadBalancerDriver", "BackendRecord"))

	// Fake nodes: Ready, with distinct InternalIPs inside the cluster's loopback block.
	nodes, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes.Items).To(HaveLen(2))
	ips := map[string]bool{}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip := netip.MustParseAddr(a.Address)
				g.Expect(c.PodNetwork().Contains(ip)).To(BeTrue(), "%s in %s", ip, c.PodNetwork())
				ips[a.Address] = true
			}
		}
	}
	g.Expect(ips).To(HaveLen(2))
	g.Expect(c.CheckProcesses()).To(Succeed())
}

// TestDeploymentPodsAnswer runs a Deployment on the fake nodes and talks to its pods: real
// sockets on the pod IPs, answering with cluster and pod name, gone when the pods are.
func TestDeploymentPodsAnswer(t *testing.T) {
	g := NewWithT(t)
	c := testenv.Cluster(t)
	cs := clientset(t)
	ns := namespace(t, cs)

	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "example.invalid/web:1",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}, {ContainerPort: 9090, Protocol: corev1.ProtocolUDP}},
				}}},
			},
		},
	}
	_, err := cs.AppsV1().Deployments(ns).Create(t.Context(), dep, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int32 {
		d, err := cs.AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return -1
		}
		return d.Status.ReadyReplicas
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Equal(int32(3)))

	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods.Items).To(HaveLen(3))
	hc := &http.Client{Timeout: 2 * time.Second}
	for _, pod := range pods.Items {
		ip := netip.MustParseAddr(pod.Status.PodIP)
		g.Expect(c.PodNetwork().Contains(ip)).To(BeTrue(), "pod IP %s in %s", ip, c.PodNetwork())
		url := fmt.Sprintf("http://%s/hello", netip.AddrPortFrom(ip, 8080))
		var answer podresponder.Answer
		g.Eventually(func() error {
			resp, err := hc.Get(url)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			return json.NewDecoder(resp.Body).Decode(&answer)
		}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		g.Expect(answer).To(Equal(podresponder.Answer{
			Cluster: "tenv", Namespace: ns, Pod: pod.Name, IP: ip.String(), Port: 8080, Path: "/hello",
		}))
	}
	// UDP ports are not served.
	for _, ep := range c.Responder().Endpoints() {
		g.Expect(ep.Addr.Port()).NotTo(Equal(uint16(9090)))
	}

	// Scaled to zero: the pods go and so do their sockets.
	_, err = cs.AppsV1().Deployments(ns).UpdateScale(t.Context(), "web", scale(ns, "web", 0), metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, pod := range pods.Items {
		url := fmt.Sprintf("http://%s:8080/", pod.Status.PodIP)
		g.Eventually(func() error {
			resp, err := hc.Get(url)
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return fmt.Errorf("still answering: %s", strings.TrimSpace(string(body)))
		}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(MatchError(ContainSubstring("connection refused")))
	}
}

func scale(ns, name string, replicas int32) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
}

// TestMissingBinaries runs this package's tests again with an empty binary cache: they skip,
// saying how to build, unless LBFED_REQUIRE_INTEGRATION=1 makes them fail.
func TestMissingBinaries(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		t.Skip("child run")
	}
	tests := []struct {
		name     string
		require  string
		wantFail bool
		wantOut  string
	}{
		{name: "skip", require: "", wantFail: false, wantOut: "integration test skipped: start cluster tenv: binaries not built"},
		{name: "required", require: "1", wantFail: true, wantOut: "binaries not built"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cmd := exec.Command(os.Args[0], "-test.run=^TestClusterBasics$", "-test.v")
			cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", "LBFED_BIN_DIR="+t.TempDir(), testenv.EnvRequire+"="+tc.require)
			out, err := cmd.CombinedOutput()
			if tc.wantFail {
				g.Expect(err).To(HaveOccurred(), string(out))
			} else {
				g.Expect(err).NotTo(HaveOccurred(), string(out))
				g.Expect(string(out)).To(ContainSubstring("--- SKIP"))
			}
			g.Expect(string(out)).To(ContainSubstring(tc.wantOut))
			g.Expect(string(out)).To(ContainSubstring("make tools"))
		})
	}
}

// TestStartFailureCleansUp: when a component cannot start, StartCluster says why (with the
// component's log) and leaves no process behind.
func TestStartFailureCleansUp(t *testing.T) {
	g := NewWithT(t)
	bins := testenv.SkipUnlessBuilt(t)
	dir := t.TempDir()
	c, err := localup.StartCluster(t.Context(), localup.ClusterOptions{
		Name: "broken", Dir: dir, Binaries: bins,
		APIServerArgs: []string{"--no-such-flag"},
	})
	g.Expect(c).To(BeNil())
	g.Expect(err).To(MatchError(ContainSubstring("broken-apiserver")))
	g.Expect(err).To(MatchError(ContainSubstring("unknown flag: --no-such-flag")), "the log tail explains the failure")
	g.Expect(err).To(MatchError(ContainSubstring(filepath.Join(dir, "logs"))))
	g.Expect(filepath.Join(dir, "logs", "broken-etcd.log")).To(BeAnExistingFile(), "logs are kept")
	// etcd had started; nothing referring to the run folder may still run.
	procs, err := os.ReadDir("/proc")
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		stat, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if strings.Contains(string(cmdline), dir) && !strings.Contains(string(stat), ") Z ") {
			t.Errorf("pid %s still running: %s", p.Name(), strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
}
