// Package mcs makes lbfed the provider behind Karmada's MultiClusterService of type
// LoadBalancer (networking.karmada.io/v1alpha1; Karmada ships none: its own controller serves
// only CrossCluster). For a MultiClusterService ns/name whose spec.types contains LoadBalancer,
// with the annotation lb.zdns.cn/vip (an IPv4 VIP; lb.zdns.cn/method rr, lc or hash, as
// elb-controller reads them) and a Service ns/name on the Karmada API server, the reconciler
// asks the frontdoor kit for one Alteon virtual server per Service port (spec.ports, when given,
// keeps only the listed ports) with the Service's pods in every provider cluster as backends:
// spec.providerClusters when set, else every cluster the Service is propagated to (its
// ResourceBinding's spec.clusters and spec.requiredBy). spec.consumerClusters and range do not
// apply: the VIP is reachable from anywhere the device is.
//
// The VIP is taken from the MultiClusterService only (not the Service's spec.loadBalancerIP: the
// Service is usually ClusterIP and a second source could disagree).
//
// Status: status.loadBalancer.ingress = [{ip: VIP}] while the device serves it, and the condition
// LoadBalancerReady (frontdoor.ConditionLoadBalancer) with observedGeneration: True/Programmed
// when every port is created, True/PortsSkipped when some ports could not be exposed (listed),
// False with Pending, Invalid, ServiceNotFound, Conflict, NameTaken or SyncFailed otherwise. Each
// change of the condition is also an event on the MultiClusterService. Karmada's own
// MultiClusterService controller writes its ServiceApplied condition in the same list for
// CrossCluster; both keep the other's condition (conflicting writes are retried).
//
// Deleting the MultiClusterService leaves the generated objects to the garbage collector through
// the owner references. Karmada's webhook keeps spec.types immutable (and to one type); where it
// does not run, dropping LoadBalancer from spec.types deletes them too.
package mcs
