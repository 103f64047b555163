package controller

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/lbfed/lbfed/ctrlqueue"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller/internal/budget"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// loadBalancerReconciler creates, ensures and deletes load balancers through their drivers:
// createLoadBalancer until Created, ensureLoadBalancer whenever spec.attributes differ from what
// the driver last accepted (and every minPeriod with policy Always), deleteLoadBalancer once all
// of the load balancer's backends are deregistered, then the finalizer is removed.
type loadBalancerReconciler struct {
	client.Client
	Options

	backoff *backoff
	mu      sync.Mutex
	ensured map[types.UID]time.Time // last successful ensure, for policy Always
	// deleted remembers load balancers the driver deleted, so that a reconcile that still sees
	// the finalizer in a lagging cache removes it again without calling the driver twice.
	deleted map[types.NamespacedName]types.UID
	// budget bounds each driver's calls in flight to half of the workers, as for records: a
	// driver whose calls hang does not stall the other drivers' load balancers. Parked load
	// balancers come back through wake.
	budget *budget.Drivers
	wake   chan event.GenericEvent
}

// SetupWithManager registers the reconciler.
func (r *loadBalancerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.Defaults()
	r.backoff = newBackoff(r.RetryDelayStep, r.MaxRetryDelay)
	r.ensured = map[types.UID]time.Time{}
	r.deleted = map[types.NamespacedName]types.UID{}
	r.wake = make(chan event.GenericEvent, 256)
	r.budget = budget.New(max(r.LoadBalancerWorkers/2, 1), r.DegradedDriverCallBudget, func(ctx context.Context, key types.NamespacedName) {
		select {
		case r.wake <- event.GenericEvent{Object: &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
		case <-ctx.Done():
		}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("loadbalancer").
		For(&lbcfv1beta1.LoadBalancer{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deletionStarted{}))).
		// A deleting LoadBalancer waits for its records to be gone.
		Watches(&lbcfv1beta1.BackendRecord{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			br := o.(*lbcfv1beta1.BackendRecord)
			key := sharedKey(br.Namespace, br.Spec.LBName)
			return []reconcile.Request{{NamespacedName: key}}
		}), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		WatchesRawSource(source.Channel(r.wake, &handler.EnqueueRequestForObject{})).
		WithOptions(ctrlqueue.Options(controller.Options{
			MaxConcurrentReconciles: r.LoadBalancerWorkers, RateLimiter: r.rateLimiter(),
			NewQueue: r.Metrics.newQueue(lbcfv1beta1.KindLoadBalancer),
		})).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *loadBalancerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer r.Metrics.observeProcess(lbcfv1beta1.KindLoadBalancer, time.Now())
	lb := &lbcfv1beta1.LoadBalancer{}
	if err := r.Get(ctx, req.NamespacedName, lb); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetDeleted(req)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	w := writer{r.Client, r.DryRun, r.Metrics}
	if lb.DeletionTimestamp != nil {
		return r.delete(ctx, w, lb)
	}
	if !controllerutil.ContainsFinalizer(lb, lbcfv1beta1.FinalizerDeleteLB) {
		// LoadBalancers created where the mutating webhook does not run (the Karmada API server)
		// get their finalizer here, before the driver creates anything.
		orig := lb.DeepCopy()
		controllerutil.AddFinalizer(lb, lbcfv1beta1.FinalizerDeleteLB)
		if err := w.do(ctx, lb, "Update", func() error { return r.Patch(ctx, lb, client.MergeFrom(orig)) }); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	drv, err := r.driverOf(ctx, lb)
	if err != nil {
		return ctrl.Result{}, err
	}
	if drv == nil {
		r.Recorder.Eventf(lb, nil, corev1.EventTypeWarning, "DriverNotFound", "Sync", "driver %s not found", sharedKey(lb.Namespace, lb.Spec.LBDriver))
		return ctrl.Result{RequeueAfter: r.MaxRetryDelay}, nil
	}
	if !r.callsDriver(drv.Spec.AcceptDryRunCall) {
		return ctrl.Result{}, nil
	}
	if !lb.IsCreated() {
		return r.create(ctx, w, lb, drv)
	}
	return r.ensure(ctx, w, lb, drv)
}

func (r *loadBalancerReconciler) driverOf(ctx context.Context, lb *lbcfv1beta1.LoadBalancer) (*lbcfv1beta1.LoadBalancerDriver, error) {
	drv := &lbcfv1beta1.LoadBalancerDriver{}
	if err := r.Get(ctx, sharedKey(lb.Namespace, lb.Spec.LBDriver), drv); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get driver: %w", err)
	}
	return drv, nil
}

// slot takes one of drv's call slots for lb; when there is none, lb is parked until one frees up.
func (r *loadBalancerReconciler) slot(ctx context.Context, lb *lbcfv1beta1.LoadBalancer, drv *lbcfv1beta1.LoadBalancerDriver) (release func(err error), ok bool) {
	name, unhealthy := driver.EndpointFor(drv).Name, driverUnhealthy(drv)
	if !r.budget.Acquire(name, unhealthy, client.ObjectKeyFromObject(lb)) {
		return nil, false
	}
	return func(err error) {
		r.budget.Observe(name, driver.IsTimeout(err))
		r.budget.Release(ctx, name, unhealthy)
	}, true
}

func (r *loadBalancerReconciler) create(ctx context.Context, w writer, lb *lbcfv1beta1.LoadBalancer, drv *lbcfv1beta1.LoadBalancerDriver) (ctrl.Result, error) {
	release, ok := r.slot(ctx, lb, drv)
	if !ok {
		return ctrl.Result{RequeueAfter: r.MaxRetryDelay}, nil // parked; the requeue is a safety net
	}
	rsp, err := r.Invoker.CreateLoadBalancer(ctx, driver.EndpointFor(drv), &driver.CreateLoadBalancerRequest{
		RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: driver.RecordID(driver.CreateLoadBalancer, string(lb.UID))},
		DryRun:               r.DryRun, LBSpec: lb.Spec.LBSpec, Attributes: lb.Spec.Attributes,
	})
	release(err)
	var o outcome
	if err != nil {
		o = outcomeOf(nil, err)
	} else {
		o = outcomeOf(&rsp.ResponseForFailRetryHooks, nil)
	}
	if r.DryRun {
		return ctrl.Result{}, nil
	}
	orig := lb.DeepCopy()
	switch o.status {
	case driver.StatusSucc:
		lb.Status.LBInfo = rsp.LBInfo
		if len(lb.Status.LBInfo) == 0 {
			lb.Status.LBInfo = maps.Clone(lb.Spec.LBSpec)
		}
		setLBCondition(&lb.Status.Conditions, lbcfv1beta1.LoadBalancerCondition{Type: lbcfv1beta1.LBCreated, Status: lbcfv1beta1.ConditionTrue, Message: o.msg})
		setLBCondition(&lb.Status.Conditions, lbcfv1beta1.LoadBalancerCondition{Type: lbcfv1beta1.LBAttributesSynced, Status: lbcfv1beta1.ConditionTrue})
		lb.Status.LastSyncedAttributes = maps.Clone(lb.Spec.Attributes)
		lb.Status.ObservedGeneration = lb.Generation
		r.mu.Lock()
		r.ensured[lb.UID] = time.Now() // creation ensured the attributes too
		r.mu.Unlock()
	case driver.StatusFail:
		setLBCondition(&lb.Status.Conditions, lbcfv1beta1.LoadBalancerCondition{Type: lbcfv1beta1.LBCreated, Status: lbcfv1beta1.ConditionFalse,
			Reason: string(lbcfv1beta1.ReasonOperationFailed), Message: o.msg})
	case driver.StatusRunning:
		setLBCondition(&lb.Status.Conditions, lbcfv1beta1.LoadBalancerCondition{Type: lbcfv1beta1.LBCreated, Status: lbcfv1beta1.ConditionFalse,
			Reason: string(lbcfv1beta1.ReasonOperationInProgress), Message: o.msg})
	default:
		reason := lbcfv1beta1.ReasonOperationFailed
		if driver.IsInvalidResponse(o.err) {
			reason = lbcfv1beta1.ReasonInvalidResponse
		}
		setLBCondition(&lb.Status.Conditions, lbcfv1beta1.LoadBalancerCondition{Type: lbcfv1beta1.LBCreated, Status: lbcfv1beta1.ConditionFalse,
			Reason: string(reason), Message: o.msg})
	}
	r.event(lb, o, "CreateLoadBalancer")
	if !equalStatus(orig.Status, lb.Status) {
		if err := w.do(ctx, lb, "UpdateStatus", func() error { return r.Status().Patch(ctx, lb, client.MergeFrom(orig)) }); err != nil {
			return ctrl.Result{}, fmt.Errorf("update status: %w", err)
		}
	}
	return r.finish(lb, o, lb.Spec.EnsurePolicy.IsAlways())
}

// attributesSynced reports whether the driver has accepted the current attributes. The original
// skipped ensureLoadBalancer once AttributesSynced was True, so attribute changes never reached
// the driver; lbfed compares with the attributes last accepted.
func attributesSynced(lb *lbcfv1beta1.LoadBalancer) bool {
	c := lb.Status.Condition(lbcfv1beta1.LBAttributesSynced)
	return c != nil && c.Status == lbcfv1beta1.ConditionTrue && maps.Equal(lb.Spec.Attributes, lb.Status.LastSyncedAttributes)
}

func (r *loadBalancerReconciler) ensure(ctx context.Context, w writer, lb *lbcfv1beta1.LoadBalancer, drv *lbcfv1beta1.LoadBalancerDriver) (ctrl.Result, error) {
	always := lb.Spec.EnsurePolicy.IsAlways()
	if attributesSynced(lb) {
		if !always {
			return ctrl.Result{}, nil
		}
		r.mu.Lock()
		last, ok := r.ensured[lb.UID]
		r.mu.Unlock()
		if period := lb.Spec.EnsurePolicy.Period(); ok && time.Since(last) < period {
			return ctrl.Result{RequeueAfter: period - time.Since(last)}, nil
		}
	}
	release, ok := r.slot(ctx, lb, drv)
	if !ok {
		return ctrl.Result{RequeueAfter: r.MaxRetryDelay}, nil
	}
	rsp, err := r.Invoker.EnsureLoadBalancer(ctx, driver.EndpointFor(drv), &driver.EnsureLoadBalancerRequest{
		RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: driver.RecordID(driver.EnsureLoadBalancer, string(lb.UID))},
		DryRun:               r.DryRun, LBInfo: lb.Status.LBInfo, Attributes: lb.Spec.Attributes,
	})
	release(err)
	var o outcome
	if err != nil {
		o = outcomeOf(nil, err)
	} else {
		o = outcomeOf(&rsp.ResponseForFailRetryHooks, nil)
	}
	if r.DryRun {
		return ctrl.Result{}, nil
	}
	orig := lb.DeepCopy()
	changed := !maps.Equal(lb.Spec.Attributes, lb.Status.LastSyncedAttributes)
	switch o.status {
	case driver.StatusSucc:
		setLBCondition(&lb.Status.Conditions, lbcfv1beta1.LoadBalancerCondition{Type: lbcfv1beta1.LBAttributesSynced, Status: lbcfv1beta1.ConditionTrue, Message: o.msg})
		lb.Status.LastSyncedAttributes = maps.Clone(lb.Spec.Attributes)
		lb.Status.ObservedGeneration = lb.Generation
		r.mu.Lock()
		r.ensured[lb.UID] = time.Now()
		r.mu.Unlock()
	case driver.StatusRunning:
		// The previous state stands until the driver finishes.
	default:
		reason := lbcfv1beta1.ReasonOperationFailed
		if driver.IsInvalidResponse(o.err) {
			reason = lbcfv1beta1.ReasonInvalidResponse
		}
		setLBCondition(&lb.Status.Conditions, lbcfv1beta1.LoadBalancerCondition{Type: lbcfv1beta1.LBAttributesSynced, Status: lbcfv1beta1.ConditionFalse,
			Reason: string(reason), Message: o.msg})
	}
	// A periodic ensure that changes nothing is not worth an event every minute.
	if o.status != driver.StatusSucc || changed || orig.Status.ObservedGeneration != lb.Generation {
		r.event(lb, o, "EnsureLoadBalancer")
	}
	if !equalStatus(orig.Status, lb.Status) {
		if err := w.do(ctx, lb, "UpdateStatus", func() error { return r.Status().Patch(ctx, lb, client.MergeFrom(orig)) }); err != nil {
			return ctrl.Result{}, fmt.Errorf("update status: %w", err)
		}
	}
	return r.finish(lb, o, always)
}

func (r *loadBalancerReconciler) delete(ctx context.Context, w writer, lb *lbcfv1beta1.LoadBalancer) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(lb, lbcfv1beta1.FinalizerDeleteLB) {
		return ctrl.Result{}, nil
	}
	r.mu.Lock()
	done := r.deleted[client.ObjectKeyFromObject(lb)] == lb.UID
	r.mu.Unlock()
	if done {
		return ctrl.Result{}, r.removeFinalizer(ctx, w, lb)
	}
	// Unlike the original, deletion waits until every backend was deregistered (the
	// BackendGroup reconcilers delete the records of a deleting LoadBalancer), so the driver never
	// sees backends of a load balancer it already deleted.
	n, err := recordsOfLB(ctx, r.Client, lb)
	if err != nil {
		return ctrl.Result{}, err
	}
	if n > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("waiting for backends to be deregistered", "records", n)
		return ctrl.Result{RequeueAfter: r.MinRetryDelay}, nil
	}
	drv, err := r.driverOf(ctx, lb)
	if err != nil {
		return ctrl.Result{}, err
	}
	if drv == nil {
		r.Recorder.Eventf(lb, nil, corev1.EventTypeWarning, "DriverNotFound", "Delete", "driver %s not found: cannot delete the load balancer; remove finalizer %s by hand to give up",
			sharedKey(lb.Namespace, lb.Spec.LBDriver), lbcfv1beta1.FinalizerDeleteLB)
		return ctrl.Result{RequeueAfter: r.MaxRetryDelay}, nil
	}
	if !r.callsDriver(drv.Spec.AcceptDryRunCall) {
		return ctrl.Result{}, nil
	}
	info := lb.Status.LBInfo
	if len(info) == 0 {
		info = lb.Spec.LBSpec
	}
	release, ok := r.slot(ctx, lb, drv)
	if !ok {
		return ctrl.Result{RequeueAfter: r.MaxRetryDelay}, nil
	}
	rsp, err := r.Invoker.DeleteLoadBalancer(ctx, driver.EndpointFor(drv), &driver.DeleteLoadBalancerRequest{
		RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: driver.RecordID(driver.DeleteLoadBalancer, string(lb.UID))},
		DryRun:               r.DryRun, LBInfo: info, Attributes: lb.Spec.Attributes,
	})
	release(err)
	var o outcome
	if err != nil {
		o = outcomeOf(nil, err)
	} else {
		o = outcomeOf(&rsp.ResponseForFailRetryHooks, nil)
	}
	if r.DryRun {
		return ctrl.Result{}, nil
	}
	if o.status == driver.StatusSucc {
		r.mu.Lock()
		delete(r.ensured, lb.UID)
		r.deleted[client.ObjectKeyFromObject(lb)] = lb.UID
		r.mu.Unlock()
		if err := r.removeFinalizer(ctx, w, lb); err != nil {
			return ctrl.Result{}, err
		}
	} else {
		r.event(lb, o, "DeleteLoadBalancer")
	}
	return r.finish(lb, o, false)
}

func (r *loadBalancerReconciler) event(lb *lbcfv1beta1.LoadBalancer, o outcome, op string) {
	t, reason := o.eventReason(op)
	if o.msg == "" {
		r.Recorder.Eventf(lb, nil, t, reason, op, "%s", reason)
		return
	}
	r.Recorder.Eventf(lb, nil, t, reason, op, "%s", o.msg)
}

// finish turns an outcome into the reconcile result: errors go to the rate limiter.
func (r *loadBalancerReconciler) finish(lb *lbcfv1beta1.LoadBalancer, o outcome, always bool) (ctrl.Result, error) {
	key := string(lb.UID)
	switch o.status {
	case driver.StatusSucc:
		if always {
			return r.toResult(r.backoff, key, periodicResult(lb.Spec.EnsurePolicy.Period())), nil
		}
		return r.toResult(r.backoff, key, finishedResult()), nil
	case driver.StatusFail:
		return r.toResult(r.backoff, key, failedResult(o.delay)), nil
	case driver.StatusRunning:
		return r.toResult(r.backoff, key, asyncResult(o.delay)), nil
	}
	return r.toResult(r.backoff, key, failedResult(0)), nil
}

// recordsOfLB counts the BackendRecords that use lb, in every namespace when lb is shared.
func recordsOfLB(ctx context.Context, c client.Client, lb *lbcfv1beta1.LoadBalancer) (int, error) {
	list := &lbcfv1beta1.BackendRecordList{}
	if err := c.List(ctx, list, client.MatchingLabels{lbcfv1beta1.LabelLBName: labelValue(lb.Name)}, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("list records of load balancer: %w", err)
	}
	n := 0
	for i := range list.Items {
		if sharedKey(list.Items[i].Namespace, list.Items[i].Spec.LBName) == client.ObjectKeyFromObject(lb) || list.Items[i].Namespace == lb.Namespace {
			n++
		}
	}
	return n, nil
}

// deletionStarted passes the update that sets deletionTimestamp, which
// GenerationChangedPredicate does not see on every kind. Finalizer changes (including our own)
// are not passed: they would re-run a reconcile that just asked to wait.
type deletionStarted struct{ predicate.Funcs }

func (deletionStarted) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return false
	}
	return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
}

func (r *loadBalancerReconciler) removeFinalizer(ctx context.Context, w writer, lb *lbcfv1beta1.LoadBalancer) error {
	orig := lb.DeepCopy()
	controllerutil.RemoveFinalizer(lb, lbcfv1beta1.FinalizerDeleteLB)
	if err := w.do(ctx, lb, "Update", func() error { return r.Patch(ctx, lb, client.MergeFrom(orig)) }); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// forgetDeleted drops the memory of a load balancer that is gone.
func (r *loadBalancerReconciler) forgetDeleted(req ctrl.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.deleted, req.NamespacedName)
}
