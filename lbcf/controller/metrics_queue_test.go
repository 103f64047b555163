package controller

import (
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// pending_key must end at the queue's length once adders and workers are done. Each of Add, Get
// and Done read the length and then set the gauge; unserialised, a reader that read a longer
// queue could set its figure after the last worker had set 0: BenchmarkRestartResync waited
// 15 minutes on pending_key{key_kind="BackendRecord"} 14 beside workqueue_depth 0.
func TestPendingKeysEndsAtTheQueueLength(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	const adders, perAdder, workers = 8, 200, 8
	for round := 0; round < 100; round++ {
		q := m.newQueue("BackendRecord")(fmt.Sprintf("test-%d", round),
			workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		var processed sync.WaitGroup
		processed.Add(adders * perAdder)
		for w := 0; w < workers; w++ {
			go func() {
				for {
					item, shutdown := q.Get()
					if shutdown {
						return
					}
					q.Done(item)
					processed.Done()
				}
			}()
		}
		var adding sync.WaitGroup
		for a := 0; a < adders; a++ {
			adding.Add(1)
			go func() {
				defer adding.Done()
				for i := 0; i < perAdder; i++ {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: fmt.Sprintf("r-%d-%d", a, i)}})
				}
			}()
		}
		// Every item was added once and processed once; the workers wait in Get, as a
		// controller's do when nothing changes (no shutdown: its Get would set the gauge again).
		adding.Wait()
		processed.Wait()
		got, want := testutil.ToFloat64(m.PendingKeys.WithLabelValues("BackendRecord")), float64(q.Len())
		q.ShutDown()
		if got != want {
			t.Fatalf("round %d: pending_key %v, queue length %v", round, got, want)
		}
	}
}
