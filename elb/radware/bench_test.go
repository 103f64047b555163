package radware

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/lbfed/lbfed/elb/radware/alteon"
	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// BenchmarkBackendChanges sends 1,000 backend changes at once through the driver's HTTP webhooks
// (500 deregistrations of registered backends and 500 registrations of new ones, on one load
// balancer of a simulated HA pair) and measures the applies and the time until every call is
// answered, i.e. until the whole change is applied, saved and synced. "per-call" is the baseline
// without coalescing (MaxBatch 1: one transaction per call) in the same run.
//
//	go test ./elb/radware -run '^$' -bench BackendChanges -benchtime 1x -timeout 30m
func BenchmarkBackendChanges(b *testing.B) {
	for _, mode := range []struct {
		name     string
		maxBatch int
	}{{"coalesced", 0}, {"per-call", 1}} {
		b.Run(mode.name, func(b *testing.B) {
			var applies, seconds float64
			for i := 0; i < b.N; i++ {
				a, s := runBackendChanges(b, mode.maxBatch)
				applies += float64(a)
				seconds += s
			}
			b.ReportMetric(applies/float64(b.N), "applies/op")
			b.ReportMetric(seconds/float64(b.N), "s-to-programmed/op")
		})
	}
}

const (
	benchExisting = 500
	benchAdded    = 500
)

func benchBackend(i int) Backend {
	return Backend{IP: netip.AddrFrom4([4]byte{10, 50, byte(i / 250), byte(i%250 + 1)}), Port: 30080, Weight: 1}
}

// seedBenchLB creates the benchmarks' load balancer with benchExisting backends, in one
// transaction whatever the frontend's mode.
func seedBenchLB(b *testing.B, e *testEnv) LoadBalancer {
	lb, err := ParseLoadBalancer(lbSpec)
	if err != nil {
		b.Fatal(err)
	}
	lb.Owner = "lbfed"
	_, err = e.pair.Do(context.Background(), func(ctx context.Context, tx *alteon.Tx) error {
		var backends []Backend
		for i := 0; i < benchExisting; i++ {
			backends = append(backends, benchBackend(i))
		}
		return e.fe.syncLB(ctx, tx, lb, backends, time.Now(), &SyncResult{})
	})
	if err != nil {
		b.Fatal(err)
	}
	return lb
}

func runBackendChanges(b *testing.B, maxBatch int) (int64, float64) {
	b.StopTimer()
	// Device timings are scaled down (a real apply takes seconds) so that the per-call baseline
	// finishes in reasonable time; the ratio is what matters.
	e := newTestEnv(b, envOptions{
		sim:      alteonsim.Options{ApplyDuration: 10 * time.Millisecond, SaveDuration: 2 * time.Millisecond, SyncDuration: 5 * time.Millisecond},
		frontend: FrontendOptions{Window: 20 * time.Millisecond, MaxBatch: maxBatch},
	})
	ctx := context.Background()
	lb := seedBenchLB(b, e)
	info := lb.Info()
	before := e.sim.A.Applies()
	// Without coalescing, calls queue far beyond LBCF's 10s webhook timeout; the benchmark waits
	// for them instead of measuring retries.
	client := driver.Bound{Invoker: driver.NewClient(driver.ClientOptions{}), Endpoint: driver.Endpoint{Name: "bench/radware", URL: e.url,
		Timeouts: map[string]time.Duration{driver.EnsureBackend: 30 * time.Minute, driver.DeregisterBackend: 30 * time.Minute}}}

	b.StartTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, benchExisting+benchAdded)
	for i := 0; i < benchExisting+benchAdded; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &driver.BackendOperationRequest{LBInfo: info, BackendAddr: benchBackend(i).String()}
			var rsp *driver.BackendOperationResponse
			var err error
			if i < benchExisting {
				rsp, err = client.DeregisterBackend(ctx, req)
			} else {
				rsp, err = client.EnsureBackend(ctx, req)
			}
			switch {
			case err != nil:
				errs <- err
			case rsp.Status != driver.StatusSucc:
				errs <- fmt.Errorf("%s: %s %s", req.BackendAddr, rsp.Status, rsp.Msg)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	members := e.sim.B.Snapshot(alteonsim.Running).Members(lb.ID())
	if len(members) != benchAdded {
		b.Fatalf("backup has %d members, want %d", len(members), benchAdded)
	}
	for i := benchExisting; i < benchExisting+benchAdded; i++ {
		if _, ok := members[lb.realServerID(benchBackend(i))]; !ok {
			b.Fatalf("backend %s missing on the backup", benchBackend(i))
		}
	}
	applies := e.sim.A.Applies() - before
	b.Logf("maxBatch=%d: %d changes, %d applies, %.2fs until all answered", maxBatch, benchExisting+benchAdded, applies, elapsed)
	return applies, elapsed
}

// BenchmarkPoisonedBatch sends 1,000 concurrent backend registrations through the frontend, one of
// which the device refuses (weight 99: 406 Wrong input), and measures the applies and the time
// until the 999 good ones are committed. Callers behave as LBCF does: a failed change is sent again
// after a retry delay (scaled down from LBCF's 10s), for up to benchRounds rounds; the poisoned one
// is retried too ("poison retried") or dropped after its first failure ("poison dropped", the most
// favourable case for the old code). "legacy" is the behaviour before issue 14.3: any error of one
// change failed its whole batch.
//
//	go test ./elb/radware -run '^$' -bench PoisonedBatch -benchtime 1x
func BenchmarkPoisonedBatch(b *testing.B) {
	for _, mode := range []struct {
		name       string
		legacy     bool
		dropPoison bool
	}{
		{"isolated/poison-retried", false, false},
		{"legacy/poison-retried", true, false},
		{"legacy/poison-dropped", true, true},
	} {
		b.Run(mode.name, func(b *testing.B) {
			var applies, seconds, good float64
			for i := 0; i < b.N; i++ {
				r := runPoisonedBatch(b, mode.legacy, mode.dropPoison)
				applies += float64(r.applies)
				seconds += r.seconds
				good += float64(r.good)
			}
			b.ReportMetric(applies/float64(b.N), "applies/op")
			b.ReportMetric(seconds/float64(b.N), "s-to-programmed/op")
			b.ReportMetric(good/float64(b.N), "good-committed/op")
		})
	}
}

const (
	benchChanges    = 1000
	benchRounds     = 5
	benchRetryDelay = 100 * time.Millisecond
)

type poisonResult struct {
	applies int64
	seconds float64
	good    int
}

func runPoisonedBatch(b *testing.B, legacy, dropPoison bool) poisonResult {
	b.StopTimer()
	e := newTestEnv(b, envOptions{
		sim:      alteonsim.Options{ApplyDuration: 10 * time.Millisecond, SaveDuration: 2 * time.Millisecond, SyncDuration: 5 * time.Millisecond},
		frontend: FrontendOptions{Window: 20 * time.Millisecond},
	})
	e.fe.legacyBatchFailure = legacy
	ctx := context.Background()
	lb, err := ParseLoadBalancer(lbSpec)
	if err != nil {
		b.Fatal(err)
	}
	lb.Owner = "lbfed"
	if err := e.fe.EnsureLoadBalancer(ctx, lb); err != nil {
		b.Fatal(err)
	}
	const poisoned = benchChanges / 2
	before := e.sim.A.Applies()
	b.StartTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var good int
	var last time.Time
	for i := 0; i < benchChanges; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			be := benchBackend(i)
			if i == poisoned {
				be.Weight = 99
			}
			for round := 0; round < benchRounds; round++ {
				if round > 0 {
					time.Sleep(benchRetryDelay)
				}
				if err := e.fe.EnsureBackend(ctx, lb, be); err == nil {
					if i != poisoned {
						mu.Lock()
						good++
						last = time.Now()
						mu.Unlock()
					}
					return
				}
				if i == poisoned && dropPoison {
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	r := poisonResult{applies: e.sim.A.Applies() - before, good: good, seconds: time.Since(start).Seconds()}
	if good == benchChanges-1 {
		r.seconds = last.Sub(start).Seconds()
	}
	b.Logf("legacy=%v dropPoison=%v: %d/%d good changes committed, %d applies, %.2fs", legacy, dropPoison, good, benchChanges-1, r.applies, r.seconds)
	return r
}

// BenchmarkLoneChange measures how long one backend change, alone on an idle frontend (500
// backends registered), takes until its caller is answered: the commit window plus one commit.
// A burst's batching must not make it wait longer.
//
//	go test ./elb/radware -run '^$' -bench LoneChange -benchtime 20x
func BenchmarkLoneChange(b *testing.B) {
	e := newTestEnv(b, envOptions{
		sim:      alteonsim.Options{ApplyDuration: 10 * time.Millisecond, SaveDuration: 2 * time.Millisecond, SyncDuration: 5 * time.Millisecond},
		frontend: FrontendOptions{Window: 20 * time.Millisecond},
	})
	ctx := context.Background()
	lb := seedBenchLB(b, e)
	info := lb.Info()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := &driver.BackendOperationRequest{LBInfo: info, BackendAddr: benchBackend(benchExisting + i).String()}
		rsp, err := e.client.EnsureBackend(ctx, req)
		if err != nil || rsp.Status != driver.StatusSucc {
			b.Fatalf("ensureBackend: %v %+v", err, rsp)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms-answered/op")
}
