// Package frontdoor is the kit every Karmada-native front door of lbfed shares: it translates a
// Karmada object that asks for a load balancer (a MultiClusterService of type LoadBalancer,
// package frontdoor/mcs; a Service type=LoadBalancer on Karmada, package frontdoor/service) into
// LBCF objects on the Karmada API server, which the federation controller (package federation)
// programs on the shared Alteon pair with everything it guarantees: fail-static member loss,
// per-cluster weights, coalesced device transactions, status. There is no second pipeline.
//
// For a front door ns/name of kind K and each exposed Service port (TCP or UDP; SCTP and ports
// that cannot be resolved are reported, never dropped silently), Kit.Sync keeps:
//
//   - a LoadBalancer <K>-<name>-<protocol>-<port> with lbDriver = the front doors' driver
//     (lbcf-radware in kube-system by default, --federation-frontdoor-driver) and the Radware
//     lbSpec {vip, port, protocol, method} (validated with elb/radware's parser). It stays in the
//     control plane. lbDriver and lbSpec are immutable: a changed VIP or method deletes the old
//     LoadBalancer (LBCF removes it from the device) and creates the new one once it is gone.
//   - a BackendGroup of the same name on that LoadBalancer selecting the Service's pods
//     (spec.selector) on the target port, with spec.parameters.weight "1". LBCF selects pod
//     ports by number, so a named target port is resolved through the pod templates of the
//     namespace's Deployments, StatefulSets and DaemonSets the selector matches (one number, or
//     the port is reported).
//   - one PropagationPolicy <K>-<name> placing those BackendGroups on the front door's clusters.
//     When it has none to give (a Service not propagated yet, or whose binding is missing), an
//     existing placement is left as it is: unobserved is not gone (the federation's
//     fail-static rule), and an empty clusterNames would mean every cluster.
//
// Every generated object, of every front door (package frontdoor/mci too, whose translation is
// its own but whose objects the kit writes: Door, SyncLoadBalancer, SyncBackendGroup,
// SyncPolicy, Owned, Remove), carries the labels lbfed.io/front-door=<K> and
// lbfed.io/front-door-name=<name> (NameLabel: hashed when longer than a label value) and a
// controller owner reference to the front door: deleting
// the front door deletes them through Karmada's garbage collector, and LBCF's finalizer on each
// LoadBalancer removes it from the device exactly once. Per-cluster weights work as for any
// BackendGroup: an OverridePolicy selecting the generated BackendGroups by those labels (or by
// name) with a plaintext replace of /spec/parameters/weight per cluster.
//
// Objects the kit did not generate (no labels, or labels without its owner reference) are never
// changed or deleted. A name it needs that such an object holds refuses the front door
// (ReasonNameTaken, the object named). Two claims on one VIP:port/protocol (front doors of any
// kind, or a user's own LBCF LoadBalancer) are settled by age: the older LoadBalancer keeps it,
// ties by namespace/name, and a front door without a LoadBalancer for it yet is the newest. The
// newer front door is refused (ReasonConflict, the holder named) and is examined again whenever a
// LoadBalancer goes; a LoadBalancer of it that lost a race for the VIP:port is removed, the ports
// it already serves stay (adding a port on a taken VIP:port does not take the others down). A refusal is reported as a
// condition (where the kind has conditions) and an event, and is never retried blindly.
//
// Input that cannot be served as written (no or bad VIP, bad method, no Service, no TCP/UDP
// port, no selector) is refused the same way, but what was generated before stays: a typo in an
// annotation must not take a serving VIP off the device. Likewise a port whose named target port
// cannot be resolved any more (Want.Held) keeps its LoadBalancer and placed BackendGroup while the
// other ports are synced. Removing the front door (deleting it,
// dropping LoadBalancer from a MultiClusterService's types, changing a Service's class) is the
// way to withdraw it.
//
// Status shows the VIP while the device serves it: at least one generated LoadBalancer reports
// Created (adding a port does not withdraw the VIP from status until the new port is up).
package frontdoor
