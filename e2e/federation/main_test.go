//go:build e2e

// Package federation_test is the end-to-end suite of the federation: Karmada + two members
// joined in Push mode and a third, m3, joined in Pull mode (karmada-agent), as local processes
// (testinfra/localup), lbfed deployed on them as processes (testinfra/deploy), the Radware driver over a
// simulated Alteon HA pair as the shared front end, and traffic through its VIP reaching pods of
// every member. lbfed-controller also runs the MultiClusterIngress front door, for the cases
// that start a real BFE (BFE_BIN) on bfeAddress. Run with `make test-e2e`.
package federation_test

import (
	"context"
	"testing"
	"time"

	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

var lbfed *deploy.Deployment

func TestMain(m *testing.M) {
	// lbfed's CRDs come with its chart (deploy.Start), as in a real install.
	// Push members in network namespaces of their own where this process may create them (root),
	// so that TestFailStatic can cut them off from Karmada; elsewhere it skips. The Pull member
	// stays in the host namespace, where its agent reaches karmada-apiserver.
	testenv.MainTopology(m, localup.TopologyOptions{
		MemberNetNS: localup.NetNSSupported() == nil,
		PullMembers: 1,
		AfterReady:  []func(context.Context, *localup.Topology) error{startLbfed},
	})
}

// grace is the federation's NotReady grace period in this suite: above the ≈10 s by which
// Karmada may see two members cut at once go NotReady one after the other, so that such a cut
// counts as every member lost at once.
const grace = 20 * time.Second

// bfeAddress is BFE's address as the MultiClusterIngress front door reports it: the BFEs the
// cases start (startBFE) listen on it.
const bfeAddress = "127.0.0.1"

func startLbfed(ctx context.Context, t *localup.Topology) (err error) {
	lbfed, err = deploy.BuildAndStart(ctx, t, deploy.Options{Grace: grace, BFEAddress: bfeAddress})
	return err
}
