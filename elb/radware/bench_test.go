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

func runBackendChanges(b *testing.B, maxBatch int) (int64, float64) {
	b.StopTimer()
	// Device timings are scaled down (a real apply takes seconds) so that the per-call baseline
	// finishes in reasonable time; the ratio is what matters.
	e := newTestEnv(b, envOptions{
		sim:      alteonsim.Options{ApplyDuration: 10 * time.Millisecond, SaveDuration: 2 * time.Millisecond, SyncDuration: 5 * time.Millisecond},
		frontend: FrontendOptions{Window: 20 * time.Millisecond, MaxBatch: maxBatch},
	})
	ctx := context.Background()
	lb, err := ParseLoadBalancer(lbSpec)
	if err != nil {
		b.Fatal(err)
	}
	lb.Owner = "lbfed"
	// Set-up in one transaction, whatever the mode.
	_, err = e.pair.Do(ctx, func(ctx context.Context, tx *alteon.Tx) error {
		var backends []Backend
		for i := 0; i < benchExisting; i++ {
			backends = append(backends, benchBackend(i))
		}
		return e.fe.syncLB(ctx, tx, lb, backends, time.Now(), &SyncResult{})
	})
	if err != nil {
		b.Fatal(err)
	}
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
