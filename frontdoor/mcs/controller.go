package mcs

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	networkingv1alpha1 "github.com/karmada-io/karmada/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
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
)

// Kind is the front door's label value and name prefix of its generated objects.
const Kind = "mcs"

// Options configure the MultiClusterService front door.
type Options struct {
	// Driver is the generated LoadBalancers' LoadBalancerDriver (frontdoor.DefaultDriver when empty).
	Driver   string
	Recorder events.EventRecorder
	// ResyncPeriod re-reconciles every MultiClusterService at least this often (5 min when 0).
	ResyncPeriod time.Duration
}

// Reconciler translates MultiClusterServices with type LoadBalancer into LBCF objects.
type Reconciler struct {
	client.Client
	kit    *frontdoor.Kit
	opts   Options
	record events.EventRecorder
}

// Setup registers the reconciler with the manager (its scheme needs frontdoor.AddToScheme and the
// LBCF kinds).
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = 5 * time.Minute
	}
	r := &Reconciler{Client: mgr.GetClient(), opts: opts, record: opts.Recorder,
		kit: &frontdoor.Kit{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: opts.Recorder, Driver: opts.Driver}}
	sameName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	})
	ofBinding := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if key, ok := frontdoor.ServiceOfBinding(o); ok {
			return []reconcile.Request{{NamespacedName: key}}
		}
		return nil
	})
	owner := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &networkingv1alpha1.MultiClusterService{}, handler.OnlyControllerOwner())
	err := ctrl.NewControllerManagedBy(mgr).Named("frontdoor-mcs").
		For(&networkingv1alpha1.MultiClusterService{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&lbcfv1beta1.BackendGroup{}).
		Owns(&policyv1alpha1.PropagationPolicy{}).
		// Its own LoadBalancers (status: Created), and any other one: a conflict may be resolved.
		Watches(&lbcfv1beta1.LoadBalancer{}, frontdoor.LoadBalancerEvents(owner, r.enqueueRefused)).
		Watches(&corev1.Service{}, sameName, builder.WithPredicates(servicechange.Predicate())).
		Watches(&workv1alpha2.ResourceBinding{}, ofBinding, builder.WithPredicates(frontdoor.PlacementUpdates())).
		WithOptions(ctrlqueue.Options(controller.Options{})).
		Complete(r)
	if err != nil {
		return nil, fmt.Errorf("frontdoor-mcs controller: %w", err)
	}
	return r, nil
}

// enqueueRefused re-examines the front doors refused for a conflict or a taken name: a
// LoadBalancer that appeared or went may settle it.
func (r *Reconciler) enqueueRefused(ctx context.Context, q frontdoor.Queue) {
	list := &networkingv1alpha1.MultiClusterServiceList{}
	// Read only: no copies (every LoadBalancer event of the initial list comes here).
	if err := r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	for i := range list.Items {
		c := meta.FindStatusCondition(list.Items[i].Status.Conditions, frontdoor.ConditionLoadBalancer)
		if c != nil && frontdoor.WaitsForLoadBalancers(c.Reason) {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
}

// LoadBalancerEnabled tells whether a MultiClusterService asks for a load balancer.
func LoadBalancerEnabled(m *networkingv1alpha1.MultiClusterService) bool {
	return m.DeletionTimestamp == nil && slices.Contains(m.Spec.Types, networkingv1alpha1.ExposureTypeLoadBalancer)
}

func door(m *networkingv1alpha1.MultiClusterService) frontdoor.Door {
	return frontdoor.Door{Kind: Kind, GVK: schema.GroupVersionKind{Group: networkingv1alpha1.GroupVersion.Group, Version: networkingv1alpha1.GroupVersion.Version, Kind: networkingv1alpha1.ResourceKindMultiClusterService}, Object: m}
}

// Reconcile translates one MultiClusterService.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx).WithValues("multiClusterService", req.NamespacedName)
	m := &networkingv1alpha1.MultiClusterService{}
	if err := r.Get(ctx, req.NamespacedName, m); err != nil {
		// Gone: the garbage collector deletes what it owned.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	d := door(m)
	if !LoadBalancerEnabled(m) {
		if m.DeletionTimestamp != nil {
			return reconcile.Result{}, nil
		}
		left, err := r.kit.Release(ctx, d)
		if err != nil {
			return reconcile.Result{}, err
		}
		if left {
			logger.V(1).Info("LoadBalancer removed from spec.types: generated objects deleted")
		}
		if meta.FindStatusCondition(m.Status.Conditions, frontdoor.ConditionLoadBalancer) == nil {
			return reconcile.Result{}, nil // never served by lbfed: its status is not ours
		}
		return reconcile.Result{}, r.writeStatus(ctx, m, nil, nil)
	}
	out, vip, skipped, err := r.sync(ctx, d, m)
	cond := frontdoor.Condition(m.Generation, out, skipped, err)
	ingress := m.Status.LoadBalancer.Ingress
	_, refused := frontdoor.AsRefusal(err)
	switch shown, serr := r.kit.VIPShown(ctx, d, out, err); {
	case serr != nil:
		return reconcile.Result{}, serr
	case shown == frontdoor.Show:
		ingress = []corev1.LoadBalancerIngress{{IP: vip}}
	case shown == frontdoor.Hide:
		ingress = nil
	}
	if werr := r.writeStatus(ctx, m, &cond, ingress); werr != nil {
		return reconcile.Result{}, werr
	}
	if err != nil && !refused {
		logger.Error(err, "sync failed")
		return reconcile.Result{}, err
	}
	logger.V(1).Info("synced", "reason", cond.Reason, "loadBalancers", out.LoadBalancers)
	return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, nil
}

// sync reads the MultiClusterService's input and syncs the generated objects.
func (r *Reconciler) sync(ctx context.Context, d frontdoor.Door, m *networkingv1alpha1.MultiClusterService) (out frontdoor.Outcome, vip string, skipped []string, err error) {
	addr, method, err := frontdoor.VIPAndMethod(m.Annotations, "")
	if err != nil {
		return out, "", nil, err
	}
	vip = addr.String()
	svc := &corev1.Service{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(m), svc); err != nil {
		if apierrors.IsNotFound(err) {
			return out, vip, nil, frontdoor.Refusef(frontdoor.ReasonServiceNotFound, "Service %s/%s not found on the Karmada API server", m.Namespace, m.Name)
		}
		return out, vip, nil, fmt.Errorf("get Service: %w", err)
	}
	ports, held, skipped, err := r.kit.Ports(ctx, svc, portFilter(m.Spec.Ports))
	if err != nil {
		return out, vip, skipped, err
	}
	for _, p := range m.Spec.Ports {
		if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Port == p.Port && (p.Name == "" || p.Name == sp.Name) }) {
			skipped = append(skipped, fmt.Sprintf("port %d (%q) of spec.ports: not a port of the Service", p.Port, p.Name))
		}
	}
	if len(ports) == 0 {
		return out, vip, skipped, frontdoor.Refusef(frontdoor.ReasonInvalid, "no TCP or UDP port of Service %s/%s to expose", svc.Namespace, svc.Name)
	}
	var clusters []string
	for _, c := range m.Spec.ProviderClusters {
		clusters = append(clusters, c.Name)
	}
	if len(clusters) == 0 {
		if clusters, err = frontdoor.Clusters(ctx, r, svc); err != nil {
			return out, vip, skipped, err
		}
	}
	out, err = r.kit.Sync(ctx, d, frontdoor.Want{VIP: addr, Method: method, Selector: svc.Spec.Selector, Ports: ports, Held: held, Clusters: clusters})
	return out, vip, skipped, err
}

// portFilter keeps the Service ports listed in spec.ports (by number, and name when given); all
// when the list is empty.
func portFilter(want []networkingv1alpha1.ExposurePort) frontdoor.PortFilter {
	if len(want) == 0 {
		return nil
	}
	return func(sp corev1.ServicePort) bool {
		return slices.ContainsFunc(want, func(p networkingv1alpha1.ExposurePort) bool {
			return p.Port == sp.Port && (p.Name == "" || p.Name == sp.Name)
		})
	}
}

// writeStatus sets the front door's condition (removed when cond is nil) and
// status.loadBalancer.ingress, with an event when the condition changes. Karmada's own
// MultiClusterService controller sets its ServiceApplied condition on the same list; conditions
// of other types are kept and a conflict is retried.
func (r *Reconciler) writeStatus(ctx context.Context, m *networkingv1alpha1.MultiClusterService, cond *metav1.Condition, ingress []corev1.LoadBalancerIngress) error {
	old := meta.FindStatusCondition(m.Status.Conditions, frontdoor.ConditionLoadBalancer)
	changed := false
	if cond == nil {
		changed = meta.RemoveStatusCondition(&m.Status.Conditions, frontdoor.ConditionLoadBalancer)
	} else {
		if old == nil || old.Reason != cond.Reason || old.Message != cond.Message {
			typ := corev1.EventTypeNormal
			if cond.Status != "True" || cond.Reason == frontdoor.ReasonPortsSkipped {
				typ = corev1.EventTypeWarning
			}
			r.record.Eventf(m, nil, typ, cond.Reason, "Sync", "%s", cond.Message)
		}
		changed = meta.SetStatusCondition(&m.Status.Conditions, *cond)
	}
	if len(ingress) == 0 {
		ingress = nil
	}
	if !reflect.DeepEqual(m.Status.LoadBalancer.Ingress, ingress) {
		m.Status.LoadBalancer.Ingress = ingress
		changed = true
	}
	if !changed {
		return nil
	}
	if err := r.Status().Update(ctx, m); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}
