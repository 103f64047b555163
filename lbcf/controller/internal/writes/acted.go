package writes

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// actedVersionTTL is how long a record's acted-on version is remembered while the cache does not
// show anything newer; after it the record's work is done again (idempotently) if it comes back.
const actedVersionTTL = time.Minute

// Acted remembers, per record, the version (resourceVersion) that a reconcile finished
// with a successful write of its outcome (the status after ensureBackend, the finalizer removal
// after deregisterBackend), until the cache shows another version. A reconcile of the same
// record that runs before the cache has caught up — requeued meanwhile by a wake-up or its
// safety-net requeue — would see the old version and do the work again: a second ensureBackend
// and a second status write (or a second deregisterBackend and finalizer patch) per record, on the
// API server and the device that a burst of changes is bound by. It is only an optimisation:
// forgotten (a restart, the TTL), the work is redone as before.
type Acted struct {
	mu     sync.Mutex
	m      map[types.UID]actedVersion
	pruned time.Time
}

type actedVersion struct {
	rvs []string // the version acted on, and any the reconcile wrote before its outcome
	at  time.Time
}

// NewActed returns an empty memory of acted-on versions.
func NewActed() *Acted { return &Acted{m: map[types.UID]actedVersion{}} }

// Done notes that the record's versions rvs (the one the reconcile read, and those its own writes
// made before the outcome's, e.g. the address) were acted on and the outcome written.
func (a *Acted) Done(uid types.UID, at time.Time, rvs ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if at.Sub(a.pruned) > actedVersionTTL {
		a.pruned = at
		for k, v := range a.m {
			if at.Sub(v.at) > actedVersionTTL {
				delete(a.m, k)
			}
		}
	}
	a.m[uid] = actedVersion{rvs: rvs, at: at}
}

// Current reports whether the cache still shows the version of the record that was acted on
// (uid, rv: the cached object's); a newer version ends the entry.
func (a *Acted) Current(uid types.UID, rv string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.m[uid]
	switch {
	case !ok:
		return false
	case slices.Contains(v.rvs, rv) && now.Sub(v.at) <= actedVersionTTL:
		return true
	}
	delete(a.m, uid)
	return false
}
