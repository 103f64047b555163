package idlegc

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const mib = 1 << 20

func TestIsQuiet(t *testing.T) {
	t0 := time.Unix(1000, 0)
	base := sample{at: t0, allocs: 1000 * mib, goal: 600 * mib, objects: 300 * mib, gogc: 100, limit: math.MaxInt64}
	after := func(d time.Duration, allocated uint64, edit func(*sample)) sample {
		s := base
		s.at, s.allocs = t0.Add(d), base.allocs+allocated
		if edit != nil {
			edit(&s)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		cur  sample
		want bool
	}{
		// 300 MiB of headroom: quiet below 300 MiB per four minutes, 1.25 MiB/s.
		{"nothing allocated", after(5*time.Second, 0, nil), true},
		{"idle chatter", after(5*time.Second, 256<<10, nil), true},
		{"just under the rate", after(5*time.Second, 6*mib, nil), true},
		{"just over the rate", after(5*time.Second, 7*mib, nil), false},
		{"busy", after(5*time.Second, 200*mib, nil), false},
		{"GOGC off", after(5*time.Second, 0, func(s *sample) { s.gogc = -1 }), false},
		{"heap at its goal", after(5*time.Second, 0, func(s *sample) { s.objects = s.goal }), false},
		{"no time passed", after(0, 0, nil), false},
		{"counter went back", after(5*time.Second, 0, func(s *sample) { s.allocs = 0 }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isQuiet(base, tc.cur); got != tc.want {
				t.Errorf("isQuiet = %v, want %v", got, tc.want)
			}
		})
	}
}

// limitHeapGoal is the runtime's heap goal under memory limit l with GOGC off
// (runtime/mgcpacer.go, memoryLimitHeapGoal, without the overage term: l is never below held).
func limitHeapGoal(l uint64, s sample) uint64 {
	goal := l - (s.held - s.free - s.objects)
	return goal - max(goal/100*3, minHeadroom)
}

func TestSuspensionLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    sample
		want int64 // 0: none; -1: the lowest limit whose heap goal is GOGC's
	}{
		{"GOGC's goal", sample{held: 400 * mib, free: 50 * mib, objects: 300 * mib, goal: 600 * mib, limit: math.MaxInt64}, -1},
		{"small heap: the runtime's 1 MiB of headroom", sample{held: 10 * mib, objects: 2 * mib, goal: 4 * mib, limit: math.MaxInt64}, -1},
		{"much free memory: what is held", sample{held: 900 * mib, free: 550 * mib, objects: 300 * mib, goal: 600 * mib, limit: math.MaxInt64}, 901 * mib},
		{"capped by GOMEMLIMIT", sample{held: 400 * mib, free: 50 * mib, objects: 300 * mib, goal: 600 * mib, limit: 464 * mib}, 464 * mib},
		{"no growth left", sample{held: 400 * mib, objects: 300 * mib, goal: 300 * mib, limit: math.MaxInt64}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := suspensionLimit(tc.s)
			if tc.want >= 0 {
				if got != tc.want {
					t.Errorf("suspensionLimit = %.2f MiB, want %.2f MiB", float64(got)/mib, float64(tc.want)/mib)
				}
				return
			}
			if g := limitHeapGoal(uint64(got), tc.s); g < tc.s.goal {
				t.Errorf("limit %.2f MiB: heap goal %.2f MiB, below GOGC's %.2f MiB", float64(got)/mib, float64(g)/mib, float64(tc.s.goal)/mib)
			}
			if g := limitHeapGoal(uint64(got)-4096, tc.s); g >= tc.s.goal {
				t.Errorf("limit %.2f MiB is not the lowest: 4 KiB less still gives heap goal %.2f MiB", float64(got)/mib, float64(g)/mib)
			}
		})
	}
}

// fakeGC is a scripted runtime: its counters are what the test sets, its settings what the
// Suspender set, and every setting call is logged in order.
type fakeGC struct {
	mu    sync.Mutex
	s     sample
	calls []string
}

func (f *fakeGC) read() sample {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.s
	s.at = time.Now()
	return s
}

func (f *fakeGC) setGCPercent(p int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.s.gogc
	f.s.gogc = int64(p)
	f.calls = append(f.calls, "gogc")
	return int(prev)
}

func (f *fakeGC) setMemoryLimit(l int64) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.s.limit
	if l >= 0 {
		f.s.limit = l
	}
	f.calls = append(f.calls, "limit")
	return prev
}

func (f *fakeGC) edit(fn func(*sample)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.s)
}

func (f *fakeGC) state() (gogc, limit int64, calls []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.s.gogc, f.s.limit, append([]string(nil), f.calls...)
}

func TestSuspenderCycle(t *testing.T) {
	g := NewWithT(t)
	f := &fakeGC{s: sample{goal: 600 * mib, objects: 300 * mib, held: 400 * mib, gogc: 100, limit: 464 * mib}}
	var events []bool
	var mu sync.Mutex
	s := New(Options{Interval: 10 * time.Millisecond, Suspended: func(on bool) { mu.Lock(); events = append(events, on); mu.Unlock() }})
	s.rt = f
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()

	// Quiet: GOGC off under GOMEMLIMIT (GOGC's goal would be above it), the limit set first.
	g.Eventually(func() int64 { gogc, _, _ := f.state(); return gogc }).Should(Equal(int64(-1)))
	_, limit, calls := f.state()
	g.Expect(limit).To(Equal(int64(464 * mib)))
	g.Expect(calls).To(Equal([]string{"limit", "gogc"}))

	// A collection: both back, GOGC first.
	f.edit(func(s *sample) { s.cycles++ })
	g.Eventually(func() int64 { gogc, _, _ := f.state(); return gogc }).Should(Equal(int64(100)))
	_, limit, calls = f.state()
	g.Expect(limit).To(Equal(int64(464 * mib)))
	g.Expect(calls).To(Equal([]string{"limit", "gogc", "gogc", "limit"}))

	// Busy (1 GiB a look): not suspended again.
	stopBusy := make(chan struct{})
	busyDone := make(chan struct{})
	go func() {
		defer close(busyDone)
		for {
			select {
			case <-stopBusy:
				return
			case <-time.After(2 * time.Millisecond):
				f.edit(func(s *sample) { s.allocs += 1 << 30 })
			}
		}
	}()
	g.Consistently(func() int64 { gogc, _, _ := f.state(); return gogc }, 200*time.Millisecond).Should(Equal(int64(100)))
	close(stopBusy)
	<-busyDone

	// Quiet again, then stopped while suspended: both put back.
	g.Eventually(func() int64 { gogc, _, _ := f.state(); return gogc }).Should(Equal(int64(-1)))
	cancel()
	g.Expect(<-done).To(Succeed())
	gogc, limit, _ := f.state()
	g.Expect(gogc).To(Equal(int64(100)))
	g.Expect(limit).To(Equal(int64(464 * mib)))
	mu.Lock()
	defer mu.Unlock()
	g.Expect(events).To(Equal([]bool{true, false, true, false}))
}

func TestSuspenderLeavesGOGCOff(t *testing.T) {
	f := &fakeGC{s: sample{goal: 600 * mib, objects: 300 * mib, held: 400 * mib, gogc: -1, limit: 464 * mib}}
	s := New(Options{Interval: 5 * time.Millisecond})
	s.rt = f
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, calls := f.state(); len(calls) != 0 {
		t.Errorf("settings changed under GOGC=off: %v", calls)
	}
}
