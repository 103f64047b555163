package bfe

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/conformance"
)

func newTestDriver(t *testing.T) (*testEnv, *Driver) {
	env := newTestEnv(t, nil)
	return env, NewDriver(DriverOptions{Frontend: env.fe, Metrics: env.metrics})
}

func TestDriverConformance(t *testing.T) {
	env, d := newTestDriver(t)
	srv := httptest.NewServer(driver.NewHandler(d, driver.HandlerOptions{}))
	defer srv.Close()
	conformance.Run(t, conformance.Config{
		BaseURL:    srv.URL,
		LBSpec:     map[string]string{SpecHost: "app.example.test", SpecPath: "/api/*", SpecCookie: "canary:yes"},
		Parameters: map[string]string{ParamWeight: "5", ParamCluster: "member1"},
	})
	NewWithT(t).Expect(env.fake.Unsafe()).To(BeEmpty())
}

func ensureReq(info map[string]string, addr string, params map[string]string) *driver.BackendOperationRequest {
	return &driver.BackendOperationRequest{RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: "ensureBackend(" + addr + ")"},
		LBInfo: info, BackendAddr: addr, Parameters: params}
}

func TestDriverLifecycle(t *testing.T) {
	g := NewWithT(t)
	env, d := newTestDriver(t)
	ctx := context.Background()

	// Validation refuses misspelled keys and attributes, and routes taken by another LoadBalancer.
	v, err := d.ValidateLoadBalancer(ctx, &driver.ValidateLoadBalancerRequest{LBSpec: map[string]string{"hots": "a.test"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Succ).To(BeFalse())
	g.Expect(v.Msg).To(ContainSubstring(`unknown lbSpec key "hots"`))
	v, _ = d.ValidateLoadBalancer(ctx, &driver.ValidateLoadBalancerRequest{LBSpec: map[string]string{"host": "a.test"}, Attributes: map[string]string{"path": "/x"}})
	g.Expect(v.Msg).To(ContainSubstring("the BFE driver has no attributes, got path"))

	created, err := d.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{LBSpec: map[string]string{"host": "app.test", "name": "web"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created.Status).To(Equal(driver.StatusSucc), created.Msg)
	g.Expect(created.LBInfo).To(Equal(map[string]string{"name": "web", "host": "app.test", "path": "/*"}))
	g.Expect(created.Msg).To(ContainSubstring("has no backends yet"))
	g.Expect(env.fake.Reloads()).To(BeEmpty(), "an empty LoadBalancer changes no BFE file")

	v, _ = d.ValidateLoadBalancer(ctx, &driver.ValidateLoadBalancerRequest{LBSpec: map[string]string{"host": "APP.test", "name": "other"}})
	g.Expect(v.Succ).To(BeFalse())
	g.Expect(v.Msg).To(ContainSubstring("route conflicts with load balancer web"))
	v, _ = d.ValidateLoadBalancer(ctx, &driver.ValidateLoadBalancerRequest{LBSpec: map[string]string{"host": "app.test", "name": "web"}, Operation: driver.OperationUpdate})
	g.Expect(v.Succ).To(BeTrue(), v.Msg)

	// Backends: sub-cluster per member, weights reported back in msg.
	info := created.LBInfo
	r, err := d.EnsureBackend(ctx, ensureReq(info, "10.0.0.1:80", map[string]string{ParamCluster: "m1", ParamClusterWeight: "3"}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Status).To(Equal(driver.StatusSucc), r.Msg)
	g.Expect(r.Msg).To(Equal("bfe version 2: load balancer web serves sub-clusters m1=1"))
	r, _ = d.EnsureBackend(ctx, ensureReq(info, "10.0.0.2:80", map[string]string{ParamCluster: "m2", ParamClusterWeight: "1"}))
	g.Expect(r.Msg).To(Equal("bfe version 3: load balancer web serves sub-clusters m1=3,m2=1"))
	r, _ = d.EnsureBackend(ctx, ensureReq(info, "10.0.0.2:80", map[string]string{ParamCluster: "m2", ParamClusterWeight: "1"}))
	g.Expect(r.Msg).To(Equal("bfe version 3 (unchanged): load balancer web serves sub-clusters m1=3,m2=1"))
	_, gslb := env.fake.Active()
	g.Expect(gslb.Gslb.Clusters["web"]).To(Equal(map[string]int{bfeconf.Blackhole: 0, "web.m1": 3, "web.m2": 1}))

	// ingress-bfe semantics: all sub-cluster weights 0 is not a success.
	r, _ = d.EnsureBackend(ctx, ensureReq(info, "10.0.0.1:80", map[string]string{ParamCluster: "m1", ParamClusterWeight: "0"}))
	g.Expect(r.Msg).To(ContainSubstring("m1=0,m2=1"))
	r, _ = d.EnsureBackend(ctx, ensureReq(info, "10.0.0.2:80", map[string]string{ParamCluster: "m2", ParamClusterWeight: "0"}))
	g.Expect(r.Status).To(Equal(driver.StatusFail))
	g.Expect(r.Msg).To(ContainSubstring("load balancer web is not installed: no traffic: sub-cluster weights sum to 0"))
	g.Expect(int(r.MinRetryDelayInSeconds)).To(Equal(5))

	// Invalid input fails without a commit.
	r, _ = d.EnsureBackend(ctx, ensureReq(info, "backend.local:80", nil))
	g.Expect(r.Status).To(Equal(driver.StatusFail))
	g.Expect(r.Msg).To(ContainSubstring("want ip:port"))

	// Dry run changes nothing.
	before := len(env.fake.Reloads())
	dry := ensureReq(info, "10.0.0.9:80", nil)
	dry.DryRun = true
	r, _ = d.EnsureBackend(ctx, dry)
	g.Expect(r.Status).To(Equal(driver.StatusSucc))
	g.Expect(env.fake.Reloads()).To(HaveLen(before))
	g.Expect(env.fe.Model().LoadBalancers["web"].Backends).To(HaveLen(2))

	// A BFE failure reaches the caller with BFE's raw message; the configuration stays.
	env.fake.FailNext(bfeconf.GslbData, "clusterTableLoad():readObjectStart: expect { or n, but found \x00")
	r, _ = d.EnsureBackend(ctx, ensureReq(info, "10.0.0.1:80", map[string]string{ParamCluster: "m1", ParamClusterWeight: "2"}))
	g.Expect(r.Status).To(Equal(driver.StatusFail))
	g.Expect(r.Msg).To(ContainSubstring(`but found \x00`))
	h, _ := d.Healthz(ctx, &driver.HealthzRequest{})
	g.Expect(h.Healthy).To(BeFalse())
	r, _ = d.EnsureBackend(ctx, ensureReq(info, "10.0.0.1:80", map[string]string{ParamCluster: "m1", ParamClusterWeight: "2"}))
	g.Expect(r.Status).To(Equal(driver.StatusSucc), r.Msg)
	h, _ = d.Healthz(ctx, &driver.HealthzRequest{})
	g.Expect(h.Healthy).To(BeTrue())
	env.fake.SetMonitorAvailable(false)
	h, _ = d.Healthz(ctx, &driver.HealthzRequest{})
	g.Expect(h.Healthy).To(BeFalse())
	env.fake.SetMonitorAvailable(true)

	// Deregistering unknown backends and from unknown LoadBalancers succeeds.
	for _, req := range []*driver.BackendOperationRequest{
		ensureReq(info, "10.9.9.9:80", nil),
		ensureReq(map[string]string{"name": "gone", "host": "gone.test"}, "10.0.0.1:80", nil),
		ensureReq(map[string]string{}, "garbage", nil),
	} {
		r, err = d.DeregisterBackend(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Status).To(Equal(driver.StatusSucc), r.Msg)
	}
	r, _ = d.DeregisterBackend(ctx, ensureReq(info, "10.0.0.1:80", map[string]string{ParamCluster: "m1"}))
	g.Expect(r.Status).To(Equal(driver.StatusSucc))
	g.Expect(env.fe.Model().LoadBalancers["web"].Backends).To(HaveLen(1))

	del, err := d.DeleteLoadBalancer(ctx, &driver.DeleteLoadBalancerRequest{LBInfo: info})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(del.Status).To(Equal(driver.StatusSucc))
	g.Expect(env.fe.Model().LoadBalancers).To(BeEmpty())
	server, _ := env.fake.Active()
	g.Expect(server.RouteRule.BasicRule["lbfed"]).To(BeEmpty())
	g.Expect(env.fake.Unsafe()).To(BeEmpty())
}

func TestDriverGenerateBackendAddr(t *testing.T) {
	_, d := newTestDriver(t)
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{PodIP: "10.1.2.3"}}
	svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080}, {Port: 80, Protocol: corev1.ProtocolUDP, NodePort: 30081}, {Port: 443, NodePort: 30443}}}}
	nodeAddrs := []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "n1"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.1"}, {Type: corev1.NodeInternalIP, Address: "192.168.0.1"}}
	portNumber := int32(8081)
	cases := []struct {
		name string
		req  driver.GenerateBackendAddrRequest
		want string // address, or "fail: <msg substring>"
	}{
		{"pod", driver.GenerateBackendAddrRequest{PodBackend: &driver.PodBackendInRequest{Pod: pod, Port: lbcfv1beta1.PortSelector{Port: 8080}}}, "10.1.2.3:8080"},
		{"pod legacy portNumber", driver.GenerateBackendAddrRequest{PodBackend: &driver.PodBackendInRequest{Pod: pod, Port: lbcfv1beta1.PortSelector{PortNumber: &portNumber}}}, "10.1.2.3:8081"},
		{"pod without IP", driver.GenerateBackendAddrRequest{PodBackend: &driver.PodBackendInRequest{Pod: corev1.Pod{ObjectMeta: pod.ObjectMeta}, Port: lbcfv1beta1.PortSelector{Port: 80}}}, "fail: pod ns/p has no IP yet"},
		{"service TCP", driver.GenerateBackendAddrRequest{ServiceBackend: &driver.ServiceBackendInRequest{Service: svc, Port: lbcfv1beta1.PortSelector{Port: 80}, NodeName: "n1", NodeAddresses: nodeAddrs}}, "192.168.0.1:30080"},
		{"service UDP", driver.GenerateBackendAddrRequest{ServiceBackend: &driver.ServiceBackendInRequest{Service: svc, Port: lbcfv1beta1.PortSelector{Port: 80, Protocol: "UDP"}, NodeName: "n1", NodeAddresses: nodeAddrs}}, "192.168.0.1:30081"},
		{"service port without protocol", driver.GenerateBackendAddrRequest{ServiceBackend: &driver.ServiceBackendInRequest{Service: svc, Port: lbcfv1beta1.PortSelector{Port: 443}, NodeName: "n1", NodeAddresses: nodeAddrs[:2]}}, "203.0.113.1:30443"},
		{"service unknown port", driver.GenerateBackendAddrRequest{ServiceBackend: &driver.ServiceBackendInRequest{Service: svc, Port: lbcfv1beta1.PortSelector{Port: 81}, NodeAddresses: nodeAddrs}}, "fail: has no nodePort for port 81/TCP"},
		{"node without address", driver.GenerateBackendAddrRequest{ServiceBackend: &driver.ServiceBackendInRequest{Service: svc, Port: lbcfv1beta1.PortSelector{Port: 80}, NodeName: "n1", NodeAddresses: nodeAddrs[:1]}}, "fail: node n1 has no InternalIP or ExternalIP"},
		{"nothing", driver.GenerateBackendAddrRequest{}, "fail: neither podBackend nor serviceBackend"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r, err := d.GenerateBackendAddr(context.Background(), &tc.req)
			g.Expect(err).NotTo(HaveOccurred())
			if msg, ok := strings.CutPrefix(tc.want, "fail: "); ok {
				g.Expect(r.Status).To(Equal(driver.StatusFail))
				g.Expect(r.Msg).To(ContainSubstring(msg))
				return
			}
			g.Expect(r.Status).To(Equal(driver.StatusSucc), r.Msg)
			g.Expect(r.BackendAddr).To(Equal(tc.want))
		})
	}
}

// TestDriverCoalescesConcurrentCalls sends many concurrent ensureBackend calls: they must be
// committed in far fewer write+reload cycles than calls, and every call must see its backend served.
func TestDriverCoalescesConcurrentCalls(t *testing.T) {
	g := NewWithT(t)
	env, d := newTestDriver(t)
	info := map[string]string{"name": "web", "host": "app.test", "path": "/*"}
	const calls = 200
	var wg sync.WaitGroup
	msgs := make([]string, calls)
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			addr := "10.0." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250+1) + ":80"
			r, err := d.EnsureBackend(context.Background(), ensureReq(info, addr, map[string]string{ParamCluster: "m" + strconv.Itoa(i%3)}))
			if err != nil || r.Status != driver.StatusSucc {
				msgs[i] = "call failed"
				return
			}
			msgs[i] = r.Msg
		}(i)
	}
	wg.Wait()
	for _, m := range msgs {
		g.Expect(m).To(HavePrefix("bfe version "))
	}
	g.Expect(env.fe.Model().LoadBalancers["web"].Backends).To(HaveLen(calls))
	_, gslb := env.fake.Active()
	total := 0
	for _, instances := range gslb.ClusterTable.Config["web"] {
		total += len(instances)
	}
	g.Expect(total).To(Equal(calls))
	reloads := len(env.fake.Reloads())
	t.Logf("%d concurrent calls → %d versions, %d reloads", calls, env.fe.Version()-1, reloads)
	g.Expect(env.fe.Version() - 1).To(BeNumerically("<", calls/4))
	g.Expect(env.fake.Unsafe()).To(BeEmpty())
}
