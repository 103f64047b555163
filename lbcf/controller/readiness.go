package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/lbfed/lbfed/ctrlqueue"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Readiness gate
//
// A pod whose spec.readinessGates names lbcfv1beta1.PodConditionBackendRegistered is Ready (for
// its Deployment, its Service's endpoints, a rollout) only once lbfed says its backends are on the
// front end. Such a pod is eligible for registration as soon as its containers are ready
// (ContainersReady): its Ready condition waits for the gate, so waiting for Ready would wait for
// ever. readinessGateReconciler then sets the condition from a RegistrationView: the group's own
// records in a standalone LBCF, the federation's registration annotation in a member.

// hasReadinessGate reports whether the pod carries lbfed's readiness gate.
func hasReadinessGate(p *corev1.Pod) bool {
	for _, g := range p.Spec.ReadinessGates {
		if string(g.ConditionType) == lbcfv1beta1.PodConditionBackendRegistered {
			return true
		}
	}
	return false
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// podReady is the readiness registration looks at: the pod's Ready condition, or for a pod
// carrying lbfed's readiness gate its ContainersReady condition.
func podReady(p *corev1.Pod) bool {
	t := corev1.PodReady
	if hasReadinessGate(p) {
		t = corev1.ContainersReady
	}
	c := podCondition(p, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// GateState is what a RegistrationView knows of one pod in one group.
type GateState struct {
	// Known is false when the view cannot tell yet (the condition is then left as it is).
	Known bool
	// Registered: every backend of the pod is registered on every LoadBalancer of the group.
	Registered bool
	// Message says what is missing when not registered.
	Message string
}

// RegistrationView tells whether a pod's backends in a group are registered.
type RegistrationView interface {
	PodRegistered(ctx context.Context, bg *lbcfv1beta1.BackendGroup, pod *corev1.Pod) (GateState, error)
}

// recordRegistrations is the standalone view: the group's BackendRecords in this cluster.
type recordRegistrations struct {
	client.Reader
}

// PodRegistered implements RegistrationView.
func (v recordRegistrations) PodRegistered(ctx context.Context, bg *lbcfv1beta1.BackendGroup, pod *corev1.Pod) (GateState, error) {
	lbs := bg.Spec.GetLoadBalancers()
	if len(lbs) == 0 {
		return GateState{Known: true, Message: "the group names no LoadBalancer"}, nil
	}
	for _, port := range bg.Spec.Pods.GetPortSelectors() {
		b := podBackend(pod, port, nil)
		if !b.Eligible() {
			return GateState{Known: true, Message: "not eligible yet (containers not ready or no IP)"}, nil
		}
		for _, lb := range lbs {
			br := &lbcfv1beta1.BackendRecord{}
			err := v.Get(ctx, client.ObjectKey{Namespace: bg.Namespace, Name: b.RecordName(lb, bg.Name)}, br)
			switch {
			case apierrors.IsNotFound(err):
				return GateState{Known: true, Message: "waiting for load balancer " + lb}, nil
			case err != nil:
				return GateState{}, fmt.Errorf("get record: %w", err)
			case br.DeletionTimestamp != nil || !br.IsRegistered():
				return GateState{Known: true, Message: "waiting for load balancer " + lb}, nil
			}
		}
	}
	return GateState{Known: true, Registered: true}, nil
}

// readinessGateReconciler sets lbfed's readiness-gate condition on the pods that carry the gate.
type readinessGateReconciler struct {
	client.Client
	View    RegistrationView
	Metrics *Metrics
	DryRun  bool
}

// Reconcile implements reconcile.Reconciler for one pod.
func (r *readinessGateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.Get(ctx, req.NamespacedName, pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !hasReadinessGate(pod) || pod.DeletionTimestamp != nil || pod.Status.PodIP == "" {
		// Not started yet: nothing to register, and nothing to say that the kubelet's
		// ReadinessGatesNotReady does not already say (one write per pod saved).
		return ctrl.Result{}, nil
	}
	groups := &lbcfv1beta1.BackendGroupList{}
	if err := r.List(ctx, groups, client.InNamespace(pod.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("list backend groups: %w", err)
	}
	want := corev1.PodCondition{Type: lbcfv1beta1.PodConditionBackendRegistered, Status: corev1.ConditionTrue,
		Reason: "NotSelected", Message: "no BackendGroup selects the pod"}
	var names, waiting []string
	unknown := false
	for i := range groups.Items {
		bg := &groups.Items[i]
		if bg.DeletionTimestamp != nil || !selectsPod(bg, pod) {
			continue
		}
		names = append(names, bg.Name)
		st, err := r.View.PodRegistered(ctx, bg, pod)
		if err != nil {
			return ctrl.Result{}, err
		}
		switch {
		case !st.Known:
			unknown = true
		case !st.Registered:
			waiting = append(waiting, bg.Name+": "+st.Message)
		}
	}
	switch {
	case len(waiting) > 0:
		want.Status, want.Reason, want.Message = corev1.ConditionFalse, "NotRegistered", strings.Join(waiting, "; ")
	case unknown:
		return ctrl.Result{}, nil // nothing known yet: the condition stays as it is
	case len(names) > 0:
		want.Reason, want.Message = "Registered", "registered on every load balancer of "+strings.Join(names, ", ")
	}
	if have := podCondition(pod, corev1.PodConditionType(lbcfv1beta1.PodConditionBackendRegistered)); have != nil &&
		have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message {
		return ctrl.Result{}, nil
	}
	if r.DryRun {
		return ctrl.Result{}, nil
	}
	want.LastTransitionTime = metav1.Now()
	if have := podCondition(pod, want.Type); have != nil && have.Status == want.Status {
		want.LastTransitionTime = have.LastTransitionTime
	}
	// A strategic merge of the one condition: the kubelet writes the others at the same time.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{want}}})
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("readiness gate", "status", want.Status, "reason", want.Reason)
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler: gated pods, their groups' changes, and (standalone)
// their records' registration.
func (r *readinessGateReconciler) SetupWithManager(mgr ctrl.Manager, records bool) error {
	c := mgr.GetClient()
	podsOfGroup := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		bg := o.(*lbcfv1beta1.BackendGroup)
		return gatedPodsOf(ctx, c, bg)
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("readinessgate").
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			p, ok := o.(*corev1.Pod)
			return ok && hasReadinessGate(p) && p.DeletionTimestamp == nil
		}))).
		Watches(&lbcfv1beta1.BackendGroup{}, podsOfGroup, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, RegistrationChanged{}))).
		WithOptions(ctrlqueue.Options(controller.Options{MaxConcurrentReconciles: 8}))
	if records {
		b = b.Watches(&lbcfv1beta1.BackendRecord{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueueRecordPod(e.Object, q)
			},
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				o, n := e.ObjectOld.(*lbcfv1beta1.BackendRecord), e.ObjectNew.(*lbcfv1beta1.BackendRecord)
				if o.IsRegistered() != n.IsRegistered() || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) {
					enqueueRecordPod(n, q)
				}
			},
			DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueueRecordPod(e.Object, q)
			},
		})
	}
	return b.Complete(r)
}

func enqueueRecordPod(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	br, ok := o.(*lbcfv1beta1.BackendRecord)
	if !ok || br.Spec.PodBackendInfo == nil {
		return
	}
	q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: br.Namespace, Name: br.Spec.PodBackendInfo.Name}})
}

// gatedPodsOf lists the pods bg selects that carry the gate.
func gatedPodsOf(ctx context.Context, c client.Reader, bg *lbcfv1beta1.BackendGroup) []reconcile.Request {
	if bg.Spec.Pods == nil {
		return nil
	}
	pods, err := LocalSource{Reader: c}.SelectedPods(ctx, bg)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list pods for a backend group event", "backendGroup", client.ObjectKeyFromObject(bg))
		return nil
	}
	var out []reconcile.Request
	for _, p := range pods {
		if hasReadinessGate(p) && p.DeletionTimestamp == nil {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		}
	}
	return out
}

// RegistrationChanged passes group updates that change the federation's registration annotation
// (the member reads it; the federation writes it again when someone else changed it).
type RegistrationChanged struct{ predicate.Funcs }

// Update implements predicate.Predicate.
func (RegistrationChanged) Update(e event.UpdateEvent) bool {
	return e.ObjectOld.GetAnnotations()[lbcfv1beta1.AnnotationRegistered] != e.ObjectNew.GetAnnotations()[lbcfv1beta1.AnnotationRegistered]
}
