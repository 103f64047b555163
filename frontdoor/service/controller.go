package service

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/lbfed/lbfed/ctrlqueue"
	"github.com/lbfed/lbfed/frontdoor"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/servicechange"
	"github.com/lbfed/lbfed/lbspec"
)

const (
	// Kind is the front door's label value and name prefix of its generated objects.
	Kind = "service"
	// DefaultLoadBalancerClass is the spec.loadBalancerClass lbfed claims on Karmada. It differs
	// from elb-controller's (lb.zdns.cn/radware) so that an elb-controller in a member never
	// claims the propagated copy.
	DefaultLoadBalancerClass = "lbfed.io/radware"
	// AnnotationIngress carries the VIP from the template to the members, set by the Karmada
	// side once the VIP is on the device ("" while it is not). The member side copies it into
	// the member Service's status.loadBalancer.ingress, which Karmada aggregates into the
	// template's status: one writer per status, no fight.
	AnnotationIngress = "lbfed.io/load-balancer-ingress"
)

// Options configure the Service front door on the Karmada API server.
type Options struct {
	// LoadBalancerClass is the class claimed (DefaultLoadBalancerClass when empty).
	LoadBalancerClass string
	// ClaimUnclassed claims Services without a class that carry lb.zdns.cn/vip.
	ClaimUnclassed bool
	// Driver is the generated LoadBalancers' LoadBalancerDriver (frontdoor.DefaultDriver when empty).
	Driver   string
	Recorder events.EventRecorder
	// ResyncPeriod re-reconciles every claimed Service at least this often (5 min when 0).
	ResyncPeriod time.Duration
}

func (o *Options) class() string {
	if o.LoadBalancerClass == "" {
		return DefaultLoadBalancerClass
	}
	return o.LoadBalancerClass
}

// Reconciler translates Services type=LoadBalancer on the Karmada API server into LBCF objects.
// It never writes a Service's status (Karmada aggregates it from the members); it writes only
// the AnnotationIngress of the template.
type Reconciler struct {
	client.Client
	kit  *frontdoor.Kit
	opts Options
	// reported is the last condition reported in an event per Service, so that a resync does
	// not repeat it (Services have no condition of ours to compare with).
	mu       sync.Mutex
	reported map[types.NamespacedName]reported
}

type reported struct{ reason, message string }

// Setup registers the reconciler with the manager (its scheme needs frontdoor.AddToScheme and the
// LBCF kinds).
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = 5 * time.Minute
	}
	r := &Reconciler{Client: mgr.GetClient(), opts: opts, reported: map[types.NamespacedName]reported{},
		kit: &frontdoor.Kit{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: opts.Recorder, Driver: opts.Driver}}
	ofBinding := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if key, ok := frontdoor.ServiceOfBinding(o); ok {
			return []reconcile.Request{{NamespacedName: key}}
		}
		return nil
	})
	owner := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &corev1.Service{}, handler.OnlyControllerOwner())
	err := ctrl.NewControllerManagedBy(mgr).Named("frontdoor-service").
		For(&corev1.Service{}, builder.WithPredicates(servicechange.Predicate())).
		Owns(&lbcfv1beta1.BackendGroup{}).
		Owns(&policyv1alpha1.PropagationPolicy{}).
		Watches(&lbcfv1beta1.LoadBalancer{}, frontdoor.LoadBalancerEvents(owner, r.enqueueRefused)).
		Watches(&workv1alpha2.ResourceBinding{}, ofBinding, builder.WithPredicates(frontdoor.PlacementUpdates())).
		WithOptions(ctrlqueue.Options(controller.Options{})).
		Complete(r)
	if err != nil {
		return nil, fmt.Errorf("frontdoor-service controller: %w", err)
	}
	return r, nil
}

// enqueueRefused re-examines the Services refused for a conflict or a taken name.
func (r *Reconciler) enqueueRefused(_ context.Context, q frontdoor.Queue) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, last := range r.reported {
		if frontdoor.WaitsForLoadBalancers(last.reason) {
			q.Add(reconcile.Request{NamespacedName: key})
		}
	}
}

func door(svc *corev1.Service) frontdoor.Door {
	return frontdoor.Door{Kind: Kind, GVK: corev1.SchemeGroupVersion.WithKind("Service"), Object: svc}
}

// Reconcile translates one Service.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx).WithValues("service", req.NamespacedName)
	svc := &corev1.Service{}
	if err := r.Get(ctx, req.NamespacedName, svc); err != nil {
		r.forget(req.NamespacedName)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	d := door(svc)
	if svc.DeletionTimestamp != nil {
		return reconcile.Result{}, nil // the garbage collector deletes what it owned
	}
	if !lbspec.Claims(svc, r.opts.class(), r.opts.ClaimUnclassed) {
		if _, err := r.kit.Release(ctx, d); err != nil {
			return reconcile.Result{}, err
		}
		r.forget(req.NamespacedName)
		// A Service lbfed served keeps the annotation, emptied: the members clear the VIP they show.
		if _, had := svc.Annotations[AnnotationIngress]; had {
			return reconcile.Result{}, r.setIngress(ctx, svc, "")
		}
		return reconcile.Result{}, nil
	}
	vip, out, skipped, err := r.sync(ctx, d, svc)
	cond := frontdoor.Condition(svc.Generation, out, skipped, err)
	r.report(svc, cond.Reason, cond.Status != "True" || cond.Reason == frontdoor.ReasonPortsSkipped, cond.Message)
	_, refused := frontdoor.AsRefusal(err)
	switch shown, serr := r.kit.VIPShown(ctx, d, out, err); {
	case serr != nil:
		return reconcile.Result{}, serr
	case shown == frontdoor.Show:
		err = r.setIngress(ctx, svc, vip)
	case shown == frontdoor.Hide:
		err = r.setIngress(ctx, svc, "")
	}
	if err != nil && !refused {
		logger.Error(err, "sync failed")
		return reconcile.Result{}, err
	}
	logger.V(1).Info("synced", "reason", cond.Reason, "loadBalancers", out.LoadBalancers)
	return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, nil
}

func (r *Reconciler) sync(ctx context.Context, d frontdoor.Door, svc *corev1.Service) (string, frontdoor.Outcome, []string, error) {
	addr, method, err := frontdoor.VIPAndMethod(svc.Annotations, svc.Spec.LoadBalancerIP)
	if err != nil {
		return "", frontdoor.Outcome{}, nil, err
	}
	ports, held, skipped, err := r.kit.Ports(ctx, svc, nil)
	if err != nil {
		return "", frontdoor.Outcome{}, skipped, err
	}
	if len(ports) == 0 {
		return "", frontdoor.Outcome{}, skipped, frontdoor.Refusef(frontdoor.ReasonInvalid, "no TCP or UDP port of Service %s/%s to expose", svc.Namespace, svc.Name)
	}
	clusters, err := frontdoor.Clusters(ctx, r, svc)
	if err != nil {
		return "", frontdoor.Outcome{}, skipped, err
	}
	out, err := r.kit.Sync(ctx, d, frontdoor.Want{VIP: addr, Method: method, Selector: svc.Spec.Selector, Ports: ports, Held: held, Clusters: clusters})
	return addr.String(), out, skipped, err
}

// report emits an event when the Service's state changed since the last one.
func (r *Reconciler) report(svc *corev1.Service, reason string, warning bool, message string) {
	key := client.ObjectKeyFromObject(svc)
	now := reported{reason, message}
	r.mu.Lock()
	last := r.reported[key]
	r.reported[key] = now
	r.mu.Unlock()
	if last == now {
		return
	}
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	r.opts.Recorder.Eventf(svc, nil, typ, reason, "Sync", "%s", message)
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.reported, key)
	r.mu.Unlock()
}

// setIngress writes AnnotationIngress on the template (a merge patch of that key alone: Karmada's
// own label and annotation writes are kept); "" says no VIP is served.
func (r *Reconciler) setIngress(ctx context.Context, svc *corev1.Service, vip string) error {
	if cur, has := svc.Annotations[AnnotationIngress]; has && cur == vip {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, AnnotationIngress, vip)
	if err := r.Patch(ctx, svc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("annotate %s: %w", AnnotationIngress, err)
	}
	return nil
}

// MemberOptions configure the member side.
type MemberOptions struct {
	// LoadBalancerClass as on Karmada: a Service of another class is never written.
	LoadBalancerClass string
	// ClaimUnclassed as on Karmada: Services without a class are written.
	ClaimUnclassed bool
}

// StatusReflector runs in each member (lbcf-controller --mode=member): it sets the
// status.loadBalancer.ingress of a Service type=LoadBalancer of lbfed's class (or unclassed) from
// AnnotationIngress, which Karmada propagated from the template. Services without the
// annotation, or of another class, are never written.
type StatusReflector struct {
	client.Client
	opts MemberOptions
}

// SetupMember registers the StatusReflector.
func SetupMember(mgr ctrl.Manager, opts MemberOptions) error {
	if opts.LoadBalancerClass == "" {
		opts.LoadBalancerClass = DefaultLoadBalancerClass
	}
	r := &StatusReflector{Client: mgr.GetClient(), opts: opts}
	return ctrl.NewControllerManagedBy(mgr).Named("frontdoor-service-status").
		For(&corev1.Service{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			_, ok := o.GetAnnotations()[AnnotationIngress]
			return ok
		}))).
		WithOptions(ctrlqueue.Options(controller.Options{})).
		Complete(r)
}

// Ingress is the status.loadBalancer.ingress an AnnotationIngress value stands for (nil for "" or
// a value that is not an IP address).
func Ingress(value string) []corev1.LoadBalancerIngress {
	a, err := netip.ParseAddr(strings.TrimSpace(value))
	if err != nil {
		return nil
	}
	// ipMode as the API server defaults it, so that an unchanged status compares equal.
	return []corev1.LoadBalancerIngress{{IP: a.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
}

// mine: type LoadBalancer and lbfed's class, or no class when unclassed Services are claimed (the
// lb.zdns.cn/vip annotation may be gone: the emptied AnnotationIngress then clears the VIP).
func (r *StatusReflector) mine(svc *corev1.Service) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	if svc.Spec.LoadBalancerClass != nil {
		return *svc.Spec.LoadBalancerClass == r.opts.LoadBalancerClass
	}
	return r.opts.ClaimUnclassed
}

// Reconcile copies the annotation into the member Service's status.
func (r *StatusReflector) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	svc := &corev1.Service{}
	if err := r.Get(ctx, req.NamespacedName, svc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	value, ok := svc.Annotations[AnnotationIngress]
	if !ok || !r.mine(svc) {
		return reconcile.Result{}, nil
	}
	want := Ingress(value)
	if reflect.DeepEqual(svc.Status.LoadBalancer.Ingress, want) {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFrom(svc.DeepCopy())
	svc.Status.LoadBalancer.Ingress = want
	if err := r.Status().Patch(ctx, svc, patch); err != nil {
		return reconcile.Result{}, fmt.Errorf("patch status: %w", err)
	}
	log.FromContext(ctx).V(1).Info("load balancer ingress set from the template", "service", req.NamespacedName, "ingress", value)
	return reconcile.Result{}, nil
}
