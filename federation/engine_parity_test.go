package federation_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lbfed/lbfed/federation"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
	"github.com/lbfed/lbfed/watchdecode"
)

// startStoppableController runs the federation controller in-process (group resync one hour, so
// nothing here relies on it) and returns a function that stops it.
func (e *env) startStoppableController(mutate ...func(*controller.Options)) (stop func()) {
	skip := true
	mgr, err := ctrl.NewManager(e.cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: &skip}, Cache: testenv.UnchangedCache(e.t, federation.CacheOptions()), NewCache: watchdecode.NewCacheWithoutManagedFields, Client: controller.ClientOptions()})
	e.g.Expect(err).NotTo(HaveOccurred())
	mgr = testenv.ClassicQueues(e.t, mgr)
	opts := federation.Options{Grace: time.Minute, ResyncPeriod: time.Hour, Options: controller.Options{
		Invoker: driver.NewClient(driver.ClientOptions{}), Recorder: mgr.GetEventRecorder("lbfed-test"),
		MinRetryDelay: 200 * time.Millisecond, RetryDelayStep: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second,
	}}
	for _, m := range mutate {
		m(&opts.Options)
	}
	_, err = federation.Setup(e.ctx, mgr, opts)
	e.g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(e.ctx)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	e.t.Cleanup(stop)
	return stop
}

func (e *env) groupRecords() []lbcfv1beta1.BackendRecord {
	list := &lbcfv1beta1.BackendRecordList{}
	e.g.Expect(e.c.List(e.ctx, list, client.InNamespace(e.ns), client.MatchingLabels{lbcfv1beta1.LabelGroupName: "web"})).To(Succeed())
	return list.Items
}

// The federation restarts while Karmada has no report of one member: that member's records are
// kept (nothing says their pods went), and those without an address yet are registered once the
// report is back — they used to stay unregistered for good.
func TestRecordWithoutAddressIsRegisteredWhenReportReturns(t *testing.T) {
	e := newEnvWithoutController(t)
	g := e.g
	stop := e.startStoppableController()
	e.drv.Inject(driver.GenerateBackendAddr, memdriver.Fault{Fail: 1000, RetryDelay: 1, Msg: "no address yet"})
	e.world("a", "b")
	reports := func(a bool) map[string]*runtime.RawExtension {
		out := map[string]*runtime.RawExtension{"a": nil, "b": report(nil, 1, 1, false, pod{"b-0", "10.0.1.1", true})}
		if a {
			out["a"] = report(nil, 1, 1, false, pod{"a-0", "10.0.0.1", true})
		}
		return out
	}
	e.setReports(reports(true))
	// The addresses are asked for before the records are created as well: wait for the records
	// themselves, and for each to have been tried once it exists.
	g.Eventually(func() int { return len(e.groupRecords()) }, wait).Should(Equal(2), "both records were created")
	calls := e.drv.CountCalls(driver.GenerateBackendAddr)
	g.Eventually(func() int { return e.drv.CountCalls(driver.GenerateBackendAddr) }, wait).Should(BeNumerically(">=", calls+2), "the records were tried")
	stop()
	g.Expect(e.groupRecords()).To(HaveLen(2))
	for _, br := range e.groupRecords() {
		g.Expect(br.Status.BackendAddr).To(BeEmpty())
	}

	e.drv.ClearFaults()
	e.setReports(reports(false)) // a's status is lost across the restart
	e.startStoppableController()
	g.Eventually(e.backends, wait).Should(ConsistOf("10.0.1.1:80"), "the restarted controller works")
	g.Consistently(func() int { return len(e.groupRecords()) }, 2*time.Second).Should(Equal(2), "a's record is kept while its report is missing")

	e.setReports(reports(true))
	g.Eventually(e.backends, wait).Should(ConsistOf("10.0.0.1:80", "10.0.1.1:80"))
}

// Two members with overlapping pod CIDRs report pods with the same IP: when one goes, the
// address stays on the device for the other; the last one deregisters it.
func TestSharedAddressAcrossMembersStaysForTheLastHolder(t *testing.T) {
	e := newEnv(t, time.Minute)
	g := e.g
	e.world("a", "b")
	e.setReports(map[string]*runtime.RawExtension{
		"a": report(nil, 1, 1, false, pod{"a-0", "10.0.0.1", true}),
		"b": report(nil, 1, 1, false, pod{"b-0", "10.0.0.1", true}, pod{"b-1", "10.0.0.2", true}),
	})
	g.Eventually(func(g Gomega) {
		bg := &lbcfv1beta1.BackendGroup{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(e.bg), bg)).To(Succeed())
		g.Expect(bg.Status.RegisteredBackends).To(Equal(int32(3)))
	}, wait).Should(Succeed())
	g.Expect(e.backends()).To(ConsistOf("10.0.0.1:80", "10.0.0.2:80"))

	e.setReports(map[string]*runtime.RawExtension{
		"a": report(nil, 1, 1, false),
		"b": report(nil, 1, 1, false, pod{"b-0", "10.0.0.1", true}, pod{"b-1", "10.0.0.2", true}),
	})
	g.Eventually(func() int { return len(e.groupRecords()) }, wait).Should(Equal(2), "a-0's record is gone")
	g.Expect(e.backends()).To(ConsistOf("10.0.0.1:80", "10.0.0.2:80"), "b-0's record still holds 10.0.0.1:80")

	e.setReports(map[string]*runtime.RawExtension{
		"a": report(nil, 1, 1, false),
		"b": report(nil, 1, 1, false, pod{"b-1", "10.0.0.2", true}),
	})
	g.Eventually(e.backends, wait).Should(ConsistOf("10.0.0.2:80"), "the last holder deregisters")
}

// karmadaProxy serves Karmada's cluster proxy for one member, forwarding to the test's API
// server as that member's; other members are not found, as a member Karmada cannot reach.
func karmadaProxy(t *testing.T, cfg *rest.Config, member string) *httptest.Server {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = rt
	prefix := "/apis/cluster.karmada.io/v1alpha1/clusters/" + member + "/proxy"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, prefix+"/") {
			http.Error(w, `{"kind":"Status","code":503,"message":"cluster unreachable"}`, http.StatusServiceUnavailable)
			return
		}
		r.URL.Path = strings.TrimPrefix(r.URL.Path, prefix)
		r.Host = target.Host
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Drivers get the member's own pod (labels, annotations, container statuses, full UID), read
// through Karmada's cluster proxy; when the member cannot be reached, the synthetic pod, which
// says so.
func TestDriversGetTheMemberPod(t *testing.T) {
	e := newEnvWithoutController(t)
	g := e.g
	proxy := karmadaProxy(t, e.cfg, e.ns+"-a")
	pods, err := federation.NewClusterProxyPods(&rest.Config{Host: proxy.URL}, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	e.startStoppableController(func(o *controller.Options) { o.MemberPods = pods })

	// Member a's pod, in the API server the proxy serves as member a (no controller-manager
	// makes the default ServiceAccount here).
	g.Expect(e.c.Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: e.ns}})).To(Succeed())
	real := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-0", Namespace: e.ns, Labels: map[string]string{"app": "web", "team": "blue", memdriver.KeepLabel: "true"},
		Annotations: map[string]string{"note": "from member a"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}, NodeName: "node-a"}}
	g.Expect(e.c.Create(e.ctx, real)).To(Succeed())
	real.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true, Image: "none"}}}
	g.Expect(e.c.Status().Update(e.ctx, real)).To(Succeed())

	e.world("a", "b")
	// The driver judges not-Ready pods: it keeps those labelled KeepLabel=true.
	bg := &lbcfv1beta1.BackendGroup{}
	policy := lbcfv1beta1.DeregisterWebhook
	// The federation annotates the template meanwhile (the members' budget): retry on conflict.
	g.Eventually(func() error {
		if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(e.bg), bg); err != nil {
			return err
		}
		bg.Spec.DeregisterPolicy = &policy
		bg.Spec.DeregisterWebhook = &lbcfv1beta1.DeregisterWebhookSpec{DriverName: "mem"}
		return e.c.Update(e.ctx, bg)
	}, wait).Should(Succeed())
	withUID := func(name, ip string, uid types.UID, ready bool) *runtime.RawExtension {
		enc, _ := lbcfv1beta1.EncodeCandidates(nil, []lbcfv1beta1.Candidate{{Kind: lbcfv1beta1.CandidatePod, Name: name, UID: lbcfv1beta1.ShortUID(uid),
			IPs: []string{ip}, Port: 80, Protocol: corev1.ProtocolTCP, Phase: corev1.PodRunning, Ready: ready}}, 0)
		raw, _ := json.Marshal(map[string]any{"candidates": enc, "backends": 1, "observedGeneration": bg.Generation, "generation": bg.Generation, "resourceTemplateGeneration": bg.Generation})
		return &runtime.RawExtension{Raw: raw}
	}
	e.setReports(map[string]*runtime.RawExtension{"a": withUID("a-0", "10.0.0.1", real.UID, true), "b": withUID("b-0", "10.0.1.1", "b-0-uid", true)})
	g.Eventually(e.backends, wait).Should(ConsistOf("10.0.0.1:80", "10.0.1.1:80"))

	sent := map[string]corev1.Pod{}
	for _, c := range e.drv.Calls(driver.GenerateBackendAddr) {
		p := c.Request.(*driver.GenerateBackendAddrRequest).PodBackend.Pod
		sent[p.Name] = p
	}
	g.Expect(sent).To(HaveKey("a-0"))
	g.Expect(sent).To(HaveKey("b-0"))
	a := sent["a-0"]
	g.Expect(a.UID).To(Equal(real.UID), "the full UID")
	g.Expect(a.Labels).To(And(HaveKeyWithValue("team", "blue"), HaveKeyWithValue(lbcfv1beta1.LabelCluster, e.ns+"-a")))
	g.Expect(a.Annotations).To(And(HaveKeyWithValue("note", "from member a"), HaveKeyWithValue(controller.AnnotationPodSource, controller.PodSourceMember)))
	g.Expect(a.Status.ContainerStatuses).To(HaveLen(1))
	b := sent["b-0"]
	g.Expect(b.Annotations).To(HaveKeyWithValue(controller.AnnotationPodSource, controller.PodSourceSynthetic))
	g.Expect(b.Annotations).To(HaveKeyWithValue(controller.AnnotationPodSourceReason, ContainSubstring("unreachable")))
	g.Expect(b.Labels).To(HaveKeyWithValue(lbcfv1beta1.LabelCluster, e.ns+"-b"))
	g.Expect(b.Status.PodIP).To(Equal("10.0.1.1"), "the synthetic pod still carries what the report knows")

	// Both pods turn not Ready: judgePodDeregister sees a-0's labels (and echoes its full UID),
	// so a-0 stays registered; b-0's synthetic pod has none, so it goes.
	e.setReports(map[string]*runtime.RawExtension{"a": withUID("a-0", "10.0.0.1", real.UID, false), "b": withUID("b-0", "10.0.1.1", "b-0-uid", false)})
	g.Eventually(e.backends, wait).Should(ConsistOf("10.0.0.1:80"))
	judged := e.drv.Calls(driver.JudgePodDeregister)
	g.Expect(judged).NotTo(BeEmpty())
	var names []string
	for _, p := range judged[len(judged)-1].Request.(*driver.JudgePodDeregisterRequest).NotReadyPods {
		names = append(names, p.Name+"="+p.Annotations[controller.AnnotationPodSource])
	}
	g.Expect(names).To(ConsistOf("a-0="+controller.PodSourceMember, "b-0="+controller.PodSourceSynthetic))
}
