package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/lbfed/lbfed/ctrlqueue"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// driverReconciler accepts LoadBalancerDrivers and, for drivers that list the healthz webhook,
// polls it into a Healthy condition and the driver_healthy gauge.
type driverReconciler struct {
	client.Client
	Options
}

// SetupWithManager registers the reconciler.
func (r *driverReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.Defaults()
	return ctrl.NewControllerManagedBy(mgr).
		Named("loadbalancerdriver").
		For(&lbcfv1beta1.LoadBalancerDriver{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(ctrlqueue.Options(controller.Options{
			MaxConcurrentReconciles: r.DriverWorkers, RateLimiter: r.rateLimiter(),
			NewQueue: r.Metrics.newQueue(lbcfv1beta1.KindLoadBalancerDriver),
		})).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *driverReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer r.Metrics.observeProcess(lbcfv1beta1.KindLoadBalancerDriver, time.Now())
	d := &lbcfv1beta1.LoadBalancerDriver{}
	if err := r.Get(ctx, req.NamespacedName, d); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.DriverHealthy.DeleteLabelValues(req.String())
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := d.DeepCopy()
	if d.Status.DriverCondition(lbcfv1beta1.DriverAccepted) == nil {
		setDriverCondition(&d.Status.Conditions, lbcfv1beta1.LoadBalancerDriverCondition{Type: lbcfv1beta1.DriverAccepted, Status: lbcfv1beta1.ConditionTrue})
	}
	var res ctrl.Result
	if d.HasWebhook(driver.Healthz) && d.DeletionTimestamp == nil && r.callsDriver(d.Spec.AcceptDryRunCall) {
		cond := lbcfv1beta1.LoadBalancerDriverCondition{Type: lbcfv1beta1.DriverHealthy}
		rsp, err := r.Invoker.Healthz(ctx, driver.EndpointFor(d))
		switch {
		case err != nil:
			cond.Status, cond.Reason, cond.Message = lbcfv1beta1.ConditionFalse, "HealthzFailed", err.Error()
		case rsp.Healthy:
			cond.Status, cond.Reason = lbcfv1beta1.ConditionTrue, "Healthy"
		default:
			cond.Status, cond.Reason, cond.Message = lbcfv1beta1.ConditionFalse, "Unhealthy", "healthz answered healthy=false"
		}
		healthy := 0.0
		if cond.Status == lbcfv1beta1.ConditionTrue {
			healthy = 1
		}
		r.Metrics.DriverHealthy.WithLabelValues(req.String()).Set(healthy)
		if prev := d.Status.DriverCondition(lbcfv1beta1.DriverHealthy); prev != nil && prev.Status != cond.Status {
			eventType := corev1.EventTypeNormal
			if cond.Status != lbcfv1beta1.ConditionTrue {
				eventType = corev1.EventTypeWarning
			}
			r.Recorder.Eventf(d, nil, eventType, "Driver"+cond.Reason, "Healthz", "driver health: %s %s", cond.Reason, cond.Message)
		}
		setDriverCondition(&d.Status.Conditions, cond)
		res.RequeueAfter = r.HealthzPeriod
	}
	if !equalStatus(orig.Status, d.Status) {
		w := writer{r.Client, r.DryRun, r.Metrics}
		if err := w.do(ctx, d, "UpdateStatus", func() error { return r.Status().Patch(ctx, d, client.MergeFrom(orig)) }); err != nil {
			return ctrl.Result{}, fmt.Errorf("update driver status: %w", err)
		}
	}
	return res, nil
}
