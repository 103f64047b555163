package ctrlqueue_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/lbfed/lbfed/ctrlqueue"
)

func TestOptions(t *testing.T) {
	own := workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, time.Minute)
	item := reconcile.Request{}
	for _, tc := range []struct {
		name   string
		in     controller.Options
		delays []time.Duration // the first retry delays of one item
	}{
		{"defaults", controller.Options{}, []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}},
		{"own rate limiter", controller.Options{RateLimiter: own}, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{"priority queue asked for", controller.Options{UsePriorityQueue: ptr.To(true), MaxConcurrentReconciles: 3}, []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ctrlqueue.Options(tc.in)
			if o.UsePriorityQueue == nil || *o.UsePriorityQueue {
				t.Fatalf("UsePriorityQueue = %v, want false", o.UsePriorityQueue)
			}
			if o.MaxConcurrentReconciles != tc.in.MaxConcurrentReconciles {
				t.Errorf("MaxConcurrentReconciles = %d, want %d kept", o.MaxConcurrentReconciles, tc.in.MaxConcurrentReconciles)
			}
			for i, want := range tc.delays {
				if got := o.RateLimiter.When(item); got != want {
					t.Errorf("retry %d after %s, want %s", i+1, got, want)
				}
			}
		})
	}
}

// TestControllerStopsUnderLoad stops a controller while its workers take items as fast as a
// source adds them, round after round. On controller-runtime's priority queue a stop hangs within
// a few rounds (the control case); on the queue Options chooses, none does.
func TestControllerStopsUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     func(controller.Options) controller.Options
		wantHang bool
	}{
		{"controller-runtime's priority queue", func(o controller.Options) controller.Options { return o }, true},
		{"ctrlqueue.Options", ctrlqueue.Options, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const rounds = 150
			for i := range rounds {
				if hung := stopUnderLoad(t, tc.opts); hung {
					if !tc.wantHang {
						t.Fatalf("round %d: the controller did not stop", i)
					}
					t.Logf("round %d: the controller did not stop, as expected", i)
					return
				}
			}
			if tc.wantHang {
				t.Fatalf("no stop hung in %d rounds: controller-runtime's priority queue may be fixed (v0.25); ctrlqueue may go", rounds)
			}
		})
	}
}

// stopUnderLoad runs one controller under load for a moment, stops it and says whether it failed
// to stop within a bound far above the time a stop takes (milliseconds).
func stopUnderLoad(t *testing.T, opts func(controller.Options) controller.Options) (hung bool) {
	t.Helper()
	requeue := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		if rand.IntN(2) == 0 {
			return reconcile.Result{RequeueAfter: time.Millisecond}, nil
		}
		return reconcile.Result{}, nil
	})
	c, err := controller.NewUnmanaged("load", opts(controller.Options{Reconciler: requeue, MaxConcurrentReconciles: 8, SkipNameValidation: ptr.To(true)}))
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan event.GenericEvent)
	if err := c.Watch(source.Channel(events, &handler.EnqueueRequestForObject{})); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	feeding, stopFeeding := context.WithCancel(context.Background())
	defer stopFeeding()
	go func() {
		for {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(rand.IntN(50))}}
			select {
			case events <- event.GenericEvent{Object: pod}:
			case <-feeding.Done():
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("controller: %v", err)
		}
		return false
	case <-time.After(5 * time.Second):
		return true
	}
}
