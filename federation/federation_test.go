package federation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/federation"
	"github.com/lbfed/lbfed/lbcf/api/crd"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
	"github.com/lbfed/lbfed/testinfra/lbenv"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
	"github.com/lbfed/lbfed/watchdecode"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(testenv.ControllerLogger())
	crds, err := crd.CRDs()
	if err != nil {
		panic(err)
	}
	standIns, err := testenv.KarmadaStandIns()
	if err != nil {
		panic(err)
	}
	crds = append(crds, standIns...)
	testenv.Main(m, localup.ClusterOptions{Name: "fed", CRDs: crds})
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = lbcfv1beta1.AddToScheme(s)
	_ = federation.AddToScheme(s)
	return s
}()

type env struct {
	t    testing.TB
	g    Gomega
	ctx  context.Context
	cfg  *rest.Config
	c    client.Client
	ns   string
	drv  *memdriver.Driver
	url  string
	bg   *lbcfv1beta1.BackendGroup
	rb   *workv1alpha2.ResourceBinding
	lbID string
	// reg holds the federation's metrics of the running controller.
	reg *prometheus.Registry
	// onManager, when set, sees the controller's manager before it starts (benchmarks trace its
	// cache).
	onManager func(ctrl.Manager)
}

func newEnv(t *testing.T, grace time.Duration) *env { return newEnvTB(t, grace) }

func newEnvTB(t testing.TB, grace time.Duration) *env {
	e := newEnvWithoutController(t)
	e.startController(grace)
	return e
}

// newEnvWithoutController is a namespace, a memdriver and a client, with no controller running.
func newEnvWithoutController(t testing.TB) *env {
	b := lbenv.New(t, lbenv.Options{Scheme: scheme, Namespace: fmt.Sprintf("fed-%d", time.Now().UnixNano()%1000000), QPS: 500, Burst: 1000})
	return &env{t: t, g: b.G, ctx: b.Ctx, cfg: b.Cfg, c: b.C, drv: b.Drv, ns: b.NS, url: b.URL}
}

// startController runs the federation controller in-process until the test ends, or until stop
// is called.
func (e *env) startController(grace time.Duration) (stop func()) {
	t, ctx, cfg := e.t, e.ctx, e.cfg
	// As cmd/lbfed-controller caches.
	mo := lbenv.ManagerOptions(scheme, testenv.UnchangedCache(t, federation.CacheOptions()))
	mo.NewCache, mo.Client = watchdecode.NewCacheWithoutManagedFields, controller.ClientOptions()
	mgr, err := ctrl.NewManager(cfg, mo)
	e.g.Expect(err).NotTo(HaveOccurred())
	mgr = testenv.ClassicQueues(e.t, mgr)
	e.reg = prometheus.NewRegistry()
	opts := federation.Options{Grace: grace, ResyncPeriod: time.Minute, ClusterMetrics: federation.NewMetrics(e.reg), Options: controller.Options{
		Invoker: driver.NewClient(driver.ClientOptions{}), Recorder: mgr.GetEventRecorder("lbfed-test"),
		MinRetryDelay: 200 * time.Millisecond, RetryDelayStep: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second,
	}}
	// Benchmarks: another number of record workers (and so driver call budget) to compare.
	if v := os.Getenv("LBFED_BENCH_RECORD_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		e.g.Expect(err).NotTo(HaveOccurred())
		opts.BackendRecordWorkers = n
	}
	_, err = federation.Setup(ctx, mgr, opts)
	e.g.Expect(err).NotTo(HaveOccurred())
	if e.onManager != nil {
		e.onManager(mgr)
	}
	done := make(chan error, 1)
	mctx, mcancel := context.WithCancel(ctx)
	go func() { done <- mgr.Start(mctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { mcancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// world creates the driver, a LoadBalancer, a BackendGroup template and its binding to the
// given members (all Ready).
func (e *env) world(clusters ...string) {
	e.worldSpec(clusters...)(map[string]string{"vip": "127.0.0.10", "port": "80"})
}

func (e *env) worldSpec(clusters ...string) func(lbSpec map[string]string) {
	return func(lbSpec map[string]string) { e.makeWorld(lbSpec, clusters) }
}

func (e *env) makeWorld(lbSpec map[string]string, clusters []string) {
	g := e.g
	// A coalescing driver answers when the device transaction holding the call committed: give
	// the backend webhooks the longest timeout LBCF allows.
	long := metav1.Duration{Duration: time.Minute}
	g.Expect(e.c.Create(e.ctx, &lbcfv1beta1.LoadBalancerDriver{ObjectMeta: metav1.ObjectMeta{Name: "mem", Namespace: e.ns},
		Spec: lbcfv1beta1.LoadBalancerDriverSpec{DriverType: "Webhook", URL: e.url, Webhooks: []lbcfv1beta1.WebhookConfig{
			{Name: driver.EnsureBackend, Timeout: long}, {Name: driver.DeregisterBackend, Timeout: long}}}})).To(Succeed())
	g.Expect(e.c.Create(e.ctx, &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: "vip", Namespace: e.ns},
		Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: "mem", LBSpec: lbSpec}})).To(Succeed())
	e.bg = &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns}, Spec: lbcfv1beta1.BackendGroupSpec{
		LoadBalancers: []string{"vip"}, Parameters: map[string]string{"weight": "1"},
		Pods: &lbcfv1beta1.PodBackend{Ports: []lbcfv1beta1.PortSelector{{Port: 80, Protocol: "TCP"}}, ByLabel: &lbcfv1beta1.SelectPodByLabel{Selector: map[string]string{"app": "web"}}},
	}}
	g.Expect(e.c.Create(e.ctx, e.bg)).To(Succeed())
	for _, name := range clusters {
		e.cluster(name, true)
	}
	e.rb = &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "web-backendgroup", Namespace: e.ns}, Spec: workv1alpha2.ResourceBindingSpec{
		Resource: workv1alpha2.ObjectReference{APIVersion: lbcfv1beta1.APIVersion, Kind: "BackendGroup", Namespace: e.ns, Name: "web", UID: e.bg.UID},
	}}
	for _, name := range clusters {
		e.rb.Spec.Clusters = append(e.rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: e.ns + "-" + name})
	}
	g.Expect(e.c.Create(e.ctx, e.rb)).To(Succeed())
	g.Eventually(func() bool {
		lb := &lbcfv1beta1.LoadBalancer{}
		_ = e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "vip"}, lb)
		return lb.IsCreated()
	}, 20*time.Second).Should(BeTrue())
	if lbs := e.drv.LoadBalancers(); len(lbs) > 0 {
		e.lbID = lbs[0].ID
	}
}

func (e *env) cluster(name string, ready bool) {
	full := e.ns + "-" + name
	c := &clusterv1alpha1.Cluster{}
	err := e.c.Get(e.ctx, client.ObjectKey{Name: full}, c)
	if err != nil {
		c = &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: full}}
		e.g.Expect(e.c.Create(e.ctx, c)).To(Succeed())
		e.t.Cleanup(func() {
			_ = e.c.Delete(context.Background(), &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: full}})
		})
	}
	status := metav1.ConditionTrue
	if !ready {
		status = metav1.ConditionFalse
	}
	c.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: status, Reason: "Test", LastTransitionTime: metav1.Now()}}
	e.g.Expect(e.c.Status().Update(e.ctx, c)).To(Succeed())
}

type pod struct {
	name, ip string
	ready    bool
}

// report is what the interpreter's InterpretStatus makes of a member's status.
func report(params map[string]string, generation, observed int64, truncated bool, pods ...pod) *runtime.RawExtension {
	return reportFor("", params, generation, observed, truncated, pods...)
}

// reportFor is a report made after the member saw the template's report request req.
func reportFor(req string, params map[string]string, generation, observed int64, truncated bool, pods ...pod) *runtime.RawExtension {
	return reportOf(req, params, generation, observed, truncated, candidates(pods...))
}

// candidates are the member's candidates of pods (port 80).
func candidates(pods ...pod) []lbcfv1beta1.Candidate {
	var cands []lbcfv1beta1.Candidate
	for _, p := range pods {
		cands = append(cands, lbcfv1beta1.Candidate{Kind: lbcfv1beta1.CandidatePod, Name: p.name, UID: lbcfv1beta1.ShortUID(types.UID(p.name + "-uid")),
			IPs: []string{p.ip}, Port: 80, Protocol: corev1.ProtocolTCP, Phase: corev1.PodRunning, Ready: p.ready})
	}
	return cands
}

func reportOf(req string, params map[string]string, generation, observed int64, truncated bool, cands []lbcfv1beta1.Candidate) *runtime.RawExtension {
	enc, _ := lbcfv1beta1.EncodeCandidates(params, cands, 0)
	cond := metav1.ConditionFalse
	if truncated {
		cond = metav1.ConditionTrue
	}
	r := map[string]any{
		"candidates": enc, "backends": len(cands), "observedGeneration": observed, "generation": generation, "resourceTemplateGeneration": 1,
		"conditions": []metav1.Condition{{Type: lbcfv1beta1.BackendGroupCandidatesTruncated, Status: cond, Reason: "Test", LastTransitionTime: metav1.Now()}},
	}
	if req != "" {
		r["reportRequest"] = req
	}
	raw, _ := json.Marshal(r)
	return &runtime.RawExtension{Raw: raw}
}

// setReports writes the binding's aggregated status (nil status: Karmada has none for it).
func (e *env) setReports(items map[string]*runtime.RawExtension) {
	e.t.Helper()
	e.g.Eventually(func() error {
		rb := &workv1alpha2.ResourceBinding{}
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(e.rb), rb); err != nil {
			return err
		}
		rb.Status.AggregatedStatus = nil
		names := make([]string, 0, len(items))
		for n := range items {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			it := workv1alpha2.AggregatedStatusItem{ClusterName: e.ns + "-" + n, Status: items[n], Applied: items[n] != nil, Health: workv1alpha2.ResourceHealthy}
			rb.Status.AggregatedStatus = append(rb.Status.AggregatedStatus, it)
		}
		return e.c.Status().Update(e.ctx, rb)
	}, 10*time.Second).Should(Succeed())
}

func (e *env) setTargets(clusters ...string) {
	rb := &workv1alpha2.ResourceBinding{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(e.rb), rb)).To(Succeed())
	rb.Spec.Clusters = nil
	for _, c := range clusters {
		rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: e.ns + "-" + c})
	}
	e.g.Expect(e.c.Update(e.ctx, rb)).To(Succeed())
}

func (e *env) backends() []string { return e.drv.BackendAddrs(e.lbID) }

func (e *env) params(addr string) map[string]string {
	lb, _ := e.drv.LoadBalancer(e.lbID)
	return lb.Backends[addr]
}

const wait = 20 * time.Second

func TestFederationAcrossMembers(t *testing.T) {
	e := newEnv(t, 2*time.Second)
	g := e.g
	e.world("m1", "m2")
	m1 := []pod{{"a", "10.1.0.1", true}, {"b", "10.1.0.2", true}}
	m2 := []pod{{"c", "10.2.0.1", true}, {"d", "10.2.0.2", false}}
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": report(map[string]string{"weight": "3"}, 1, 1, false, m2...)})

	g.Eventually(e.backends, wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.2:80", "10.2.0.1:80"), "Ready pods of both members, on the one load balancer")
	g.Expect(e.params("10.1.0.1:80")).To(HaveKeyWithValue(lbcfv1beta1.ParamCluster, e.ns+"-m1"))
	g.Expect(e.params("10.2.0.1:80")).To(Equal(map[string]string{lbcfv1beta1.ParamCluster: e.ns + "-m2", "weight": "3"}), "a member's effective parameters reach the driver")
	g.Expect(e.drv.CountCalls(driver.CreateLoadBalancer)).To(Equal(1))
	gen := e.drv.Calls(driver.GenerateBackendAddr)
	g.Expect(gen[0].Request.(*driver.GenerateBackendAddrRequest).PodBackend.Pod.Labels).To(HaveKey(lbcfv1beta1.LabelCluster))
	g.Eventually(func(g Gomega) {
		bg := &lbcfv1beta1.BackendGroup{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(e.bg), bg)).To(Succeed())
		g.Expect(bg.Status.Backends).To(Equal(int32(3)))
		g.Expect(bg.Status.RegisteredBackends).To(Equal(int32(3)))
	}, wait).Should(Succeed())
	recs := &lbcfv1beta1.BackendRecordList{}
	g.Expect(e.c.List(e.ctx, recs, client.InNamespace(e.ns), client.MatchingLabels{lbcfv1beta1.LabelCluster: e.ns + "-m2"})).To(Succeed())
	g.Expect(recs.Items).To(HaveLen(1))
	// The record gauges, from the record informer's events.
	g.Eventually(func() []float64 {
		return []float64{e.gauge("lbfed_cluster_registered_backends", map[string]string{"cluster": e.ns + "-m1"}),
			e.gauge("lbfed_cluster_registered_backends", map[string]string{"cluster": e.ns + "-m2"}),
			e.gauge("lbfed_cluster_unregistered_backends", map[string]string{"cluster": e.ns + "-m1"})}
	}, wait).Should(Equal([]float64{2, 1, 0}))

	// Scaling one member adds and removes exactly its backends.
	deregs := e.drv.CountCalls(driver.DeregisterBackend)
	m1 = []pod{{"a", "10.1.0.1", true}, {"e", "10.1.0.3", true}}
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": report(map[string]string{"weight": "3"}, 1, 1, false, m2...)})
	g.Eventually(e.backends, wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.3:80", "10.2.0.1:80"))
	g.Expect(e.drv.CountCalls(driver.DeregisterBackend) - deregs).To(Equal(1))

	// A member pod turning NotReady is deregistered.
	m2 = []pod{{"c", "10.2.0.1", false}, {"d", "10.2.0.2", false}}
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": report(nil, 1, 1, false, m2...)})
	g.Eventually(e.backends, wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.3:80"))
	m2 = []pod{{"c", "10.2.0.1", true}, {"d", "10.2.0.2", true}}
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": report(nil, 1, 1, false, m2...)})
	g.Eventually(e.backends, wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.3:80", "10.2.0.1:80", "10.2.0.2:80"))
	g.Eventually(func() float64 {
		return e.gauge("lbfed_cluster_registered_backends", map[string]string{"cluster": e.ns + "-m2"})
	}, wait).Should(Equal(2.0), "registrations and deregistrations are counted")

	// Karmada delivers no status for m2 (applied=false, as after a recovery): its backends stay.
	// m1 scales in the same binding update, so the controller is seen acting on it.
	m1f := append(append([]pod(nil), m1...), pod{"f", "10.1.0.6", true})
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1f...), "m2": nil})
	g.Eventually(e.backends, wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.3:80", "10.1.0.6:80", "10.2.0.1:80", "10.2.0.2:80"))
	g.Eventually(e.memberState("m2"), wait).Should(Equal(lbcfv1beta1.MemberStale))
	g.Consistently(e.backends, time.Second).Should(HaveLen(5))
	// A stale report (the member has not observed its latest generation) is not acted on.
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": report(nil, 2, 1, false)})
	g.Eventually(e.backends, wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.3:80", "10.2.0.1:80", "10.2.0.2:80"))
	g.Consistently(e.backends, time.Second).Should(HaveLen(4))
	// A truncated report never deregisters what it does not list; the template names the member.
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, true, m1[:1]...), "m2": report(nil, 1, 1, false, m2...)})
	g.Eventually(func(g Gomega) string {
		c := e.condition(g, lbcfv1beta1.BackendGroupCandidatesTruncated)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		return c.Message
	}, wait).Should(ContainSubstring(e.ns + "-m1"))
	g.Expect(e.backends()).To(HaveLen(4))

	// m2 NotReady: kept for the grace period, then withdrawn while m1 serves.
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": report(nil, 1, 1, false, m2...)})
	e.cluster("m2", false)
	g.Eventually(e.memberState("m2"), wait).Should(Equal(lbcfv1beta1.MemberUnobserved))
	g.Expect(e.backends()).To(HaveLen(4), "within the grace period")
	g.Eventually(e.backends, wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.3:80"))
	g.Eventually(e.memberState("m2"), wait).Should(Equal(lbcfv1beta1.MemberWithdrawn))
	// Back: only a report made after its return restores it.
	e.cluster("m2", true)
	var req string
	g.Eventually(func(g Gomega) {
		m := e.member(g, "m2")
		g.Expect(m.State).To(Equal(lbcfv1beta1.MemberRecovering))
		g.Expect(m.Request).NotTo(BeEmpty())
		g.Expect(e.template(g).Annotations).To(HaveKeyWithValue(lbcfv1beta1.AnnotationReportRequest, m.Request))
		req = m.Request
	}, wait).Should(Succeed())
	g.Expect(e.backends()).To(HaveLen(2), "the report remembered from before the outage restores nothing")
	e.setReports(map[string]*runtime.RawExtension{"m1": report(nil, 1, 1, false, m1...), "m2": reportFor(req, nil, 1, 1, false, m2...)})
	g.Eventually(e.backends, wait).Should(HaveLen(4))
	g.Eventually(e.memberState("m2"), wait).Should(Equal(lbcfv1beta1.MemberContributing))

	// m2 leaves the binding: its backends go.
	e.setTargets("m1")
	g.Eventually(e.backends, wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.3:80"))

	// Deleting the group deregisters everything; deleting the load balancer removes it, once.
	g.Expect(e.c.Delete(e.ctx, e.bg)).To(Succeed())
	g.Eventually(e.backends, wait).Should(BeEmpty())
	g.Expect(e.c.Delete(e.ctx, &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: "vip", Namespace: e.ns}})).To(Succeed())
	g.Eventually(func() int { return len(e.drv.LoadBalancers()) }, wait).Should(BeZero())
	g.Expect(e.drv.CountCalls(driver.DeleteLoadBalancer)).To(Equal(1))
}

// template returns the BackendGroup template as stored.
func (e *env) template(g Gomega) *lbcfv1beta1.BackendGroup {
	bg := &lbcfv1beta1.BackendGroup{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(e.bg), bg)).To(Succeed())
	return bg
}

// member returns the federation's status of a member on the template (zero when absent).
func (e *env) member(g Gomega, name string) lbcfv1beta1.MemberStatus {
	for _, m := range e.template(g).Status.Members {
		if m.Name == e.ns+"-"+name {
			return m
		}
	}
	return lbcfv1beta1.MemberStatus{}
}

// memberState polls a member's state.
func (e *env) memberState(name string) func(g Gomega) lbcfv1beta1.MemberState {
	return func(g Gomega) lbcfv1beta1.MemberState { return e.member(g, name).State }
}

// condition returns the template's condition of type typ (zero when absent).
func (e *env) condition(g Gomega, typ string) metav1.Condition {
	for _, c := range e.template(g).Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// gauge returns the value of a federation metric with the given labels (0 when absent).
func (e *env) gauge(name string, labels map[string]string) float64 {
	mfs, err := e.reg.Gather()
	e.g.Expect(err).NotTo(HaveOccurred())
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
