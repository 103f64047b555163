package federation

import (
	"context"
	"fmt"
	"maps"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/servicechange"
)

// Options configure the federation controller.
type Options struct {
	controller.Options
	// Grace is how long a member may be unobserved (Cluster NotReady or gone, binding missing)
	// before the member-loss policy applies.
	Grace time.Duration
	// MemberLossPolicy is the default policy (FailStatic when empty); a group's
	// lbfed.io/member-loss-policy annotation overrides it.
	MemberLossPolicy lbcfv1beta1.MemberLossPolicy
	// CandidatesBudget is the candidate data one group's binding may carry over all members
	// (DefaultCandidatesBudget when 0).
	CandidatesBudget int
	// ResyncPeriod re-reconciles every BackendGroup at least this often.
	ResyncPeriod time.Duration
	// ClusterMetrics, when set, receive the per-cluster figures.
	ClusterMetrics *Metrics
}

// AddToScheme adds the Karmada kinds the federation reads.
func AddToScheme(s *runtime.Scheme) error {
	if err := workv1alpha2.Install(s); err != nil {
		return err
	}
	return clusterv1alpha1.Install(s)
}

// Setup registers the federation controller: the LBCF engine on the Karmada API server with the
// members' reports as backends.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) (*Source, error) {
	if opts.Grace <= 0 {
		opts.Grace = time.Minute
	}
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = 5 * time.Minute
	}
	if err := controller.IndexField(ctx, mgr.GetCache(), &workv1alpha2.ResourceBinding{}, indexBindingResource, controller.InNamespaceLookups, func(o client.Object) []string {
		r := o.(*workv1alpha2.ResourceBinding).Spec.Resource
		if r.APIVersion != lbcfv1beta1.APIVersion {
			return nil
		}
		return []string{r.Kind + "/" + r.Name}
	}); err != nil {
		return nil, fmt.Errorf("index resource bindings: %w", err)
	}
	if opts.MemberLossPolicy == "" {
		opts.MemberLossPolicy = lbcfv1beta1.MemberLossFailStatic
	}
	if _, ok := lbcfv1beta1.ParseMemberLossPolicy(string(opts.MemberLossPolicy)); !ok {
		return nil, fmt.Errorf("unknown member-loss policy %q (FailStatic, Withdraw or Keep)", opts.MemberLossPolicy)
	}
	// A pod whose readiness its member could not observe is handled like a member Karmada cannot
	// observe: the same grace period and policy.
	opts.Readiness.UnobservedGrace, opts.Readiness.Policy = opts.Grace, opts.MemberLossPolicy
	src := &Source{Client: mgr.GetClient(), Writer: mgr.GetClient(), Recorder: opts.Recorder, Grace: opts.Grace,
		Policy: opts.MemberLossPolicy, CandidatesBudget: opts.CandidatesBudget, DryRun: opts.DryRun, Metrics: opts.ClusterMetrics}
	if opts.ClusterMetrics != nil {
		opts.OnRegistered = opts.ClusterMetrics.ObserveRegistered
		if err := opts.ClusterMetrics.records.watch(ctx, mgr.GetCache()); err != nil {
			return nil, err
		}
	}
	c := mgr.GetClient()
	groupsOfCluster := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &workv1alpha2.ResourceBindingList{}
		if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			rb := &list.Items[i]
			if rb.Spec.Resource.APIVersion != lbcfv1beta1.APIVersion || rb.Spec.Resource.Kind != lbcfv1beta1.KindBackendGroup {
				continue
			}
			for _, t := range rb.Spec.Clusters {
				if t.Name == o.GetName() {
					out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: rb.Namespace, Name: rb.Spec.Resource.Name}})
				}
			}
		}
		return out
	})
	forget := handler.Funcs{DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		src.Forget(e.Object.GetUID())
	}}
	watches := []controller.Watch{
		func(b *builder.Builder) *builder.Builder {
			return b.Watches(&workv1alpha2.ResourceBinding{}, groupOfBinding(), builder.WithPredicates(bindingChanged()))
		},
		func(b *builder.Builder) *builder.Builder {
			return b.Watches(&clusterv1alpha1.Cluster{}, groupsOfCluster, builder.WithPredicates(readinessChanged()))
		},
		func(b *builder.Builder) *builder.Builder {
			return b.Watches(&corev1.Service{}, controller.GroupsOfService(c), builder.WithPredicates(servicechange.Predicate()))
		},
		func(b *builder.Builder) *builder.Builder { return b.Watches(&lbcfv1beta1.BackendGroup{}, forget) },
	}
	if err := controller.SetupEngine(ctx, mgr, opts.Options, src, src, opts.ResyncPeriod, watches...); err != nil {
		return nil, err
	}
	if err := (&registrationReporter{Client: mgr.GetClient(), src: src, dryRun: opts.DryRun}).setup(mgr); err != nil {
		return nil, fmt.Errorf("registration reporter: %w", err)
	}
	return src, nil
}

// groupOfBinding maps a ResourceBinding to the BackendGroup template it binds.
func groupOfBinding() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		r := o.(*workv1alpha2.ResourceBinding).Spec.Resource
		if r.APIVersion != lbcfv1beta1.APIVersion || r.Kind != lbcfv1beta1.KindBackendGroup {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: r.Name}}}
	})
}

// bindingChanged passes binding updates that change targets or members' reports.
func bindingChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*workv1alpha2.ResourceBinding), e.ObjectNew.(*workv1alpha2.ResourceBinding)
		if len(o.Spec.Clusters) != len(n.Spec.Clusters) || len(o.Status.AggregatedStatus) != len(n.Status.AggregatedStatus) {
			return true
		}
		for i := range o.Spec.Clusters {
			if o.Spec.Clusters[i].Name != n.Spec.Clusters[i].Name {
				return true
			}
		}
		for i := range o.Status.AggregatedStatus {
			a, b := o.Status.AggregatedStatus[i], n.Status.AggregatedStatus[i]
			if a.ClusterName != b.ClusterName || a.Applied != b.Applied || (a.Status == nil) != (b.Status == nil) ||
				(a.Status != nil && string(a.Status.Raw) != string(b.Status.Raw)) {
				return true
			}
		}
		return false
	}}
}

// readinessChanged passes Cluster updates whose Ready condition changed.
func readinessChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*clusterv1alpha1.Cluster), e.ObjectNew.(*clusterv1alpha1.Cluster)
		a := meta.FindStatusCondition(o.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
		b := meta.FindStatusCondition(n.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
		return (a == nil) != (b == nil) || (a != nil && (a.Status != b.Status || !a.LastTransitionTime.Equal(&b.LastTransitionTime))) ||
			!maps.Equal(o.Labels, n.Labels)
	}}
}

// CacheOptions are the cache settings of the federation's manager: the engine's, and
// ResourceBindings of other kinds (every propagated Deployment, Service, … has one, with every
// member's status) cached as the bare reference the federation reads, which keeps memory
// independent of the rest of the Karmada control plane.
func CacheOptions() cache.Options {
	out := controller.CacheOptions()
	out.ByObject[&workv1alpha2.ResourceBinding{}] = cache.ByObject{Transform: func(o any) (any, error) {
		rb, ok := o.(*workv1alpha2.ResourceBinding)
		if !ok {
			return o, nil
		}
		rb.ManagedFields = nil
		if rb.Spec.Resource.APIVersion == lbcfv1beta1.APIVersion {
			return rb, nil
		}
		rb.Annotations = nil
		// Clusters and requiredBy: the Karmada front doors (package frontdoor) place a Service's
		// backends where the Service is propagated.
		rb.Spec = workv1alpha2.ResourceBindingSpec{Resource: rb.Spec.Resource, Clusters: rb.Spec.Clusters, RequiredBy: rb.Spec.RequiredBy}
		rb.Status = workv1alpha2.ResourceBindingStatus{}
		return rb, nil
	}}
	return out
}
