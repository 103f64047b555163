package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/lbfed/lbfed/ctrlqueue"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller/internal/budget"
	"github.com/lbfed/lbfed/lbcf/controller/internal/pace"
	"github.com/lbfed/lbfed/lbcf/controller/internal/wakeup"
	"github.com/lbfed/lbfed/lbcf/controller/internal/writes"
	"github.com/lbfed/lbfed/lbcf/servicechange"
)

// Field indexes.
const (
	indexRecordGroup    = "lbfed.group"     // BackendRecord: its group label (namespaced)
	indexGroupLB        = "lbfed.lb"        // BackendGroup: namespace/name of every LoadBalancer it may use
	indexGroupService   = "lbfed.service"   // BackendGroup: namespace/name of its Service
	indexGroupNodeBound = "lbfed.nodeBound" // BackendGroup: "true" for Service (node) backends
)

// Watch adds a watch to a BackendGroup controller (used to add the local backend watches, or
// the federation's bindings and clusters).
type Watch func(*builder.Builder) *builder.Builder

// setupIndexes registers the field indexes the reconcilers use. Call once per manager.
func setupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	// A label selector on the cache scans every record of the namespace: with 100,000 records,
	// each of 10,000 groups' reconciles went through all of them.
	if err := IndexField(ctx, mgr.GetCache(), &lbcfv1beta1.BackendRecord{}, indexRecordGroup, InNamespaceLookups, func(o client.Object) []string {
		if v := o.GetLabels()[lbcfv1beta1.LabelGroupName]; v != "" {
			return []string{v}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index records by group: %w", err)
	}
	return setupGroupIndexes(ctx, mgr)
}

func setupGroupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	c := mgr.GetCache()
	// Groups are looked up across namespaces: a LoadBalancer in kube-system serves every one.
	if err := IndexField(ctx, c, &lbcfv1beta1.BackendGroup{}, indexGroupLB, AcrossNamespaceLookups, func(o client.Object) []string {
		bg := o.(*lbcfv1beta1.BackendGroup)
		var keys []string
		for _, name := range bg.Spec.GetLoadBalancers() {
			keys = append(keys, bg.Namespace+"/"+name)
			if k := sharedKey(bg.Namespace, name); k.Namespace != bg.Namespace {
				keys = append(keys, k.String())
			}
		}
		return keys
	}); err != nil {
		return fmt.Errorf("index groups by load balancer: %w", err)
	}
	if err := IndexField(ctx, c, &lbcfv1beta1.BackendGroup{}, indexGroupService, AcrossNamespaceLookups, func(o client.Object) []string {
		bg := o.(*lbcfv1beta1.BackendGroup)
		if bg.Spec.Service == nil {
			return nil
		}
		return []string{bg.Namespace + "/" + bg.Spec.Service.Name}
	}); err != nil {
		return fmt.Errorf("index groups by service: %w", err)
	}
	return IndexField(ctx, c, &lbcfv1beta1.BackendGroup{}, indexGroupNodeBound, AcrossNamespaceLookups, func(o client.Object) []string {
		if o.(*lbcfv1beta1.BackendGroup).Spec.Service != nil {
			return []string{"true"}
		}
		return nil
	})
}

func requests(list *lbcfv1beta1.BackendGroupList) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// GroupsOfService maps a Service to the groups that use it as their service backend.
func GroupsOfService(c client.Reader) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &lbcfv1beta1.BackendGroupList{}
		if err := c.List(ctx, list, client.MatchingFields{indexGroupService: client.ObjectKeyFromObject(o).String()}, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		return requests(list)
	})
}

// LocalWatches are the watches of backends in the local cluster: pods, Services and nodes,
// each mapped to the groups that select them, filtered to the changes that matter.
func LocalWatches(c client.Reader) []Watch {
	groupsOfPod := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		pod := o.(*corev1.Pod)
		list := &lbcfv1beta1.BackendGroupList{}
		if err := c.List(ctx, list, client.InNamespace(pod.Namespace), client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list backend groups for a pod event")
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			if selectsPod(&list.Items[i], pod) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return out
	})
	groupsOfService := GroupsOfService(c)
	groupsOfNode := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &lbcfv1beta1.BackendGroupList{}
		if err := c.List(ctx, list, client.MatchingFields{indexGroupNodeBound: "true"}, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		return requests(list)
	})
	return []Watch{
		func(b *builder.Builder) *builder.Builder {
			return b.Watches(&corev1.Pod{}, groupsOfPod, builder.WithPredicates(podChangePredicate()))
		},
		func(b *builder.Builder) *builder.Builder {
			return b.Watches(&corev1.Service{}, groupsOfService, builder.WithPredicates(servicechange.Predicate()))
		},
		func(b *builder.Builder) *builder.Builder {
			return b.Watches(&corev1.Node{}, groupsOfNode, builder.WithPredicates(nodeChangePredicate()))
		},
	}
}

// selectsPod reports whether bg selects pod (same namespace, by label minus except, or by name).
func selectsPod(bg *lbcfv1beta1.BackendGroup, pod *corev1.Pod) bool {
	return bg.SelectsPod(pod.Namespace, pod.Name, pod.Labels)
}

// podChangePredicate passes pod updates that can change a group's backends: labels, readiness
// (and whether a pod that is not Ready was looked at, see readinessUnobserved), phase, IPs, node,
// deletion. Status noise (container restarts, probes) is dropped, which keeps big clusters cheap.
func podChangePredicate() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
		return !maps.Equal(o.Labels, n.Labels) || podReady(o) != podReady(n) || o.Status.Phase != n.Status.Phase ||
			readinessUnobserved(o, true) != readinessUnobserved(n, true) ||
			o.Status.PodIP != n.Status.PodIP || !slices.Equal(o.Status.PodIPs, n.Status.PodIPs) || o.Spec.NodeName != n.Spec.NodeName ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
	}}
}

func nodeChangePredicate() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
		return !maps.Equal(o.Labels, n.Labels) || nodeObserved(o) != nodeObserved(n) || !slices.Equal(o.Status.Addresses, n.Status.Addresses) ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
	}}
}

// SetupWithManager registers the reconciler with the given extra watches.
func (r *backendGroupReconciler) SetupWithManager(mgr ctrl.Manager, watches ...Watch) error {
	r.Defaults()
	r.recent = writes.NewRecent()
	r.pacer = pace.New()
	if r.ResyncPeriod <= 0 {
		r.ResyncPeriod = 5 * time.Minute
	}
	// How far the record cache has got, for the group's writes it does not show yet.
	inf, err := mgr.GetCache().GetInformer(context.Background(), &lbcfv1beta1.BackendRecord{})
	if err != nil {
		return fmt.Errorf("record informer: %w", err)
	}
	seen := func(o any) {
		if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = t.Obj
		}
		if m, ok := o.(metav1.Object); ok {
			r.recent.Observe(m.GetResourceVersion())
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }, DeleteFunc: seen,
	}); err != nil {
		return fmt.Errorf("record informer: %w", err)
	}
	c := mgr.GetClient()
	groupsOfLB := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &lbcfv1beta1.BackendGroupList{}
		if err := c.List(ctx, list, client.MatchingFields{indexGroupLB: client.ObjectKeyFromObject(o).String()}, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		return requests(list)
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("backendgroup").
		For(&lbcfv1beta1.BackendGroup{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, policyAnnotationsChanged()))).
		Watches(&lbcfv1beta1.LoadBalancer{}, groupsOfLB).
		Watches(&lbcfv1beta1.BackendRecord{}, r.pacer.OwnerHandler(), builder.WithPredicates(recordCountChanged())).
		WithOptions(ctrlqueue.Options(controller.Options{
			MaxConcurrentReconciles: r.BackendGroupWorkers, RateLimiter: r.rateLimiter(),
			NewQueue: r.Metrics.newQueue(lbcfv1beta1.KindBackendGroup),
		}))
	for _, w := range watches {
		b = w(b)
	}
	return b.Complete(r)
}

// policyAnnotationsChanged passes group updates that change the annotations deciding what
// happens to not-Ready pods (and, in the federation, to unobserved members): other annotation
// writes (the federation's registration answer, many a second) do not reconcile the group.
func policyAnnotationsChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
		for _, k := range []string{lbcfv1beta1.AnnotationMemberLossPolicy, lbcfv1beta1.AnnotationReadinessPanicThreshold} {
			if o[k] != n[k] {
				return true
			}
		}
		return false
	}}
}

// recordCountChanged passes the record events that change a group's counts or need a record
// recreated: creation, deletion, Registered flips.
func recordCountChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*lbcfv1beta1.BackendRecord), e.ObjectNew.(*lbcfv1beta1.BackendRecord)
		return o.IsRegistered() != n.IsRegistered() || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
			duplicate(o) != duplicate(n)
	}}
}

func duplicate(br *lbcfv1beta1.BackendRecord) bool {
	c := br.Status.Condition(DuplicateAddress)
	return c != nil && c.Status == lbcfv1beta1.ConditionTrue
}

// SetupWithManager registers the reconciler.
func (r *backendRecordReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.init()
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("backendrecord").
		For(&lbcfv1beta1.BackendRecord{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deletionStarted{}))).
		// A deleted group's records check their owner at once, even where no garbage collector runs.
		Watches(&lbcfv1beta1.BackendGroup{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			list := &lbcfv1beta1.BackendRecordList{}
			if err := mgr.GetClient().List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexRecordGroup: labelValue(o.GetName())}, client.UnsafeDisableDeepCopy); err != nil {
				return nil
			}
			out := make([]reconcile.Request, 0, len(list.Items))
			for i := range list.Items {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
			return out
		}), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		// Records waiting for their backend, a driver slot or another holder of their address.
		WatchesRawSource(source.Channel(r.wakeups.Events(), &handler.EnqueueRequestForObject{})).
		WithOptions(ctrlqueue.Options(controller.Options{
			MaxConcurrentReconciles: r.BackendRecordWorkers, RateLimiter: r.rateLimiter(),
			NewQueue: r.Metrics.newQueue(lbcfv1beta1.KindBackendRecord),
		})).
		Complete(r)
}

// SetupStandalone registers the complete single-cluster LBCF: every reconciler, with backends
// from the local cluster.
func SetupStandalone(ctx context.Context, mgr ctrl.Manager, opts Options, resync time.Duration) error {
	src := LocalSource{Reader: mgr.GetClient()}
	if err := SetupEngine(ctx, mgr, opts, src, src, resync, LocalWatches(mgr.GetClient())...); err != nil {
		return err
	}
	gates := &readinessGateReconciler{Client: mgr.GetClient(), View: recordRegistrations{Reader: mgr.GetClient()}, Metrics: opts.Metrics, DryRun: opts.DryRun}
	if err := gates.SetupWithManager(mgr, true); err != nil {
		return fmt.Errorf("readiness gate controller: %w", err)
	}
	return nil
}

// SetupEngine registers every reconciler of the engine with the given backend source; the
// watches tell the BackendGroup controller when the source's answer may have changed.
func SetupEngine(ctx context.Context, mgr ctrl.Manager, opts Options, src BackendSource, addr AddrRequestBuilder, resync time.Duration, watches ...Watch) error {
	opts.Defaults()
	if err := setupIndexes(ctx, mgr); err != nil {
		return err
	}
	if err := (&driverReconciler{Client: mgr.GetClient(), Options: opts}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("driver controller: %w", err)
	}
	if err := (&loadBalancerReconciler{Client: mgr.GetClient(), Options: opts}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("load balancer controller: %w", err)
	}
	wakeups := wakeup.New()
	budgets := budget.NewForRecords(opts.DriverCallBudget, opts.DegradedDriverCallBudget, wakeups.Wake)
	if err := (&backendGroupReconciler{Client: mgr.GetClient(), Options: opts, Source: src, ResyncPeriod: resync, Addr: addr, wakeups: wakeups, budget: budgets}).SetupWithManager(mgr, watches...); err != nil {
		return fmt.Errorf("backend group controller: %w", err)
	}
	addrs, err := addrIndex(ctx, mgr)
	if err != nil {
		return err
	}
	if err := (&backendRecordReconciler{Client: mgr.GetClient(), Options: opts, Addr: addr, addrs: addrs, wakeups: wakeups, budget: budgets}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("backend record controller: %w", err)
	}
	return nil
}

// SetupReporter registers the BackendGroup controller of a cluster that reports its backends
// rather than serving them (lbcf-controller --mode=member): r with the local backend watches and
// the engine's queues and retries, and the readiness gates answered by view.
func SetupReporter(ctx context.Context, mgr ctrl.Manager, opts Options, r reconcile.Reconciler, view RegistrationView) error {
	opts.Defaults()
	if err := setupGroupIndexes(ctx, mgr); err != nil {
		return err
	}
	timed := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		defer opts.Metrics.observeProcess(lbcfv1beta1.KindBackendGroup, time.Now())
		return r.Reconcile(ctx, req)
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("backendgroup-member").
		// Annotations carry the federation's report requests and budgets.
		For(&lbcfv1beta1.BackendGroup{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(ctrlqueue.Options(controller.Options{
			MaxConcurrentReconciles: opts.BackendGroupWorkers, RateLimiter: opts.rateLimiter(),
			NewQueue: opts.Metrics.newQueue(lbcfv1beta1.KindBackendGroup),
		}))
	for _, w := range LocalWatches(mgr.GetClient()) {
		b = w(b)
	}
	if err := b.Complete(timed); err != nil {
		return fmt.Errorf("backend group controller: %w", err)
	}
	gates := &readinessGateReconciler{Client: mgr.GetClient(), View: view, Metrics: opts.Metrics, DryRun: opts.DryRun}
	if err := gates.SetupWithManager(mgr, false); err != nil {
		return fmt.Errorf("readiness gate controller: %w", err)
	}
	return nil
}
