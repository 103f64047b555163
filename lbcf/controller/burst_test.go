package controller_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"

	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
)

// A burst of records larger than the driver's call budget, against a driver that answers slowly
// (as the Radware driver does: after the device commit), costs one driver call and one write of
// its outcome per record: a parked record that is requeued while its call runs (its safety-net
// requeue, a wake-up) finds, in the cache, the version it has just acted on, not yet its write,
// and must not call the driver again and write the same status twice.
func TestBurstCallsDriverOncePerRecord(t *testing.T) {
	e := newEnv(t)
	g := e.g
	writes := e.countWrites()
	opts := fastOptions()
	// Two calls at once; the parked records' safety net (MaxRetryDelay) fires while their own
	// (slower) calls run.
	opts.DriverCallBudget = 2
	opts.MaxRetryDelay = 250 * time.Millisecond
	e.start(opts)
	e.driverObj("mem")
	e.lb("lb1", "mem")
	id := e.lbID("lb1")
	e.drv.Inject(driver.EnsureBackend, memdriver.Fault{Latency: 400 * time.Millisecond})
	e.drv.Inject(driver.DeregisterBackend, memdriver.Fault{Latency: 400 * time.Millisecond})
	const n = 24
	var want []string
	var pods []*corev1.Pod
	for i := 0; i < n; i++ {
		ip := "10.8.0." + itoa(int32(i+1))
		pods = append(pods, e.pod("web-"+itoa(int32(i)), "web", ip))
		want = append(want, ip+":80")
	}
	e.podGroup("web", []string{"lb1"}, []int32{80})
	g.Eventually(e.backends(id), wait).Should(ConsistOf(want))
	g.Eventually(func() int32 { return e.group("web").Status.RegisteredBackends }, wait).Should(Equal(int32(n)))
	g.Expect(e.drv.CountCalls(driver.EnsureBackend)).To(Equal(n), "ensureBackend calls")
	g.Expect(e.drv.CountCalls(driver.GenerateBackendAddr)).To(Equal(n), "generateBackendAddr calls")
	// Records created without their address (the group found the budget spent) stored it first.
	selfAddressed := 0
	for _, br := range e.records("web") {
		if br.Annotations[controller.AnnotationBackendAddr] == "" {
			selfAddressed++
		}
	}
	g.Expect(writes.of("backendrecords/status")).To(Equal(n+selfAddressed), "status writes: %v", writes.snapshot())

	for _, p := range pods {
		g.Expect(e.c.Delete(e.ctx, p)).To(Succeed())
	}
	g.Eventually(e.backends(id), wait).Should(BeEmpty())
	g.Eventually(func() []string {
		var names []string
		for _, br := range e.records("web") {
			names = append(names, br.Name)
		}
		return names
	}, wait).Should(BeEmpty())
	g.Expect(e.drv.CountCalls(driver.DeregisterBackend)).To(Equal(n), "deregisterBackend calls")
	// The group's deletions and the finalizer removals.
	g.Expect(writes.of("backendrecords")).To(Equal(3*n), "record writes (create, delete, finalizer): %v", writes.snapshot())
}

// When a group's backends are replaced (here: its selector moves to new pods), the new backends'
// records are not held back until every old record is deleted: creations and deletions
// alternate, a creation first (make before break).
func TestReplacedBackendsAreCreatedAlongsideDeletions(t *testing.T) {
	e := newEnv(t)
	g := e.g
	var mu sync.Mutex
	var seq []string // record creations (+) and deletions (-), in order
	cfg := rest.CopyConfig(e.cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			rsp, err := rt.RoundTrip(req)
			if testenv.APIResource(req) == "backendrecords" && strings.Contains(req.URL.Path, "/namespaces/"+e.ns+"/") {
				mu.Lock()
				switch req.Method {
				case http.MethodPost:
					seq = append(seq, "+")
				case http.MethodDelete:
					seq = append(seq, "-")
				}
				mu.Unlock()
			}
			return rsp, err
		})
	})
	e.cfg = cfg
	opts := fastOptions()
	opts.WriteParallelism = 1 // the order of the writes is the order of the group's plan
	e.start(opts)
	e.driverObj("mem")
	e.lb("lb1", "mem")
	id := e.lbID("lb1")
	const n = 4
	var old, next []string
	for i := 0; i < n; i++ {
		e.pod("old-"+itoa(int32(i)), "old", "10.10.0."+itoa(int32(i+1)))
		e.pod("new-"+itoa(int32(i)), "new", "10.10.1."+itoa(int32(i+1)))
		old = append(old, "10.10.0."+itoa(int32(i+1))+":80")
		next = append(next, "10.10.1."+itoa(int32(i+1))+":80")
	}
	e.podGroup("web", []string{"lb1"}, []int32{80}, func(bg *lbcfv1beta1.BackendGroup) { bg.Spec.Pods.ByLabel.Selector = map[string]string{"app": "old"} })
	g.Eventually(e.backends(id), wait).Should(ConsistOf(old))
	g.Eventually(func() int32 { return e.group("web").Status.RegisteredBackends }, wait).Should(Equal(int32(n)))
	mu.Lock()
	seq = nil
	mu.Unlock()
	bg := e.group("web")
	orig := bg.DeepCopy()
	bg.Spec.Pods.ByLabel.Selector = map[string]string{"app": "new"}
	g.Expect(e.c.Patch(e.ctx, bg, client.MergeFrom(orig))).To(Succeed())
	g.Eventually(e.backends(id), wait).Should(ConsistOf(next))
	// The last deletion is logged when its response is back, and the record reconciler can have
	// deregistered the backend on the watch event before that: wait for the log, not the driver.
	// seq only grows, so a wrong order never comes right.
	g.Eventually(func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(seq, "")
	}, wait).Should(Equal(strings.Repeat("+-", n)), "record writes after the selector moved")
}
