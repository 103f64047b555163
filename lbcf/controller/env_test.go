package controller_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	// No kubelet, scheduler or controller-manager: tests set pod status themselves, and the
	// ServiceAccount admission plugin (which waits for the controller-manager) is off.
	testenv.Main(m, localup.ClusterOptions{Name: "lbcf", CRDs: crds, APIServerArgs: []string{"--disable-admission-plugins=ServiceAccount"}})
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = lbcfv1beta1.AddToScheme(s)
	return s
}()

// fastOptions shortens LBCF's delays so retries show within seconds.
func fastOptions() controller.Options {
	return controller.Options{
		MinRetryDelay: 200 * time.Millisecond, RetryDelayStep: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second,
		DefaultDriverRetryDelay: 500 * time.Millisecond, HealthzPeriod: 500 * time.Millisecond,
	}
}

// env is one test's world: a namespace, a memdriver behind an HTTP server and a client.
type env struct {
	t   testing.TB
	g   Gomega
	ctx context.Context
	cfg *rest.Config
	c   client.Client
	ns  string
	drv *memdriver.Driver
	url string
}

var nsCounter atomic.Int32

func newEnv(t testing.TB) *env {
	t.Helper()
	b := lbenv.New(t, lbenv.Options{Scheme: scheme, Namespace: fmt.Sprintf("t%d-%d", time.Now().UnixNano()%100000, nsCounter.Add(1)), QPS: 500, Burst: 1000})
	return &env{t: t, g: b.G, ctx: b.Ctx, cfg: b.Cfg, c: b.C, ns: b.NS, drv: b.Drv, url: b.URL}
}

// start runs the standalone controller until the test ends, or until stop is called.
func (e *env) start(opts controller.Options) (stop func()) {
	e.t.Helper()
	return e.startMode(opts, func(ctx context.Context, mgr ctrl.Manager, o controller.Options) error {
		return controller.SetupStandalone(ctx, mgr, o, time.Minute)
	})
}

func (e *env) startMode(opts controller.Options, setup func(context.Context, ctrl.Manager, controller.Options) error) (stop func()) {
	e.t.Helper()
	// As cmd/lbcf-controller caches; every cached object is checked unchanged when the test ends.
	mo := lbenv.ManagerOptions(scheme, testenv.UnchangedCache(e.t, controller.CacheOptions()))
	mo.NewCache, mo.Client = watchdecode.NewCacheWithoutManagedFields, controller.ClientOptions()
	mgr, err := ctrl.NewManager(e.cfg, mo)
	e.g.Expect(err).NotTo(HaveOccurred())
	mgr = testenv.ClassicQueues(e.t, mgr)
	if opts.Invoker == nil {
		opts.Invoker = driver.NewClient(driver.ClientOptions{})
	}
	if opts.Recorder == nil {
		opts.Recorder = mgr.GetEventRecorder("lbcf-test")
	}
	ctx, cancel := context.WithCancel(e.ctx)
	e.g.Expect(setup(ctx, mgr, opts)).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			testenv.WaitStopped(e.t, done)
		})
	}
	e.t.Cleanup(stop)
	return stop
}

func (e *env) driverObj(name string, mutate ...func(*lbcfv1beta1.LoadBalancerDriver)) *lbcfv1beta1.LoadBalancerDriver {
	d := &lbcfv1beta1.LoadBalancerDriver{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec:       lbcfv1beta1.LoadBalancerDriverSpec{DriverType: "Webhook", URL: e.url},
	}
	for _, m := range mutate {
		m(d)
	}
	e.g.Expect(e.c.Create(e.ctx, d)).To(Succeed())
	return d
}

func (e *env) lb(name, drv string, mutate ...func(*lbcfv1beta1.LoadBalancer)) *lbcfv1beta1.LoadBalancer {
	lb := &lbcfv1beta1.LoadBalancer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec:       lbcfv1beta1.LoadBalancerSpec{LBDriver: drv, LBSpec: map[string]string{"name": name}},
	}
	for _, m := range mutate {
		m(lb)
	}
	e.g.Expect(e.c.Create(e.ctx, lb)).To(Succeed())
	return lb
}

// podGroup creates a BackendGroup selecting pods labelled app=<name> on the given ports.
func (e *env) podGroup(name string, lbs []string, ports []int32, mutate ...func(*lbcfv1beta1.BackendGroup)) *lbcfv1beta1.BackendGroup {
	bg := &lbcfv1beta1.BackendGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: lbcfv1beta1.BackendGroupSpec{
			LoadBalancers: lbs,
			Pods:          &lbcfv1beta1.PodBackend{ByLabel: &lbcfv1beta1.SelectPodByLabel{Selector: map[string]string{"app": name}}},
			Parameters:    map[string]string{"weight": "1"},
		},
	}
	for _, p := range ports {
		bg.Spec.Pods.Ports = append(bg.Spec.Pods.Ports, lbcfv1beta1.PortSelector{Port: p, Protocol: "TCP"})
	}
	for _, m := range mutate {
		m(bg)
	}
	e.g.Expect(e.c.Create(e.ctx, bg)).To(Succeed())
	return bg
}

// pod creates a pod labelled app=<app> with the given IP, Running and Ready.
func (e *env) pod(name, app, ip string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}, NodeName: "node-1"},
	}
	e.g.Expect(e.c.Create(e.ctx, p)).To(Succeed())
	e.setPod(p, corev1.PodRunning, true, ip)
	return p
}

// setPod sets a pod's phase, readiness and IP, as a kubelet would.
func (e *env) setPod(p *corev1.Pod, phase corev1.PodPhase, ready bool, ip string) {
	e.t.Helper()
	cur := &corev1.Pod{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(p), cur)).To(Succeed())
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	cur.Status.Phase = phase
	cur.Status.PodIP = ip
	cur.Status.PodIPs = nil
	if ip != "" {
		cur.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	e.g.Expect(e.c.Status().Update(e.ctx, cur)).To(Succeed())
}

// lbID waits for the LoadBalancer to be created and returns its memdriver ID.
func (e *env) lbID(name string) string {
	e.t.Helper()
	var id string
	e.g.Eventually(func(g Gomega) {
		lb := &lbcfv1beta1.LoadBalancer{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, lb)).To(Succeed())
		g.Expect(lb.IsCreated()).To(BeTrue())
		id = lb.Status.LBInfo[memdriver.LBIDKey]
	}).WithTimeout(20 * time.Second).Should(Succeed())
	return id
}

// backends polls the memdriver's registered addresses of a load balancer.
func (e *env) backends(lbID string) func() []string {
	return func() []string { return e.drv.BackendAddrs(lbID) }
}

func (e *env) records(bg string) []lbcfv1beta1.BackendRecord {
	list := &lbcfv1beta1.BackendRecordList{}
	e.g.Expect(e.c.List(e.ctx, list, client.InNamespace(e.ns), client.MatchingLabels{lbcfv1beta1.LabelGroupName: bg})).To(Succeed())
	return list.Items
}

// update writes obj changed by mutate, reading obj again first, and again when a controller's
// write (a status) came in between.
func (e *env) update(obj client.Object, mutate func()) {
	e.t.Helper()
	e.g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate()
		return e.c.Update(e.ctx, obj)
	})).To(Succeed())
}

func (e *env) group(name string) *lbcfv1beta1.BackendGroup {
	bg := &lbcfv1beta1.BackendGroup{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, bg)).To(Succeed())
	return bg
}

func (e *env) events(reason string) func() []string {
	return func() []string {
		list := &corev1.EventList{}
		_ = e.c.List(e.ctx, list, client.InNamespace(e.ns))
		var out []string
		for _, ev := range list.Items {
			if ev.Reason == reason {
				out = append(out, ev.Message)
			}
		}
		return out
	}
}

const wait = 20 * time.Second
