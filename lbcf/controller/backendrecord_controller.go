package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller/internal/budget"
	"github.com/lbfed/lbfed/lbcf/controller/internal/wakeup"
	"github.com/lbfed/lbfed/lbcf/controller/internal/writes"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// backendRecordReconciler registers one backend on one load balancer: generateBackendAddr
// while the record has no address, then ensureBackend (again every minPeriod with policy
// Always, and whenever the record's spec changes); when the record is deleted,
// deregisterBackend, and only then is its finalizer removed.
type backendRecordReconciler struct {
	client.Client
	Options
	// Addr builds generateBackendAddr requests.
	Addr AddrRequestBuilder
	// APIReader reads owners uncached, to tell a missing owner from a cache that lags behind.
	APIReader client.Reader
	// addrs reads the address index (see addrIndex).
	addrs addrBuckets

	backoff *backoff
	mu      sync.Mutex
	ensured map[types.UID]time.Time // last successful ensure, for policy Always
	// wakeups requeues records waiting on something other than themselves (shared with the
	// BackendGroup reconciler by SetupEngine).
	wakeups *wakeup.Records
	budget  *budget.Drivers
	acted   *writes.Acted // versions whose outcome is written, while the cache lags behind
}

func (r *backendRecordReconciler) init() {
	r.Defaults()
	r.backoff = newBackoff(r.RetryDelayStep, r.MaxRetryDelay)
	r.ensured = map[types.UID]time.Time{}
	r.acted = writes.NewActed()
	if r.wakeups == nil {
		r.wakeups = wakeup.New()
	}
	if r.budget == nil {
		r.budget = budget.NewForRecords(r.DriverCallBudget, r.DegradedDriverCallBudget, r.wakeups.Wake)
	}
}

// Reconcile implements reconcile.Reconciler.
func (r *backendRecordReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer r.Metrics.observeProcess(lbcfv1beta1.KindBackendRecord, time.Now())
	// The cached record itself, read in place and copied before its first change: most reconciles
	// write nothing (every one of a restart's resync), and their copies were ≈ 7 % of what a
	// 100,000-record resync allocated. Nothing below changes br before br = br.DeepCopy().
	br := &lbcfv1beta1.BackendRecord{}
	if err := r.Get(ctx, req.NamespacedName, br, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			r.wakeups.Done(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.acted.Current(br.UID, br.ResourceVersion, time.Now()) {
		// The cache does not show this record's last write yet: what it shows is done. Looked
		// at again later, in case it is periodic work the requeue of that write was for.
		return ctrl.Result{RequeueAfter: r.MinRetryDelay}, nil
	}
	w := writer{r.Client, r.DryRun, r.Metrics}
	if br.DeletionTimestamp != nil {
		r.wakeups.Done(req.NamespacedName)
		return r.deregister(ctx, w, br.DeepCopy())
	}
	if gone, err := r.ownerGone(ctx, br); err != nil || gone {
		if gone {
			ctrl.LoggerFrom(ctx).Info("owner BackendGroup is gone: deleting the record")
			err = w.do(ctx, br, "Delete", func() error { return client.IgnoreNotFound(r.Delete(ctx, br, client.Preconditions{UID: &br.UID})) })
		}
		return ctrl.Result{}, err
	}
	if !controllerutil.ContainsFinalizer(br, lbcfv1beta1.FinalizerDeregisterBackend) {
		orig := br
		br = br.DeepCopy()
		controllerutil.AddFinalizer(br, lbcfv1beta1.FinalizerDeregisterBackend)
		if err := w.do(ctx, br, "Update", func() error { return r.Patch(ctx, br, client.MergeFrom(orig)) }); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	// Another record of the load balancer may hold the same address: said on the record.
	var dup *lbcfv1beta1.BackendRecordCondition
	var holders []*lbcfv1beta1.BackendRecord
	hadAddr := recordAddr(br) != ""
	if hadAddr {
		var err error
		if dup, holders, err = r.duplicateCondition(ctx, br); err != nil {
			return ctrl.Result{}, err
		}
	}
	if br.IsRegistered() && br.Status.ObservedGeneration == br.Generation {
		idle := !br.Spec.EnsurePolicy.IsAlways()
		var res ctrl.Result
		if !idle {
			r.mu.Lock()
			last, ok := r.ensured[br.UID]
			r.mu.Unlock()
			if period := br.Spec.EnsurePolicy.Period(); ok && time.Since(last) < period {
				idle, res = true, ctrl.Result{RequeueAfter: period - time.Since(last)}
			}
		}
		if idle {
			return res, r.setDuplicate(ctx, w, br, dup, holders)
		}
	}
	drv, err := r.driverOf(ctx, br)
	if err != nil || drv == nil {
		return ctrl.Result{RequeueAfter: r.MaxRetryDelay}, err
	}
	if !r.callsDriver(drv.Spec.AcceptDryRunCall) {
		return ctrl.Result{}, nil
	}
	ep := driver.EndpointFor(drv)
	unhealthy := driverUnhealthy(drv)
	if !r.budget.Acquire(ep.Name, unhealthy, req.NamespacedName) {
		// Parked until one of the driver's calls ends; the requeue is only a safety net.
		return ctrl.Result{RequeueAfter: r.MaxRetryDelay}, nil
	}
	orig := br
	br = br.DeepCopy()
	res, err := r.register(ctx, w, br, ep)
	// The slot bounds the driver's calls, not the status write that follows: held during it, a
	// slow API server made a busy driver of an idle one (its parked records, and the group's
	// generateBackendAddr calls, waited for writes, not for the driver).
	r.budget.Release(ctx, ep.Name, unhealthy)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The versions a reconcile may find in a lagging cache once the outcome is written: the one
	// it read, and the one its address write made.
	actedOn := []string{orig.ResourceVersion, br.ResourceVersion}
	if !hadAddr && recordAddr(br) != "" {
		if dup, holders, err = r.duplicateCondition(ctx, br); err != nil {
			return ctrl.Result{}, err
		}
	}
	if dup != nil && !r.DryRun {
		setRecordCondition(&br.Status.Conditions, *dup)
		r.reportDuplicate(ctx, br, dup, holders)
	}
	if !r.DryRun && !equalStatus(orig.Status, br.Status) {
		if err := w.update(ctx, br, orig, "UpdateStatus", true); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		r.acted.Done(br.UID, time.Now(), actedOn...)
	}
	return res, nil
}

// register generates the address if needed, then ensures the backend, in one reconcile. A
// generated address is stored before ensureBackend: were the process killed after the device
// took the backend but before a later status write, the record would not know what to
// deregister and the backend would stay on the front end. Usually it was stored with the record
// itself (AnnotationBackendAddr: the group asked the driver before creating the record), and the
// Registered write copies it into the status; otherwise it is generated here and written to the
// status before ensureBackend. Static addresses need no write: the spec has them.
func (r *backendRecordReconciler) register(ctx context.Context, w writer, br *lbcfv1beta1.BackendRecord, ep driver.Endpoint) (ctrl.Result, error) {
	if br.Status.BackendAddr == "" {
		switch {
		case br.Spec.StaticAddr != nil:
			br.Status.BackendAddr = *br.Spec.StaticAddr
		case br.Annotations[AnnotationBackendAddr] != "":
			br.Status.BackendAddr = br.Annotations[AnnotationBackendAddr]
		default:
			// Marked before the backend is read: a group that sees the backend eligible after
			// this read finds the mark and wakes the record.
			key := client.ObjectKeyFromObject(br)
			r.wakeups.Wait(key)
			req, ok, err := r.addrRequest(ctx, r.Addr, br, driver.RecordID(driver.GenerateBackendAddr, string(br.UID)))
			if err != nil {
				r.wakeups.Done(key)
				return ctrl.Result{}, err
			}
			if !ok {
				// Gone or not eligible: the group deletes the record, or keeps it (deregister
				// policy, a member without a report) and wakes it when the backend is eligible
				// again. Nothing about the record itself changes then, so nothing else would.
				return ctrl.Result{RequeueAfter: r.WaitingRecordResync}, nil
			}
			r.wakeups.Done(key)
			rsp, err := r.Invoker.GenerateBackendAddr(ctx, ep, req)
			r.budget.Observe(ep.Name, driver.IsTimeout(err))
			o := outcomeOf(commonOf(rsp, err))
			if r.DryRun {
				return ctrl.Result{}, nil
			}
			if o.status != driver.StatusSucc {
				r.event(br, o, "GenerateAddr")
				r.setRegistered(br, o)
				return r.finish(br, o, false), nil
			}
			before := br.DeepCopy()
			br.Status.BackendAddr = rsp.BackendAddr
			if err := w.do(ctx, br, "UpdateStatus", func() error { return r.Status().Patch(ctx, br, client.MergeFrom(before)) }); err != nil {
				return ctrl.Result{}, fmt.Errorf("record address %s: %w", rsp.BackendAddr, client.IgnoreNotFound(err))
			}
			if r.BackendSuccessEvents {
				r.Recorder.Eventf(br, nil, corev1.EventTypeNormal, "SuccGenerateAddr", "GenerateAddr", "addr: %s", rsp.BackendAddr)
			}
		}
	}
	// A pod recreated with the same IP: wait until the old record is deregistered, or the
	// driver would see the deregistration after the new registration.
	if busy, err := r.addrBeingDeregistered(ctx, br); err != nil || busy {
		if busy {
			r.Recorder.Eventf(br, nil, corev1.EventTypeNormal, "DelayedEnsureBackend", "EnsureBackend", "addr %s is being deregistered by another record", br.Status.BackendAddr)
			return ctrl.Result{RequeueAfter: r.MinRetryDelay}, nil
		}
		return ctrl.Result{}, err
	}
	rsp, err := r.Invoker.EnsureBackend(ctx, ep, &driver.BackendOperationRequest{
		RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: driver.RecordID(driver.EnsureBackend, string(br.UID))},
		DryRun:               r.DryRun, LBInfo: br.Spec.LBInfo, BackendAddr: br.Status.BackendAddr, Parameters: br.Spec.Parameters,
		InjectedInfo: br.Status.InjectedInfo,
	})
	r.budget.Observe(ep.Name, driver.IsTimeout(err))
	o := outcomeOf(commonOfBackend(rsp, err))
	if r.DryRun {
		return ctrl.Result{}, nil
	}
	registeredBefore := br.IsRegistered()
	wasRegistered := registeredBefore && br.Status.ObservedGeneration == br.Generation
	r.setRegistered(br, o)
	if o.status == driver.StatusSucc {
		if len(rsp.InjectedInfo) > 0 {
			br.Status.InjectedInfo = rsp.InjectedInfo
		}
		br.Status.ObservedGeneration = br.Generation
		r.mu.Lock()
		r.ensured[br.UID] = time.Now()
		r.mu.Unlock()
	}
	if o.status != driver.StatusSucc || (!wasRegistered && r.BackendSuccessEvents) {
		r.event(br, o, "EnsureBackend")
	}
	// Registered again (a spec change, a holder asked to ensure its address again) is not a
	// registration.
	if o.status == driver.StatusSucc && !registeredBefore && r.OnRegistered != nil {
		r.OnRegistered(br)
	}
	return r.finish(br, o, br.Spec.EnsurePolicy.IsAlways()), nil
}

// setRegistered records an ensure (or address) outcome in the Registered condition. Running
// leaves a registered backend registered.
func (r *backendRecordReconciler) setRegistered(br *lbcfv1beta1.BackendRecord, o outcome) {
	c := lbcfv1beta1.BackendRecordCondition{Type: lbcfv1beta1.BackendRegistered, Message: o.msg}
	switch {
	case o.status == driver.StatusSucc:
		c.Status = lbcfv1beta1.ConditionTrue
	case o.status == driver.StatusRunning:
		if br.IsRegistered() {
			return
		}
		c.Status, c.Reason = lbcfv1beta1.ConditionFalse, string(lbcfv1beta1.ReasonOperationInProgress)
	case driver.IsInvalidResponse(o.err):
		c.Status, c.Reason = lbcfv1beta1.ConditionFalse, string(lbcfv1beta1.ReasonInvalidResponse)
	default:
		c.Status, c.Reason = lbcfv1beta1.ConditionFalse, string(lbcfv1beta1.ReasonOperationFailed)
	}
	setRecordCondition(&br.Status.Conditions, c)
}

func (r *backendRecordReconciler) deregister(ctx context.Context, w writer, br *lbcfv1beta1.BackendRecord) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(br, lbcfv1beta1.FinalizerDeregisterBackend) {
		return ctrl.Result{}, nil
	}
	var o outcome
	// Static addresses and those the record was created with: ensureBackend may have run before
	// any status write.
	addr := recordAddr(br)
	holders, others, err := r.heldByAnother(ctx, br)
	if err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case addr == "":
		o.status = driver.StatusSucc // never registered anywhere: the address is stored first
	case len(holders) > 0:
		// The device holds the address once; another record still needs it there. This record
		// may have begun taking it off already (a drain that answered Running, a call that raced
		// a holder's registration): the holders ensure it again before this record lets go.
		if err := r.reassert(ctx, w, br, addr, holders); err != nil {
			return ctrl.Result{}, err
		}
		o.status = driver.StatusSucc
		r.Recorder.Eventf(br, nil, corev1.EventTypeNormal, "SharedAddrKept", "DeregisterBackend",
			"address %s not deregistered: %s holds it registered", addr, describe(holders))
	default:
		drv, err := r.driverOf(ctx, br)
		if err != nil || drv == nil {
			return ctrl.Result{RequeueAfter: r.MaxRetryDelay}, err
		}
		if !r.callsDriver(drv.Spec.AcceptDryRunCall) {
			return ctrl.Result{}, nil
		}
		ep := driver.EndpointFor(drv)
		unhealthy := driverUnhealthy(drv)
		if !r.budget.Acquire(ep.Name, unhealthy, client.ObjectKeyFromObject(br)) {
			return ctrl.Result{RequeueAfter: r.MaxRetryDelay}, nil
		}
		rsp, err := r.Invoker.DeregisterBackend(ctx, ep, &driver.BackendOperationRequest{
			RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: driver.RecordID(driver.DeregisterBackend, string(br.UID))},
			DryRun:               r.DryRun, LBInfo: br.Spec.LBInfo, BackendAddr: addr, Parameters: br.Spec.Parameters,
			InjectedInfo: br.Status.InjectedInfo,
		})
		r.budget.Observe(ep.Name, driver.IsTimeout(err))
		r.budget.Release(ctx, ep.Name, unhealthy)
		o = outcomeOf(commonOfBackend(rsp, err))
		if r.DryRun {
			return ctrl.Result{}, nil
		}
		if o.status == driver.StatusSucc {
			// A record registered with this address while the call was on its way (decided on
			// a cache that did not show it yet) lost it on the device: it ensures it again.
			if holders, _, err = r.heldByAnother(ctx, br); err != nil {
				return ctrl.Result{}, err
			}
			if err := r.reassert(ctx, w, br, addr, holders); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if o.status != driver.StatusSucc {
		t, reason := o.eventReason("Deregister")
		r.Recorder.Eventf(br, nil, t, reason, "DeregisterBackend", "%s", o.msg)
		return r.finish(br, o, false), nil
	}
	orig := br.DeepCopy()
	controllerutil.RemoveFinalizer(br, lbcfv1beta1.FinalizerDeregisterBackend)
	withBackendLabel(br) // written whole: a record with other finalizers stays
	if err := client.IgnoreNotFound(w.update(ctx, br, orig, "Update", false)); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	r.acted.Done(br.UID, time.Now(), orig.ResourceVersion)
	r.mu.Lock()
	delete(r.ensured, br.UID)
	r.mu.Unlock()
	r.backoff.forget(string(br.UID))
	r.wakeAll(ctx, others) // their DuplicateAddress condition may end with this record
	return ctrl.Result{}, nil
}

// reassert makes the records that hold addr registered ensure it again, before br (which shares
// it) lets go of it: br's deregistration may have taken it off the device, and a registered
// record is otherwise idle. Written on the holders (their status.observedGeneration, which then
// no longer says the registration reflects their spec), the request survives this process.
func (r *backendRecordReconciler) reassert(ctx context.Context, w writer, br *lbcfv1beta1.BackendRecord, addr string, holders []*lbcfv1beta1.BackendRecord) error {
	if r.DryRun {
		return nil
	}
	for _, h := range holders {
		if h.Status.ObservedGeneration != h.Generation {
			continue // an ensure is due already
		}
		cp := h.DeepCopy()
		cp.Status.ObservedGeneration = 0
		err := w.do(ctx, cp, "UpdateStatus", func() error {
			return r.Status().Patch(ctx, cp, client.MergeFromWithOptions(h, client.MergeFromWithOptimisticLock{}))
		})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("ask record %s to ensure %s again: %w", h.Name, addr, err)
		}
		r.Recorder.Eventf(cp, nil, corev1.EventTypeNormal, "ReassertBackend", "EnsureBackend",
			"address %s: record %s/%s, which shares it, is deregistering; ensuring it again", addr, br.Namespace, br.Name)
	}
	return nil
}

// setDuplicate writes a changed DuplicateAddress condition on a record that is otherwise left
// alone, and reports it.
func (r *backendRecordReconciler) setDuplicate(ctx context.Context, w writer, br *lbcfv1beta1.BackendRecord, c *lbcfv1beta1.BackendRecordCondition, others []*lbcfv1beta1.BackendRecord) error {
	if c == nil || r.DryRun {
		return nil
	}
	orig := br
	br = br.DeepCopy()
	setRecordCondition(&br.Status.Conditions, *c)
	if err := w.do(ctx, br, "UpdateStatus", func() error { return r.Status().Patch(ctx, br, client.MergeFrom(orig)) }); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.reportDuplicate(ctx, br, c, others)
	return nil
}

// driverUnhealthy reports whether the driver's healthz said unhealthy (or did not answer).
func driverUnhealthy(d *lbcfv1beta1.LoadBalancerDriver) bool {
	c := d.Status.DriverCondition(lbcfv1beta1.DriverHealthy)
	return c != nil && c.Status == lbcfv1beta1.ConditionFalse
}

func (r *backendRecordReconciler) driverOf(ctx context.Context, br *lbcfv1beta1.BackendRecord) (*lbcfv1beta1.LoadBalancerDriver, error) {
	drv := &lbcfv1beta1.LoadBalancerDriver{}
	if err := r.Get(ctx, sharedKey(br.Namespace, br.Spec.LBDriver), drv); err != nil {
		if apierrors.IsNotFound(err) {
			r.Recorder.Eventf(br, nil, corev1.EventTypeWarning, "DriverNotFound", "Sync", "driver %s not found", sharedKey(br.Namespace, br.Spec.LBDriver))
			return nil, nil
		}
		return nil, fmt.Errorf("get driver: %w", err)
	}
	return drv, nil
}

// ownerGone reports whether the record's controlling BackendGroup no longer exists, so that
// records are cleaned up even where no garbage collector runs.
func (r *backendRecordReconciler) ownerGone(ctx context.Context, br *lbcfv1beta1.BackendRecord) (bool, error) {
	ref := metav1.GetControllerOf(br)
	if ref == nil || ref.Kind != lbcfv1beta1.KindBackendGroup {
		return false, nil
	}
	// The typed cache is the one whose delete events enqueue the records: when the event comes,
	// the group is already gone from it (a metadata-only cache could still have it).
	// Only its UID is read: the cached group itself, not a deep copy (every record reconcile asks,
	// and the copies were 156 MB of the 2.9 GB a 100,000-record restart's resync allocated).
	bg := &lbcfv1beta1.BackendGroup{}
	err := r.Get(ctx, client.ObjectKey{Namespace: br.Namespace, Name: ref.Name}, bg, client.UnsafeDisableDeepCopy)
	if err == nil && bg.UID == ref.UID {
		return false, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	// The cache may lag behind a just-created group: confirm with the API server.
	if r.APIReader == nil {
		return false, nil
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(lbcfv1beta1.SchemeGroupVersion.WithKind(lbcfv1beta1.KindBackendGroup))
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: br.Namespace, Name: ref.Name}, meta)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return meta.UID != ref.UID, nil
}

// addrBeingDeregistered reports whether another record of the same load balancer and address
// is being deregistered. The records themselves are the state, so this survives restarts.
func (r *backendRecordReconciler) addrBeingDeregistered(ctx context.Context, br *lbcfv1beta1.BackendRecord) (bool, error) {
	others, err := r.sameAddr(ctx, br)
	if err != nil {
		return false, err
	}
	for _, o := range others {
		if o.DeletionTimestamp != nil && controllerutil.ContainsFinalizer(o, lbcfv1beta1.FinalizerDeregisterBackend) {
			return true, nil
		}
	}
	return false, nil
}

func (r *backendRecordReconciler) event(br *lbcfv1beta1.BackendRecord, o outcome, op string) {
	t, reason := o.eventReason(op)
	msg := o.msg
	if msg == "" {
		msg = reason
	}
	if reason == "SuccEnsureBackend" && br.Status.BackendAddr != "" {
		msg = "registered " + br.Status.BackendAddr
	}
	r.Recorder.Eventf(br, nil, t, reason, op, "%s", msg)
}

func (r *backendRecordReconciler) finish(br *lbcfv1beta1.BackendRecord, o outcome, always bool) ctrl.Result {
	key := string(br.UID)
	switch o.status {
	case driver.StatusSucc:
		if always {
			return r.toResult(r.backoff, key, periodicResult(br.Spec.EnsurePolicy.Period()))
		}
		return r.toResult(r.backoff, key, finishedResult())
	case driver.StatusRunning:
		return r.toResult(r.backoff, key, asyncResult(o.delay))
	case driver.StatusFail:
		return r.toResult(r.backoff, key, failedResult(o.delay))
	}
	return r.toResult(r.backoff, key, failedResult(0))
}

func commonOf(rsp *driver.GenerateBackendAddrResponse, err error) (*driver.ResponseForFailRetryHooks, error) {
	if err != nil {
		return nil, err
	}
	return &rsp.ResponseForFailRetryHooks, nil
}

func commonOfBackend(rsp *driver.BackendOperationResponse, err error) (*driver.ResponseForFailRetryHooks, error) {
	if err != nil {
		return nil, err
	}
	return &rsp.ResponseForFailRetryHooks, nil
}
