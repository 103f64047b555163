package controller_test

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// The controller is killed with SIGKILL at random moments while pods come, go and flap. The
// driver's final state must be exactly the Ready pods: no registration lost, no orphan left.
func TestKillAndRestartLosesNothing(t *testing.T) {
	e := newEnv(t)
	g := e.g
	bin := buildController(t)
	kubeconfig := testenv.Cluster(t).KubeconfigPath()
	e.drv.Inject(driver.EnsureBackend, memdriver.Fault{Latency: 30 * time.Millisecond})
	e.drv.Inject(driver.DeregisterBackend, memdriver.Fault{Latency: 30 * time.Millisecond})
	e.driverObj("mem")
	e.lb("lb1", "mem")

	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	seed := rng.Int63()
	t.Logf("seed %d", seed)
	rng = rand.New(rand.NewSource(seed))
	pods := map[string]*corev1.Pod{}
	ready := map[string]bool{}
	ips := map[string]string{}
	next := 0
	addPod := func() {
		name := "web-" + strconv.Itoa(next)
		ip := fmt.Sprintf("10.3.%d.%d", next/200, next%200+1)
		next++
		pods[name] = e.pod(name, "web", ip)
		ready[name] = true
		ips[name] = ip
	}
	for i := 0; i < 30; i++ {
		addPod()
	}
	e.podGroup("web", []string{"lb1"}, []int32{80})

	for round := 0; round < 6; round++ {
		proc := startController(t, bin, kubeconfig)
		time.Sleep(time.Duration(300+rng.Intn(1500)) * time.Millisecond)
		g.Expect(proc.Process.Kill()).To(Succeed())
		_ = proc.Wait()
		// Change the world while the controller is down.
		for i := 0; i < 5; i++ {
			names := sortedKeys(pods)
			victim := names[rng.Intn(len(names))]
			switch rng.Intn(3) {
			case 0:
				g.Expect(e.c.Delete(e.ctx, pods[victim])).To(Succeed())
				delete(pods, victim)
				delete(ready, victim)
			case 1:
				ready[victim] = !ready[victim]
				e.setPod(pods[victim], corev1.PodRunning, ready[victim], ips[victim])
			default:
				addPod()
			}
		}
	}
	proc := startController(t, bin, kubeconfig)
	defer func() { _ = proc.Process.Kill(); _ = proc.Wait() }()
	id := e.lbID("lb1")
	var want []string
	for name := range pods {
		if ready[name] {
			want = append(want, ips[name]+":80")
		}
	}
	g.Eventually(e.backends(id), 60*time.Second).Should(ConsistOf(want))
	g.Eventually(func() int32 { return e.group("web").Status.RegisteredBackends }, wait).Should(Equal(int32(len(want))))
	g.Expect(e.drv.LoadBalancers()).To(HaveLen(1), "createLoadBalancer, retried across kills, made one load balancer")

	// And everything goes away cleanly.
	g.Expect(e.c.Delete(e.ctx, e.group("web"))).To(Succeed())
	g.Eventually(e.backends(id), wait).Should(BeEmpty())
	lb := &lbcfv1beta1.LoadBalancer{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "lb1"}, lb)).To(Succeed())
	g.Expect(e.c.Delete(e.ctx, lb)).To(Succeed())
	g.Eventually(func() int { return len(e.drv.LoadBalancers()) }, wait).Should(BeZero())
}

// The device takes a backend, then the controller dies before it hears back (so before it
// writes anything about the ensure). The pod goes away meanwhile; after the restart the backend
// must still be deregistered: the record knew its address before ensureBackend was called.
func TestKilledAfterDeviceTookBackendLeavesNoOrphan(t *testing.T) {
	e := newEnv(t)
	g := e.g
	bin := buildController(t)
	kubeconfig := testenv.Cluster(t).KubeconfigPath()
	e.drv.Inject(driver.EnsureBackend, memdriver.Fault{LoseAnswer: 1})
	e.driverObj("mem")
	e.lb("lb1", "mem")
	pod := e.pod("web-0", "web", "10.4.0.1")
	e.podGroup("web", []string{"lb1"}, []int32{80})

	proc := startController(t, bin, kubeconfig)
	id := e.lbID("lb1")
	g.Eventually(e.backends(id), wait).Should(ConsistOf("10.4.0.1:80"), "the device took the backend")
	g.Expect(proc.Process.Kill()).To(Succeed())
	_ = proc.Wait()
	g.Expect(e.records("web")).To(HaveLen(1))
	rec := e.records("web")[0]
	g.Expect(rec.IsRegistered()).To(BeFalse(), "the answer was lost, so nothing says registered")
	g.Expect([]string{rec.Status.BackendAddr, rec.Annotations[controller.AnnotationBackendAddr]}).To(ContainElement("10.4.0.1:80"),
		"the record named its address before ensureBackend (in its status, or since its creation)")
	g.Expect(e.c.Delete(e.ctx, pod)).To(Succeed())

	proc = startController(t, bin, kubeconfig)
	defer func() { _ = proc.Process.Kill(); _ = proc.Wait() }()
	g.Eventually(e.backends(id), wait).Should(BeEmpty(), "deregistered although no ensure answer was ever recorded")
	g.Eventually(func() []lbcfv1beta1.BackendRecord { return e.records("web") }, wait).Should(BeEmpty())
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func buildController(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lbcf-controller")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/lbfed/lbfed/cmd/lbcf-controller")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build lbcf-controller: %v\n%s", err, out)
	}
	return bin
}

func startController(t *testing.T, bin, kubeconfig string) *exec.Cmd {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--mode=standalone", "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--webhook-host=127.0.0.1", "--webhook-port="+strconv.Itoa(testenv.FreePort(t)), "--cert-dir="+dir, "--self-signed-cert-hosts=127.0.0.1",
		"--min-retry-delay=200ms", "--retry-delay-step=200ms", "--max-retry-delay=2s")
	logf, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			if keep := os.Getenv("LBFED_KEEP_LOGS"); keep != "" {
				_ = exec.Command("cp", logf.Name(), filepath.Join(keep, filepath.Base(dir)+".log")).Run()
			}
			out, _ := os.ReadFile(logf.Name())
			if len(out) > 4000 {
				out = out[len(out)-4000:]
			}
			t.Logf("controller log tail:\n%s", out)
		}
	})
	return cmd
}
