package memdriver_test

import (
	"context"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/conformance"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
)

func serve(t *testing.T, d *memdriver.Driver) driver.Bound {
	srv := httptest.NewServer(d.Handler(driver.HandlerOptions{}))
	t.Cleanup(srv.Close)
	return driver.Bound{Invoker: driver.NewClient(driver.ClientOptions{}), Endpoint: driver.Endpoint{Name: "test/mem", URL: srv.URL}}
}

func TestMemdriverIsConformant(t *testing.T) {
	d := memdriver.New()
	srv := httptest.NewServer(d.Handler(driver.HandlerOptions{Prefix: "/mem"}))
	defer srv.Close()
	conformance.Run(t, conformance.Config{BaseURL: srv.URL + "/mem", LBSpec: map[string]string{"name": "conformance"}})
	if n := len(d.LoadBalancers()); n != 0 {
		t.Errorf("the suite left %d load balancers behind", n)
	}
}

func TestLifecycleAndState(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d := memdriver.New()
	b := serve(t, d)

	c, err := b.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: "r1"},
		LBSpec: map[string]string{"vip": "1.1.1.1"}, Attributes: map[string]string{"a": "1"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Status).To(Equal(driver.StatusSucc))
	g.Expect(c.LBInfo).To(Equal(map[string]string{"vip": "1.1.1.1", "lbID": "lb-1"}))

	_, _ = b.EnsureLoadBalancer(ctx, &driver.EnsureLoadBalancerRequest{LBInfo: c.LBInfo, Attributes: map[string]string{"a": "2"}})
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{PodIP: "10.0.0.1"}}
	gen, err := b.GenerateBackendAddr(ctx, &driver.GenerateBackendAddrRequest{PodBackend: &driver.PodBackendInRequest{Pod: pod, Port: lbcfv1beta1.PortSelector{Port: 80}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gen.BackendAddr).To(Equal("10.0.0.1:80"))

	svc := corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, Protocol: "TCP", NodePort: 30080}}}}
	gen, err = b.GenerateBackendAddr(ctx, &driver.GenerateBackendAddrRequest{ServiceBackend: &driver.ServiceBackendInRequest{Service: svc,
		Port: lbcfv1beta1.PortSelector{Port: 80}, NodeName: "n1", NodeAddresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "n1"}, {Type: corev1.NodeInternalIP, Address: "10.1.0.1"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gen.BackendAddr).To(Equal("10.1.0.1:30080"))

	e, err := b.EnsureBackend(ctx, &driver.BackendOperationRequest{LBInfo: c.LBInfo, BackendAddr: "10.0.0.1:80", Parameters: map[string]string{"weight": "3"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.InjectedInfo).To(HaveKeyWithValue("backendID", "lb-1/10.0.0.1:80"))
	lb, ok := d.LoadBalancer("lb-1")
	g.Expect(ok).To(BeTrue())
	g.Expect(lb.Attributes).To(Equal(map[string]string{"a": "2"}))
	g.Expect(lb.Backends).To(Equal(map[string]map[string]string{"10.0.0.1:80": {"weight": "3"}}))

	// Dry-run changes nothing.
	_, _ = b.EnsureBackend(ctx, &driver.BackendOperationRequest{DryRun: true, LBInfo: c.LBInfo, BackendAddr: "10.0.0.2:80"})
	g.Expect(d.BackendAddrs("lb-1")).To(Equal([]string{"10.0.0.1:80"}))

	_, _ = b.DeregisterBackend(ctx, &driver.BackendOperationRequest{LBInfo: c.LBInfo, BackendAddr: "10.0.0.1:80"})
	g.Expect(d.BackendAddrs("lb-1")).To(BeEmpty())
	_, _ = b.DeleteLoadBalancer(ctx, &driver.DeleteLoadBalancerRequest{LBInfo: c.LBInfo})
	g.Expect(d.LoadBalancers()).To(BeEmpty())
	g.Expect(d.CountCalls(driver.EnsureBackend)).To(Equal(2))
	g.Expect(d.Calls(driver.CreateLoadBalancer)[0].Status).To(Equal(driver.StatusSucc))
}

func TestValidationAndJudge(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d := memdriver.New()
	b := serve(t, d)
	v, err := b.ValidateLoadBalancer(ctx, &driver.ValidateLoadBalancerRequest{LBSpec: map[string]string{memdriver.DenyKey: "vip taken"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Succ).To(BeFalse())
	g.Expect(v.Msg).To(Equal("vip taken"))
	vb, _ := b.ValidateBackend(ctx, &driver.ValidateBackendRequest{Parameters: map[string]string{"weight": "1"}})
	g.Expect(vb.Succ).To(BeTrue())

	keep := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "keep", Labels: map[string]string{memdriver.KeepLabel: "true"}}}
	drop := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "drop"}}
	j, err := b.JudgePodDeregister(ctx, &driver.JudgePodDeregisterRequest{NotReadyPods: []*corev1.Pod{keep, drop}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.DoNotDeregister).To(HaveLen(1))
	g.Expect(j.DoNotDeregister[0].Name).To(Equal("keep"))
	d.SetJudge(func(p []*corev1.Pod) []*corev1.Pod { return p })
	j, _ = b.JudgePodDeregister(ctx, &driver.JudgePodDeregisterRequest{NotReadyPods: []*corev1.Pod{keep, drop}})
	g.Expect(j.DoNotDeregister).To(HaveLen(2))

	h, _ := b.Healthz(ctx, nil)
	g.Expect(h.Healthy).To(BeTrue())
	d.SetHealthy(false)
	h, _ = b.Healthz(ctx, nil)
	g.Expect(h.Healthy).To(BeFalse())
}

func TestFaults(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	d := memdriver.New()
	b := serve(t, d)
	create := func() (*driver.CreateLoadBalancerResponse, error) {
		return b.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: "r"}})
	}

	d.Inject(driver.CreateLoadBalancer, memdriver.Fault{Fail: 1, Running: 2, RetryDelay: 7, Msg: "quota"})
	r, _ := create()
	g.Expect(r.Status).To(Equal(driver.StatusFail))
	g.Expect(r.Msg).To(Equal("quota"))
	g.Expect(int(r.MinRetryDelayInSeconds)).To(Equal(7))
	r, _ = create()
	g.Expect(r.Status).To(Equal(driver.StatusRunning))
	r, _ = create()
	g.Expect(r.Status).To(Equal(driver.StatusRunning))
	r, _ = create()
	g.Expect(r.Status).To(Equal(driver.StatusSucc))

	d.Inject(driver.EnsureBackend, memdriver.Fault{HTTPStatus: 503, HTTPStatusTimes: 1, BadJSON: 1})
	_, err := b.EnsureBackend(ctx, &driver.BackendOperationRequest{LBInfo: r.LBInfo, BackendAddr: "a:1"})
	g.Expect(err).To(MatchError(ContainSubstring("http status code: 503")))
	_, err = b.EnsureBackend(ctx, &driver.BackendOperationRequest{LBInfo: r.LBInfo, BackendAddr: "a:1"})
	g.Expect(driver.IsInvalidResponse(err)).To(BeTrue(), "%v", err)
	e, err := b.EnsureBackend(ctx, &driver.BackendOperationRequest{LBInfo: r.LBInfo, BackendAddr: "a:1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.Status).To(Equal(driver.StatusSucc))
	var statuses []string
	for _, c := range d.Calls(driver.EnsureBackend) {
		statuses = append(statuses, c.Status)
	}
	g.Expect(statuses).To(Equal([]string{"http-503", "bad-json", "Succ"}))

	d.Inject(driver.Healthz, memdriver.Fault{Latency: 200e6})
	short, cancel := context.WithTimeout(ctx, 20e6)
	defer cancel()
	_, err = b.Healthz(short, nil)
	g.Expect(err).To(HaveOccurred())
	d.ClearFaults()
	_, err = b.Healthz(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
}
