// Package idlegc spares an idle process the Go runtime's forced collections.
//
// The runtime starts a collection at least every two minutes whether or not the heap grew
// (runtime/proc.go, forcegcperiod), and each one marks the whole live heap. For a controller that
// caches a large fleet and then waits, that is most of what it does while nothing changes: at
// 100,000 records the forced collection's marking of a ≈ 290 MB live heap was ≈ 500 of the 630 ms
// an idle process spent in two minutes (BenchmarkRestartResync), work that grows with the fleet.
// The runtime skips the clock's collection only while GOGC is off; a memory limit then starts the
// collections instead.
//
// So a Suspender watches the runtime's counters and, once the process allocates so little that
// its heap would take more than twice that period to grow to its goal, turns GOGC off and sets a
// memory limit whose heap goal is GOGC's (never above the limit already set, e.g. GOMEMLIMIT). A
// collection then still comes from growth, after as much of it, never from the clock. The first
// collection, whatever started it, ends the suspension: GOGC and the memory limit are put back as
// they were. A process that runs with GOGC off is left alone.
package idlegc

import (
	"context"
	"errors"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// ForcedPeriod is the runtime's longest time between collections (runtime/proc.go).
const ForcedPeriod = 2 * time.Minute

// Options configure a Suspender; the zero value is usable.
type Options struct {
	// Interval between looks at the runtime's counters while collections run as usual (default
	// 5s); while suspended, a fifth of it, so that GOGC is back soon after the first collection.
	Interval time.Duration
	// Quiet is how many intervals in a row must be quiet before the suspension (default 3).
	Quiet int
	// Suspended, when set, is told each change (true when GOGC goes off), e.g. for a gauge.
	Suspended func(bool)
	Log       logr.Logger
}

// Suspender is a runnable (Start(ctx) error, as controller-runtime's manager.Runnable).
type Suspender struct {
	opts Options
	rt   runtimeGC
}

// New returns a Suspender acting on this process's runtime.
func New(opts Options) *Suspender {
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.Quiet <= 0 {
		opts.Quiet = 3
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &Suspender{opts: opts, rt: processGC{}}
}

// FlagUsage is the help of the commands' --suspend-idle-gc flag.
const FlagUsage = "While the process allocates too little for its heap to reach its goal in four minutes, suspend the Go runtime's collection forced every two minutes, which marks the whole live heap (GOGC off under a memory limit whose heap goal is GOGC's, never above GOMEMLIMIT; both restored at the next collection). false keeps the runtime's behaviour."

// sample is what one look at the runtime reads.
type sample struct {
	at      time.Time
	cycles  uint64 // collections so far
	allocs  uint64 // bytes allocated so far
	goal    uint64 // heap goal of the running cycle (bytes of heap objects)
	objects uint64 // bytes of heap objects, live or not yet swept
	free    uint64 // free heap memory not released to the OS
	held    uint64 // memory the limit counts: all mapped minus what was released to the OS
	gogc    int64
	limit   int64
}

// runtimeGC is the seam between the policy and the process's runtime.
type runtimeGC interface {
	read() sample
	setGCPercent(int) int
	setMemoryLimit(int64) int64
}

// NeedLeaderElection lets a controller-runtime manager start it without waiting for leadership:
// a process's memory is its own, leader or not.
func (s *Suspender) NeedLeaderElection() bool { return false }

// Start watches the runtime until ctx is done, then puts back what it changed.
func (s *Suspender) Start(ctx context.Context) error {
	quiet := 0
	prev := s.rt.read()
	var susp *suspension
	defer func() {
		if susp != nil {
			s.resume(susp, "stopping")
		}
	}()
	for {
		wait := s.opts.Interval
		if susp != nil {
			wait /= 5
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		cur := s.rt.read()
		if susp != nil {
			if cur.cycles != susp.cycles {
				s.resume(susp, "a collection ran")
				susp, quiet = nil, 0
			}
			prev = cur
			continue
		}
		if isQuiet(prev, cur) {
			quiet++
		} else {
			quiet = 0
		}
		prev = cur
		if quiet >= s.opts.Quiet {
			susp = s.suspend(cur)
			quiet = 0
		}
	}
}

// isQuiet tells whether, at the rate allocated between two looks, the heap would take more than
// twice the forced period to grow to its goal: the next collection would be the clock's.
func isQuiet(prev, cur sample) bool {
	if cur.gogc < 0 || cur.goal <= cur.objects || cur.allocs < prev.allocs {
		return false
	}
	dt := cur.at.Sub(prev.at)
	if dt <= 0 {
		return false
	}
	perPeriod := float64(cur.allocs-prev.allocs) * float64(2*ForcedPeriod) / float64(dt)
	return perPeriod < float64(cur.goal-cur.objects)
}

// suspensionLimit is the memory limit while GOGC is off: the lowest whose heap goal is not below
// GOGC's (runtime/mgcpacer.go, memoryLimitHeapGoal: the limit less the memory that holds no heap
// objects, less 3 % or at least 1 MiB of headroom), and at least what the process holds now (a
// limit under it would have the scavenger return free memory and the collector start early);
// at most the limit set. So a collection comes after as much growth as GOGC's would, and the
// process holds no more than the larger of what it holds and what that growth takes.
func suspensionLimit(s sample) int64 {
	if s.goal <= s.objects || s.held < s.free+s.objects {
		return 0
	}
	nonHeap := s.held - s.free - s.objects
	l := nonHeap + max(s.goal+s.goal*3/97+1, s.goal+minHeadroom)
	l = max(l, s.held+minHeadroom)
	if l > math.MaxInt64 || int64(l) > s.limit {
		return s.limit
	}
	return int64(l)
}

// minHeadroom is the runtime's memoryLimitMinHeapGoalHeadroom.
const minHeadroom = 1 << 20

// suspension is what a suspension changed, to be put back.
type suspension struct {
	gogc   int
	limit  int64
	cycles uint64
}

func (s *Suspender) suspend(cur sample) *suspension {
	l := suspensionLimit(cur)
	if l <= 0 || uint64(l) <= cur.held {
		return nil // the limit set binds already: collections come from it, not the clock
	}
	// The limit first, so that the heap is never without a bound.
	limit := s.rt.setMemoryLimit(l)
	gogc := s.rt.setGCPercent(-1)
	s.opts.Log.V(1).Info("idle: forced collections suspended", "gogc", gogc, "memoryLimit", l, "held", cur.held,
		"heapGoal", cur.goal, "heapObjects", cur.objects)
	if s.opts.Suspended != nil {
		s.opts.Suspended(true)
	}
	return &suspension{gogc: gogc, limit: limit, cycles: cur.cycles}
}

func (s *Suspender) resume(susp *suspension, why string) {
	// GOGC first, so that the heap is never without a bound.
	s.rt.setGCPercent(susp.gogc)
	s.rt.setMemoryLimit(susp.limit)
	s.opts.Log.V(1).Info("forced collections back", "reason", why, "gogc", susp.gogc, "memoryLimit", susp.limit)
	if s.opts.Suspended != nil {
		s.opts.Suspended(false)
	}
}

// processGC is this process's runtime.
type processGC struct{}

var sampleNames = []string{
	"/gc/cycles/total:gc-cycles",
	"/gc/heap/allocs:bytes",
	"/gc/heap/goal:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/gc/gogc:percent",
	"/gc/gomemlimit:bytes",
}

func (processGC) read() sample {
	ms := make([]metrics.Sample, len(sampleNames))
	for i, n := range sampleNames {
		ms[i].Name = n
	}
	metrics.Read(ms)
	v := func(i int) uint64 {
		if ms[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return ms[i].Value.Uint64()
	}
	return sample{
		at:      time.Now(),
		cycles:  v(0),
		allocs:  v(1),
		goal:    v(2),
		objects: v(3),
		free:    v(4),
		held:    v(5) - v(6),
		gogc:    int64(v(7)),
		limit:   int64(v(8)),
	}
}

func (processGC) setGCPercent(p int) int       { return debug.SetGCPercent(p) }
func (processGC) setMemoryLimit(l int64) int64 { return debug.SetMemoryLimit(l) }

// NewGauge registers lbfed_idle_gc_suspended (1 while GOGC is off for an idle process) on reg and
// returns the Suspended callback that sets it.
func NewGauge(reg prometheus.Registerer) func(bool) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "lbfed_idle_gc_suspended",
		Help: "1 while the process is idle and the Go runtime's forced collections are suspended (GOGC off under a memory limit), 0 otherwise."})
	if err := reg.Register(g); err != nil {
		// One process, one runtime: a second Suspender (tests) shares the gauge.
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			panic(err)
		}
		g = are.ExistingCollector.(prometheus.Gauge)
	}
	return func(on bool) {
		if on {
			g.Set(1)
		} else {
			g.Set(0)
		}
	}
}
