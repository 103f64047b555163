// Package controller is lbfed's LBCF engine: controller-runtime reconcilers for
// LoadBalancerDriver, LoadBalancer, BackendGroup and BackendRecord that call LBCF drivers with
// the original's semantics (Succ/Fail/Running, minRetryDelayInSeconds, exponential backoff,
// periodic ensure, deregister policies), and the pods' readiness gates. Member mode (lbcf/member)
// plugs another BackendGroup reconciler into the same watches and gates (SetupReporter).
//
// Where backends come from is pluggable (BackendSource, AddrRequestBuilder): in a plain cluster
// they are the cluster's pods, Service nodePorts and static addresses (LocalSource); the
// federation controller plugs in the candidates its member clusters report.
//
// Finalizers and BackendRecords are the only state: a controller killed at any point and
// restarted redoes at most idempotent driver calls and loses no registration.
package controller

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// Options are shared by the reconcilers of one controller process.
type Options struct {
	// Invoker calls drivers.
	Invoker driver.Invoker
	// Recorder emits events carrying the drivers' messages.
	Recorder events.EventRecorder
	// DryRun: drivers are called only when they accept dry-run calls (with dryRun: true), their
	// answers are ignored, and nothing is written to the API server.
	DryRun bool
	// MinRetryDelay is the smallest delay before a retry or a periodic ensure (--min-retry-delay).
	MinRetryDelay time.Duration
	// RetryDelayStep and MaxRetryDelay shape the per-object exponential backoff of errors and
	// failures (--retry-delay-step, --max-retry-delay).
	RetryDelayStep, MaxRetryDelay time.Duration
	// DefaultDriverRetryDelay is the wait after Fail or Running when the driver asks none (10s).
	DefaultDriverRetryDelay time.Duration
	// HealthzPeriod is how often drivers listing healthz are polled.
	HealthzPeriod time.Duration
	// Workers per kind (MaxConcurrentReconciles).
	DriverWorkers, LoadBalancerWorkers, BackendGroupWorkers, BackendRecordWorkers int
	// WriteParallelism bounds concurrent record writes within one BackendGroup reconcile. It must
	// keep the client's queries per second busy at the API server's latency under load (500 qps
	// × 100ms and more): with 16, 5,000 record creations were paced by their own latency while
	// the records' status writes took the rest of the API server.
	WriteParallelism int
	// DriverCallBudget bounds the calls to one driver at once, so that a driver whose calls hang
	// holds at most that many of the BackendRecordWorkers (0: three quarters of them); a
	// sixteenth of it is kept for the BackendGroup reconciler's generateBackendAddr calls.
	// DegradedDriverCallBudget applies instead while the driver's healthz says unhealthy or since
	// one of its calls timed out (0: 2); it bounds the driver's LoadBalancer reconciles too,
	// which otherwise get half of the LoadBalancerWorkers per driver.
	DriverCallBudget, DegradedDriverCallBudget int
	// WaitingRecordResync is how often a record whose backend is not eligible for an address is
	// looked at again: a safety net, as its group wakes it when the backend turns eligible.
	WaitingRecordResync time.Duration
	// Metrics receives the engine's metrics; nil: NewMetrics(nil).
	Metrics *Metrics
	// BackendSuccessEvents emits a Normal event for every backend's address and registration
	// (SuccGenerateAddr, SuccEnsureBackend) as the original did. Failures, refusals and Running
	// answers always get events. At federation scale (tens of thousands of records) the success
	// events are noise and cost memory and API writes, so the federation turns them off.
	BackendSuccessEvents bool
	// OnRegistered, when set, is called when a record becomes Registered (for latency metrics).
	OnRegistered func(*lbcfv1beta1.BackendRecord)
	// MemberPods, when set, reads federated backends' real pods for the requests that carry a
	// pod (generateBackendAddr, judgePodDeregister); without it, or when a member cannot be read,
	// drivers get the synthetic pod (see AnnotationPodSource).
	MemberPods MemberPodFetcher
	// Readiness decides how long pods that are not Ready keep their records (see keptPods).
	Readiness Readiness
}

// Readiness is how registration treats pods that turn not Ready. A pod known to be gone (deleted,
// finished) always loses its records at once; one that is only not Ready does so as the group's
// deregister policy says, except in the two cases below, where following the API would empty a
// serving group on evidence that says nothing of the pods (ARCHITECTURE.md, "Failure semantics").
type Readiness struct {
	// UnobservedGrace is how long a pod whose readiness is unobserved (Backend.ReadinessUnobserved:
	// its node's kubelet unheard, or Ready cleared by the node lifecycle controller while its
	// containers are ready) keeps its records; then Policy applies. 0: DefaultUnobservedGrace.
	UnobservedGrace time.Duration
	// Policy applies to such pods after the grace period, unless the group's
	// lbfed.io/member-loss-policy annotation says otherwise: FailStatic (withdrawn only while
	// another backend of the group is eligible), Withdraw, Keep. Empty: FailStatic.
	Policy lbcfv1beta1.MemberLossPolicy
	// PanicThreshold is the share of a group's registered pods that may lose their records at
	// once to readiness alone (pods neither deleted nor finished); when more would, all of them
	// keep their records and the front end's health checks decide (Envoy's panic threshold). 0
	// turns it off; the group annotation lbfed.io/readiness-panic-threshold overrides it.
	PanicThreshold float64
	// PanicWindow: the pods a group let go for readiness alone within it count against the
	// threshold with those about to go, so that a collapse arriving pod by pod is one
	// (defaultPanicWindow when 0).
	PanicWindow time.Duration
}

// defaultPanicWindow is Readiness.PanicWindow when unset: several periods of the default
// readiness probe (10 s, 3 failures), over which the pods failing for one shared cause turn not
// Ready one after another.
const defaultPanicWindow = time.Minute

// DefaultUnobservedGrace is Readiness.UnobservedGrace when unset: the federation's member grace.
const DefaultUnobservedGrace = time.Minute

// defaultPanicThreshold is the flags' default: more than half of a group's pods turning not Ready
// at once is a shared cause (a dependency, a probe, a control plane), not half of the pods failing.
const defaultPanicThreshold = 0.5

// Defaults fills unset fields with the original LBCF's defaults (and lbfed's worker counts).
func (o *Options) Defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&o.MinRetryDelay, 5*time.Second)
	set(&o.RetryDelayStep, 10*time.Second)
	set(&o.MaxRetryDelay, 2*time.Minute)
	set(&o.DefaultDriverRetryDelay, 10*time.Second)
	set(&o.HealthzPeriod, 30*time.Second)
	set(&o.WaitingRecordResync, 5*time.Minute)
	seti := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	seti(&o.DriverWorkers, 2)
	seti(&o.LoadBalancerWorkers, 8)
	seti(&o.BackendGroupWorkers, 8)
	seti(&o.BackendRecordWorkers, 512)
	seti(&o.WriteParallelism, 64)
	seti(&o.DriverCallBudget, max(o.BackendRecordWorkers*3/4, 1))
	seti(&o.DegradedDriverCallBudget, 2)
	set(&o.Readiness.UnobservedGrace, DefaultUnobservedGrace)
	set(&o.Readiness.PanicWindow, defaultPanicWindow)
	if o.Readiness.Policy == "" {
		o.Readiness.Policy = lbcfv1beta1.MemberLossFailStatic
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
}

// rateLimiter is the error backoff of every queue: exponential per object, at least
// MinRetryDelay. Unlike the original there is no global token bucket: it paced every retry of
// every object at 10 per second.
func (o *Options) rateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](o.RetryDelayStep, o.MaxRetryDelay),
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](o.MinRetryDelay, o.MinRetryDelay),
	)
}

// resultKind is LBCF's SyncResult.
type resultKind int

const (
	finished resultKind = iota // Succ without periodic: done, backoff reset
	failed                     // status Fail: retry after max(backoff, driver delay)
	async                      // status Running: poll after max(driver delay, min retry delay)
	periodic                   // Succ with policy Always: again after max(minPeriod, min retry delay)
)

// result is the outcome of one driver-facing step of a reconcile.
type result struct {
	kind  resultKind
	delay time.Duration // driver's minRetryDelayInSeconds, or the ensure period
}

func finishedResult() result                        { return result{kind: finished} }
func failedResult(d time.Duration) result           { return result{kind: failed, delay: d} }
func asyncResult(d time.Duration) result            { return result{kind: async, delay: d} }
func periodicResult(d time.Duration) result         { return result{kind: periodic, delay: d} }
func driverDelay(r driver.RetryDelay) time.Duration { return time.Duration(r) * time.Second }

// backoff tracks failures per object, for retries that are requeued with an explicit delay
// (controller-runtime forgets its own rate limiter state whenever a delay is returned).
type backoff struct {
	mu       sync.Mutex
	failures map[string]int
	step     time.Duration
	max      time.Duration
}

func newBackoff(step, max time.Duration) *backoff {
	return &backoff{failures: map[string]int{}, step: step, max: max}
}

// next records a failure of key and returns the delay before its next try.
func (b *backoff) next(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.failures[key]
	b.failures[key] = n + 1
	d := b.step
	for i := 0; i < n && d < b.max; i++ {
		d *= 2
	}
	if d > b.max {
		d = b.max
	}
	return d
}

// forget resets key's backoff.
func (b *backoff) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.failures, key)
}

// toResult maps a result to a controller-runtime answer with LBCF's timing rules.
func (o *Options) toResult(b *backoff, key string, r result) ctrl.Result {
	switch r.kind {
	case failed:
		d := b.next(key)
		return ctrl.Result{RequeueAfter: max(d, o.driverDelayOrDefault(r.delay))}
	case async:
		b.forget(key)
		return ctrl.Result{RequeueAfter: max(o.driverDelayOrDefault(r.delay), o.MinRetryDelay)}
	case periodic:
		b.forget(key)
		return ctrl.Result{RequeueAfter: max(r.delay, o.MinRetryDelay)}
	default:
		b.forget(key)
		return ctrl.Result{}
	}
}

func (o *Options) driverDelayOrDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return o.DefaultDriverRetryDelay
	}
	return d
}

// callsDriver reports whether a driver may be called: always, except in dry-run mode for drivers
// that do not accept dry-run calls.
func (o *Options) callsDriver(acceptDryRun bool) bool { return !o.DryRun || acceptDryRun }

// Write runs f, a write to the API server, as the engine's own writes run: skipped under
// DryRun, its latency in the metrics.
func (o *Options) Write(ctx context.Context, obj client.Object, op string, f func() error) error {
	return writer{dryRun: o.DryRun, metrics: o.Metrics}.do(ctx, obj, op, f)
}

// writer performs API writes, or only logs them in dry-run mode.
type writer struct {
	client.Client
	dryRun  bool
	metrics *Metrics
}

func (w writer) do(ctx context.Context, obj client.Object, op string, f func() error) error {
	if w.dryRun {
		ctrl.LoggerFrom(ctx).Info("dry-run: skipping write", "op", op, "kind", kindOf(obj), "object", client.ObjectKeyFromObject(obj))
		return nil
	}
	start := time.Now()
	err := f()
	w.metrics.K8sOpLatency.WithLabelValues(kindOf(obj), op).Observe(time.Since(start).Seconds())
	return err
}

// update writes obj, changed from orig (as read from the cache), with an update at orig's
// resourceVersion, or — when the object changed since — with a merge patch of the difference, as
// before. An update costs the API server less than a patch, which it must apply to its encoding
// of the stored object (about a tenth of its CPU while records registered). The merge patch keeps
// the old meaning where the object moved on: what this write says is still true of the
// generation it was computed from (observedGeneration says which).
func (w writer) update(ctx context.Context, obj, orig client.Object, op string, status bool) error {
	return w.do(ctx, obj, op, func() error {
		var err error
		if status {
			err = w.Status().Update(ctx, obj)
		} else {
			err = w.Update(ctx, obj)
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		if status {
			return w.Status().Patch(ctx, obj, client.MergeFrom(orig))
		}
		return w.Patch(ctx, obj, client.MergeFrom(orig))
	})
}

func equalStatus(a, b any) bool { return equality.Semantic.DeepEqual(a, b) }

// outcome is a retryable webhook call's answer, reduced to what the reconcilers act on.
type outcome struct {
	status string // Succ, Fail, Running; "" when the call failed (err set)
	msg    string
	delay  time.Duration
	err    error
}

func outcomeOf(r *driver.ResponseForFailRetryHooks, err error) outcome {
	if err != nil {
		return outcome{err: err, msg: err.Error()}
	}
	return outcome{status: r.Status, msg: r.Msg, delay: driverDelay(r.MinRetryDelayInSeconds)}
}

// eventReason is the LBCF event reason for an outcome of op (e.g. "CreateLoadBalancer"):
// Succ<op>, Failed<op>, Running<op> or Invalid<op>.
func (o outcome) eventReason(op string) (eventType, reason string) {
	switch {
	case o.err != nil && driver.IsInvalidResponse(o.err):
		return corev1.EventTypeWarning, "Invalid" + op
	case o.err != nil, o.status == driver.StatusFail:
		return corev1.EventTypeWarning, "Failed" + op
	case o.status == driver.StatusRunning:
		return corev1.EventTypeNormal, "Running" + op
	}
	return corev1.EventTypeNormal, "Succ" + op
}

// sharedKey resolves a driver (or shared LoadBalancer) name used from namespace ns: names
// starting with "lbcf-" live in kube-system.
func sharedKey(ns, name string) client.ObjectKey {
	if strings.HasPrefix(name, lbcfv1beta1.SystemDriverPrefix) {
		return client.ObjectKey{Namespace: lbcfv1beta1.SystemNamespace, Name: name}
	}
	return client.ObjectKey{Namespace: ns, Name: name}
}
