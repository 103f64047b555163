package servicelb_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lbfed/lbfed/elb/radware"
	"github.com/lbfed/lbfed/elb/radware/alteon"
	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/elb/radware/alteonsim/simpair"
	"github.com/lbfed/lbfed/elb/servicelb"
	"github.com/lbfed/lbfed/lbspec"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(testenv.ControllerLogger())
	// Two kwok nodes; kube-controller-manager for namespaces and garbage collection.
	testenv.Main(m, localup.ClusterOptions{Name: "elb", ControllerManager: true, FakeNodes: 2})
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	return s
}()

type env struct {
	t     *testing.T
	g     Gomega
	ctx   context.Context
	cfg   *rest.Config
	c     client.Client
	ns    string
	class string
	sim   *alteonsim.Pair
	nodes []corev1.Node
}

type envOptions struct {
	sim        alteonsim.Options
	drain      time.Duration
	maxRetries int
	unclassed  bool
}

var counter atomic.Int32

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	cfg := testenv.Config(t)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := counter.Add(1)
	e := &env{t: t, g: NewWithT(t), ctx: ctx, cfg: cfg, c: c,
		ns: fmt.Sprintf("elb-%d-%d", time.Now().UnixNano()%100000, n), class: fmt.Sprintf("lb.zdns.cn/test-%d", n)}
	e.g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})).To(Succeed())
	var nodes corev1.NodeList
	e.g.Expect(c.List(ctx, &nodes)).To(Succeed())
	e.g.Expect(nodes.Items).To(HaveLen(2))
	e.nodes = nodes.Items

	so := o.sim
	so.DataPlane = true
	if so.ApplyDuration == 0 {
		so.ApplyDuration = 5 * time.Millisecond
	}
	so.SaveDuration, so.SyncDuration = time.Millisecond, time.Millisecond
	var pair *alteon.Pair
	e.sim, pair = simpair.Start(t, so, so, 2*time.Millisecond, alteon.PairOptions{PollInterval: 2 * time.Millisecond, ApplyTimeout: 5 * time.Second, ForeignWait: 50 * time.Millisecond})
	fe, err := radware.NewFrontend(radware.FrontendOptions{Pair: pair, Window: 5 * time.Millisecond, DrainPeriod: o.drain})
	e.g.Expect(err).NotTo(HaveOccurred())

	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: &skip},
		Cache:      testenv.UnchangedCache(t, cache.Options{}),
	})
	e.g.Expect(err).NotTo(HaveOccurred())
	mgr = testenv.ClassicQueues(t, mgr)
	_, err = servicelb.SetupWithManager(mgr, servicelb.Options{
		Frontend: fe, ClusterName: "it", LoadBalancerClass: e.class, ClaimUnclassed: o.unclassed,
		MaxRetries: o.maxRetries, RetryBaseDelay: 50 * time.Millisecond, RetryMaxDelay: 500 * time.Millisecond,
	})
	e.g.Expect(err).NotTo(HaveOccurred())
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		testenv.WaitStopped(t, done)
	})
	// Runs before the manager stops: Services go while their finalizer can still be honoured.
	t.Cleanup(func() {
		var list corev1.ServiceList
		_ = c.List(context.Background(), &list, client.InNamespace(e.ns))
		for i := range list.Items {
			_ = c.Delete(context.Background(), &list.Items[i])
		}
		NewWithT(t).Eventually(func() []corev1.Service {
			_ = c.List(context.Background(), &list, client.InNamespace(e.ns))
			return list.Items
		}).WithTimeout(20 * time.Second).Should(BeEmpty())
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})
	})
	return e
}

// vip returns a loopback VIP and a free port on it.
var vipCounter atomic.Int32

func (e *env) vip() (string, int32) {
	ip := fmt.Sprintf("127.0.0.%d", 50+vipCounter.Add(1))
	l, err := net.Listen("tcp", ip+":0")
	e.g.Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return ip, int32(l.Addr().(*net.TCPAddr).Port)
}

func (e *env) service(name, vip string, port int32, mods ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, Annotations: map[string]string{lbspec.AnnotationVIP: vip}},
		Spec: corev1.ServiceSpec{
			Type:              corev1.ServiceTypeLoadBalancer,
			LoadBalancerClass: &e.class,
			Selector:          map[string]string{"app": name},
			Ports:             []corev1.ServicePort{{Name: "http", Port: port, Protocol: corev1.ProtocolTCP}},
		},
	}
	for _, m := range mods {
		m(s)
	}
	e.g.Expect(e.c.Create(e.ctx, s)).To(Succeed())
	return s
}

func (e *env) get(name string) *corev1.Service {
	var s corev1.Service
	e.g.Expect(e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, &s)).To(Succeed())
	return &s
}

func (e *env) update(name string, mutate func(*corev1.Service)) {
	e.g.Eventually(func() error {
		s := e.get(name)
		mutate(s)
		return e.c.Update(e.ctx, s)
	}).Should(Succeed())
}

func (e *env) ingressIP(name string) func() string {
	return func() string {
		s := e.get(name)
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return ""
		}
		return s.Status.LoadBalancer.Ingress[0].IP
	}
}

// members returns the running members (real server id → state) of a Service port's group on the
// current master.
func (e *env) members(vip string, port int32, proto string) func() map[string]int {
	return func() map[string]int {
		m := e.sim.Master()
		if m == nil {
			return nil
		}
		return m.Snapshot(alteonsim.Running).Members(fmt.Sprintf("elb_%s_%s_%d", vip, proto, port))
	}
}

func rsID(vip string, port int32, nodeIP string, nodePort int32) string {
	return fmt.Sprintf("elb_%s_tcp_%d_%s_%d", vip, port, nodeIP, nodePort)
}

func nodeIP(n corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// kubeProxy stands in for kube-proxy on a node: nodeIP:nodePort answers the node's name.
func (e *env) kubeProxy(n corev1.Node, nodePort int32) {
	l, err := net.Listen("tcp", net.JoinHostPort(nodeIP(n), strconv.Itoa(int(nodePort))))
	e.g.Expect(err).NotTo(HaveOccurred())
	e.t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, n.Name)
			_ = c.Close()
		}
	}()
}

func dial(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

// reached dials the VIP n times and counts the answering nodes.
func reached(addr string, n int) map[string]int {
	out := map[string]int{}
	for i := 0; i < n; i++ {
		out[dial(addr)]++
	}
	return out
}

func (e *env) events(name string) func() []string {
	return func() []string {
		var list eventsv1.EventList
		_ = e.c.List(e.ctx, &list, client.InNamespace(e.ns))
		var out []string
		for _, ev := range list.Items {
			if ev.Regarding.Name == name {
				out = append(out, ev.Reason+": "+ev.Note)
			}
		}
		return out
	}
}

func TestServiceLifecycle(t *testing.T) {
	e := newEnv(t, envOptions{})
	g := e.g
	vip, port := e.vip()
	e.service("web", vip, port)
	g.Eventually(e.ingressIP("web")).WithTimeout(20 * time.Second).Should(Equal(vip))
	svc := e.get("web")
	g.Expect(svc.Finalizers).To(ContainElement(servicelb.Finalizer))
	g.Expect(*svc.Status.LoadBalancer.Ingress[0].IPMode).To(Equal(corev1.LoadBalancerIPModeVIP))
	nodePort := svc.Spec.Ports[0].NodePort
	want := map[string]int{}
	for _, n := range e.nodes {
		want[rsID(vip, port, nodeIP(n), nodePort)] = 1
	}
	g.Expect(e.members(vip, port, "tcp")()).To(Equal(want), "all Ready schedulable nodes, nodeIP:nodePort")
	g.Expect(e.sim.B.Snapshot(alteonsim.Running).Equal(e.sim.A.Snapshot(alteonsim.Running))).To(BeTrue(), "synced to the backup")
	g.Expect(e.sim.A.Snapshot(alteonsim.Flash).Equal(e.sim.A.Snapshot(alteonsim.Running))).To(BeTrue(), "saved")
	g.Eventually(e.events("web")).Should(ContainElement(ContainSubstring("EnsuredLoadBalancer")))

	// Traffic through the VIP reaches both nodes' nodePort.
	for _, n := range e.nodes {
		e.kubeProxy(n, nodePort)
	}
	addr := net.JoinHostPort(vip, strconv.Itoa(int(port)))
	g.Expect(reached(addr, 4)).To(Equal(map[string]int{e.nodes[0].Name: 2, e.nodes[1].Name: 2}))

	// Method change: the group's metric follows.
	e.update("web", func(s *corev1.Service) { s.Annotations[lbspec.AnnotationMethod] = "hash" })
	g.Eventually(func() map[string]int {
		hits := reached(addr, 4)
		return map[string]int{"distinct": len(hits)}
	}).Should(Equal(map[string]int{"distinct": 1}), "hash: one client, one node")

	// Port change: the old virtual server goes, a new one comes.
	_, port2 := e.vip()
	e.update("web", func(s *corev1.Service) { s.Spec.Ports[0].Port = port2 })
	g.Eventually(func() []string { return e.sim.A.Snapshot(alteonsim.Running).VirtualServers() }).
		Should(Equal([]string{fmt.Sprintf("elb_%s_tcp_%d", vip, port2)}))

	// Deletion removes everything and then the finalizer.
	g.Expect(e.c.Delete(e.ctx, e.get("web"))).To(Succeed())
	g.Eventually(func() error {
		return e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: "web"}, &corev1.Service{})
	}).
		Should(MatchError(ContainSubstring("not found")))
	run := e.sim.A.Snapshot(alteonsim.Running)
	g.Expect(run.VirtualServers()).To(BeEmpty())
	g.Expect(run.Groups()).To(BeEmpty())
	g.Expect(run.RealServers()).To(BeEmpty())
	g.Expect(dial(net.JoinHostPort(vip, strconv.Itoa(int(port2))))).To(BeEmpty())
}

// endpoints publishes the Service's ready endpoints as an EndpointSlice, one endpoint per node
// given. (Pods of the local cluster have loopback IPs, which EndpointSlices refuse, so the tests
// use a selector-less Service and write its slice themselves, as any slice manager may.)
func (e *env) endpoints(svc string, nodes ...corev1.Node) {
	e.t.Helper()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: svc + "-test", Labels: map[string]string{
			discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "lbfed-test"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080)}},
	}
	for i, n := range nodes {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{fmt.Sprintf("10.244.0.%d", i+1)}, NodeName: ptr.To(n.Name),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	var cur discoveryv1.EndpointSlice
	err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: s.Name}, &cur)
	if apierrors.IsNotFound(err) {
		e.g.Expect(e.c.Create(e.ctx, s)).To(Succeed())
		return
	}
	e.g.Expect(err).NotTo(HaveOccurred())
	cur.Endpoints = s.Endpoints
	e.g.Expect(e.c.Update(e.ctx, &cur)).To(Succeed())
}

func TestExternalTrafficPolicyLocal(t *testing.T) {
	e := newEnv(t, envOptions{drain: 300 * time.Millisecond})
	g := e.g
	vip, port := e.vip()
	e.endpoints("api", e.nodes[0])
	e.service("api", vip, port, func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.Selector = nil
	})
	g.Eventually(e.ingressIP("api")).WithTimeout(20 * time.Second).Should(Equal(vip))
	nodePort := e.get("api").Spec.Ports[0].NodePort
	rs := func(i int) string { return rsID(vip, port, nodeIP(e.nodes[i]), nodePort) }
	g.Expect(e.members(vip, port, "tcp")()).To(Equal(map[string]int{rs(0): 1}), "only the node with a ready endpoint")
	for _, n := range e.nodes {
		e.kubeProxy(n, nodePort)
	}
	addr := net.JoinHostPort(vip, strconv.Itoa(int(port)))
	g.Expect(reached(addr, 3)).To(Equal(map[string]int{e.nodes[0].Name: 3}))

	// An endpoint on the second node adds it.
	e.endpoints("api", e.nodes[0], e.nodes[1])
	g.Eventually(e.members(vip, port, "tcp")).WithTimeout(20 * time.Second).Should(Equal(map[string]int{rs(0): 1, rs(1): 1}))
	g.Eventually(func() int { return len(reached(addr, 4)) }).Should(Equal(2))

	// The first node's endpoint goes: the node drains (shutdown-connection), then leaves.
	e.endpoints("api", e.nodes[1])
	g.Eventually(e.members(vip, port, "tcp")).WithTimeout(20 * time.Second).Should(HaveKeyWithValue(rs(0), 3))
	g.Expect(reached(addr, 3)).To(Equal(map[string]int{e.nodes[1].Name: 3}), "a draining node gets no new connections")
	g.Eventually(e.members(vip, port, "tcp")).WithTimeout(20 * time.Second).Should(Equal(map[string]int{rs(1): 1}))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{rs(1)}))
}

func TestNodeChanges(t *testing.T) {
	e := newEnv(t, envOptions{})
	g := e.g
	vip, port := e.vip()
	e.service("web", vip, port)
	g.Eventually(e.ingressIP("web")).WithTimeout(20 * time.Second).Should(Equal(vip))
	nodePort := e.get("web").Spec.Ports[0].NodePort
	rs := func(i int) string { return rsID(vip, port, nodeIP(e.nodes[i]), nodePort) }
	g.Eventually(e.members(vip, port, "tcp")).Should(HaveLen(2))

	setNode := func(i int, mutate func(*corev1.Node)) {
		g.Eventually(func() error {
			var n corev1.Node
			if err := e.c.Get(e.ctx, types.NamespacedName{Name: e.nodes[i].Name}, &n); err != nil {
				return err
			}
			mutate(&n)
			return e.c.Update(e.ctx, &n)
		}).Should(Succeed())
	}
	setNode(0, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	t.Cleanup(func() { setNode(0, func(n *corev1.Node) { n.Spec.Unschedulable = false }) })
	g.Eventually(e.members(vip, port, "tcp")).WithTimeout(20*time.Second).Should(Equal(map[string]int{rs(1): 1}), "cordoned node leaves")
	setNode(0, func(n *corev1.Node) { n.Spec.Unschedulable = false })
	g.Eventually(e.members(vip, port, "tcp")).WithTimeout(20 * time.Second).Should(HaveLen(2))

	setNode(1, func(n *corev1.Node) { n.Labels[servicelb.LabelExcludeFromLB] = "true" })
	t.Cleanup(func() { setNode(1, func(n *corev1.Node) { delete(n.Labels, servicelb.LabelExcludeFromLB) }) })
	g.Eventually(e.members(vip, port, "tcp")).WithTimeout(20*time.Second).Should(Equal(map[string]int{rs(0): 1}), "excluded node leaves")
	setNode(1, func(n *corev1.Node) { delete(n.Labels, servicelb.LabelExcludeFromLB) })
	g.Eventually(e.members(vip, port, "tcp")).WithTimeout(20 * time.Second).Should(HaveLen(2))
}

func TestMasterFailoverMidApply(t *testing.T) {
	e := newEnv(t, envOptions{sim: alteonsim.Options{ApplyDuration: 30 * time.Millisecond}})
	g := e.g
	e.sim.A.InjectApply(alteonsim.ApplyFault{During: e.sim.Failover})
	vip, port := e.vip()
	e.service("web", vip, port)
	g.Eventually(e.ingressIP("web")).WithTimeout(20 * time.Second).Should(Equal(vip))
	g.Expect(e.sim.Master()).To(BeIdenticalTo(e.sim.B))
	g.Expect(e.members(vip, port, "tcp")()).To(HaveLen(2), "programmed on the new master")
	g.Expect(e.sim.B.Snapshot(alteonsim.Flash).Members(fmt.Sprintf("elb_%s_tcp_%d", vip, port))).To(HaveLen(2), "and saved there")
	// Traffic is served by the new master.
	nodePort := e.get("web").Spec.Ports[0].NodePort
	for _, n := range e.nodes {
		e.kubeProxy(n, nodePort)
	}
	g.Expect(reached(net.JoinHostPort(vip, strconv.Itoa(int(port))), 2)).To(HaveLen(2))
	g.Expect(e.sim.B.Served()).To(HaveLen(2))
}

func TestBackupOnlyWritesAreRejected(t *testing.T) {
	e := newEnv(t, envOptions{sim: alteonsim.Options{BackupWrites: alteonsim.BackupReject}})
	g := e.g
	// The master turns backup right before the first write reaches it: that write is refused.
	e.sim.A.AddFault(alteonsim.Fault{Method: "PUT", Kind: alteonsim.FaultHook, Times: 1, Hook: e.sim.Failover})
	vip, port := e.vip()
	e.service("web", vip, port)
	g.Eventually(e.ingressIP("web")).WithTimeout(20 * time.Second).Should(Equal(vip))
	var rejected int
	for _, r := range e.sim.A.Requests() {
		if r.Status == 403 {
			rejected++
		}
	}
	g.Expect(rejected).To(BeNumerically(">=", 1), "the backup refused the write")
	g.Expect(e.sim.A.Applies()).To(BeZero())
	g.Expect(e.sim.B.Snapshot(alteonsim.Running).Members(fmt.Sprintf("elb_%s_tcp_%d", vip, port))).To(HaveLen(2))
}

func TestApplyFailureRetriesThenGivesUp(t *testing.T) {
	e := newEnv(t, envOptions{maxRetries: 2})
	g := e.g
	// Two failed applies, then success: retried with backoff.
	e.sim.A.InjectApply(alteonsim.ApplyFault{Fail: "Injected failure 1."}, alteonsim.ApplyFault{Fail: "Injected failure 2."})
	vip, port := e.vip()
	e.service("web", vip, port)
	g.Eventually(e.ingressIP("web")).WithTimeout(20 * time.Second).Should(Equal(vip))
	g.Expect(e.events("web")()).To(ContainElement(And(ContainSubstring("SyncLoadBalancerFailed"), ContainSubstring("Injected failure 1."))))

	// Persistent failure: the controller gives up after MaxRetries with an event.
	var faults []alteonsim.ApplyFault
	for i := 0; i < 20; i++ {
		faults = append(faults, alteonsim.ApplyFault{Fail: "Persistent failure."})
	}
	e.sim.A.InjectApply(faults...)
	vip2, port2 := e.vip()
	e.service("web2", vip2, port2)
	g.Eventually(e.events("web2")).WithTimeout(20 * time.Second).Should(ContainElement(ContainSubstring("SyncLoadBalancerGaveUp")))
	applies := e.sim.A.Applies()
	g.Consistently(func() int64 { return e.sim.A.Applies() }).WithTimeout(time.Second).Should(Equal(applies), "no more retries")
	g.Expect(e.ingressIP("web2")()).To(BeEmpty())

	// A change of the Service starts over.
	e.sim.A.ClearFaults()
	e.update("web2", func(s *corev1.Service) { s.Annotations[lbspec.AnnotationMethod] = "lc" })
	g.Eventually(e.ingressIP("web2")).WithTimeout(20 * time.Second).Should(Equal(vip2))
}

// TestDeviceOutageIsRetriedUntilItEnds reproduces issue 14.6: during an outage of the pair (here no
// unit is master) the controller gave up on a Service after MaxRetries (≈30s with the defaults) until
// the 10-minute resync, so changes made during an HA incident stayed unapplied for minutes. Device
// unavailability is now retried with capped backoff for as long as it lasts.
func TestDeviceOutageIsRetriedUntilItEnds(t *testing.T) {
	e := newEnv(t, envOptions{maxRetries: 2})
	g := e.g
	e.sim.SetRoles(alteonsim.RoleBackup, alteonsim.RoleBackup)
	vip, port := e.vip()
	e.service("web", vip, port)
	// Well past MaxRetries (each reconcile reads the roles at most 3 times: 9 reads in the
	// attempts MaxRetries allows), and no giving up.
	g.Eventually(e.events("web")).WithTimeout(20 * time.Second).Should(ContainElement(ContainSubstring("SyncLoadBalancerFailed")))
	g.Eventually(func() int { return e.sim.A.RequestCounts()["GET ?prop=vrrpInfoHAState"] }).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 30))
	g.Expect(e.events("web")()).NotTo(ContainElement(ContainSubstring("SyncLoadBalancerGaveUp")))
	g.Expect(e.ingressIP("web")()).To(BeEmpty())
	e.sim.SetRoles(alteonsim.RoleMaster, alteonsim.RoleBackup)
	g.Eventually(e.ingressIP("web")).WithTimeout(20 * time.Second).Should(Equal(vip))
	g.Expect(e.members(vip, port, "tcp")()).To(HaveLen(2))
}

// TestForeignEditsAreReported: another writer's unapplied edit on the master is neither applied nor
// discarded; the Service gets a ForeignAlteonEdits event and is programmed once the edit is
// resolved (issue 14.2).
func TestForeignEditsAreReported(t *testing.T) {
	e := newEnv(t, envOptions{})
	g := e.g
	operator, err := alteon.NewClient(alteon.Config{URL: e.sim.A.URL(), User: "admin", Password: "admin"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(operator.Put(e.ctx, alteon.TableRealServer, []string{"webui-edit"}, map[string]any{"IpAddr": "10.9.9.9"})).To(Succeed())
	vip, port := e.vip()
	e.service("web", vip, port)
	g.Eventually(e.events("web")).WithTimeout(20 * time.Second).Should(ContainElement(And(ContainSubstring("ForeignAlteonEdits"), ContainSubstring("webui-edit"))))
	g.Expect(e.sim.A.Snapshot(alteonsim.Pending).RealServers()).To(ContainElement("webui-edit"), "not discarded")
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(BeEmpty(), "nor applied")
	g.Expect(operator.Action(e.ctx, "apply")).To(Succeed(), "the operator applies the edit")
	g.Eventually(e.ingressIP("web")).WithTimeout(20 * time.Second).Should(Equal(vip))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(ContainElement("webui-edit"))
}

func TestBusyDeviceAnswers406(t *testing.T) {
	e := newEnv(t, envOptions{})
	g := e.g
	// Someone else's apply hangs on the master: every write gets 406 until it ends.
	e.sim.A.InjectApply(alteonsim.ApplyFault{Hang: true})
	cl, err := alteon.NewClient(alteon.Config{URL: e.sim.A.URL(), User: "admin", Password: "admin"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cl.Action(e.ctx, "apply")).To(Succeed())
	vip, port := e.vip()
	e.service("web", vip, port)
	g.Eventually(func() int {
		n := 0
		for _, r := range e.sim.A.Requests() {
			if r.Status == 406 {
				n++
			}
		}
		return n
	}).WithTimeout(10 * time.Second).Should(BeNumerically(">", 0))
	g.Expect(e.ingressIP("web")()).To(BeEmpty())
	e.sim.A.ReleaseApply()
	g.Eventually(e.ingressIP("web")).WithTimeout(20 * time.Second).Should(Equal(vip))
	g.Expect(e.members(vip, port, "tcp")()).To(HaveLen(2))
}

func TestConflictsAndInvalidServices(t *testing.T) {
	e := newEnv(t, envOptions{})
	g := e.g
	vip, port := e.vip()
	e.service("first", vip, port)
	g.Eventually(e.ingressIP("first")).WithTimeout(20 * time.Second).Should(Equal(vip))
	e.service("second", vip, port)
	g.Eventually(e.events("second")).WithTimeout(20 * time.Second).Should(ContainElement(And(ContainSubstring("LoadBalancerConflict"), ContainSubstring("first"))))
	g.Expect(e.ingressIP("second")()).To(BeEmpty())
	g.Expect(e.members(vip, port, "tcp")()).To(HaveLen(2), "the first Service keeps its load balancer")

	e.service("bad", "not-an-ip", port)
	g.Eventually(e.events("bad")).WithTimeout(20 * time.Second).Should(ContainElement(ContainSubstring("InvalidLoadBalancer")))

	// Freeing the VIP:port lets the second Service in (its resync or a change retries it).
	g.Expect(e.c.Delete(e.ctx, e.get("first"))).To(Succeed())
	e.update("second", func(s *corev1.Service) { s.Annotations["touch"] = "1" })
	g.Eventually(e.ingressIP("second")).WithTimeout(20 * time.Second).Should(Equal(vip))
}

func TestUnclassedClaimAndRelease(t *testing.T) {
	e := newEnv(t, envOptions{unclassed: true})
	g := e.g
	vip, port := e.vip()
	other := "example.com/other"
	e.service("legacy", vip, port, func(s *corev1.Service) { s.Spec.LoadBalancerClass = nil })
	_, port2 := e.vip()
	e.service("foreign", vip, port2, func(s *corev1.Service) { s.Spec.LoadBalancerClass = &other })
	g.Eventually(e.ingressIP("legacy")).WithTimeout(20 * time.Second).Should(Equal(vip))
	g.Consistently(e.ingressIP("foreign")).WithTimeout(time.Second).Should(BeEmpty(), "another class is not ours")
	g.Expect(e.get("foreign").Finalizers).To(BeEmpty())

	// Removing the annotation releases the Service: device cleaned, status and finalizer cleared.
	e.update("legacy", func(s *corev1.Service) { delete(s.Annotations, lbspec.AnnotationVIP) })
	g.Eventually(func() []string { return e.get("legacy").Finalizers }).WithTimeout(20 * time.Second).Should(BeEmpty())
	g.Expect(e.ingressIP("legacy")()).To(BeEmpty())
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).VirtualServers()).To(BeEmpty())
}
