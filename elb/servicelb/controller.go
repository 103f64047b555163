package servicelb

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/lbfed/lbfed/ctrlqueue"
	"github.com/lbfed/lbfed/elb/radware"
	"github.com/lbfed/lbfed/elb/radware/alteon"
	"github.com/lbfed/lbfed/lbspec"
)

// Frontend programs the Alteon; *radware.Frontend implements it.
type Frontend interface {
	SyncOwner(ctx context.Context, owner string, desired []radware.Desired) (radware.SyncResult, error)
	DeleteOwner(ctx context.Context, owner string) error
}

// Options configure the controller.
type Options struct {
	Frontend Frontend
	// ClusterName is part of the owner mark of every Alteon object (elb/<cluster>/<ns>/<name>), so
	// that several clusters can share one Alteon pair (default "kubernetes").
	ClusterName string
	// LoadBalancerClass is the spec.loadBalancerClass claimed (default DefaultLoadBalancerClass).
	LoadBalancerClass string
	// ClaimUnclassed also claims Services without a loadBalancerClass that carry lbspec.AnnotationVIP
	// (zdnscloud/elb-controller's behaviour).
	ClaimUnclassed bool
	// MaxRetries is how many consecutive times the device may refuse one Service's change (a
	// rejected write, a failed apply) before the controller gives up (with a Warning event) until
	// the Service, its endpoints or the nodes change, or ResyncPeriod passes (default 5). Failures of
	// the device itself (unreachable, no master, another writer's pending edits) are retried with
	// capped backoff for as long as they last: a change made during an HA incident is applied as
	// soon as the pair is back.
	MaxRetries int
	// RetryBaseDelay and RetryMaxDelay bound the exponential backoff (defaults 1s, 30s).
	RetryBaseDelay, RetryMaxDelay time.Duration
	// MaxConcurrentReconciles lets several Services reconcile at once; their Alteon changes share
	// transactions (default 4).
	MaxConcurrentReconciles int
	// ResyncPeriod re-reconciles every claimed Service this often, repairing drift on the device,
	// and retries Services given up on or in conflict (default 10m).
	ResyncPeriod time.Duration
	// Recorder emits events on Services (default: the manager's "elb-controller" recorder).
	Recorder events.EventRecorder
}

// Reconciler is the Service type=LoadBalancer controller.
type Reconciler struct {
	client.Client
	opts Options

	mu       sync.Mutex
	failures map[types.NamespacedName]int
}

// Event reasons.
const (
	ReasonSynced    = "EnsuredLoadBalancer"
	ReasonDeleted   = "DeletedLoadBalancer"
	ReasonInvalid   = "InvalidLoadBalancer"
	ReasonSkipped   = "PortSkipped"
	ReasonConflict  = "LoadBalancerConflict"
	ReasonFailed    = "SyncLoadBalancerFailed"
	ReasonGaveUp    = "SyncLoadBalancerGaveUp"
	ReasonNoBackend = "NoBackends"
	// ReasonForeignEdits: another writer's configuration is pending on the Alteon master; nothing
	// is committed until it is applied or reverted (one writer per pair).
	ReasonForeignEdits = "ForeignAlteonEdits"
)

// SetupWithManager builds the controller: it watches Services, their EndpointSlices (for
// externalTrafficPolicy Local) and Nodes.
func SetupWithManager(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if opts.Frontend == nil {
		return nil, errors.New("servicelb: no frontend")
	}
	if opts.ClusterName == "" {
		opts.ClusterName = "kubernetes"
	}
	if opts.LoadBalancerClass == "" {
		opts.LoadBalancerClass = DefaultLoadBalancerClass
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = 5
	}
	if opts.RetryBaseDelay <= 0 {
		opts.RetryBaseDelay = time.Second
	}
	if opts.RetryMaxDelay <= 0 {
		opts.RetryMaxDelay = 30 * time.Second
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = 4
	}
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = 10 * time.Minute
	}
	if opts.Recorder == nil {
		opts.Recorder = mgr.GetEventRecorder("elb-controller")
	}
	r := &Reconciler{Client: mgr.GetClient(), opts: opts, failures: map[types.NamespacedName]int{}}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("elb-service").
		For(&corev1.Service{}, builder.WithPredicates(serviceChanged())).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(r.serviceOfSlice)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.claimedServices), builder.WithPredicates(nodeChanged())).
		WithOptions(ctrlqueue.Options(controller.Options{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](opts.RetryBaseDelay, opts.RetryMaxDelay),
		})).
		Complete(r)
	return r, err
}

// serviceChanged ignores status-only updates (the controller's own status patches).
func serviceChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Service), e.ObjectNew.(*corev1.Service)
		return !reflect.DeepEqual(o.Spec, n.Spec) || !reflect.DeepEqual(o.Annotations, n.Annotations) ||
			!reflect.DeepEqual(o.Finalizers, n.Finalizers) || !o.DeletionTimestamp.Equal(n.DeletionTimestamp)
	}}
}

// nodeChanged passes node updates that can change a load balancer's backends.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
		oip, _ := nodeIP(o)
		nip, _ := nodeIP(n)
		return nodeReady(o) != nodeReady(n) || o.Spec.Unschedulable != n.Spec.Unschedulable ||
			excluded(o) != excluded(n) || oip != nip
	}}
}

func (r *Reconciler) claims(svc *corev1.Service) bool {
	return lbspec.Claims(svc, r.opts.LoadBalancerClass, r.opts.ClaimUnclassed)
}

func (r *Reconciler) serviceOfSlice(ctx context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[discoveryv1.LabelServiceName]
	if name == "" {
		return nil
	}
	var svc corev1.Service
	if err := r.Get(ctx, types.NamespacedName{Namespace: o.GetNamespace(), Name: name}, &svc); err != nil {
		return nil
	}
	// Only externalTrafficPolicy Local depends on where the endpoints are.
	if !r.claims(&svc) || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}}}
}

func (r *Reconciler) claimedServices(ctx context.Context, _ client.Object) []reconcile.Request {
	var list corev1.ServiceList
	if err := r.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "list Services for a node change")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if s := &list.Items[i]; r.claims(s) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
	}
	return out
}

// Reconcile brings the Alteon in line with one Service.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	var svc corev1.Service
	if err := r.Get(ctx, req.NamespacedName, &svc); err != nil {
		r.forget(req.NamespacedName)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	own := owner(r.opts.ClusterName, &svc)
	if !svc.DeletionTimestamp.IsZero() || !r.claims(&svc) {
		return r.release(ctx, &svc, own)
	}
	if !controllerutil.ContainsFinalizer(&svc, Finalizer) {
		patch := client.MergeFrom(svc.DeepCopy())
		controllerutil.AddFinalizer(&svc, Finalizer)
		if err := r.Patch(ctx, &svc, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return reconcile.Result{}, fmt.Errorf("list nodes: %w", err)
	}
	var slices discoveryv1.EndpointSliceList
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		if err := r.List(ctx, &slices, client.InNamespace(svc.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
			return reconcile.Result{}, fmt.Errorf("list endpoint slices: %w", err)
		}
	}
	want, skipped, err := desired(r.opts.ClusterName, &svc, nodes.Items, slices.Items)
	if err != nil {
		// The Service is wrong as written: the Alteon keeps what it has, and nothing is retried
		// until the Service changes.
		r.opts.Recorder.Eventf(&svc, nil, corev1.EventTypeWarning, ReasonInvalid, "Sync", "%v", err)
		r.forget(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	for _, s := range skipped {
		r.opts.Recorder.Eventf(&svc, nil, corev1.EventTypeWarning, ReasonSkipped, "Sync", "%s", s)
	}
	if len(want) > 0 && len(want[0].Backends) == 0 {
		r.opts.Recorder.Eventf(&svc, nil, corev1.EventTypeWarning, ReasonNoBackend, "Sync", "no node can receive the traffic (none Ready and eligible%s)",
			map[bool]string{true: ", with a ready endpoint", false: ""}[svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal])
	}

	res, err := r.opts.Frontend.SyncOwner(ctx, own, want)
	if err != nil {
		return r.failed(ctx, &svc, "sync", err)
	}
	r.forget(req.NamespacedName)

	ip, _ := vip(&svc)
	wantIngress := ingress(ip)
	if len(want) == 0 {
		wantIngress = nil
	}
	if !reflect.DeepEqual(svc.Status.LoadBalancer.Ingress, wantIngress) {
		patch := client.MergeFrom(svc.DeepCopy())
		svc.Status.LoadBalancer.Ingress = wantIngress
		if err := r.Status().Patch(ctx, &svc, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("patch status: %w", err)
		}
		r.opts.Recorder.Eventf(&svc, nil, corev1.EventTypeNormal, ReasonSynced, "Sync", "load balancer %s on ports %s", ip, portList(want))
	}
	logger.V(1).Info("Service synced", "owner", own, "loadBalancers", len(want), "requeue", res.Requeue)
	next := r.opts.ResyncPeriod
	if res.Requeue > 0 && res.Requeue < next {
		next = res.Requeue // removed backends are draining
	}
	return reconcile.Result{RequeueAfter: next}, nil
}

// release removes the Service's Alteon objects when it is deleted or no longer claimed, then its
// finalizer (and status, if the Service stays).
func (r *Reconciler) release(ctx context.Context, svc *corev1.Service, own string) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(svc, Finalizer) && !controllerutil.ContainsFinalizer(svc, LegacyFinalizer) {
		return reconcile.Result{}, nil
	}
	if err := r.opts.Frontend.DeleteOwner(ctx, own); err != nil {
		return r.failed(ctx, svc, "delete", err)
	}
	r.forget(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
	r.opts.Recorder.Eventf(svc, nil, corev1.EventTypeNormal, ReasonDeleted, "Delete", "Alteon objects of %s removed", own)
	if svc.DeletionTimestamp.IsZero() && len(svc.Status.LoadBalancer.Ingress) > 0 {
		patch := client.MergeFrom(svc.DeepCopy())
		svc.Status.LoadBalancer.Ingress = nil
		if err := r.Status().Patch(ctx, svc, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("clear status: %w", err)
		}
	}
	patch := client.MergeFrom(svc.DeepCopy())
	controllerutil.RemoveFinalizer(svc, Finalizer)
	controllerutil.RemoveFinalizer(svc, LegacyFinalizer)
	if err := r.Patch(ctx, svc, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{}, nil
}

// failed turns an Alteon error into events and a bounded number of retries.
func (r *Reconciler) failed(ctx context.Context, svc *corev1.Service, action string, err error) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	if radware.IsRejected(err) {
		// Someone else's objects are in the way: retrying cannot help until something changes.
		r.opts.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, ReasonConflict, action, "%v", err)
		r.forget(key)
		return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, nil
	}
	r.mu.Lock()
	r.failures[key]++
	n := r.failures[key]
	r.mu.Unlock()
	if errors.Is(err, alteon.ErrForeignPending) {
		r.opts.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, ReasonForeignEdits, action, "attempt %d: %v", n, err)
		return reconcile.Result{}, err
	}
	if !radware.IsRefusedByDevice(err) {
		// The device (or the way to it) fails, not this change: keep trying, with the rate
		// limiter's capped backoff, for as long as the incident lasts.
		r.opts.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, ReasonFailed, action,
			"attempt %d (retrying while the Alteon is unavailable, at most %s apart): %v", n, r.opts.RetryMaxDelay, err)
		return reconcile.Result{}, err
	}
	if n > r.opts.MaxRetries {
		r.opts.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, ReasonGaveUp, action,
			"giving up after %d attempts until the Service, its endpoints or the nodes change: %v", n, err)
		log.FromContext(ctx).Error(err, "giving up on Service until it changes or the next resync", "attempts", n)
		r.forget(key)
		return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, nil
	}
	r.opts.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, ReasonFailed, action, "attempt %d of %d: %v", n, r.opts.MaxRetries, err)
	return reconcile.Result{}, err
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failures, key)
}

func portList(want []radware.Desired) string {
	parts := make([]string, len(want))
	for i, d := range want {
		parts[i] = fmt.Sprintf("%d/%s", d.LoadBalancer.Port, d.LoadBalancer.Protocol)
	}
	return strings.Join(parts, ",")
}
