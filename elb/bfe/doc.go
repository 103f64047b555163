// Package bfe drives a BFE front end from LBCF: it keeps the desired load balancers and backends
// (Model), generates BFE's routing and balancing files from them (Generate), validates them
// (bfeconf), writes them as versioned directories (Store) and hot-reloads BFE in an order that
// never routes to a missing cluster (Frontend). Driver serves the LBCF driver webhooks over this,
// committing concurrent calls as one write and reload.
//
// # Mapping
//
//   - One LoadBalancer is one BFE cluster. lbSpec keys: host (exact, "*" or "*.suffix"), path
//     ("/a/*" element prefix, "/a" exact; default "/*"), cookie and header (ingress-bfe's
//     "key:value" conditions; "v1|v2" lists alternatives), name (cluster name; by default derived
//     from the route). Unknown lbSpec keys and any attribute are refused.
//   - Routing: a request goes to the most specific matching LoadBalancer — exact host, then
//     "*.suffix" (exactly one label more than suffix, as in BFE: *.example.test matches
//     a.example.test, not a.b.example.test or example.test), then "*"; exact path, then the longer
//     prefix; then cookie+header, cookie, header, none. A request that does not meet a route's
//     conditions, or whose host has no route for its path, falls through to the next matching
//     route (a less specific path or host); with none, BFE answers 500.
//   - BFE itself never falls back: its basic-rule lookup takes the exact host and never tries "*"
//     or "*.suffix" when the path misses, and a basic rule pointing at ADVANCED_MODE consults only
//     the product rules. So a host+path served by one unconditional LoadBalancer is a basic rule;
//     a host+path with conditional LoadBalancers is ADVANCED_MODE; and the product rules, most
//     specific first, repeat every route such a request may be meant for (the broader routes of
//     the same host, and wildcard routes covering a host that may miss).
//   - One member cluster is one sub-cluster (backend parameter lbfed.io/cluster, "default" when
//     absent). IPv6 instances are written "[addr]" (BFE dials Addr:Port). Instance weight: parameter weight (0..10000, default 10). Sub-cluster weight:
//     parameter lbfed.io/cluster-weight with ingress-bfe balance.weight semantics (0 = no traffic,
//     the sum must be positive), set per member, e.g. through a Karmada OverridePolicy; without it,
//     the member's instance weight sum, so a federated pool splits like one flat pool. The split is
//     per request (HashStrategy 0 with a hash header no client sends), not per client IP.
//   - Subsets (ingress-bfe balance.weight across Services): backends with parameter
//     lbfed.io/subset form a subset with its own sub-clusters ("<cluster>.<subset>.<member>");
//     lbfed.io/subset-weight (0..10000, default 1) is the subset's share of the route whatever its
//     members and backends, and inside a subset members split as above. The MultiClusterIngress
//     front door (package frontdoor/mci) sets them.
//   - A LoadBalancer without a positive-weight backend has no route, so its traffic falls through
//     to the next matching route; ensureBackend fails while all its sub-cluster weights are 0.
//
// # Running it
//
// The driver runs on the BFE host: BFE accepts reloads from loopback only and reads the files the
// driver writes. bfe.conf names the routing files through the store's "current" link
// (BFEConfServerSection), so a restarted BFE loads the last version it accepted. The store writes
// version 1 (no routes) on first start, so BFE can start before any LoadBalancer exists.
//
// # Reloads
//
// Each change writes a complete version directory (temporary name, fsync, rename), reloads with
// ?path=<version dir>, accepts only the body {"error":null}, checks /monitor/*_version, and only
// then moves "current". Order: GSLB data before routes when clusters appear, routes before GSLB
// data when they disappear, and a union of old and new GSLB data first when both happen. On failure
// BFE is reloaded back to the current version and the caller gets BFE's raw message.
package bfe
