package radware

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/go-logr/logr/testr"

	"github.com/lbfed/lbfed/elb/radware/alteonsim"
)

// ensuredLB is the windows' load balancer (lbSpec, owned by lbfed), ensured on the device.
func ensuredLB(g Gomega, e *testEnv) LoadBalancer {
	lb, err := ParseLoadBalancer(lbSpec)
	g.Expect(err).NotTo(HaveOccurred())
	lb.Owner = "lbfed"
	g.Expect(e.fe.EnsureLoadBalancer(context.Background(), lb)).To(Succeed())
	return lb
}

// Changes that keep coming, each within Window of the one before, share one commit, up to
// MaxWindow after the first (the last one here comes later than Window after the first); a
// batch that reaches MaxWindow is committed without the changes that come after it.
func TestBurstSharesACommit(t *testing.T) {
	cases := []struct {
		name      string
		maxWindow time.Duration
		applies   int
	}{
		{"within MaxWindow: one commit", 10 * time.Second, 1},
		{"MaxWindow no longer than Window: committed after Window", -1, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e := newTestEnv(t, envOptions{frontend: FrontendOptions{Window: 1500 * time.Millisecond, MaxWindow: tc.maxWindow}})
			ctx := context.Background()
			lb := ensuredLB(g, e)
			before := e.sim.A.Applies()
			// Ten changes 200ms apart: 1.8s from the first to the last, never more than 200ms
			// between two (a loaded machine may stretch a gap by more than a second and still
			// keep it within Window).
			var wg sync.WaitGroup
			for i := 0; i < 10; i++ {
				if i > 0 {
					time.Sleep(200 * time.Millisecond)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					g.Expect(e.fe.EnsureBackend(ctx, lb, benchBackend(i))).To(Succeed())
				}()
			}
			wg.Wait()
			g.Expect(e.sim.A.Applies() - before).To(BeEquivalentTo(tc.applies))
			g.Expect(e.sim.B.Snapshot(alteonsim.Running).Members(lb.ID())).To(HaveLen(10), "every change reached the backup")
		})
	}
}

// A burst from callers that may have only so many changes in flight (the controller's call
// budget) reaches the frontend in waves: every caller waits for its commit, so nothing is pending
// when a commit ends, and the callers come back over the next tens of milliseconds. The returning
// wave is still the burst and forms one batch; before, its first change found an idle frontend,
// was committed alone (or with the few that came within Window) and the rest waited for that
// apply: two commits per wave.
func TestBurstContinuesAfterItsCommit(t *testing.T) {
	const callers, rounds = 8, 4
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{
		sim:      alteonsim.Options{ApplyDuration: 50 * time.Millisecond},
		frontend: FrontendOptions{Window: 20 * time.Millisecond, MaxWindow: time.Second},
	})
	ctx := context.Background()
	lb := ensuredLB(g, e)
	before := e.sim.A.Applies()
	var wg sync.WaitGroup
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				g.Expect(e.fe.EnsureBackend(ctx, lb, benchBackend(r*callers+c))).To(Succeed())
				// The callers' next changes come back 30ms apart, over 210ms (API writes and
				// reconciles in between), longer than Window, shorter than MaxWindow/4.
				time.Sleep(time.Duration(c) * 30 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	applies := e.sim.A.Applies() - before
	t.Logf("%d changes in %d waves: %d applies", callers*rounds, rounds, applies)
	g.Expect(applies).To(BeNumerically("<=", rounds+1), "one commit per wave (one more if a wave is split by a slow machine)")
	g.Expect(e.sim.B.Snapshot(alteonsim.Running).Members(lb.ID())).To(HaveLen(callers*rounds), "every change reached the backup")
}

// Callers limited to so many changes in flight (the controller's per-driver call budget) fill
// the batch that gathers while a commit runs only up to the budget; when the commit ends, its
// callers come back (after their own writes) and belong with that batch. Before, the batch's
// quiet time (MaxWindow/4, 250ms) had passed during the commit (400ms) and it went alone with
// the few changes that had found slots: batches of 5, 3, 5, 3, 5 here, of 17 and 28 beside ones
// of 367 in BenchmarkFederatedBackendChanges. The commits' sizes are logged (-v).
func TestBatchWaitsForTheCallersOfTheCommitBefore(t *testing.T) {
	const changes, budget = 21, 8
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{
		sim:      alteonsim.Options{ApplyDuration: 400 * time.Millisecond},
		frontend: FrontendOptions{Window: 20 * time.Millisecond, MaxWindow: time.Second, Logger: testr.NewWithOptions(t, testr.Options{Verbosity: 1})},
	})
	ctx := context.Background()
	lb := ensuredLB(g, e)
	before := e.sim.A.Applies()
	slots := make(chan struct{}, budget)
	var wg sync.WaitGroup
	for i := 0; i < changes; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Five changes come first; the others a little later, while the first commit runs,
			// and three of them find a slot.
			if i >= 5 {
				time.Sleep(100 * time.Millisecond)
			}
			slots <- struct{}{}
			g.Expect(e.fe.EnsureBackend(ctx, lb, benchBackend(i))).To(Succeed())
			// The worker writes the record's status before it takes the next record.
			time.Sleep(60 * time.Millisecond)
			<-slots
		}()
	}
	wg.Wait()
	applies := e.sim.A.Applies() - before
	t.Logf("%d changes, %d in flight at most: %d applies", changes, budget, applies)
	g.Expect(applies).To(BeNumerically("<=", 3), "five, then full batches of eight")
	g.Expect(e.sim.B.Snapshot(alteonsim.Running).Members(lb.ID())).To(HaveLen(changes), "every change reached the backup")
}
