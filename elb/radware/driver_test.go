package radware

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lbfed/lbfed/elb/radware/alteon"
	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/elb/radware/alteonsim/simpair"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/conformance"
	"github.com/lbfed/lbfed/lbspec"
)

type testEnv struct {
	sim    *alteonsim.Pair
	pair   *alteon.Pair
	fe     *Frontend
	drv    *Driver
	url    string       // driver base URL
	client driver.Bound // HTTP client of the driver
}

type envOptions struct {
	sim      alteonsim.Options
	frontend FrontendOptions
}

func newTestEnv(t testing.TB, o envOptions) *testEnv {
	t.Helper()
	simA, simB := o.sim, o.sim
	simA.Name, simB.Name = "", ""
	if simA.ApplyDuration == 0 {
		simA.ApplyDuration, simB.ApplyDuration = 5*time.Millisecond, 5*time.Millisecond
	}
	for _, s := range []*alteonsim.Options{&simA, &simB} {
		if s.SaveDuration == 0 {
			s.SaveDuration = time.Millisecond
		}
		if s.SyncDuration == 0 {
			s.SyncDuration = time.Millisecond
		}
	}
	sim, pair := simpair.Start(t, simA, simB, 2*time.Millisecond, alteon.PairOptions{PollInterval: 2 * time.Millisecond})
	fo := o.frontend
	fo.Pair = pair
	if fo.Window == 0 {
		fo.Window = 5 * time.Millisecond
	}
	fe, err := NewFrontend(fo)
	if err != nil {
		t.Fatal(err)
	}
	drv, err := NewDriver(DriverOptions{Frontend: fe, RetryDelaySeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(driver.NewHandler(drv, driver.HandlerOptions{}))
	t.Cleanup(srv.Close)
	return &testEnv{sim: sim, pair: pair, fe: fe, drv: drv, url: srv.URL,
		client: driver.Bound{Invoker: driver.NewClient(driver.ClientOptions{}), Endpoint: driver.Endpoint{Name: "test/radware", URL: srv.URL}}}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestConformance(t *testing.T) {
	e := newTestEnv(t, envOptions{frontend: FrontendOptions{DrainPeriod: 1500 * time.Millisecond}})
	conformance.Run(t, conformance.Config{
		BaseURL:    e.url,
		LBSpec:     map[string]string{"vip": "127.0.0.40", "port": "8080", "protocol": "TCP", "method": "rr"},
		Parameters: map[string]string{"weight": "3", lbcfv1beta1.ParamCluster: "member-1"},
		MaxPoll:    500 * time.Millisecond,
	})
	// The suite deleted its load balancers: nothing of the driver is left on the device.
	run := e.sim.A.Snapshot(alteonsim.Running)
	NewWithT(t).Expect(run.VirtualServers()).To(BeEmpty())
	NewWithT(t).Expect(run.Groups()).To(BeEmpty())
	NewWithT(t).Expect(run.RealServers()).To(BeEmpty())
}

var lbSpec = map[string]string{"vip": "192.0.2.10", "port": "80", "protocol": "TCP", "method": "lc"}

func (e *testEnv) create(t *testing.T, spec map[string]string) map[string]string {
	t.Helper()
	rsp, err := e.client.CreateLoadBalancer(testCtx(t), &driver.CreateLoadBalancerRequest{LBSpec: spec})
	if err != nil || rsp.Status != driver.StatusSucc {
		t.Fatalf("createLoadBalancer: %v %+v", err, rsp)
	}
	return rsp.LBInfo
}

func (e *testEnv) backend(t *testing.T, webhook string, info map[string]string, addr string, params map[string]string) driver.ResponseForFailRetryHooks {
	t.Helper()
	req := &driver.BackendOperationRequest{LBInfo: info, BackendAddr: addr, Parameters: params}
	var rsp *driver.BackendOperationResponse
	var err error
	if webhook == driver.EnsureBackend {
		rsp, err = e.client.EnsureBackend(testCtx(t), req)
	} else {
		rsp, err = e.client.DeregisterBackend(testCtx(t), req)
	}
	if err != nil {
		t.Fatalf("%s %s: %v", webhook, addr, err)
	}
	return rsp.ResponseForFailRetryHooks
}

func TestDriverProgramsTheDevice(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{})
	info := e.create(t, lbSpec)
	id := "lbfed_192.0.2.10_tcp_80"
	g.Expect(info).To(Equal(map[string]string{"vip": "192.0.2.10", "port": "80", "protocol": "TCP", "method": "lc", "healthCheck": "tcp", "virtualServer": id}))

	run := e.sim.A.Snapshot(alteonsim.Running)
	g.Expect(run.VirtualServers()).To(Equal([]string{id}))
	g.Expect(run.Groups()).To(Equal([]string{id}))
	g.Expect(e.sim.B.Snapshot(alteonsim.Running).Equal(run)).To(BeTrue(), "synced to the backup")
	g.Expect(e.sim.A.Snapshot(alteonsim.Flash).Equal(run)).To(BeTrue(), "saved")

	rsp := e.backend(t, driver.EnsureBackend, info, "10.0.0.11:30080", map[string]string{"weight": "7", lbcfv1beta1.ParamCluster: "member-1"})
	g.Expect(rsp.Status).To(Equal(driver.StatusSucc), rsp.Msg)
	rs := id + "_10.0.0.11_30080"
	run = e.sim.A.Snapshot(alteonsim.Running)
	g.Expect(run.Members(id)).To(Equal(map[string]int{rs: 1}))
	g.Expect(run.RealServer(rs)).To(And(HaveKeyWithValue("IpAddr", "10.0.0.11"), HaveKeyWithValue("Weight", int64(7)),
		HaveKeyWithValue("State", int64(2)), HaveKeyWithValue("Name", "lbfed")))

	// Re-ensuring with a new weight updates only the weight.
	applies := e.sim.A.Applies()
	g.Expect(e.backend(t, driver.EnsureBackend, info, "10.0.0.11:30080", map[string]string{"weight": "7"}).Status).To(Equal(driver.StatusSucc))
	g.Expect(e.sim.A.Applies()).To(Equal(applies), "nothing changed, nothing applied")
	g.Expect(e.backend(t, driver.EnsureBackend, info, "10.0.0.11:30080", map[string]string{"weight": "2"}).Status).To(Equal(driver.StatusSucc))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServer(rs)).To(HaveKeyWithValue("Weight", int64(2)))

	// Without a drain period, deregistering removes at once.
	g.Expect(e.backend(t, driver.DeregisterBackend, info, "10.0.0.11:30080", nil).Status).To(Equal(driver.StatusSucc))
	run = e.sim.A.Snapshot(alteonsim.Running)
	g.Expect(run.Members(id)).To(BeEmpty())
	g.Expect(run.RealServers()).To(BeEmpty())

	// Bad input fails without touching the device.
	g.Expect(e.backend(t, driver.EnsureBackend, info, "10.0.0.11:30080", map[string]string{"weight": "100"}).Status).To(Equal(driver.StatusFail))
	g.Expect(e.backend(t, driver.EnsureBackend, info, "[::1]:80", nil).Status).To(Equal(driver.StatusFail))

	// ensureLoadBalancer repairs a virtual server removed behind the driver's back.
	c := e.pair
	_, err := c.Do(testCtx(t), func(ctx context.Context, tx *alteon.Tx) error {
		_, err := tx.DeleteVirtualServer(ctx, id)
		return err
	})
	g.Expect(err).NotTo(HaveOccurred())
	ens, err := e.client.EnsureLoadBalancer(testCtx(t), &driver.EnsureLoadBalancerRequest{LBInfo: info})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ens.Status).To(Equal(driver.StatusSucc))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).VirtualServers()).To(Equal([]string{id}))
}

func TestDrainThenRemove(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{frontend: FrontendOptions{DrainPeriod: 300 * time.Millisecond}})
	info := e.create(t, lbSpec)
	id := info["virtualServer"]
	rs := id + "_10.0.0.12_30080"
	g.Expect(e.backend(t, driver.EnsureBackend, info, "10.0.0.12:30080", nil).Status).To(Equal(driver.StatusSucc))

	rsp := e.backend(t, driver.DeregisterBackend, info, "10.0.0.12:30080", nil)
	g.Expect(rsp.Status).To(Equal(driver.StatusRunning))
	g.Expect(rsp.MinRetryDelayInSeconds).To(BeEquivalentTo(1))
	g.Expect(rsp.Msg).To(ContainSubstring("draining"))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).Members(id)).To(Equal(map[string]int{rs: 3}), "shutdown-connection, committed")

	applies := e.sim.A.Applies()
	g.Expect(e.backend(t, driver.DeregisterBackend, info, "10.0.0.12:30080", nil).Status).To(Equal(driver.StatusRunning))
	g.Expect(e.sim.A.Applies()).To(Equal(applies), "polling a drain does not touch the device")

	g.Eventually(func() string { return e.backend(t, driver.DeregisterBackend, info, "10.0.0.12:30080", nil).Status }).
		WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal(driver.StatusSucc))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).Members(id)).To(BeEmpty())
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(BeEmpty())

	// A backend ensured again while draining is enabled again.
	g.Expect(e.backend(t, driver.EnsureBackend, info, "10.0.0.12:30080", nil).Status).To(Equal(driver.StatusSucc))
	g.Expect(e.backend(t, driver.DeregisterBackend, info, "10.0.0.12:30080", nil).Status).To(Equal(driver.StatusRunning))
	g.Expect(e.backend(t, driver.EnsureBackend, info, "10.0.0.12:30080", nil).Status).To(Equal(driver.StatusSucc))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).Members(id)).To(Equal(map[string]int{rs: 1}))
}

func TestDeleteRemovesOnlyWhatItCreated(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{})
	info := e.create(t, lbSpec)
	id := info["virtualServer"]
	for _, a := range []string{"10.0.0.1:80", "10.0.0.2:80"} {
		g.Expect(e.backend(t, driver.EnsureBackend, info, a, nil).Status).To(Equal(driver.StatusSucc))
	}
	// Someone else's objects: a real server added to our group by hand, another virtual server,
	// a real server that merely looks like ours.
	_, err := e.pair.Do(testCtx(t), func(ctx context.Context, tx *alteon.Tx) error {
		for _, rs := range []alteon.RealServer{
			{Index: "manual-rs", IP: "10.9.9.9", Weight: 1, State: alteon.RealServerEnabled, Name: "ops"},
			{Index: id + "_10.9.9.8_80", IP: "10.9.9.8", Weight: 1, State: alteon.RealServerEnabled, Name: "ops"},
		} {
			if _, err := tx.EnsureRealServer(ctx, rs); err != nil {
				return err
			}
		}
		if _, err := tx.AddMember(ctx, id, "manual-rs"); err != nil {
			return err
		}
		if _, err := tx.EnsureGroup(ctx, alteon.Group{Index: "ops-group", Metric: alteon.MetricRoundRobin}); err != nil {
			return err
		}
		if _, err := tx.EnsureVirtualServer(ctx, alteon.VirtualServer{Index: "ops-vip", IP: "192.0.2.10", Enabled: true, Name: "ops"}); err != nil {
			return err
		}
		_, err := tx.EnsureVirtualService(ctx, alteon.VirtualService{Server: "ops-vip", Index: 1, VirtPort: 443, Balance: alteon.BalanceTCP, DBind: 2, PBind: 3, Group: "ops-group"})
		return err
	})
	g.Expect(err).NotTo(HaveOccurred())

	for i := 0; i < 2; i++ { // idempotent
		rsp, err := e.client.DeleteLoadBalancer(testCtx(t), &driver.DeleteLoadBalancerRequest{LBInfo: info})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rsp.Status).To(Equal(driver.StatusSucc), rsp.Msg)
	}
	run := e.sim.A.Snapshot(alteonsim.Running)
	g.Expect(run.VirtualServers()).To(Equal([]string{"ops-vip"}))
	g.Expect(run.Groups()).To(Equal([]string{"ops-group"}))
	g.Expect(run.RealServers()).To(ConsistOf("manual-rs", id+"_10.9.9.8_80"))

	// Deregistering from the deleted load balancer succeeds.
	g.Expect(e.backend(t, driver.DeregisterBackend, info, "10.0.0.1:80", nil).Status).To(Equal(driver.StatusSucc))
	// Ensuring a backend of a missing load balancer fails (it is not silently re-created).
	rsp := e.backend(t, driver.EnsureBackend, info, "10.0.0.1:80", nil)
	g.Expect(rsp.Status).To(Equal(driver.StatusFail))
	g.Expect(rsp.Msg).To(ContainSubstring("does not exist"))
}

// Issue 46 (soak seed 2, a slow device): createLoadBalancer timed out while the device committed
// it, so the LoadBalancer never had lbInfo; deleted, the engine sent its lbSpec to
// deleteLoadBalancer, which found the virtual server marked with the LoadBalancer's UID and left
// it, answering Succ: an orphan virtual service for good.
func TestDeleteAfterAnUnansweredCreate(t *testing.T) {
	for _, tc := range []struct {
		name string
		// createUID is the UID of createLoadBalancer's recordID ("": none, marks before UIDs).
		createUID string
		// info: what deleteLoadBalancer gets: the lbSpec, or the lbInfo the create answered.
		lostAnswer bool
		deleteUID  string
		gone       bool
	}{
		{name: "the create's answer was lost: the lbSpec and the same UID", createUID: "uid-1", lostAnswer: true, deleteUID: "uid-1", gone: true},
		{name: "another LoadBalancer of the same VIP:port", createUID: "uid-1", lostAnswer: true, deleteUID: "uid-2", gone: false},
		{name: "the create answered", createUID: "uid-1", deleteUID: "uid-1", gone: true},
		{name: "created before marks carried the UID", deleteUID: "uid-1", gone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e := newTestEnv(t, envOptions{})
			create := &driver.CreateLoadBalancerRequest{LBSpec: lbSpec}
			if tc.createUID != "" {
				create.RecordID = driver.RecordID(driver.CreateLoadBalancer, tc.createUID)
			}
			rsp, err := e.client.CreateLoadBalancer(testCtx(t), create)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rsp.Status).To(Equal(driver.StatusSucc), rsp.Msg)
			g.Expect(e.sim.A.Snapshot(alteonsim.Running).VirtualServers()).To(HaveLen(1), "the create reached the device")
			info := rsp.LBInfo
			if tc.lostAnswer {
				info = maps.Clone(lbSpec) // what the engine sends without lbInfo
			}
			del, err := e.client.DeleteLoadBalancer(testCtx(t), &driver.DeleteLoadBalancerRequest{
				RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: driver.RecordID(driver.DeleteLoadBalancer, tc.deleteUID)}, LBInfo: info})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(del.Status).To(Equal(driver.StatusSucc), del.Msg)
			run := e.sim.A.Snapshot(alteonsim.Running)
			if tc.gone {
				g.Expect(run.VirtualServers()).To(BeEmpty(), "deleted")
				g.Expect(run.Groups()).To(BeEmpty())
			} else {
				g.Expect(run.VirtualServers()).To(HaveLen(1), "another LoadBalancer's objects are left alone")
			}
		})
	}
}

func TestConflictsAreRefused(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{})
	_, err := e.pair.Do(testCtx(t), func(ctx context.Context, tx *alteon.Tx) error {
		if _, err := tx.EnsureGroup(ctx, alteon.Group{Index: "ops-group", Metric: alteon.MetricRoundRobin}); err != nil {
			return err
		}
		if _, err := tx.EnsureVirtualServer(ctx, alteon.VirtualServer{Index: "ops-vip", IP: "192.0.2.10", Enabled: true, Name: "ops"}); err != nil {
			return err
		}
		_, err := tx.EnsureVirtualService(ctx, alteon.VirtualService{Server: "ops-vip", Index: 1, VirtPort: 80, Balance: alteon.BalanceTCP, DBind: 2, PBind: 3, Group: "ops-group"})
		return err
	})
	g.Expect(err).NotTo(HaveOccurred())
	rsp, err := e.client.CreateLoadBalancer(testCtx(t), &driver.CreateLoadBalancerRequest{LBSpec: lbSpec})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rsp.Status).To(Equal(driver.StatusFail))
	g.Expect(rsp.Msg).To(ContainSubstring("already served by virtual server ops-vip"))
	g.Expect(e.sim.A.Snapshot(alteonsim.Pending).Groups()).To(Equal([]string{"ops-group"}), "nothing written")

	// UDP on the same port does not conflict with TCP.
	udp := map[string]string{"vip": "192.0.2.10", "port": "80", "protocol": "UDP"}
	info := e.create(t, udp)
	g.Expect(info["healthCheck"]).To(Equal("udp"))
}

func TestValidateAndGenerate(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := testCtx(t)
	specs := []struct {
		spec map[string]string
		ok   bool
	}{
		{map[string]string{"vip": "192.0.2.1", "port": "80"}, true},
		{map[string]string{"vip": "192.0.2.1", "port": "53", "protocol": "udp", "method": "hash", "healthCheck": "none"}, true},
		{map[string]string{"vip": "192.0.2.1"}, false},
		{map[string]string{"vip": "2001:db8::1", "port": "80"}, false},
		{map[string]string{"vip": "192.0.2.1", "port": "5"}, false},
		{map[string]string{"vip": "192.0.2.1", "port": "80", "protocol": "SCTP"}, false},
		{map[string]string{"vip": "192.0.2.1", "port": "80", "method": "random"}, false},
		{map[string]string{"vip": "192.0.2.1", "port": "80", "healthCheck": "grpc"}, false},
		{map[string]string{"vip": "192.0.2.1", "port": "80", "colour": "red"}, false},
	}
	for _, s := range specs {
		t.Run(fmt.Sprint(s.spec), func(t *testing.T) {
			rsp, err := e.client.ValidateLoadBalancer(ctx, &driver.ValidateLoadBalancerRequest{LBSpec: s.spec, Operation: driver.OperationCreate})
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			NewWithT(t).Expect(rsp.Succ).To(Equal(s.ok), rsp.Msg)
		})
	}
	g := NewWithT(t)
	vb, _ := e.client.ValidateBackend(ctx, &driver.ValidateBackendRequest{BackendType: "Pod", Parameters: map[string]string{"weight": "49"}})
	g.Expect(vb.Succ).To(BeFalse())
	vb, _ = e.client.ValidateBackend(ctx, &driver.ValidateBackendRequest{BackendType: "Pod", Parameters: map[string]string{"weight": "48"}})
	g.Expect(vb.Succ).To(BeTrue())

	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{PodIP: "fd00::5", PodIPs: []corev1.PodIP{{IP: "fd00::5"}, {IP: "10.1.2.3"}}}}
	ga, err := e.client.GenerateBackendAddr(ctx, &driver.GenerateBackendAddrRequest{PodBackend: &driver.PodBackendInRequest{Pod: pod, Port: lbcfv1beta1.PortSelector{Port: 8080}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ga.BackendAddr).To(Equal("10.1.2.3:8080"), "the IPv4 address of a dual-stack pod")
	svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}}}
	ga, err = e.client.GenerateBackendAddr(ctx, &driver.GenerateBackendAddrRequest{ServiceBackend: &driver.ServiceBackendInRequest{
		Service: svc, Port: lbcfv1beta1.PortSelector{Port: 80, Protocol: "TCP"}, NodeName: "n1",
		NodeAddresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "n1"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.1"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ga.BackendAddr).To(Equal("10.0.0.5:30080"))
	ga, _ = e.client.GenerateBackendAddr(ctx, &driver.GenerateBackendAddrRequest{ServiceBackend: &driver.ServiceBackendInRequest{
		Service: svc, Port: lbcfv1beta1.PortSelector{Port: 81, Protocol: "TCP"}}})
	g.Expect(ga.Status).To(Equal(driver.StatusFail))

	// Dry run changes nothing.
	cr, err := e.client.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{DryRun: true, LBSpec: lbSpec})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cr.Status).To(Equal(driver.StatusSucc))
	g.Expect(e.sim.A.Applies()).To(BeZero())

	hz, err := e.client.Healthz(ctx, &driver.HealthzRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hz.Healthy).To(BeTrue())
	e.sim.SetRoles(alteonsim.RoleBackup, alteonsim.RoleBackup)
	hz, _ = e.client.Healthz(ctx, &driver.HealthzRequest{})
	g.Expect(hz.Healthy).To(BeFalse(), "no master")
}

func TestConcurrentCallsAreCoalesced(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{frontend: FrontendOptions{Window: 20 * time.Millisecond}})
	info := e.create(t, lbSpec)
	id := info["virtualServer"]
	before := e.sim.A.Applies()
	const n = 200
	var wg sync.WaitGroup
	statuses := make([]string, n)
	// Each call, when answered, must see its backend committed on the master and the backup.
	visible := make([]bool, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := fmt.Sprintf("10.1.%d.%d:8080", i/250, i%250+1)
			statuses[i] = e.backend(t, driver.EnsureBackend, info, addr, nil).Status
			rs := fmt.Sprintf("%s_10.1.%d.%d_8080", id, i/250, i%250+1)
			_, onA := e.sim.A.Snapshot(alteonsim.Flash).Members(id)[rs]
			_, onB := e.sim.B.Snapshot(alteonsim.Running).Members(id)[rs]
			visible[i] = onA && onB
		}()
	}
	wg.Wait()
	g.Expect(statuses).To(HaveEach(Equal(driver.StatusSucc)))
	g.Expect(visible).To(HaveEach(BeTrue()), "answered only after apply, save and sync")
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).Members(id)).To(HaveLen(n))
	applies := e.sim.A.Applies() - before
	g.Expect(applies).To(BeNumerically("<=", 3), "200 concurrent calls in at most 3 transactions")
	t.Logf("%d concurrent ensureBackend calls: %d applies", n, applies)
}

func TestFailedApplyIsBisected(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{frontend: FrontendOptions{Window: 30 * time.Millisecond}})
	info := e.create(t, lbSpec)
	e.sim.A.InjectApply(alteonsim.ApplyFault{Fail: "Transient apply failure."})
	var wg sync.WaitGroup
	statuses := make([]string, 8)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = e.backend(t, driver.EnsureBackend, info, fmt.Sprintf("10.2.0.%d:8080", i+1), nil).Status
		}()
	}
	wg.Wait()
	g.Expect(statuses).To(HaveEach(Equal(driver.StatusSucc)), "both halves committed after the batch's apply failed")
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).Members(info["virtualServer"])).To(HaveLen(8))
}

func TestFailoverDuringBatch(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{sim: alteonsim.Options{ApplyDuration: 20 * time.Millisecond}, frontend: FrontendOptions{Window: 30 * time.Millisecond}})
	info := e.create(t, lbSpec)
	id := info["virtualServer"]
	e.sim.A.InjectApply(alteonsim.ApplyFault{During: e.sim.Failover})
	var wg sync.WaitGroup
	statuses := make([]string, 20)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = e.backend(t, driver.EnsureBackend, info, fmt.Sprintf("10.3.0.%d:8080", i+1), nil).Status
		}()
	}
	wg.Wait()
	g.Expect(statuses).To(HaveEach(Equal(driver.StatusSucc)))
	g.Expect(e.sim.Master()).To(BeIdenticalTo(e.sim.B))
	g.Expect(e.sim.B.Snapshot(alteonsim.Running).Members(id)).To(HaveLen(20), "re-run on the new master")
	g.Expect(e.sim.B.Snapshot(alteonsim.Flash).Members(id)).To(HaveLen(20))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).Members(id)).To(HaveLen(20), "synced back to the old master")
}

// echo is a TCP server that answers its name.
func echo(t *testing.T, name string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, name)
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

func dialName(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

func TestTrafficThroughTheVIP(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{sim: alteonsim.Options{DataPlane: true}})
	l, err := net.Listen("tcp", "127.0.0.41:0")
	g.Expect(err).NotTo(HaveOccurred())
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	vip := net.JoinHostPort("127.0.0.41", strconv.Itoa(port))
	info := e.create(t, map[string]string{"vip": "127.0.0.41", "port": strconv.Itoa(port), "method": "rr", "healthCheck": "none"})
	a1, a2 := echo(t, "one"), echo(t, "two")
	for _, a := range []string{a1, a2} {
		g.Expect(e.backend(t, driver.EnsureBackend, info, a, nil).Status).To(Equal(driver.StatusSucc))
	}
	seen := map[string]int{}
	for i := 0; i < 6; i++ {
		seen[dialName(vip)]++
	}
	g.Expect(seen).To(Equal(map[string]int{"one": 3, "two": 3}))
	g.Expect(e.backend(t, driver.DeregisterBackend, info, a2, nil).Status).To(Equal(driver.StatusSucc))
	for i := 0; i < 3; i++ {
		g.Expect(dialName(vip)).To(Equal("one"))
	}
	rsp, err := e.client.DeleteLoadBalancer(testCtx(t), &driver.DeleteLoadBalancerRequest{LBInfo: info})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rsp.Status).To(Equal(driver.StatusSucc))
	g.Expect(dialName(vip)).To(BeEmpty(), "the VIP is gone")
}

// TestHealthAsksTheDevice reproduces issue 14.4: with one unit, Master returned it without asking,
// so healthz (and with it LBCF's driver_healthy and elb-controller's readiness) said healthy while
// the device was down.
func TestHealthAsksTheDevice(t *testing.T) {
	single := func(t *testing.T) (*alteonsim.Device, *Frontend) {
		d := alteonsim.New(alteonsim.Options{})
		url, err := d.Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		c, err := alteon.NewClient(alteon.Config{URL: url, User: "admin", Password: "admin", RetryDelay: time.Millisecond, Attempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		p, err := alteon.NewPair(alteon.PairOptions{}, c)
		if err != nil {
			t.Fatal(err)
		}
		fe, err := NewFrontend(FrontendOptions{Pair: p})
		if err != nil {
			t.Fatal(err)
		}
		return d, fe
	}
	for _, tt := range []struct {
		name    string
		setup   func(t *testing.T) *Frontend
		healthy bool
	}{
		{"single unit up", func(t *testing.T) *Frontend { _, fe := single(t); return fe }, true},
		{"single unit down", func(t *testing.T) *Frontend { d, fe := single(t); _ = d.Close(); return fe }, false},
		{"pair with a master", func(t *testing.T) *Frontend { return newTestEnv(t, envOptions{}).fe }, true},
		{"pair, master down", func(t *testing.T) *Frontend { e := newTestEnv(t, envOptions{}); _ = e.sim.A.Close(); return e.fe }, false},
		{"pair, both down", func(t *testing.T) *Frontend { e := newTestEnv(t, envOptions{}); _ = e.sim.Close(); return e.fe }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			fe := tt.setup(t)
			drv, err := NewDriver(DriverOptions{Frontend: fe})
			g.Expect(err).NotTo(HaveOccurred())
			h, err := drv.Healthz(testCtx(t), &driver.HealthzRequest{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(h.Healthy).To(Equal(tt.healthy))
			if tt.healthy {
				g.Expect(fe.Healthy(testCtx(t))).To(Succeed())
			} else {
				g.Expect(fe.Healthy(testCtx(t))).To(HaveOccurred())
			}
		})
	}
}

// TestSameVIPPortIsRefused reproduces issue 14.7: two LoadBalancers with the same VIP:port shared
// one set of device objects without warning, and deleting one removed them for both. The second is
// now refused at validation, naming the owner, also after a driver restart (the owners come from
// the marks on the device); and a create that got past validation (a race) is refused too.
func TestSameVIPPortIsRefused(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{})
	ctx := testCtx(t)
	validate := func(drv *Driver) *driver.ValidateLoadBalancerResponse {
		rsp, err := drv.ValidateLoadBalancer(ctx, &driver.ValidateLoadBalancerRequest{LBSpec: lbSpec, Operation: driver.OperationCreate})
		g.Expect(err).NotTo(HaveOccurred())
		return rsp
	}
	create := func(uid string) *driver.CreateLoadBalancerResponse {
		rsp, err := e.drv.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{
			RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: driver.RecordID(driver.CreateLoadBalancer, uid)}, LBSpec: lbSpec})
		g.Expect(err).NotTo(HaveOccurred())
		return rsp
	}
	g.Expect(validate(e.drv).Succ).To(BeTrue(), "the first is allowed")
	first := create("uid-1")
	g.Expect(first.Status).To(Equal(driver.StatusSucc))
	id := first.LBInfo[lbspec.KeyVirtualServer]

	second := validate(e.drv)
	g.Expect(second.Succ).To(BeFalse(), "the second is refused")
	g.Expect(second.Msg).To(And(ContainSubstring("192.0.2.10:80/TCP"), ContainSubstring("uid-1"), ContainSubstring(id)))

	// Past validation (two creates racing): the create is refused, the first keeps its objects.
	raced := create("uid-2")
	g.Expect(raced.Status).To(Equal(driver.StatusFail))
	g.Expect(raced.Msg).To(ContainSubstring("uid-1"))
	info2 := maps.Clone(first.LBInfo)
	info2[lbspec.KeyLoadBalancerUID] = "uid-2"
	del, err := e.drv.DeleteLoadBalancer(ctx, &driver.DeleteLoadBalancerRequest{LBInfo: info2})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(del.Status).To(Equal(driver.StatusSucc))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).VirtualServers()).To(Equal([]string{id}), "deleting the second leaves the first's objects")

	// A restarted driver knows the owner from the device.
	drv2, err := NewDriver(DriverOptions{Frontend: e.fe})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(validate(drv2).Msg).To(ContainSubstring("uid-1"))

	// Once the first is deleted, the address is free again.
	del, err = e.drv.DeleteLoadBalancer(ctx, &driver.DeleteLoadBalancerRequest{LBInfo: first.LBInfo})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(del.Status).To(Equal(driver.StatusSucc))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).VirtualServers()).To(BeEmpty())
	g.Expect(validate(e.drv).Succ).To(BeTrue())
}
