package frontdoor

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Queue is a controller's work queue.
type Queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// LoadBalancerEvents is the LoadBalancer watch of a front door: every event goes to owner (the
// front door of a generated LoadBalancer: its Created status), and a LoadBalancer appearing or
// going also calls refused, which requeues the front doors waiting on one (WaitsForLoadBalancers):
// a conflict or a taken name may be settled.
func LoadBalancerEvents(owner handler.EventHandler, refused func(context.Context, Queue)) handler.Funcs {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q Queue) {
			owner.Create(ctx, e, q)
			refused(ctx, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q Queue) { owner.Update(ctx, e, q) },
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q Queue) {
			owner.Delete(ctx, e, q)
			refused(ctx, q)
		},
	}
}

// PlacementUpdates passes the ResourceBinding updates that change the clusters Clusters and
// ServicePlacements read (creations and deletions pass).
func PlacementUpdates() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return PlacementChanged(e.ObjectOld, e.ObjectNew) }}
}

// WaitsForLoadBalancers tells whether a front door refused with reason is examined again when a
// LoadBalancer appears or goes (a conflict, a taken name, a previous incarnation's objects going).
func WaitsForLoadBalancers(reason string) bool {
	return reason == ReasonConflict || reason == ReasonNameTaken || reason == ReasonPending
}

// Shown is what a front door's status does with the VIP after Sync.
type Shown int

const (
	// Keep what status shows: the input was refused as written or the sync failed, and the
	// device keeps serving what it serves.
	Keep Shown = iota
	// Show the VIP: the device serves it.
	Show
	// Hide the VIP: the device does not serve it.
	Hide
)

// VIPShown says what status shows of the VIP after Sync returned out and err. A front door
// refused for a conflict keeps the VIP while a LoadBalancer of it still serves (only one that
// lost a race is removed).
func (k *Kit) VIPShown(ctx context.Context, d Door, out Outcome, err error) (Shown, error) {
	rf, refused := AsRefusal(err)
	switch {
	case refused && rf.Reason == ReasonConflict:
		serving, serr := k.Serving(ctx, d)
		if serr != nil {
			return Keep, serr
		}
		if !serving {
			return Hide, nil
		}
		return Keep, nil
	case err != nil:
		return Keep, nil
	case out.Serving:
		return Show, nil
	default:
		return Hide, nil
	}
}
