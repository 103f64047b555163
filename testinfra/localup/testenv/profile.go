package testenv

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/lbfed/lbfed/testinfra/localup"
)

// EnvAPIServerProfile names a file prefix: benchmarks that call ProfileAPIServer write the test
// API server's CPU profile of their measured phase to <prefix>-<name>.pprof. Where a benchmark
// is bound by the API server, its profile says what the server spent the time on.
const EnvAPIServerProfile = "LBFED_BENCH_APISERVER_PROFILE"

// ProfileAPIServer starts a CPU profile of the API server cfg reaches when EnvAPIServerProfile
// is set, and returns a func that waits for it; a no-op otherwise. The profile covers d.
func ProfileAPIServer(t testing.TB, cfg *rest.Config, name string, d time.Duration) (wait func()) {
	prefix := os.Getenv(EnvAPIServerProfile)
	if prefix == "" {
		return func() {}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("profile API server: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		data, err := cs.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(d.Seconds()))).Timeout(d + time.Minute).DoRaw(context.Background())
		if err == nil {
			err = os.WriteFile(fmt.Sprintf("%s-%s.pprof", prefix, name), data, 0o644)
		}
		if err != nil {
			t.Logf("profile API server: %v", err)
		}
	}()
	return func() { <-done }
}

// ControlPlaneCPU is the CPU time the shared cluster's API server and etcd have used so far.
// A benchmark bound by the API server reports the difference over its run per unit of work:
// the cost its controller puts on the control plane, which other load on the machine hardly
// changes (its wall time does).
func ControlPlaneCPU(t testing.TB) time.Duration {
	var sum time.Duration
	for _, p := range Cluster(t).Processes() {
		if p.Tier == localup.TierAPIServer || p.Tier == localup.TierStorage {
			sum += p.CPUTime()
		}
	}
	return sum
}

// OwnCPU is the CPU time this process (a benchmark with its in-process controller and drivers)
// has used so far.
func OwnCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// EnvOwnCPUProfile names the file benchmarks that call ProfileOwnCPU write this process's CPU
// profile of their measured phase to.
const EnvOwnCPUProfile = "LBFED_BENCH_CPU_PROFILE"

// ProfileOwnCPU writes this process's CPU profile, from now until the returned func is called,
// to the file EnvOwnCPUProfile names (nothing when unset).
func ProfileOwnCPU(tb testing.TB) (stop func()) {
	path := os.Getenv(EnvOwnCPUProfile)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		tb.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			tb.Error(err)
		}
	}
}
