package conformance_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/conformance"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
)

// Each broken driver violates one rule of the protocol; the suite must catch it.

// reEnsureFails refuses to ensure a backend that is already registered.
type reEnsureFails struct {
	*memdriver.Driver
	mu   sync.Mutex
	seen map[string]bool
}

func (d *reEnsureFails) EnsureBackend(ctx context.Context, r *driver.BackendOperationRequest) (*driver.BackendOperationResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen[r.BackendAddr] {
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: driver.Fail("already registered", 0)}, nil
	}
	d.seen[r.BackendAddr] = true
	return d.Driver.EnsureBackend(ctx, r)
}

func (d *reEnsureFails) DeregisterBackend(ctx context.Context, r *driver.BackendOperationRequest) (*driver.BackendOperationResponse, error) {
	d.mu.Lock()
	delete(d.seen, r.BackendAddr)
	d.mu.Unlock()
	return d.Driver.DeregisterBackend(ctx, r)
}

// strictDeregister fails to deregister what it does not know, and on deleted load balancers.
type strictDeregister struct{ *memdriver.Driver }

func (d strictDeregister) DeregisterBackend(ctx context.Context, r *driver.BackendOperationRequest) (*driver.BackendOperationResponse, error) {
	lb, ok := d.LoadBalancer(r.LBInfo[memdriver.LBIDKey])
	if !ok {
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: driver.Fail("no such load balancer", 0)}, nil
	}
	if _, ok := lb.Backends[r.BackendAddr]; !ok {
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: driver.Fail("no such backend", 0)}, nil
	}
	return d.Driver.DeregisterBackend(ctx, r)
}

// notIdempotent creates a new load balancer on every call.
type notIdempotent struct {
	*memdriver.Driver
	n int
}

func (d *notIdempotent) CreateLoadBalancer(ctx context.Context, r *driver.CreateLoadBalancerRequest) (*driver.CreateLoadBalancerResponse, error) {
	d.n++
	r.RecordID = fmt.Sprintf("%s-%d", r.RecordID, d.n)
	return d.Driver.CreateLoadBalancer(ctx, r)
}

// runningForever never finishes deleting.
type runningForever struct{ *memdriver.Driver }

func (runningForever) DeleteLoadBalancer(context.Context, *driver.DeleteLoadBalancerRequest) (*driver.DeleteLoadBalancerResponse, error) {
	return &driver.DeleteLoadBalancerResponse{ResponseForFailRetryHooks: driver.Running("deleting", 1)}, nil
}

// deleteTwiceFails refuses to delete a load balancer that is already gone.
type deleteTwiceFails struct{ *memdriver.Driver }

func (d deleteTwiceFails) DeleteLoadBalancer(ctx context.Context, r *driver.DeleteLoadBalancerRequest) (*driver.DeleteLoadBalancerResponse, error) {
	if _, ok := d.LoadBalancer(r.LBInfo[memdriver.LBIDKey]); !ok {
		return &driver.DeleteLoadBalancerResponse{ResponseForFailRetryHooks: driver.Fail("not found", 0)}, nil
	}
	return d.Driver.DeleteLoadBalancer(ctx, r)
}

// acceptsAnything answers 200 with a Succ-shaped body to every request, even garbage.
var acceptsAnything = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	_, _ = io.WriteString(w, `{"status":"Succ","succ":true,"healthy":true,"backendAddr":"1.2.3.4:80","lbInfo":{"id":"x"}}`)
})

func check(t *testing.T, h http.Handler) map[string]error {
	srv := httptest.NewServer(h)
	defer srv.Close()
	out := map[string]error{}
	for _, r := range conformance.Check(context.Background(), conformance.Config{
		BaseURL: srv.URL, LBSpec: map[string]string{"name": "x"}, SettleTimeout: 2 * time.Second, MaxPoll: 100 * time.Millisecond,
	}) {
		out[r.Rule] = r.Err
	}
	return out
}

func TestSuitePassesTheReferenceDriver(t *testing.T) {
	g := NewWithT(t)
	results := check(t, memdriver.New().Handler(driver.HandlerOptions{}))
	g.Expect(results).To(HaveLen(len(conformance.Rules)))
	for rule, err := range results {
		g.Expect(err).NotTo(HaveOccurred(), rule)
	}
}

func TestSuiteTolerantOfRunningThatSettles(t *testing.T) {
	g := NewWithT(t)
	d := memdriver.New()
	d.Inject(driver.CreateLoadBalancer, memdriver.Fault{Running: 3, RetryDelay: 30})
	for rule, err := range check(t, d.Handler(driver.HandlerOptions{})) {
		g.Expect(err).NotTo(HaveOccurred(), rule)
	}
}

func TestSuiteCatchesBrokenDrivers(t *testing.T) {
	cases := []struct {
		name   string
		h      http.Handler
		broken []string
	}{
		{"re-ensure fails", driver.NewHandler(&reEnsureFails{Driver: memdriver.New(), seen: map[string]bool{}}, driver.HandlerOptions{}),
			[]string{conformance.RuleReEnsure}},
		{"strict deregister", driver.NewHandler(strictDeregister{memdriver.New()}, driver.HandlerOptions{}),
			[]string{conformance.RuleDeregisterUnregistered, conformance.RuleDeregisterTwice, conformance.RuleDeregisterDeletedLB}},
		{"create not idempotent", driver.NewHandler(&notIdempotent{Driver: memdriver.New()}, driver.HandlerOptions{}),
			[]string{conformance.RuleCreateIdempotent}},
		{"running forever", driver.NewHandler(runningForever{memdriver.New()}, driver.HandlerOptions{}),
			[]string{conformance.RuleRunningSettles}},
		{"delete twice fails", driver.NewHandler(deleteTwiceFails{memdriver.New()}, driver.HandlerOptions{}),
			[]string{conformance.RuleDeleteIdempotent}},
		{"accepts anything", acceptsAnything, []string{conformance.RuleMalformed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			results := check(t, tc.h)
			for _, rule := range tc.broken {
				g.Expect(results[rule]).To(HaveOccurred(), "rule %q should fail", rule)
			}
			// Rules before the broken one still pass: the report pinpoints the problem.
			g.Expect(results[conformance.RuleValidate]).NotTo(HaveOccurred())
		})
	}
}
