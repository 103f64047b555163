package controller

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// recordWakeups requeues BackendRecords whose reconcile waits for something that does not change
// the record, so no watch of the record would bring it back: its backend turning eligible (seen
// by the BackendGroup reconciler), a driver slot freeing up, another record sharing its address
// changing. The record controller reads ch.
type recordWakeups struct {
	ch chan event.GenericEvent

	mu sync.Mutex
	// waiting are the records whose backend was not eligible for generateBackendAddr: the
	// group wakes those whose backend it finds eligible again.
	waiting map[types.NamespacedName]struct{}
}

func newRecordWakeups() *recordWakeups {
	return &recordWakeups{ch: make(chan event.GenericEvent, 1024), waiting: map[types.NamespacedName]struct{}{}}
}

// wait marks key as waiting for its backend.
func (w *recordWakeups) wait(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting[key] = struct{}{}
}

// done unmarks key.
func (w *recordWakeups) done(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiting, key)
}

// wakeIfWaiting requeues key when it waits for its backend, and reports whether it did.
func (w *recordWakeups) wakeIfWaiting(ctx context.Context, key types.NamespacedName) bool {
	w.mu.Lock()
	_, ok := w.waiting[key]
	delete(w.waiting, key)
	w.mu.Unlock()
	if ok {
		w.wake(ctx, key)
	}
	return ok
}

// wake requeues key now. It blocks only while the record controller's channel is full (it drains
// it into its queue as fast as it can) and gives up when ctx ends.
func (w *recordWakeups) wake(ctx context.Context, key types.NamespacedName) {
	obj := &lbcfv1beta1.BackendRecord{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	select {
	case w.ch <- event.GenericEvent{Object: obj}:
	case <-ctx.Done():
	}
}
