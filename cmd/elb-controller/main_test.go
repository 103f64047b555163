package main

import (
	"context"
	"flag"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/elb/servicelb"
	"github.com/lbfed/lbfed/lbspec"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, localup.ClusterOptions{Name: "elbctl", FakeNodes: 1})
}

// TestRun starts the binary's controller from command-line flags against a real kube-apiserver
// and a simulated HA pair, and checks that a Service is programmed and released.
func TestRun(t *testing.T) {
	g := NewWithT(t)
	cfg := testenv.Config(t)
	fast := alteonsim.Options{Password: "pw", ApplyDuration: 5 * time.Millisecond, SaveDuration: time.Millisecond, SyncDuration: time.Millisecond}
	sim := alteonsim.NewPair(fast, fast)
	ua, ub, err := sim.Start()
	g.Expect(err).NotTo(HaveOccurred())
	defer sim.Close()
	t.Setenv("ALTEON_PASSWORD", "pw")

	var o options
	fs := flag.NewFlagSet("elb-controller", flag.ContinueOnError)
	o.register(fs)
	g.Expect(fs.Parse([]string{"--alteon-urls=" + ua + "," + ub, "--alteon-poll-interval=2ms", "--radware-commit-window=5ms",
		"--cluster-name=c1", "--metrics-bind-address=0", "--health-probe-bind-address=0"})).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, &o) }()
	defer func() {
		cancel()
		g.Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	}()

	c, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	class := servicelb.DefaultLoadBalancerClass
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Annotations: map[string]string{lbspec.AnnotationVIP: "192.0.2.80"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class,
			Ports: []corev1.ServicePort{{Port: 8080, Protocol: corev1.ProtocolTCP}}},
	}
	g.Expect(c.Create(ctx, svc)).To(Succeed())
	key := types.NamespacedName{Namespace: "default", Name: "web"}
	g.Eventually(func() []corev1.LoadBalancerIngress {
		_ = c.Get(ctx, key, svc)
		return svc.Status.LoadBalancer.Ingress
	}).WithTimeout(20 * time.Second).Should(HaveLen(1))
	g.Expect(svc.Status.LoadBalancer.Ingress[0].IP).To(Equal("192.0.2.80"))
	g.Expect(sim.A.Snapshot(alteonsim.Running).VirtualServers()).To(Equal([]string{"elb_192.0.2.80_tcp_8080"}))
	g.Expect(sim.A.Snapshot(alteonsim.Running).Members("elb_192.0.2.80_tcp_8080")).To(HaveLen(1), "the one fake node")

	g.Expect(c.Delete(ctx, svc)).To(Succeed())
	g.Eventually(func() error { return c.Get(ctx, key, &corev1.Service{}) }).WithTimeout(20 * time.Second).Should(MatchError(ContainSubstring("not found")))
	g.Expect(sim.A.Snapshot(alteonsim.Running).VirtualServers()).To(BeEmpty())
}
