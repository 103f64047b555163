//go:build e2e

// Package scale_test measures lbfed at fleet scale on the local topology: Karmada with four
// members — two joined in Push mode, two in Pull mode (karmada-agent) — as local processes
// (testinfra/localup), lbfed deployed on them as processes (testinfra/deploy), and one BackendGroup whose
// pods kwok runs by thousands in every member. Its figures come from benchmarks only: `make
// test` starts nothing here (the topology starts on first use), and `make test-e2e` does not
// list the package.
//
//	LBFED_REQUIRE_INTEGRATION=1 go test -tags e2e ./e2e/scale -run XXX -bench . -benchtime 1x -timeout 40m
package scale_test

import (
	"context"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

var lbfed *deploy.Deployment

// podsPerNode: each member's two fake nodes hold 8,188 pods, room for 5,000 and for growing
// past the candidate budget.
const podsPerNode = 4094

func TestMain(m *testing.M) {
	// The benchmark's caches log through controller-runtime; nothing to say.
	ctrllog.SetLogger(logr.Discard())
	testenv.MainTopology(m, localup.TopologyOptions{
		Members:     2,
		PullMembers: 2,
		PodsPerNode: podsPerNode,
		// Thousands of pods: no HTTP listener per pod in this process (the benchmark sends no
		// traffic; the front end is the in-memory driver).
		NoPodResponder: true,
		AfterReady:     []func(context.Context, *localup.Topology) error{startLbfed},
	})
}

// EnvCandidatesBudget sets the federation's candidate budget (bytes of one group's binding over
// all its members; the chart's controller.federation.candidatesBudgetBytes), e.g. for a small
// run that still goes over it. Unset: the chart's default.
const EnvCandidatesBudget = "LBFED_BENCH_CANDIDATES_BUDGET"

func startLbfed(ctx context.Context, t *localup.Topology) (err error) {
	var opts deploy.Options
	if v := os.Getenv(EnvCandidatesBudget); v != "" {
		opts.Set = append(opts.Set, "controller.federation.candidatesBudgetBytes="+v)
	}
	lbfed, err = deploy.BuildAndStart(ctx, t, opts)
	return err
}
