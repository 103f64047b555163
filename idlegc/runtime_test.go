package idlegc

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// node makes a pointer-linked heap for the collector to mark (64 bytes a node).
type node struct {
	next *node
	_    [48]byte
}

func retain(bytes int) *node {
	var head *node
	for i := 0; i < bytes/64; i++ {
		head = &node{next: head}
	}
	return head
}

var sink []byte

// TestSuspenderOnTheRuntime: on this process's runtime, an idle heap gets GOGC off under a memory
// limit; allocation then starts a collection at that limit (GOGC being off, nothing else could),
// which puts GOGC and the limit back.
func TestSuspenderOnTheRuntime(t *testing.T) {
	g := NewWithT(t)
	gogc0 := debug.SetGCPercent(100)
	limit0 := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(gogc0); debug.SetMemoryLimit(limit0) })
	live := retain(64 * mib)
	runtime.GC()
	rt := processGC{}
	gogcGoal := rt.read().goal

	s := New(Options{Interval: 20 * time.Millisecond, Quiet: 2})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()
	defer func() { cancel(); g.Expect(<-done).To(Succeed()) }()

	g.Eventually(func() int64 { return rt.read().gogc }, 5*time.Second, 10*time.Millisecond).Should(Equal(int64(-1)))
	susp := rt.read()
	g.Expect(susp.limit).To(BeNumerically("<", int64(math.MaxInt64)), "a memory limit while GOGC is off")
	g.Expect(uint64(susp.limit)).To(BeNumerically(">", susp.held), "above what the process holds")
	t.Logf("GOGC's heap goal %.2f MiB; under the limit %.2f MiB (limit %.2f MiB, held %.2f MiB)",
		float64(gogcGoal)/mib, float64(susp.goal)/mib, float64(susp.limit)/mib, float64(susp.held)/mib)
	// The runtime's heap goal under the limit is GOGC's (to its rounding), not below it.
	g.Expect(susp.goal).To(BeNumerically(">=", gogcGoal-gogcGoal/100), "heap goal under the limit against GOGC's %d", gogcGoal)
	g.Expect(susp.goal).To(BeNumerically("<", gogcGoal+gogcGoal/10+2*mib), "heap goal under the limit against GOGC's %d", gogcGoal)

	// Garbage until a collection runs: the limit started it, at about the limit.
	var peakHeld uint64
	for rt.read().cycles == susp.cycles {
		sink = make([]byte, 256<<10)
		peakHeld = max(peakHeld, rt.read().held)
		g.Expect(peakHeld).To(BeNumerically("<", uint64(susp.limit)+32*mib), "the heap grew past the limit without a collection")
	}
	g.Eventually(func() int64 { return rt.read().gogc }, 5*time.Second, 5*time.Millisecond).Should(Equal(int64(100)))
	g.Expect(rt.read().limit).To(Equal(limit0))
	runtime.KeepAlive(live)
}

const childEnv = "LBFED_IDLEGC_CHILD"

// TestNoForcedCollectionWhileIdle runs two idle processes holding the same heap for longer than the
// runtime's forced period, one with a Suspender: only the other collects.
func TestNoForcedCollectionWhileIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("idles for over two minutes")
	}
	t.Parallel()
	results := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, mode := range []string{"suspender", "runtime-default"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := runIdleChild(mode)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("%s: %v", mode, err)
				return
			}
			results[mode] = n
		}()
	}
	wg.Wait()
	t.Logf("collections while idle: %v", results)
	if results["runtime-default"] < 1 {
		t.Errorf("without the suspender the runtime forced no collection in %v: the test shows nothing", idleFor)
	}
	if results["suspender"] != 0 {
		t.Errorf("with the suspender: %d collections while idle, want 0", results["suspender"])
	}
}

// idleFor is past the runtime's period, with the time sysmon may take to notice it.
const idleFor = ForcedPeriod + 25*time.Second

func runIdleChild(mode string) (int, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleChild$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(sc.Text()), "collections: %d", &n); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("no count in: %s", out)
}

// TestIdleChild is TestNoForcedCollectionWhileIdle's child process: 64 MiB held, a little work
// a second as a controller's lease renewals, and the collections counted after the first.
func TestIdleChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("the child of TestNoForcedCollectionWhileIdle")
	}
	live := retain(64 * mib)
	runtime.GC()
	ctx, cancel := context.WithTimeout(context.Background(), idleFor)
	defer cancel()
	if mode == "suspender" {
		// Its own context: stopping it puts GOGC back, which must not come before the count.
		sctx, stop := context.WithCancel(context.Background())
		defer stop()
		go func() { _ = New(Options{}).Start(sctx) }()
	}
	rt := processGC{}
	start := rt.read().cycles
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Printf("collections: %d\n", rt.read().cycles-start)
			runtime.KeepAlive(live)
			return
		case <-tick.C:
			sink = make([]byte, 1024)
		}
	}
}
