// Package ctrlqueue gives every lbfed controller the same work queue: client-go's rate-limited
// queue rather than controller-runtime's priority queue, its default since v0.22. Before v0.25
// the priority queue can deadlock on shutdown (kubernetes-sigs/controller-runtime#3538): a worker
// never returns, and the manager's stop — a leader handing over, a rolling update — runs out its
// whole grace period and gives up on the runnables. controller-runtime v0.25 needs Kubernetes
// 0.37 libraries, which Karmada 1.18 is not built with; once both move, this package can go.
package ctrlqueue

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Options returns o on the rate-limited queue. Without a RateLimiter of its own, o gets the
// per-item backoff that controller-runtime gives its priority queue (5 ms doubling to 1000 s),
// so that leaving the priority queue changes no controller's retry timing.
func Options(o controller.Options) controller.Options {
	o.UsePriorityQueue = ptr.To(false)
	if o.RateLimiter == nil {
		o.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, 1000*time.Second)
	}
	return o
}
