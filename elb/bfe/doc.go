// Package bfe drives a BFE front end from LBCF: it keeps the desired load balancers and backends
// (Model), generates BFE's routing and balancing files from them (Generate), validates them
// (bfeconf), writes them as versioned directories (Store) and hot-reloads BFE in an order that
// never routes to a missing cluster (Frontend). Driver serves the LBCF driver webhooks over this,
// committing concurrent calls as one write and reload.
//
// The mapping of lbSpec to BFE's configuration, the reload order and the rest of the design:
// docs/design/bfe.md.
package bfe
