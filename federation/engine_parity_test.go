package federation_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lbfed/lbfed/federation"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
)

// startStoppableController runs the federation controller in-process (group resync one hour, so
// nothing here relies on it) and returns a function that stops it.
func (e *env) startStoppableController() (stop func()) {
	skip := true
	mgr, err := ctrl.NewManager(e.cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: &skip}, Cache: federation.CacheOptions()})
	e.g.Expect(err).NotTo(HaveOccurred())
	opts := federation.Options{Grace: time.Minute, ResyncPeriod: time.Hour, Options: controller.Options{
		Invoker: driver.NewClient(driver.ClientOptions{}), Recorder: mgr.GetEventRecorder("lbfed-test"),
		MinRetryDelay: 200 * time.Millisecond, RetryDelayStep: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second,
	}}
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
	g.Eventually(func() int { return e.drv.CountCalls(driver.GenerateBackendAddr) }, wait).Should(BeNumerically(">=", 2), "both records were tried")
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
