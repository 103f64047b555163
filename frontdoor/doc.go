// Package frontdoor is the kit every Karmada-native front door of lbfed shares: it translates a
// Karmada object that asks for a load balancer (a MultiClusterService of type LoadBalancer,
// package frontdoor/mcs; a Service type=LoadBalancer on Karmada, package frontdoor/service; a
// MultiClusterIngress, package frontdoor/mci) into LBCF objects on the Karmada API server, which
// the federation controller (package federation) programs on the shared front end with everything
// it guarantees: fail-static member loss, per-cluster weights, coalesced device transactions,
// status. There is no second pipeline.
//
// Kit.Sync keeps one LoadBalancer and one BackendGroup per exposed port and one
// PropagationPolicy; the lbSpec and annotations it reads and writes are package lbspec's, so the
// kit depends on no driver. What it generates, how conflicts are refused and how status is
// reported: docs/design/frontdoor.md.
package frontdoor
