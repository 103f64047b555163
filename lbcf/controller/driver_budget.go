package controller

import (
	"context"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// driverBudget bounds how many record reconciles call one driver at once. Every record shares
// one pool of workers, and a driver call may take up to a minute: without a bound, a driver
// whose calls hang would hold every worker and stall the records of every other driver. A record
// that finds its driver's budget spent does not wait in a worker: it is parked, and requeued when
// one of that driver's calls ends.
//
// A driver is degraded while its healthz says unhealthy or since one of its calls timed out
// (until one is answered): it then gets the smaller budget, so it slows only its own records.
type driverBudget struct {
	size, degradedSize int
	wake               func(context.Context, types.NamespacedName)

	mu      sync.Mutex
	drivers map[string]*driverSlots
}

type driverSlots struct {
	inFlight int
	timedOut bool // the last answered-or-not call timed out
	parked   []types.NamespacedName
	isParked map[types.NamespacedName]bool
}

func newDriverBudget(size, degradedSize int, wake func(context.Context, types.NamespacedName)) *driverBudget {
	return &driverBudget{size: max(size, 1), degradedSize: max(min(degradedSize, size), 1), wake: wake, drivers: map[string]*driverSlots{}}
}

func (b *driverBudget) slots(drv string) *driverSlots {
	s := b.drivers[drv]
	if s == nil {
		s = &driverSlots{isParked: map[types.NamespacedName]bool{}}
		b.drivers[drv] = s
	}
	return s
}

func (b *driverBudget) limit(s *driverSlots, unhealthy bool) int {
	if unhealthy || s.timedOut {
		return b.degradedSize
	}
	return b.size
}

// acquire takes one of drv's slots for key, or parks key until one frees up and reports false.
func (b *driverBudget) acquire(drv string, unhealthy bool, key types.NamespacedName) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.slots(drv)
	if s.inFlight < b.limit(s, unhealthy) {
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

// tryAcquire takes one of drv's slots if one is free, nobody waits in line and the driver is
// not degraded; it parks nothing. For calls that are only worth making when they cost no wait
// (the BackendGroup reconciler's generateBackendAddr before a record is created).
func (b *driverBudget) tryAcquire(drv string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.slots(drv)
	if s.timedOut || len(s.parked) > 0 || s.inFlight >= b.size {
		return false
	}
	s.inFlight++
	return true
}

// observe notes the outcome of one call to drv: a timeout degrades the driver, an answer (even a
// failure) restores it.
func (b *driverBudget) observe(drv string, timedOut bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.slots(drv).timedOut = timedOut
}

// release returns a slot of drv and requeues the parked records that now fit.
func (b *driverBudget) release(ctx context.Context, drv string, unhealthy bool) {
	b.mu.Lock()
	s := b.slots(drv)
	s.inFlight--
	var wake []types.NamespacedName
	for n := b.limit(s, unhealthy) - s.inFlight; n > 0 && len(s.parked) > 0; n-- {
		key := s.parked[0]
		s.parked = s.parked[1:]
		delete(s.isParked, key)
		wake = append(wake, key)
	}
	if s.inFlight == 0 && len(s.parked) == 0 && !s.timedOut {
		delete(b.drivers, drv) // drivers come and go: keep only those with something going on
	}
	b.mu.Unlock()
	for _, key := range wake {
		b.wake(ctx, key)
	}
}
