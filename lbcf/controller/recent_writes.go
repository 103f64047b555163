package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// recentWriteTTL is how long a record a group reconcile created or deleted is taken as written
// while the cache does not show it yet.
const recentWriteTTL = 15 * time.Second

// recentWrites remembers, per group, the records its reconciles created or deleted until the
// cache shows the write (the expectations of Kubernetes' ReplicaSet controller). The group is
// reconciled again while thousands of its records are being written (every record that turns
// Registered requeues it), and its cache lags behind most when the API server is busiest: without
// this, such a reconcile creates again the records it has just created (a 409 each, after a
// generateBackendAddr call) and deletes again those it has just deleted, adding writes to a run
// that is bound by them. An entry that the cache never confirms expires after recentWriteTTL, and
// the group is requeued for then.
type recentWrites struct {
	mu     sync.Mutex
	m      map[types.UID]map[string]recentWrite
	pruned time.Time
}

type recentWrite struct {
	deleted bool
	at      time.Time
}

func newRecentWrites() *recentWrites { return &recentWrites{m: map[types.UID]map[string]recentWrite{}} }

// wrote notes a create (deleted false) or a delete of the group's record name.
func (w *recentWrites) wrote(group types.UID, name string, deleted bool, at time.Time) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if at.Sub(w.pruned) > recentWriteTTL {
		// Entries of groups that are not reconciled any more (deleted) go too.
		w.pruned = at
		for g, names := range w.m {
			for name, e := range names {
				if at.Sub(e.at) > recentWriteTTL {
					delete(names, name)
				}
			}
			if len(names) == 0 {
				delete(w.m, g)
			}
		}
	}
	if w.m[group] == nil {
		w.m[group] = map[string]recentWrite{}
	}
	w.m[group][name] = recentWrite{deleted: deleted, at: at}
}

// settle drops the group's entries the cache confirms (existing: the group's records in the
// cache) or that expired, and returns the rest: the writes not to repeat, and when the earliest
// of them expires (0: none).
func (w *recentWrites) settle(group types.UID, existing map[string]*lbcfv1beta1.BackendRecord, now time.Time) (pending map[string]recentWrite, next time.Duration) {
	if w == nil {
		return nil, 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, e := range w.m[group] {
		have, ok := existing[name]
		confirmed := (!e.deleted && ok) || (e.deleted && (!ok || have.DeletionTimestamp != nil))
		left := recentWriteTTL - now.Sub(e.at)
		if confirmed || left <= 0 {
			delete(w.m[group], name)
			continue
		}
		if pending == nil {
			pending = map[string]recentWrite{}
		}
		pending[name] = e
		if next == 0 || left < next {
			next = left
		}
	}
	if len(w.m[group]) == 0 {
		delete(w.m, group)
	}
	return pending, next
}
