// Package pace spaces the BackendGroup reconciles that its records' events cause: thousands of
// records turning Registered in a burst cost one group reconcile per interval rather than one
// each, while the first event after a quiet spell still reconciles the group at once. The
// interval grows with the group, whose reconcile reads every record.
package pace

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Spacing of the group reconciles that its records' events cause (see Groups).
const (
	// minGroupPace is the shortest: a group's status follows its last record within this.
	minGroupPace = 200 * time.Millisecond
	// groupPacePerRecord grows the spacing with the group, whose reconcile reads every record.
	groupPacePerRecord = 200 * time.Microsecond
	// maxGroupPace is the longest (a group of 5,000 records and more): the fixed delay every
	// group had before.
	maxGroupPace = time.Second
)

// Groups spaces the reconciles of a group that its records' events cause: thousands of
// records turning Registered cost one reconcile per interval, not thousands. Unlike a fixed
// delay after each event, the first event after a quiet spell reconciles the group at once, and
// during a burst the next reconcile comes an interval after the last one started, not a whole
// delay after the first event that followed it: the group's status trailed its last record by
// up to a second, the last step of every convergence. The interval grows with the group (its
// reconcile lists and counts every record, and writes the group's status when the counts moved),
// so a large group's burst costs a bounded share of a core.
type Groups struct {
	mu    sync.Mutex
	last  map[client.ObjectKey]groupPace
	swept time.Time
	now   func() time.Time
}

type groupPace struct {
	start    time.Time     // the last reconcile's start: it read the cache after this
	interval time.Duration // from the number of records it found
}

// New returns a pacer that knows no group yet.
func New() *Groups {
	return &Groups{last: map[client.ObjectKey]groupPace{}, now: time.Now}
}

// groupPaceFor is the spacing of the reconciles of a group with n records.
func groupPaceFor(n int) time.Duration {
	return min(max(time.Duration(n)*groupPacePerRecord, minGroupPace), maxGroupPace)
}

// groupPaceSweep is how often the pacer drops the groups whose interval has passed, which it
// treats as unknown anyway: deleted groups do not stay.
const groupPaceSweep = time.Minute

// Reconciled notes that a reconcile of key started at start found n records (0 for a group
// that is gone or going: the events of its records being deleted are spaced too).
func (p *Groups) Reconciled(key client.ObjectKey, start time.Time, n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[key] = groupPace{start: start, interval: groupPaceFor(n)}
	if now := p.now(); now.Sub(p.swept) >= groupPaceSweep {
		p.swept = now
		for k, l := range p.last {
			if !l.start.Add(l.interval).After(now) {
				delete(p.last, k)
			}
		}
	}
}

// delay is how long a record event of group key waits before it reconciles the group: 0 when the
// last reconcile started an interval ago or more (or none is known).
func (p *Groups) delay(key client.ObjectKey) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	l, ok := p.last[key]
	p.mu.Unlock()
	if !ok {
		return 0
	}
	return max(l.start.Add(l.interval).Sub(p.now()), 0)
}

// OwnerHandler enqueues a record's group, spaced by the pacer. Events within one interval all
// ask for the same moment; the queue keeps one entry per group at the earliest moment asked.
func (p *Groups) OwnerHandler() handler.EventHandler {
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.Kind != lbcfv1beta1.KindBackendGroup {
			return
		}
		key := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}}
		if d := p.delay(key.NamespacedName); d > 0 {
			q.AddAfter(key, d)
			return
		}
		q.Add(key) // not AddAfter(key, 0): that bypasses the metered queue's Add and its gauge
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
	}
}
