package mci

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	networkingv1alpha1 "github.com/karmada-io/karmada/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	netutils "k8s.io/utils/net"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/lbfed/lbfed/ctrlqueue"
	"github.com/lbfed/lbfed/frontdoor"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/servicechange"
)

// AnnotationConditions is written by lbfed on a MultiClusterIngress it claims: a JSON list of
// conditions (metav1.Condition) Accepted and Programmed, as Karmada's MultiClusterIngress status
// has no conditions field.
const AnnotationConditions = "lbfed.io/conditions"

// Condition types of AnnotationConditions.
const (
	// ConditionAccepted: the spec and annotations are valid and conflict with no other claim.
	// When False, nothing of the refused spec is applied and the objects of the last accepted
	// spec stay.
	ConditionAccepted = "Accepted"
	// ConditionProgrammed: every generated LoadBalancer is created on BFE and every backend Service
	// is propagated.
	ConditionProgrammed = "Programmed"
)

// DefaultIngressClass is the ingress class lbfed's BFE claims by default.
const DefaultIngressClass = "lbfed-bfe"

// Options configure the MultiClusterIngress front door.
type Options struct {
	// IngressClass is the class (spec.ingressClassName, else kubernetes.io/ingress.class) that
	// selects lbfed's BFE.
	IngressClass string
	// Driver is the lbDriver of generated LoadBalancers: the BFE driver ("lbcf-*" names live in
	// kube-system and serve every namespace).
	Driver string
	// Address is BFE's address (IP or hostname) written into status.loadBalancer.ingress.
	Address string
	// Recorder emits events on MultiClusterIngresses.
	Recorder events.EventRecorder
	// RetryAfter is how long a route held by another MultiClusterIngress's LoadBalancer waits
	// before the next look (default 5s).
	RetryAfter time.Duration
}

// AddToScheme adds the kinds the front door reads and writes.
func AddToScheme(s *runtime.Scheme) error {
	if err := frontdoor.AddToScheme(s); err != nil {
		return err
	}
	return lbcfv1beta1.AddToScheme(s)
}

// Reconciler translates claimed MultiClusterIngresses into LBCF objects.
type Reconciler struct {
	Client client.Client
	Opts   Options
	kit    *frontdoor.Kit
}

// Setup registers the reconciler with the manager.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if opts.IngressClass == "" {
		opts.IngressClass = DefaultIngressClass
	}
	if opts.Driver == "" {
		return nil, fmt.Errorf("no BFE driver name")
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 5 * time.Second
	}
	r := &Reconciler{Client: mgr.GetClient(), Opts: opts, kit: &frontdoor.Kit{Client: mgr.GetClient(), Recorder: opts.Recorder, Driver: opts.Driver}}
	c := mgr.GetClient()
	// Everything a namespace's MultiClusterIngresses read (Services, their bindings) requeues them
	// all: there are few per namespace.
	namespaceMCIs := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return listMCIs(ctx, c, client.InNamespace(o.GetNamespace()))
	})
	// A LoadBalancer or MultiClusterIngress appearing or going may open or close a conflict with
	// any other route on the shared BFE.
	allMCIs := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return listMCIs(ctx, c)
	})
	createOrDelete := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
	serviceBindings := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := frontdoor.ServiceOfBinding(o)
		return ok
	})
	err := ctrl.NewControllerManagedBy(mgr).Named("multiclusteringress").
		For(&networkingv1alpha1.MultiClusterIngress{}).
		Owns(&lbcfv1beta1.LoadBalancer{}).
		Owns(&lbcfv1beta1.BackendGroup{}).
		Owns(&policyv1alpha1.PropagationPolicy{}).
		Watches(&corev1.Service{}, namespaceMCIs, builder.WithPredicates(servicechange.Predicate())).
		Watches(&workv1alpha2.ResourceBinding{}, namespaceMCIs, builder.WithPredicates(serviceBindings, frontdoor.PlacementUpdates())).
		Watches(&lbcfv1beta1.LoadBalancer{}, allMCIs, builder.WithPredicates(createOrDelete)).
		Watches(&networkingv1alpha1.MultiClusterIngress{}, allMCIs, builder.WithPredicates(predicate.Or(createOrDelete, predicate.GenerationChangedPredicate{}))).
		WithOptions(ctrlqueue.Options(controller.Options{})).
		Complete(r)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func listMCIs(ctx context.Context, c client.Client, opts ...client.ListOption) []reconcile.Request {
	var l networkingv1alpha1.MultiClusterIngressList
	if err := c.List(ctx, &l, opts...); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
	}
	return out
}

// Claims reports whether a MultiClusterIngress selects the ingress class.
func Claims(mci *networkingv1alpha1.MultiClusterIngress, class string) bool {
	if mci.Spec.IngressClassName != nil {
		return *mci.Spec.IngressClassName == class
	}
	return mci.Annotations[AnnotationIngressClass] == class
}

// Reconcile brings a MultiClusterIngress's generated objects, conditions and status to its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("multiClusterIngress", req.NamespacedName)
	mci := &networkingv1alpha1.MultiClusterIngress{}
	if err := r.Client.Get(ctx, req.NamespacedName, mci); err != nil {
		if apierrors.IsNotFound(err) {
			// Owner references let the garbage collector remove the objects too; this is quicker
			// and works where no collector runs.
			gone := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}}
			return reconcile.Result{}, r.deleteOwned(ctx, door(gone), nil)
		}
		return reconcile.Result{}, err
	}
	if mci.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	if !Claims(mci, r.Opts.IngressClass) {
		return reconcile.Result{}, r.release(ctx, mci)
	}

	in, err := r.inputs(ctx, mci)
	if err != nil {
		return reconcile.Result{}, err
	}
	t := translate(mci, in)
	held, lost, err := r.conflicts(ctx, mci, t)
	if err != nil {
		return reconcile.Result{}, err
	}
	if t.refused() {
		// Fail static: the objects of the last accepted spec stay; nothing of this one applies.
		// Only a route another claim wins from this one is given up.
		log.V(1).Info("refused; objects of the last accepted spec kept", "problems", len(t.problems), "routesLost", len(lost))
		if err := r.releaseRoutes(ctx, mci, lost); err != nil {
			return reconcile.Result{}, err
		}
	} else if err := r.apply(ctx, mci, t, held); err != nil {
		return reconcile.Result{}, err
	}
	created, total, err := r.createdLoadBalancers(ctx, mci)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.writeStatus(ctx, mci, created, total, len(t.lbs)); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.writeConditions(ctx, mci, t, created, total); err != nil {
		return reconcile.Result{}, err
	}
	if len(held) > 0 {
		return reconcile.Result{RequeueAfter: r.Opts.RetryAfter}, nil
	}
	return reconcile.Result{}, nil
}

// inputs reads the namespace's Services and their placements.
func (r *Reconciler) inputs(ctx context.Context, mci *networkingv1alpha1.MultiClusterIngress) (inputs, error) {
	in := inputs{services: map[string]*corev1.Service{}, placements: map[string][]string{}, driver: r.Opts.Driver}
	var svcs corev1.ServiceList
	if err := r.Client.List(ctx, &svcs, client.InNamespace(mci.Namespace)); err != nil {
		return in, fmt.Errorf("list services: %w", err)
	}
	for i := range svcs.Items {
		in.services[svcs.Items[i].Name] = &svcs.Items[i]
	}
	placements, err := frontdoor.ServicePlacements(ctx, r.Client, mci.Namespace)
	if err != nil {
		return in, err
	}
	in.placements = placements
	return in, nil
}

// conflicts adds a Conflict problem for each route that another claim holds: a LoadBalancer of
// the same driver serving it (another MultiClusterIngress's, or a user's), or — when no
// LoadBalancer serves it yet — an older MultiClusterIngress claiming it. So the newer claim on a
// route is refused, and an edit never takes a serving route from someone else (ingress-bfe too
// refuses the Ingress that would conflict with an existing one). It returns the routes still held
// by another MultiClusterIngress's going LoadBalancer (this one waits for it), and the routes
// this one holds but loses (two claims served at once after a race: the older keeps it).
//
// Creation timestamps have a one-second resolution: between claims of the same second, names
// decide.
func (r *Reconciler) conflicts(ctx context.Context, mci *networkingv1alpha1.MultiClusterIngress, t *translation) (held, lost map[Route]bool, err error) {
	ours := frontdoor.DriverKey(mci.Namespace, r.Opts.Driver)
	var lbs lbcfv1beta1.LoadBalancerList
	// Read only: no copies of every LoadBalancer of the federation.
	if err := r.Client.List(ctx, &lbs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("list loadbalancers: %w", err)
	}
	holders := map[Route]map[types.UID]bool{} // route → MultiClusterIngresses whose LoadBalancer serves it
	var foreign []*lbcfv1beta1.LoadBalancer
	for i := range lbs.Items {
		lb := &lbs.Items[i]
		if frontdoor.DriverKey(lb.Namespace, lb.Spec.LBDriver) != ours {
			continue
		}
		route := routeOfLBSpec(lb.Spec.LBSpec)
		if _, wanted := t.routes[route]; !wanted {
			continue
		}
		if lb.Labels[frontdoor.LabelFrontDoor] != Kind {
			foreign = append(foreign, lb)
			continue
		}
		if ref := metav1.GetControllerOf(lb); ref != nil {
			if holders[route] == nil {
				holders[route] = map[types.UID]bool{}
			}
			holders[route][ref.UID] = true
		}
	}
	wins := func(other *networkingv1alpha1.MultiClusterIngress, route Route) bool {
		if h := holders[route]; h[other.UID] != h[mci.UID] {
			return h[other.UID]
		}
		to, tm := other.GetCreationTimestamp(), mci.GetCreationTimestamp()
		if !to.Equal(&tm) {
			return to.Before(&tm)
		}
		return other.Namespace+"/"+other.Name < mci.Namespace+"/"+mci.Name
	}

	var mcis networkingv1alpha1.MultiClusterIngressList
	if err := r.Client.List(ctx, &mcis); err != nil {
		return nil, nil, fmt.Errorf("list multiclusteringresses: %w", err)
	}
	lost = map[Route]bool{}
	for i := range mcis.Items {
		other := &mcis.Items[i]
		if other.UID == mci.UID || other.DeletionTimestamp != nil || !Claims(other, r.Opts.IngressClass) {
			continue
		}
		ann, _ := parseAnnotations(other.Annotations)
		rbs, _ := readRules(other, ann)
		for _, rb := range rbs {
			if _, ok := t.routes[rb.route]; ok && wins(other, rb.route) {
				t.problems = append(t.problems, Problem{Reason: ReasonConflict,
					Message: fmt.Sprintf("route %s is already claimed by MultiClusterIngress %s/%s", rb.route, other.Namespace, other.Name)})
				if holders[rb.route][mci.UID] {
					lost[rb.route] = true
				}
			}
		}
	}
	for _, lb := range foreign {
		// A user's LoadBalancer serving the route first wins; one created while this
		// MultiClusterIngress serves it is the driver's to refuse.
		route := routeOfLBSpec(lb.Spec.LBSpec)
		if !holders[route][mci.UID] {
			t.problems = append(t.problems, Problem{Reason: ReasonConflict,
				Message: fmt.Sprintf("route %s is already served by %s", route, frontdoor.Holder(lb))})
		}
	}
	held = map[Route]bool{}
	for route, h := range holders {
		for uid := range h {
			if uid != mci.UID {
				held[route] = true
			}
		}
	}
	for route := range held {
		t.problems = append(t.problems, Problem{Reason: ReasonRouteHeld,
			Message: fmt.Sprintf("route %s waits for another MultiClusterIngress's LoadBalancer to go", route)})
	}
	return held, lost, nil
}

// releaseRoutes deletes the generated LoadBalancers of the given routes with the groups and
// policies that hang on them.
func (r *Reconciler) releaseRoutes(ctx context.Context, mci *networkingv1alpha1.MultiClusterIngress, routes map[Route]bool) error {
	if len(routes) == 0 {
		return nil
	}
	d := door(mci)
	keep := map[string]bool{}
	lbs, err := r.kit.Owned(ctx, d, &lbcfv1beta1.LoadBalancerList{})
	if err != nil {
		return err
	}
	gone := map[string]bool{}
	for _, o := range lbs {
		if routes[routeOfLBSpec(o.(*lbcfv1beta1.LoadBalancer).Spec.LBSpec)] {
			gone[o.GetName()] = true
		} else {
			keep[objectKey(o)] = true
		}
	}
	bgs, err := r.kit.Owned(ctx, d, &lbcfv1beta1.BackendGroupList{})
	if err != nil {
		return err
	}
	for _, o := range bgs {
		bg := o.(*lbcfv1beta1.BackendGroup)
		if len(bg.Spec.LoadBalancers) == 0 || !gone[bg.Spec.LoadBalancers[0]] {
			keep[objectKey(o)] = true
			keep[objectKey(&policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: bg.Name}})] = true
		}
	}
	return r.deleteOwned(ctx, d, keep)
}

// door is the kit's view of a MultiClusterIngress; without a UID (one already gone) it owns what
// any MultiClusterIngress of its name generated.
func door(mci *networkingv1alpha1.MultiClusterIngress) frontdoor.Door {
	return frontdoor.Door{Kind: Kind, GVK: schema.GroupVersionKind{Group: networkingv1alpha1.GroupName, Version: networkingv1alpha1.GroupVersion.Version, Kind: networkingv1alpha1.ResourceKindMultiClusterIngress}, Object: mci}
}

// deleteOwned deletes the generated objects of a MultiClusterIngress except those in keep.
func (r *Reconciler) deleteOwned(ctx context.Context, d frontdoor.Door, keep map[string]bool) error {
	return r.kit.Remove(ctx, d, func(o client.Object) bool { return keep[objectKey(o)] },
		&lbcfv1beta1.LoadBalancerList{}, &lbcfv1beta1.BackendGroupList{}, &policyv1alpha1.PropagationPolicyList{})
}

func objectKey(o client.Object) string {
	return fmt.Sprintf("%T/%s", o, o.GetName())
}

// release undoes a claim: the class no longer selects lbfed.
func (r *Reconciler) release(ctx context.Context, mci *networkingv1alpha1.MultiClusterIngress) error {
	if err := r.deleteOwned(ctx, door(mci), nil); err != nil {
		return err
	}
	if _, ok := mci.Annotations[AnnotationConditions]; ok {
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, AnnotationConditions))
		if err := r.Client.Patch(ctx, mci, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("remove %s: %w", AnnotationConditions, err)
		}
	}
	return r.writeStatus(ctx, mci, 0, 0, 0)
}

// apply creates or updates the desired objects (except the LoadBalancers of held routes and
// what hangs on them) through the kit and deletes the generated objects no longer desired.
// Objects of a needed name that the front door did not generate are left alone (an error).
func (r *Reconciler) apply(ctx context.Context, mci *networkingv1alpha1.MultiClusterIngress, t *translation, held map[Route]bool) error {
	d := door(mci)
	skipLB := map[string]bool{}
	for route := range held {
		skipLB[t.routes[route]] = true
	}
	keep := map[string]bool{}
	for _, lb := range t.lbs {
		if skipLB[lb.Name] {
			continue
		}
		if _, err := r.kit.SyncLoadBalancer(ctx, d, lb.Name, lb.Spec.LBSpec, "route "+routeOfLBSpec(lb.Spec.LBSpec).String()); err != nil {
			return err
		}
		keep[objectKey(lb)] = true
	}
	skipBG := map[string]bool{}
	for _, bg := range t.bgs {
		if skipLB[bg.Spec.LoadBalancers[0]] {
			skipBG[bg.Name] = true
			continue
		}
		g := frontdoor.Group{LoadBalancer: bg.Spec.LoadBalancers[0], Pods: *bg.Spec.Pods, Parameters: bg.Spec.Parameters}
		if err := r.kit.SyncBackendGroup(ctx, d, bg.Name, g); err != nil {
			return err
		}
		keep[objectKey(bg)] = true
	}
	for _, pp := range t.pps {
		if skipBG[pp.Name] {
			continue
		}
		var groups []string
		for _, sel := range pp.Spec.ResourceSelectors {
			groups = append(groups, sel.Name)
		}
		if err := r.kit.SyncPolicy(ctx, d, pp.Name, groups, pp.Spec.Placement.ClusterAffinity.ClusterNames); err != nil {
			return err
		}
		keep[objectKey(pp)] = true
	}
	for _, name := range t.keepPolicies {
		if !skipBG[name] {
			keep[objectKey(&policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})] = true
		}
	}
	return r.deleteOwned(ctx, d, keep)
}

// createdLoadBalancers counts the generated LoadBalancers and those the driver created.
func (r *Reconciler) createdLoadBalancers(ctx context.Context, mci *networkingv1alpha1.MultiClusterIngress) (created, total int, err error) {
	objs, err := r.kit.Owned(ctx, door(mci), &lbcfv1beta1.LoadBalancerList{})
	if err != nil {
		return 0, 0, err
	}
	for _, o := range objs {
		total++
		if o.(*lbcfv1beta1.LoadBalancer).IsCreated() {
			created++
		}
	}
	return created, total, nil
}

// writeStatus publishes BFE's address once every generated LoadBalancer is created (want is the
// number desired), keeps it while any of them stays created (a spec change adding a route does
// not withdraw it), and removes it when none is.
func (r *Reconciler) writeStatus(ctx context.Context, mci *networkingv1alpha1.MultiClusterIngress, created, total, want int) error {
	ours := r.ingressStatus()
	cur := mci.Status.LoadBalancer.Ingress
	has := equality.Semantic.DeepEqual(cur, ours)
	var next []networkingv1.IngressLoadBalancerIngress
	switch {
	case created > 0 && created == total && total >= want:
		next = ours
	case created > 0 && has:
		next = ours
	case !has && len(cur) > 0 && created == 0:
		return nil // another writer's address: left alone
	}
	if equality.Semantic.DeepEqual(cur, next) || (len(cur) == 0 && len(next) == 0) {
		return nil
	}
	base := mci.DeepCopy()
	mci.Status.LoadBalancer.Ingress = next
	if err := r.Client.Status().Patch(ctx, mci, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return nil
}

func (r *Reconciler) ingressStatus() []networkingv1.IngressLoadBalancerIngress {
	if netutils.ParseIPSloppy(r.Opts.Address) != nil {
		return []networkingv1.IngressLoadBalancerIngress{{IP: r.Opts.Address}}
	}
	return []networkingv1.IngressLoadBalancerIngress{{Hostname: r.Opts.Address}}
}

// writeConditions writes AnnotationConditions, and an event per problem when they change.
func (r *Reconciler) writeConditions(ctx context.Context, mci *networkingv1alpha1.MultiClusterIngress, t *translation, created, total int) error {
	var refusing, waiting []Problem
	for _, p := range t.problems {
		if p.refuses() {
			refusing = append(refusing, p)
		} else {
			waiting = append(waiting, p)
		}
	}
	gen := mci.Generation
	accepted := metav1.Condition{Type: ConditionAccepted, Status: metav1.ConditionTrue, Reason: "Accepted", Message: "routes accepted", ObservedGeneration: gen}
	if len(refusing) > 0 {
		accepted = metav1.Condition{Type: ConditionAccepted, Status: metav1.ConditionFalse, Reason: refusing[0].Reason, Message: joinProblems(refusing), ObservedGeneration: gen}
	}
	programmed := metav1.Condition{Type: ConditionProgrammed, Status: metav1.ConditionTrue, Reason: "Programmed",
		Message: fmt.Sprintf("%d LoadBalancer(s) created on BFE", created), ObservedGeneration: gen}
	switch {
	case len(refusing) > 0:
		programmed.Status, programmed.Reason, programmed.Message = metav1.ConditionFalse, "Refused", "the spec is refused (see Accepted)"
		if total > 0 {
			programmed.Message += fmt.Sprintf("; %d LoadBalancer(s) of the last accepted spec kept, %d created", total, created)
		}
	case len(waiting) > 0:
		programmed.Status, programmed.Reason, programmed.Message = metav1.ConditionFalse, waiting[0].Reason, joinProblems(waiting)
	case created < total || total < len(t.lbs):
		programmed.Status, programmed.Reason = metav1.ConditionFalse, "Creating"
		programmed.Message = fmt.Sprintf("%d of %d LoadBalancer(s) created on BFE", created, len(t.lbs))
	}
	conds := []metav1.Condition{accepted, programmed}
	var prev []metav1.Condition
	_ = json.Unmarshal([]byte(mci.Annotations[AnnotationConditions]), &prev)
	now := metav1.Now()
	for i := range conds {
		conds[i].LastTransitionTime = now
		for _, p := range prev {
			if p.Type == conds[i].Type && p.Status == conds[i].Status {
				conds[i].LastTransitionTime = p.LastTransitionTime
			}
		}
	}
	if sameConditions(prev, conds) {
		return nil
	}
	data, err := json.Marshal(conds)
	if err != nil {
		return err
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationConditions: string(data)}}})
	if err := r.Client.Patch(ctx, mci, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("write %s: %w", AnnotationConditions, err)
	}
	if r.Opts.Recorder != nil {
		// An event per problem when the condition it is in changes, not on every count update.
		if !sameConditions(pick(prev, ConditionAccepted), conds[:1]) {
			for _, p := range refusing {
				r.Opts.Recorder.Eventf(mci, nil, corev1.EventTypeWarning, p.Reason, "Refuse", "%s", p.String())
			}
		}
		if len(refusing) == 0 && !sameConditions(pick(prev, ConditionProgrammed), conds[1:]) {
			for _, p := range waiting {
				r.Opts.Recorder.Eventf(mci, nil, corev1.EventTypeNormal, p.Reason, "Wait", "%s", p.String())
			}
		}
		if len(refusing) == 0 && !conditionTrue(prev, ConditionAccepted) {
			r.Opts.Recorder.Eventf(mci, nil, corev1.EventTypeNormal, "Accepted", "Translate", "%d route(s) translated into LBCF objects", len(t.lbs))
		}
	}
	return nil
}

func joinProblems(ps []Problem) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	sort.Strings(s)
	return strings.Join(s, "; ")
}

func sameConditions(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}

// pick returns the condition of type t in cs, as a list of zero or one.
func pick(cs []metav1.Condition, t string) []metav1.Condition {
	for _, c := range cs {
		if c.Type == t {
			return []metav1.Condition{c}
		}
	}
	return nil
}

func conditionTrue(cs []metav1.Condition, t string) bool {
	for _, c := range cs {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
