// Package budget bounds how many calls each load-balancer driver gets at once. The engine's
// record and load balancer workers share one pool, and a driver call may take up to a minute:
// without a per-driver bound, a driver whose calls hang would hold every worker and stall the
// other drivers' objects. Those that find their driver's budget spent are parked and woken
// when one of its calls ends, instead of waiting in a worker.
package budget

import (
	"context"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Drivers bounds how many record reconciles call one driver at once. Every record shares
// one pool of workers, and a driver call may take up to a minute: without a bound, a driver
// whose calls hang would hold every worker and stall the records of every other driver. A record
// that finds its driver's budget spent does not wait in a worker: it is parked, and requeued when
// one of that driver's calls ends.
//
// A driver is degraded while its healthz says unhealthy or since one of its calls timed out
// (until one is answered): it then gets the smaller budget, so it slows only its own records.
//
// Part of a healthy driver's budget (addrReserve) is kept for the BackendGroup reconciler's
// generateBackendAddr calls before it creates records (AcquireAddr): the records' own calls
// never take it. Without it, the budget was full through every large burst (its calls wait for
// the device's commits) and the records created meanwhile went without an address: each cost a
// third API write and came to the driver a write later than the rest, a straggling commit of its
// own at the end of the burst. Whatever the split, a driver never sees more calls at once than
// its budget.
type Drivers struct {
	size, degradedSize int
	addrReserve        int
	wake               func(context.Context, types.NamespacedName)

	mu      sync.Mutex
	drivers map[string]*driverSlots
}

type driverSlots struct {
	inFlight     int // the records' calls
	addrInFlight int // generateBackendAddr calls before records are created (AcquireAddr)
	// addrFreed is closed when an address call's slot is returned, for the address calls waiting
	// for one (nil while none waits).
	addrFreed chan struct{}
	timedOut  bool // the last answered-or-not call timed out
	parked    []types.NamespacedName
	isParked  map[types.NamespacedName]bool
}

// addrReserveShare is the share of a driver's budget kept for address calls before records are
// created: 24 of the default 384. Such a call answers in milliseconds (nothing reaches a device),
// so a few slots serve the group's record writes (WriteParallelism at a time, at the API server's
// pace, each waiting for a slot of the reserve at most preGenerateTimeout); a budget under 16
// keeps none, and its address calls take free slots only, never waiting.
const addrReserveShare = 16

// New returns a budget of size calls per driver, degradedSize for a degraded one; wake requeues
// a parked key.
func New(size, degradedSize int, wake func(context.Context, types.NamespacedName)) *Drivers {
	return &Drivers{size: max(size, 1), degradedSize: max(min(degradedSize, size), 1), wake: wake, drivers: map[string]*driverSlots{}}
}

// NewForRecords is the records' budget: New with a share kept for address calls.
func NewForRecords(size, degradedSize int, wake func(context.Context, types.NamespacedName)) *Drivers {
	b := New(size, degradedSize, wake)
	b.addrReserve = b.size / addrReserveShare
	return b
}

func (b *Drivers) slots(drv string) *driverSlots {
	s := b.drivers[drv]
	if s == nil {
		s = &driverSlots{isParked: map[types.NamespacedName]bool{}}
		b.drivers[drv] = s
	}
	return s
}

// free is how many more of the records' calls drv takes now: within their limit (the budget less
// the address reserve, or the degraded budget), and with the address calls in flight within the
// whole budget.
func (b *Drivers) free(s *driverSlots, unhealthy bool) int {
	limit := b.size - b.addrReserve
	if unhealthy || s.timedOut {
		limit = min(b.degradedSize, limit)
	}
	return min(limit-s.inFlight, b.size-s.inFlight-s.addrInFlight)
}

// Acquire takes one of drv's slots for key, or parks key until one frees up and reports false.
func (b *Drivers) Acquire(drv string, unhealthy bool, key types.NamespacedName) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.slots(drv)
	if b.free(s, unhealthy) > 0 {
		s.inFlight++
		if s.isParked[key] {
			// Requeued by something else (its safety-net requeue, a change) before its turn: it
			// no longer waits, and a wake-up later would only run it again for nothing (or,
			// with a cache that does not show its last write yet, call the driver twice).
			delete(s.isParked, key)
			s.parked = slices.DeleteFunc(s.parked, func(k types.NamespacedName) bool { return k == key })
		}
		return true
	}
	if !s.isParked[key] {
		s.isParked[key] = true
		s.parked = append(s.parked, key)
	}
	return false
}

// AcquireAddr takes one of drv's slots for a generateBackendAddr call before a record is
// created: one of the address reserve, or beyond it a slot no record waits for. While the
// reserve's slots are all taken it waits for one (such calls answer in milliseconds) until ctx
// ends; it never waits for the records' slots, and gives up at once on a degraded driver or a
// budget without a reserve. ReleaseAddr returns the slot.
func (b *Drivers) AcquireAddr(ctx context.Context, drv string) bool {
	for {
		b.mu.Lock()
		s := b.slots(drv)
		if s.timedOut {
			b.mu.Unlock()
			return false
		}
		if s.inFlight+s.addrInFlight < b.size && (s.addrInFlight < b.addrReserve || len(s.parked) == 0) {
			s.addrInFlight++
			b.mu.Unlock()
			return true
		}
		if b.addrReserve == 0 {
			b.mu.Unlock()
			return false
		}
		// Here addrInFlight >= addrReserve: the records never take the reserve, so an address
		// call's end frees a slot this call may take.
		if s.addrFreed == nil {
			s.addrFreed = make(chan struct{})
		}
		freed := s.addrFreed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
}

// Observe notes the outcome of one call to drv: a timeout degrades the driver, an answer (even a
// failure) restores it.
func (b *Drivers) Observe(drv string, timedOut bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.slots(drv).timedOut = timedOut
}

// Release returns a slot of drv a record's call held and requeues the parked records that now fit.
func (b *Drivers) Release(ctx context.Context, drv string, unhealthy bool) {
	b.returnSlot(ctx, drv, unhealthy, func(s *driverSlots) { s.inFlight-- })
}

// ReleaseAddr returns a slot AcquireAddr took (its driver was healthy).
func (b *Drivers) ReleaseAddr(ctx context.Context, drv string) {
	b.returnSlot(ctx, drv, false, func(s *driverSlots) {
		s.addrInFlight--
		if s.addrFreed != nil {
			close(s.addrFreed)
			s.addrFreed = nil
		}
	})
}

func (b *Drivers) returnSlot(ctx context.Context, drv string, unhealthy bool, give func(*driverSlots)) {
	b.mu.Lock()
	s := b.slots(drv)
	give(s)
	var wake []types.NamespacedName
	for n := b.free(s, unhealthy); n > 0 && len(s.parked) > 0; n-- {
		key := s.parked[0]
		s.parked = s.parked[1:]
		delete(s.isParked, key)
		wake = append(wake, key)
	}
	if s.inFlight == 0 && s.addrInFlight == 0 && len(s.parked) == 0 && !s.timedOut {
		delete(b.drivers, drv) // drivers come and go: keep only those with something going on
	}
	b.mu.Unlock()
	for _, key := range wake {
		b.wake(ctx, key)
	}
}
