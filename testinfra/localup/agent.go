package localup

import (
	"github.com/lbfed/lbfed/testinfra/localup/binaries"
)

// Sync modes of a member's Cluster object in Karmada (spec.syncMode).
const (
	SyncModePush = "Push"
	SyncModePull = "Pull"
)

// startAgent starts the karmada-agent of a Pull member, as `karmadactl register` deploys it in
// the member: it registers the Cluster with karmada-apiserver (creating the member's
// karmada-cluster ServiceAccounts and reporting their tokens, so that Karmada's cluster proxy
// can reach the member at --cluster-api-endpoint), then applies the member's Works and reports
// cluster and Work status, calling the resource interpreter webhooks (InterpretStatus,
// InterpretHealth, Retain) from here rather than from karmada-controller-manager.
//
// It uses the run's admin kubeconfigs for both API servers, as Karmada's other components do
// here; upstream the agent has a certificate of its own from the bootstrap token.
func (t *Topology) startAgent(m *Cluster) (*Process, error) {
	ports, err := allocatePorts(2)
	if err != nil {
		return nil, err
	}
	return t.sup.start(ProcessSpec{
		Name: "karmada-agent-" + m.name,
		Path: t.karmada.bins.Path(binaries.KarmadaAgent),
		Tier: TierClient,
		Args: []string{
			"--karmada-kubeconfig=" + t.karmada.kubeconfig,
			"--kubeconfig=" + m.kubeconfig,
			"--cluster-name=" + m.name,
			// karmadactl register gives the member kubeconfig's server.
			"--cluster-api-endpoint=" + m.host,
			"--cluster-status-update-frequency=10s",
			"--leader-elect=false",
			"--metrics-bind-address=" + loopback(ports[0]),
			"--health-probe-bind-address=" + loopback(ports[1]),
		},
	})
}
