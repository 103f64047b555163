//go:build soak

package soak_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/lbfed/lbfed/e2e/soak"
	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

var lbfed *deploy.Deployment

func TestMain(m *testing.M) {
	// Push members in network namespaces of their own where this process may create them (root),
	// so that their links to Karmada can be cut; the Pull member, m3, in the host namespace.
	testenv.MainTopology(m, localup.TopologyOptions{
		MemberNetNS: localup.NetNSSupported() == nil,
		PullMembers: 1,
		AfterReady: []func(context.Context, *localup.Topology) error{func(ctx context.Context, t *localup.Topology) (err error) {
			// Two lbfed-controller replicas, as the chart runs them: a leader and a standby.
			lbfed, err = deploy.BuildAndStart(ctx, t, deploy.Options{Grace: soak.Grace, ControllerReplicas: 2})
			return err
		}},
	})
}

// TestSoak is issue 46's chaos soak: SOAK_DURATION (default 30m) of fault episodes drawn from
// SOAK_SEED (default: the clock's, printed) under a changing workload and load through every
// VIP, with the invariants checked continuously and after the settle. With BFE_BIN the first
// app is also behind a real BFE's route. SOAK_REPORT names a file for the figures as JSON.
func TestSoak(t *testing.T) {
	duration := 30 * time.Minute
	if s := os.Getenv("SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SOAK_DURATION: %v", err)
		}
		duration = d
	}
	seed := uint64(time.Now().UnixNano() % 1_000_000)
	if s := os.Getenv("SOAK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED: %v", err)
		}
		seed = v
	}
	// Printed first, so that a run cut short can still be repeated.
	fmt.Printf("soak: SEED=%d DURATION=%s (repeat with: make soak SEED=%d DURATION=%s)\n", seed, duration, seed, duration)
	topo := testenv.Topology(t)
	ctx := context.Background()
	r, err := soak.NewRunner(ctx, soak.Config{Duration: duration, Seed: seed, BFEBin: os.Getenv("BFE_BIN"), Logf: t.Logf}, topo, lbfed)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
	if path := os.Getenv("SOAK_REPORT"); path != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Errorf("write %s: %v", path, err)
		}
	}
	for _, v := range rep.Violations {
		t.Error(v)
	}
}
