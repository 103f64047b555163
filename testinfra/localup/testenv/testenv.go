// Package testenv shares one local cluster (or one Karmada topology) between the tests of a
// package. The cluster is started by the first test that asks for it, so `go test -run` over
// unit tests alone starts nothing, and is stopped when the package's tests are done.
//
//	func TestMain(m *testing.M) {
//		testenv.Main(m, localup.ClusterOptions{ControllerManager: true, FakeNodes: 2})
//	}
//
//	func TestReconcile(t *testing.T) {
//		cfg := testenv.Config(t) // *rest.Config, admin on the shared cluster
//		c, err := client.New(cfg, client.Options{Scheme: scheme})
//		…
//	}
//
// When the binaries are not built (see package binaries), tests asking for the cluster are
// skipped with a message saying how to build them — unless LBFED_REQUIRE_INTEGRATION=1 (set by
// `make test`), where they fail instead so CI cannot pass by skipping. A start failure always
// fails the test. After a failed run the run folder is kept and its path printed.
//
// Tests share the cluster: give objects unique names or namespaces (e.g. one namespace per
// test) and never depend on a cluster-wide object count.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/stdr"
	"k8s.io/client-go/rest"

	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/binaries"
)

// EnvRequire makes missing binaries a test failure instead of a skip.
const EnvRequire = "LBFED_REQUIRE_INTEGRATION"

// Required reports whether integration tests must run (LBFED_REQUIRE_INTEGRATION=1).
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// env is the package's shared environment: at most one cluster and one topology.
var env struct {
	mu          sync.Mutex
	mainCalled  bool
	clusterOpts localup.ClusterOptions
	topoOpts    localup.TopologyOptions
	cluster     *localup.Cluster
	topology    *localup.Topology
	err         error
	started     bool
}

// Main runs the package's tests with a shared plain cluster started on first use by Cluster or
// Config, then stops it and exits. Call it from TestMain.
func Main(m *testing.M, opts localup.ClusterOptions) {
	env.clusterOpts = opts
	os.Exit(run(m))
}

// MainTopology is Main for the full Karmada topology, started on first use by Topology.
func MainTopology(m *testing.M, opts localup.TopologyOptions) {
	env.topoOpts = opts
	os.Exit(run(m))
}

func run(m *testing.M) int {
	env.mainCalled = true
	code := m.Run()
	env.mu.Lock()
	defer env.mu.Unlock()
	var keep string
	if env.cluster != nil {
		if code != 0 {
			printLogTails(env.cluster.Processes())
			env.cluster.KeepRunDir()
			keep = env.cluster.Dir()
		}
		if err := env.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stop cluster:", err)
			code = 1
		}
	}
	if env.topology != nil {
		if code != 0 {
			printLogTails(env.topology.Processes())
			env.topology.KeepRunDir()
			keep = env.topology.Dir()
		}
		if err := env.topology.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stop topology:", err)
			code = 1
		}
	}
	if keep != "" {
		fmt.Fprintf(os.Stderr, "testenv: tests failed; run folder with process logs kept at %s\n", keep)
	}
	return code
}

// printLogTails shows the end of every process log after a failure, so that a CI log says
// what the control plane was doing without the run folder.
func printLogTails(procs []*localup.Process) {
	for _, p := range procs {
		fmt.Fprintf(os.Stderr, "===== %s (last 15 lines of %s)\n%s\n", p.Name, p.LogPath, p.LogTail(15))
	}
}

// Cluster returns the package's shared cluster, starting it on first use.
func Cluster(t testing.TB) *localup.Cluster {
	t.Helper()
	startOnce(t, func(log logr.Logger) (err error) {
		opts := env.clusterOpts
		if opts.Logger.GetSink() == nil {
			opts.Logger = log
		}
		env.cluster, err = localup.StartCluster(context.Background(), opts)
		return err
	})
	if env.cluster == nil {
		t.Fatal("testenv: this package's TestMain started a topology, not a plain cluster")
	}
	return env.cluster
}

// startOnce runs start, the package's one environment start, on first use; every caller gets
// its error.
func startOnce(t testing.TB, start func(logr.Logger) error) {
	t.Helper()
	env.mu.Lock()
	defer env.mu.Unlock()
	mustHaveMain(t)
	if !env.started {
		env.started = true
		env.err = start(logger())
	}
	check(t, env.err)
}

// Config returns a new admin *rest.Config for the package's shared cluster.
func Config(t testing.TB) *rest.Config {
	t.Helper()
	return Cluster(t).RESTConfig()
}

// FreePort returns a loopback port nothing listens on, for a process under test.
func FreePort(t testing.TB) int {
	t.Helper()
	ports, err := localup.FreePorts(1)
	check(t, err)
	return ports[0]
}

// Topology returns the package's shared Karmada topology, starting it on first use.
func Topology(t testing.TB) *localup.Topology {
	t.Helper()
	startOnce(t, func(log logr.Logger) (err error) {
		opts := env.topoOpts
		if opts.Logger.GetSink() == nil {
			opts.Logger = log
		}
		env.topology, err = localup.StartTopology(context.Background(), opts)
		return err
	})
	if env.topology == nil {
		t.Fatal("testenv: this package's TestMain started a plain cluster, not a topology")
	}
	return env.topology
}

// SkipUnlessBuilt skips t (or fails it under LBFED_REQUIRE_INTEGRATION=1) when the binaries are
// missing, for tests that start their own clusters with package localup.
func SkipUnlessBuilt(t testing.TB) *binaries.Set {
	t.Helper()
	set, err := binaries.Locate("")
	check(t, err)
	return set
}

func mustHaveMain(t testing.TB) {
	t.Helper()
	if !env.mainCalled {
		t.Fatal("testenv: call testenv.Main or testenv.MainTopology from TestMain")
	}
}

func check(t testing.TB, err error) {
	t.Helper()
	switch {
	case err == nil:
	case errors.Is(err, binaries.ErrNotBuilt) && !Required():
		t.Skipf("integration test skipped: %v (set %s=1 to make this a failure)", err, EnvRequire)
	default:
		t.Fatalf("testenv: %v", err)
	}
}

// logger reports start-up progress on stderr under `go test -v` only.
func logger() logr.Logger {
	if !testing.Verbose() {
		return logr.Discard()
	}
	return stdr.New(log.New(os.Stderr, "localup: ", log.Ltime|log.Lmicroseconds))
}
