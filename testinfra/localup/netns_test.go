package localup

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/lbfed/lbfed/testinfra/localup/podresponder"
)

func requireNetNS(t *testing.T) {
	t.Helper()
	if err := NetNSSupported(); err != nil {
		t.Skip("skipping network-namespace test: ", err)
	}
}

func netnsExists(name string) bool {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return true
		}
	}
	return false
}

func linkExists(dev string) bool { return exec.Command("ip", "link", "show", dev).Run() == nil }

func TestRemoveStaleNetNamespaces(t *testing.T) {
	requireNetNS(t)
	g := NewWithT(t)
	// 999999999 is above any pid_max: that run is certainly gone. Our own pid is alive.
	stale, live := netnsPrefix+"999999999-m1", fmt.Sprintf("%s%d-stale-test", netnsPrefix, os.Getpid())
	for _, name := range []string{stale, live} {
		g.Expect(ip("netns", "add", name)).To(Succeed())
		t.Cleanup(func() { _ = ip("netns", "del", name) })
	}
	removeStaleNetNamespaces()
	g.Expect(netnsExists(stale)).To(BeFalse(), "a dead run's namespace is removed")
	g.Expect(netnsExists(live)).To(BeTrue(), "a live run's namespace is left alone")
}

// TestClusterInNetNS starts one cluster in its own network namespace and cuts its peer link:
// the API server stops answering there, while over the admin link a pod is still scheduled and
// made Ready by the components inside, and the host-side pod responder serves its new IP.
func TestClusterInNetNS(t *testing.T) {
	requireNetNS(t)
	bins := requireBinaries(t)
	g := NewWithT(t)
	ctx := context.Background()
	c, err := StartCluster(ctx, ClusterOptions{Name: "nsm", NetNS: true, Binaries: bins, ControllerManager: true, FakeNodes: 1, PodResponder: true})
	g.Expect(err).NotTo(HaveOccurred())
	ns, link := c.NetNS(), c.Link()
	peerDev, adminDev := c.ns.peerDev, c.ns.adminDev
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if t.Failed() {
				c.KeepRunDir()
			}
			_ = c.Stop()
		}
	})
	g.Expect(link).NotTo(BeNil())
	g.Expect(netnsExists(ns)).To(BeTrue())

	// Every process of the cluster runs in the namespace, and a file it cannot see otherwise:
	// compare network namespace inodes with ours.
	self, err := os.Readlink("/proc/self/ns/net")
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range c.Processes() {
		theirs, err := os.Readlink("/proc/" + strconv.Itoa(p.PID()) + "/ns/net")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(theirs).NotTo(Equal(self), "%s runs in the cluster's namespace", p.Name)
	}

	hc, err := c.pki.httpClient()
	g.Expect(err).NotTo(HaveOccurred())
	hc.Timeout = 2 * time.Second
	hc.Transport.(*http.Transport).DisableKeepAlives = true // each check dials anew
	readyz := func(host string) error {
		rsp, err := hc.Get(host + "/readyz")
		if err != nil {
			return err
		}
		rsp.Body.Close()
		if rsp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d", rsp.StatusCode)
		}
		return nil
	}
	g.Expect(readyz(c.peerHost)).To(Succeed(), "the API server answers over the peer link, its certificate names the address")
	g.Expect(c.PeerKubeconfigPath()).NotTo(Equal(c.KubeconfigPath()))

	g.Expect(link.Cut()).To(Succeed())
	g.Expect(link.IsCut()).To(BeTrue())
	g.Expect(readyz(c.peerHost)).NotTo(Succeed(), "nothing answers over a cut link")

	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	g.Expect(err).NotTo(HaveOccurred())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "during-cut", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
	}
	// The ServiceAccount admission plugin waits for the default account.
	g.Eventually(func() error {
		_, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		return err
	}, time.Minute, time.Second).Should(Succeed())
	var ip string
	g.Eventually(func(g Gomega) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(podReadyCondition(p)).To(BeTrue())
		ip = p.Status.PodIP
	}, time.Minute, time.Second).Should(Succeed(), "scheduled and made Ready inside while the peer link is cut")
	g.Eventually(func(g Gomega) {
		rsp, err := http.Get("http://" + ip + ":8080/")
		g.Expect(err).NotTo(HaveOccurred())
		defer rsp.Body.Close()
		var a podresponder.Answer
		g.Expect(json.NewDecoder(rsp.Body).Decode(&a)).To(Succeed())
		g.Expect(a.Pod).To(Equal(pod.Name))
		g.Expect(a.Cluster).To(Equal("nsm"))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "the pod answers on its IP in the host namespace")
	g.Expect(readyz(c.peerHost)).NotTo(Succeed(), "still cut")

	g.Expect(link.Restore()).To(Succeed())
	g.Eventually(func() error { return readyz(c.peerHost) }, 30*time.Second, 500*time.Millisecond).Should(Succeed())

	stopped = true
	g.Expect(c.Stop()).To(Succeed())
	g.Expect(netnsExists(ns)).To(BeFalse(), "Stop removes the namespace")
	g.Expect(linkExists(peerDev)).To(BeFalse(), "and both links")
	g.Expect(linkExists(adminDev)).To(BeFalse())
}

func podReadyCondition(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
