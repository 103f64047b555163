package controller_test

import (
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
)

// secondDriver serves another memdriver and creates its LoadBalancerDriver object.
func (e *env) secondDriver(name string, mutate ...func(*lbcfv1beta1.LoadBalancerDriver)) *memdriver.Driver {
	e.t.Helper()
	d := memdriver.New()
	srv := httptest.NewServer(d.Handler(driver.HandlerOptions{}))
	// Hanging calls end with the test, not with their one-minute timeout.
	e.t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	e.driverObj(name, append([]func(*lbcfv1beta1.LoadBalancerDriver){func(o *lbcfv1beta1.LoadBalancerDriver) { o.Spec.URL = srv.URL }}, mutate...)...)
	return d
}

// A driver whose calls hang takes at most its own share of the record workers: the records of
// a healthy driver beside it are registered while the hanging calls are still open.
func TestHangingDriverDoesNotStarveOthers(t *testing.T) {
	cases := []struct {
		name      string
		unhealthy bool // the hanging driver's healthz says so before its records come
		peak      int  // most calls the hanging driver may see at once
	}{
		{"hanging driver", false, 6},          // three quarters of 8 workers
		{"unhealthy hanging driver", true, 2}, // the degraded budget
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			g := e.g
			opts := fastOptions()
			opts.BackendRecordWorkers = 8
			e.start(opts)
			long := metav1.Duration{Duration: time.Minute} // the longest LBCF allows
			hang := e.secondDriver("hang", func(d *lbcfv1beta1.LoadBalancerDriver) {
				d.Spec.Webhooks = []lbcfv1beta1.WebhookConfig{{Name: driver.GenerateBackendAddr, Timeout: long}}
				if tc.unhealthy {
					d.Spec.Webhooks = append(d.Spec.Webhooks, lbcfv1beta1.WebhookConfig{Name: driver.Healthz, Timeout: metav1.Duration{Duration: time.Second}})
				}
			})
			hang.Inject(driver.GenerateBackendAddr, memdriver.Fault{Latency: time.Hour})
			if tc.unhealthy {
				hang.SetHealthy(false)
				g.Eventually(func() lbcfv1beta1.ConditionStatus {
					d := &lbcfv1beta1.LoadBalancerDriver{}
					_ = e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "hang"}, d)
					if c := d.Status.DriverCondition(lbcfv1beta1.DriverHealthy); c != nil {
						return c.Status
					}
					return ""
				}, wait).Should(Equal(lbcfv1beta1.ConditionFalse))
			}
			e.driverObj("mem")
			e.lb("lbh", "hang")
			e.lb("lb1", "mem")
			e.lbID("lbh")
			id := e.lbID("lb1")
			for i := 0; i < 12; i++ {
				e.pod("slow-"+itoa(int32(i)), "slow", "10.5.0."+itoa(int32(i+1)))
			}
			e.podGroup("slow", []string{"lbh"}, []int32{80})
			g.Eventually(func() int { n, _ := hang.InFlight(driver.GenerateBackendAddr); return n }, wait).Should(BeNumerically(">=", tc.peak),
				"the hanging driver holds its calls")

			for i := 0; i < 3; i++ {
				e.pod("web-"+itoa(int32(i)), "web", "10.6.0."+itoa(int32(i+1)))
			}
			e.podGroup("web", []string{"lb1"}, []int32{80})
			g.Eventually(e.backends(id), wait).Should(ConsistOf("10.6.0.1:80", "10.6.0.2:80", "10.6.0.3:80"))
			now, peak := hang.InFlight(driver.GenerateBackendAddr)
			g.Expect(now).To(BeNumerically(">", 0), "the hanging calls are still open: the healthy driver did not wait for them")
			g.Expect(peak).To(BeNumerically("<=", tc.peak), "the hanging driver had no more than its budget")
		})
	}
}

// The same for load balancers: a driver whose createLoadBalancer hangs holds at most half of the
// LoadBalancer workers; another driver's load balancer is created meanwhile.
func TestHangingDriverDoesNotStallOtherLoadBalancers(t *testing.T) {
	e := newEnv(t)
	g := e.g
	e.start(fastOptions()) // 8 LoadBalancer workers
	hang := e.secondDriver("hang", func(d *lbcfv1beta1.LoadBalancerDriver) {
		d.Spec.Webhooks = []lbcfv1beta1.WebhookConfig{{Name: driver.CreateLoadBalancer, Timeout: metav1.Duration{Duration: time.Minute}}}
	})
	hang.Inject(driver.CreateLoadBalancer, memdriver.Fault{Latency: time.Hour})
	e.driverObj("mem")
	for i := 0; i < 10; i++ {
		e.lb("hang-"+itoa(int32(i)), "hang")
	}
	g.Eventually(func() int { n, _ := hang.InFlight(driver.CreateLoadBalancer); return n }, wait).Should(BeNumerically(">=", 4))
	e.lb("lb1", "mem")
	e.lbID("lb1")
	now, peak := hang.InFlight(driver.CreateLoadBalancer)
	g.Expect(now).To(BeNumerically(">", 0), "the hanging calls are still open")
	g.Expect(peak).To(BeNumerically("<=", 4), "half of the 8 workers")
}

// Records created while a driver's budget is full of the records' calls still get their address
// before they are created (two writes a backend, not three): a share of the budget is kept for
// the group's generateBackendAddr calls, and the driver still sees no more calls than its budget.
func TestRecordsCreatedWhileDriverBusyKeepTheirAddress(t *testing.T) {
	e := newEnv(t)
	g := e.g
	opts := fastOptions()
	opts.BackendRecordWorkers = 48
	opts.DriverCallBudget = 32 // of which 2 are kept for address calls
	e.start(opts)
	long := metav1.Duration{Duration: time.Minute}
	busy := e.secondDriver("busy", func(d *lbcfv1beta1.LoadBalancerDriver) {
		d.Spec.Webhooks = []lbcfv1beta1.WebhookConfig{{Name: driver.EnsureBackend, Timeout: long}}
	})
	busy.Inject(driver.EnsureBackend, memdriver.Fault{Latency: time.Hour}) // a device commit that takes its time
	e.lb("lbb", "busy")
	e.lbID("lbb")
	for i := 0; i < 40; i++ {
		e.pod("first-"+itoa(int32(i)), "first", "10.8.0."+itoa(int32(i+1)))
	}
	e.podGroup("first", []string{"lbb"}, []int32{80})
	g.Eventually(func() int { n, _ := busy.InFlight(driver.EnsureBackend); return n }, wait).Should(Equal(30),
		"the records' calls fill their part of the budget; the other 10 records wait in line")

	for i := 0; i < 5; i++ {
		e.pod("late-"+itoa(int32(i)), "late", "10.9.0."+itoa(int32(i+1)))
	}
	e.podGroup("late", []string{"lbb"}, []int32{80})
	g.Eventually(func() []lbcfv1beta1.BackendRecord { return e.records("late") }, wait).Should(HaveLen(5))
	for _, br := range e.records("late") {
		g.Expect(br.Annotations).To(HaveKeyWithValue(controller.AnnotationBackendAddr, Not(BeEmpty())),
			"record %s was created with its address while the driver was busy", br.Name)
	}
	ensures, ensurePeak := busy.InFlight(driver.EnsureBackend)
	g.Expect(ensures).To(Equal(30), "the busy driver's calls were still open")
	g.Expect(ensurePeak).To(Equal(30), "the records' calls never took the address calls' share")
}
