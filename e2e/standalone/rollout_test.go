//go:build e2e

// Package standalone_test is the end-to-end test of lbfed as a plain single-cluster LBCF in front
// of the simulated Alteon: a real cluster (kube-apiserver, controller-manager, scheduler, kwok
// with the kubelet model of testinfra/localup, pods answering on their IPs), lbcf-controller's
// standalone engine with its readiness-gate webhook, and the Radware driver over a simulated HA
// pair whose data plane forwards a VIP. Run with `make test-e2e`.
package standalone_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/lbfed/lbfed/elb/radware"
	"github.com/lbfed/lbfed/elb/radware/alteon"
	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/elb/radware/alteonsim/simpair"
	lbcfadmission "github.com/lbfed/lbfed/lbcf/admission"
	"github.com/lbfed/lbfed/lbcf/api/crd"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/servingcert"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
	"github.com/lbfed/lbfed/testinfra/traffic"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(testenv.ControllerLogger())
	crds, err := crd.CRDs()
	if err != nil {
		panic(err)
	}
	testenv.Main(m, localup.ClusterOptions{Name: "standalone", CRDs: crds, ControllerManager: true, FakeNodes: 2, PodResponder: true})
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = lbcfv1beta1.AddToScheme(s)
	return s
}()

// frontEnd is the Radware driver over a simulated pair with its data plane on.
func frontEnd(t *testing.T) (string, *alteonsim.Pair) {
	o := alteonsim.Options{DataPlane: true}
	sim, pair := simpair.Start(t, o, o, 5*time.Millisecond, alteon.PairOptions{PollInterval: 200 * time.Millisecond})
	fe, err := radware.NewFrontend(radware.FrontendOptions{Pair: pair, DrainPeriod: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	drv, err := radware.NewDriver(radware.DriverOptions{Frontend: fe, RetryDelaySeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(driver.NewHandler(drv, driver.HandlerOptions{}))
	t.Cleanup(srv.Close)
	return srv.URL, sim
}

// startLBCF runs the standalone engine and the readiness-gate webhook until the test ends.
func startLBCF(t *testing.T, g Gomega, ctx context.Context) {
	cfg := testenv.Config(t)
	certDir := t.TempDir()
	ca, err := servingcert.Ensure(certDir, []string{"127.0.0.1"}, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	port := testenv.FreePort(t)
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller:    config.Controller{SkipNameValidation: &skip},
		Cache:         testenv.UnchangedCache(t, controller.CacheOptions()),
		Client:        controller.ClientOptions(),
		WebhookServer: webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir}),
	})
	g.Expect(err).NotTo(HaveOccurred())
	mgr = testenv.ClassicQueues(t, mgr)
	opts := controller.Options{Invoker: driver.NewClient(driver.ClientOptions{}), Recorder: mgr.GetEventRecorder("lbcf-e2e")}
	g.Expect(controller.SetupStandalone(ctx, mgr, opts, time.Minute)).To(Succeed())
	(&lbcfadmission.ReadinessGateWebhooks{Client: mgr.GetClient(), Decoder: admission.NewDecoder(scheme)}).Register(mgr.GetWebhookServer())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	cc := lbcfadmission.URLClientConfig("https://127.0.0.1:"+strconv.Itoa(port), ca)
	g.Expect(lbcfadmission.ApplyReadinessGate(ctx, c, "lbcf-e2e-readiness-gate", cc, false)).To(Succeed())
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// watchPods records every change of the pods' IP, readiness, gate and deletion, with times.
func watchPods(ctx context.Context, c client.Client, ns string) func() []string {
	var mu sync.Mutex
	var lines []string
	last := map[string]string{}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		for ctx.Err() == nil {
			list := &corev1.PodList{}
			if err := c.List(ctx, list, client.InNamespace(ns)); err == nil {
				mu.Lock()
				for _, p := range list.Items {
					st := p.Status.PodIP
					for _, cd := range p.Status.Conditions {
						st += fmt.Sprintf(" %s=%s", cd.Type, cd.Status)
					}
					if p.DeletionTimestamp != nil {
						st += " deleting"
					}
					if last[p.Name] != st {
						last[p.Name] = st
						lines = append(lines, time.Now().Format("15:04:05.000")+" "+p.Name+" "+st)
					}
				}
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() []string {
		cancel()
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lines...)
	}
}

// (d) A standalone LBCF rollout with the readiness gate and a preStop sleep drops nothing.
func TestStandaloneRolloutDropsNothing(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drvURL, sim := frontEnd(t)
	startLBCF(t, g, ctx)
	c, err := client.New(testenv.Config(t), client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	ns := "rollout"
	vip := fmt.Sprintf("127.5.%d.%d", rand.IntN(250), rand.IntN(250)+1)
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{lbcfv1beta1.LabelReadinessGateInject: "enabled"}}})).To(Succeed())
	long := metav1.Duration{Duration: time.Minute}
	g.Expect(c.Create(ctx, &lbcfv1beta1.LoadBalancerDriver{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "radware"},
		Spec: lbcfv1beta1.LoadBalancerDriverSpec{DriverType: "Webhook", URL: drvURL, Webhooks: []lbcfv1beta1.WebhookConfig{
			{Name: driver.EnsureBackend, Timeout: long}, {Name: driver.DeregisterBackend, Timeout: long}, {Name: driver.CreateLoadBalancer, Timeout: long}}}})).To(Succeed())
	g.Expect(c.Create(ctx, &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vip"},
		Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: "radware", LBSpec: map[string]string{"vip": vip, "port": "80", "protocol": "TCP", "method": "rr"}}})).To(Succeed())
	g.Expect(c.Create(ctx, &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: lbcfv1beta1.BackendGroupSpec{
		LoadBalancers: []string{"vip"}, Parameters: map[string]string{"weight": "1"},
		Pods: &lbcfv1beta1.PodBackend{Ports: []lbcfv1beta1.PortSelector{{Port: 8080, Protocol: "TCP"}},
			ByLabel: &lbcfv1beta1.SelectPodByLabel{Selector: map[string]string{"app": "web"}}}}})).To(Succeed())
	replicas, grace, zero, one := int32(4), int64(30), intstr.FromInt32(0), intstr.FromInt32(1)
	g.Expect(c.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 10}}}}}}}}})).To(Succeed())

	settled := func(g Gomega) {
		dep := &appsv1.Deployment{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, dep)).To(Succeed())
		g.Expect(dep.Status.ObservedGeneration).To(Equal(dep.Generation))
		g.Expect(dep.Status.UpdatedReplicas).To(BeEquivalentTo(4))
		g.Expect(dep.Status.AvailableReplicas).To(BeEquivalentTo(4))
		pods := &corev1.PodList{}
		g.Expect(c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(4), "no pod left terminating")
		for _, p := range pods.Items {
			g.Expect(p.Spec.ReadinessGates).To(ContainElement(corev1.PodReadinessGate{ConditionType: lbcfv1beta1.PodConditionBackendRegistered}))
		}
	}
	g.Eventually(settled, 3*time.Minute, time.Second).Should(Succeed())
	url := "http://" + vip + ":80/"
	g.Eventually(func() error { _, err := traffic.Get(ctx, traffic.Client(), url); return err }, time.Minute, 200*time.Millisecond).Should(Succeed())

	timeline := watchPods(ctx, c, ns)
	l := traffic.Start(url, traffic.Interval, 10*time.Minute)
	time.Sleep(2 * time.Second)
	start := time.Now()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, start.Format(time.RFC3339Nano))
	g.Expect(c.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	time.Sleep(time.Second)
	g.Eventually(settled, 5*time.Minute, time.Second).Should(Succeed())
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	res := l.Stop()
	sent, failed, first := res.Sent, res.Failed, res.Failures
	t.Logf("FIGURE (d) standalone gated rollout: %d requests, %d failed (first %q), rollout %s", sent, failed, first, took.Round(100*time.Millisecond))
	if failed > 0 {
		t.Logf("dropped by real server: %v", sim.Master().Dropped())
		for _, line := range timeline() {
			t.Log(line)
		}
	}
	g.Expect(sent).To(BeNumerically(">", 100), "the load ran")
	g.Expect(failed).To(BeZero())
}
