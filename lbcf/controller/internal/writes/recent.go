// Package writes remembers the engine's own writes while the informer cache does not show them
// yet: a BackendGroup's record creates and deletes (Recent), and the record versions whose outcome
// a reconcile has written (Acted). The cache lags behind most when the API server is busiest, and
// a reconcile that reads it then would repeat those writes (and their driver calls) on the API
// server and the devices a burst of changes is bound by.
package writes

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// recentWriteTTL is how long a record a group reconcile deleted (or created, when resource
// versions cannot be compared) is taken as written while the cache does not show it yet.
const recentWriteTTL = 15 * time.Second

// recentCreateTTL bounds how long a create is taken as written while the record cache has not
// shown anything as new as it: the cache is then still behind the write, however long that is
// (on a saturated API server its watch lagged more than 15 s, and the group created again
// thousands of records it had just created — up to 6,850 409s for 20,000 records). Only a cache
// that stopped moving altogether waits for this.
const recentCreateTTL = 5 * time.Minute

// Recent remembers, per group, the records its reconciles created or deleted until the
// cache shows the write (the expectations of Kubernetes' ReplicaSet controller). The group is
// reconciled again while thousands of its records are being written (every record that turns
// Registered requeues it), and its cache lags behind most when the API server is busiest: without
// this, such a reconcile creates again the records it has just created (a 409 each, after a
// generateBackendAddr call) and deletes again those it has just deleted, adding writes to a run
// that is bound by them. A create the cache does not show is given up once the cache has shown
// a record event at least as new as the create (the record is gone again), a delete after
// recentWriteTTL; the group is requeued for then.
type Recent struct {
	mu     sync.Mutex
	m      map[types.UID]map[string]Write
	pruned time.Time
	seen   string // the newest resourceVersion the record cache has shown
}

// Write is a create or a delete of one of a group's records that the cache does not show yet.
type Write struct {
	Deleted bool // a delete (a create otherwise)
	at      time.Time
	rv      string // a create's resourceVersion
}

// Observe notes a resourceVersion the record cache has shown (every event of the record informer).
func (w *Recent) Observe(rv string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, err := resourceversion.CompareResourceVersion(rv, w.seen); err == nil && c > 0 || w.seen == "" {
		w.seen = rv
	}
}

// CacheSeen is the newest resourceVersion the record cache has shown so far. A reconcile takes it
// before it lists the cache, whose content is then at least that new (the informer updates its
// store before it notifies Observe): a later Observe may concern records the list missed.
func (w *Recent) CacheSeen() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// ttl is how long e is taken as written without confirmation, and whether a cache that has shown
// resourceVersion seen is known to be past it.
func ttl(e Write, seen string) (time.Duration, bool) {
	if e.Deleted || e.rv == "" {
		return recentWriteTTL, false
	}
	c, err := resourceversion.CompareResourceVersion(seen, e.rv)
	if err != nil {
		return recentWriteTTL, false
	}
	return recentCreateTTL, c >= 0
}

// NewRecent returns an empty memory of writes.
func NewRecent() *Recent { return &Recent{m: map[types.UID]map[string]Write{}} }

// Wrote notes a create (deleted false, rv its resourceVersion) or a delete of the group's record
// name.
func (w *Recent) Wrote(group types.UID, name string, deleted bool, rv string, at time.Time) {
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
				if d, past := ttl(e, w.seen); past || at.Sub(e.at) > d {
					delete(names, name)
				}
			}
			if len(names) == 0 {
				delete(w.m, g)
			}
		}
	}
	if w.m[group] == nil {
		w.m[group] = map[string]Write{}
	}
	w.m[group][name] = Write{Deleted: deleted, at: at, rv: rv}
}

// Settle drops the group's entries the cache confirms (existing: the group's records in the
// cache, listed after CacheSeen returned seen) or that expired, and returns the rest: the writes
// not to repeat, and when the earliest of them expires (0: none).
func (w *Recent) Settle(group types.UID, existing map[string]*lbcfv1beta1.BackendRecord, seen string, now time.Time) (pending map[string]Write, next time.Duration) {
	if w == nil {
		return nil, 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, e := range w.m[group] {
		have, ok := existing[name]
		confirmed := (!e.Deleted && ok) || (e.Deleted && (!ok || have.DeletionTimestamp != nil))
		d, past := ttl(e, seen)
		left := d - now.Sub(e.at)
		if confirmed || past || left <= 0 {
			delete(w.m[group], name)
			continue
		}
		if pending == nil {
			pending = map[string]Write{}
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
