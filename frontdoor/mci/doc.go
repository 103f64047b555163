// Package mci is lbfed's provider behind Karmada's networking.karmada.io/v1alpha1
// MultiClusterIngress on BFE. It translates each MultiClusterIngress of its ingress class into
// LBCF objects on the Karmada API server, which the federation controller (package federation)
// programs through the BFE driver (package elb/bfe) with every guarantee it gives BackendGroups:
// fail-static member loss, weights, coalesced reloads, status. There is no second pipeline.
//
// # Claim
//
// A MultiClusterIngress is claimed when spec.ingressClassName (or, without it, the annotation
// kubernetes.io/ingress.class) equals the configured class ("lbfed-bfe" by default). When the
// class changes away, its generated objects are deleted.
//
// # Translation
//
//   - Each rule host+path (and spec.defaultBackend, as host "*" path "/*") is one LBCF
//     LoadBalancer of the BFE driver, lbSpec host/path plus the cookie/header annotations: one
//     BFE cluster and route. An empty host is "*"; "*.suffix" matches exactly one label, as in
//     Ingress. pathType Exact stays exact; Prefix "/a" becomes "/a/*" (BFE's element prefix:
//     /a, /a/, /a/b, not /ab); ImplementationSpecific is a Prefix, as in ingress-bfe. A path
//     with "*", quotes, backslashes or spaces cannot be expressed and is refused.
//   - Each backend Service of a route is one BackendGroup on that LoadBalancer selecting the
//     Service's pods (the Karmada Service's spec.selector) on its targetPort (a named targetPort
//     is refused: LBCF selects a port number). The group reaches the members through a
//     PropagationPolicy placed on every cluster the Service is propagated to: its
//     ResourceBinding's spec.clusters ∪ spec.requiredBy. Karmada then gives each member's
//     lbcf-controller the group, and the federation registers every member's pods on BFE, one
//     sub-cluster per member.
//   - Every generated object carries the labels of every front door (package frontdoor, which
//     writes them): lbfed.io/front-door=multiclusteringress and lbfed.io/front-door-name=<name>
//     (hashed when longer than a label value), and a controller owner reference to the
//     MultiClusterIngress; names are <name>-<hash of what the object stands for>, so every
//     reconcile yields the same names. Objects without the labels are never touched. As for
//     every front door, a PropagationPolicy is compared on what the front door owns (selectors,
//     cluster names), so Karmada's admission defaults are not rewritten.
//
// # ingress-bfe annotations (seed 001)
//
//   - bfe.ingress.kubernetes.io/balance.weight: {"svc": {"svc1": 80, "svc2": 20}} splits a path
//     whose backend is "svc" across the Services svc1 and svc2 (integers >= 0, positive sum, as
//     ingress-bfe). Each Service's group carries lbfed.io/subset and lbfed.io/subset-weight, so
//     the BFE driver gives each Service its share of the route whatever its number of members
//     and pods, and inside a Service the members split as for any BackendGroup (the members'
//     instance weights, or lbfed.io/cluster-weight set per member by an OverridePolicy on the
//     generated group). Across members (an lbfed extension): an entry "svc1@m1" is svc1's pods
//     in member m1 only, with its own group placed on m1 and its own share, e.g.
//     {"web": {"web@m1": 1, "web@m2": 3}}.
//   - bfe.ingress.kubernetes.io/router.cookie "key:value" and router.header "Key:value": every
//     route of the MultiClusterIngress matches only requests with that cookie or header; requests
//     without it fall through to the next matching route, as the BFE driver documents.
//   - bfe.ingress.kubernetes.io/bfe-ingress-status is ingress-bfe's own status output: ignored.
//     Any other key under bfe.ingress.kubernetes.io/ is refused.
//
// # Refusals, conflicts and status
//
// Karmada's MultiClusterIngress status has no conditions, so lbfed writes them into the annotation
// lbfed.io/conditions (JSON metav1.Conditions): Accepted (False with reason InvalidAnnotation,
// UnsupportedAnnotation, InvalidRule, InvalidBackend or Conflict, the message naming the
// annotation or rule) and Programmed (False while a Service is missing or not propagated, a route
// is being released by another MultiClusterIngress, or LoadBalancers are not yet created). Each
// change is also an event on the MultiClusterIngress.
//
// A refused spec is not applied and the objects of the last accepted spec stay: a typo in an
// annotation never takes a serving route off BFE. Of two claims on one route (host, path, cookie,
// header) of the same driver the newer is refused with Conflict: a MultiClusterIngress (in any
// namespace) claiming a route that another one or a user's LoadBalancer already serves, or, when
// none serves it yet, the younger of two MultiClusterIngresses. So an edit never takes a serving
// route from someone else (ingress-bfe likewise refuses the Ingress that would conflict with an
// existing one). A route whose previous holder is going (its LoadBalancer waits for the federation
// to remove it from BFE) is taken once it is gone (Programmed=False, RouteHeld, meanwhile).
//
// status.loadBalancer.ingress is the BFE address (an IP or a hostname) once every generated
// LoadBalancer is created on BFE; it stays while any is, so adding a route does not withdraw it,
// and goes when none is. Deletion of the MultiClusterIngress deletes the generated objects (the
// owner references let the garbage collector do it too), and the federation removes their routes
// and backends from BFE once.
package mci
