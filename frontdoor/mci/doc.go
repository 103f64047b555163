// Package mci is lbfed's provider behind Karmada's networking.karmada.io/v1alpha1
// MultiClusterIngress on BFE. It translates each MultiClusterIngress of its ingress class into
// LBCF objects on the Karmada API server, which the federation controller (package federation)
// programs through the BFE driver (package elb/bfe) with every guarantee it gives BackendGroups:
// fail-static member loss, weights, coalesced reloads, status. There is no second pipeline.
//
// Which ingresses it claims, how rules translate, and what it reports: docs/design/frontdoor-mci.md.
package mci
