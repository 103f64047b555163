package federation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"

	"github.com/lbfed/lbfed/ctrlqueue"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
)

// The registration state reaches the members through the template: see the package doc.

// registrationDelay coalesces a burst of records turning Registered into one template write.
const registrationDelay = 50 * time.Millisecond

// registrationReporter writes lbfed.io/registered on BackendGroup templates.
type registrationReporter struct {
	client.Client
	src    *Source
	dryRun bool
}

// Reconcile implements reconcile.Reconciler for one template.
func (r *registrationReporter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bg := &lbcfv1beta1.BackendGroup{}
	if err := r.Get(ctx, req.NamespacedName, bg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if bg.DeletionTimestamp != nil || bg.Spec.Pods == nil {
		return ctrl.Result{}, nil // only pods carry readiness gates
	}
	rb, err := r.src.binding(ctx, bg)
	if err != nil || rb == nil {
		return ctrl.Result{}, err
	}
	records, err := controller.GroupRecords(ctx, r.Client, bg)
	if err != nil {
		return ctrl.Result{}, err
	}
	registered := func(name string) bool {
		br := records[name]
		return br != nil && br.DeletionTimestamp == nil && br.IsRegistered()
	}
	lbs := bg.Spec.GetLoadBalancers()
	reg := lbcfv1beta1.Registration{}
	for i := range rb.Status.AggregatedStatus {
		item := &rb.Status.AggregatedStatus[i]
		cr := r.src.fresh(bg, item.ClusterName, item)
		if cr == nil {
			cr = r.src.lastReport(bg.UID, item.ClusterName)
		}
		if cr == nil || len(cr.itemBackend) == 0 {
			continue
		}
		names := make([][]string, len(lbs))
		for j, lb := range lbs {
			names[j] = cr.recordNames(lb, bg.Name)
		}
		reg[item.ClusterName] = lbcfv1beta1.MemberRegistrationOf(cr.itemsDigest, len(cr.itemBackend), func(i int) bool {
			k := cr.itemBackend[i]
			if k < 0 || len(lbs) == 0 {
				return false
			}
			for j := range lbs {
				if !registered(names[j][k]) {
					return false
				}
			}
			return true
		})
	}
	want := ""
	if len(reg) > 0 {
		want = reg.String()
	}
	if bg.Annotations[lbcfv1beta1.AnnotationRegistered] == want || r.dryRun {
		return ctrl.Result{}, nil
	}
	var value any = want
	if want == "" {
		value = nil // merge patch: remove
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{lbcfv1beta1.AnnotationRegistered: value}}})
	if err != nil {
		return ctrl.Result{}, err
	}
	obj := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: bg.Namespace, Name: bg.Name}}
	if err := r.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("write registration for members: %w", err))
	}
	ctrl.LoggerFrom(ctx).V(1).Info("told members their registered backends", "bytes", len(want), "members", len(reg))
	return ctrl.Result{}, nil
}

func (r *registrationReporter) setup(mgr ctrl.Manager) error {
	ownerSoon := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == lbcfv1beta1.KindBackendGroup {
			q.AddAfter(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}}, registrationDelay)
		}
	}
	records := handler.Funcs{
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			o, n := e.ObjectOld.(*lbcfv1beta1.BackendRecord), e.ObjectNew.(*lbcfv1beta1.BackendRecord)
			if o.IsRegistered() != n.IsRegistered() || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) {
				ownerSoon(n, q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			ownerSoon(e.Object, q)
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("registration").
		For(&lbcfv1beta1.BackendGroup{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, controller.RegistrationChanged{}))).
		Watches(&lbcfv1beta1.BackendRecord{}, records).
		Watches(&workv1alpha2.ResourceBinding{}, groupOfBinding(), builder.WithPredicates(bindingChanged())).
		WithOptions(ctrlqueue.Options(ctrlcontroller.Options{MaxConcurrentReconciles: 4})).
		Complete(r)
}
