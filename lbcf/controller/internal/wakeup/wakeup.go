// Package wakeup requeues BackendRecords whose reconcile waits for something no watch of the
// record would report (a driver slot, an eligible backend, another holder of its address): the
// record controller reads Records.Events as one of its sources, so a record that waits need not
// hold a worker or poll.
package wakeup

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Records requeues BackendRecords whose reconcile waits for something that does not change
// the record, so no watch of the record would bring it back: its backend turning eligible (seen
// by the BackendGroup reconciler), a driver slot freeing up, another record sharing its address
// changing. The record controller reads Events.
type Records struct {
	ch chan event.GenericEvent

	mu sync.Mutex
	// waiting are the records whose backend was not eligible for generateBackendAddr: the
	// group wakes those whose backend it finds eligible again.
	waiting map[types.NamespacedName]struct{}
}

// New returns Records with no record waiting.
func New() *Records {
	return &Records{ch: make(chan event.GenericEvent, 1024), waiting: map[types.NamespacedName]struct{}{}}
}

// Wait marks key as waiting for its backend.
func (w *Records) Wait(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting[key] = struct{}{}
}

// Done unmarks key.
func (w *Records) Done(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiting, key)
}

// WakeIfWaiting requeues key when it waits for its backend, and reports whether it did.
func (w *Records) WakeIfWaiting(ctx context.Context, key types.NamespacedName) bool {
	w.mu.Lock()
	_, ok := w.waiting[key]
	delete(w.waiting, key)
	w.mu.Unlock()
	if ok {
		w.Wake(ctx, key)
	}
	return ok
}

// Wake requeues key now. It blocks only while the record controller's channel is full (it drains
// it into its queue as fast as it can) and gives up when ctx ends.
func (w *Records) Wake(ctx context.Context, key types.NamespacedName) {
	obj := &lbcfv1beta1.BackendRecord{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	select {
	case w.ch <- event.GenericEvent{Object: obj}:
	case <-ctx.Done():
	}
}

// Events is the channel the record controller reads the wake-ups from.
func (w *Records) Events() <-chan event.GenericEvent { return w.ch }
