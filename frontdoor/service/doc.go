// Package service serves Services type=LoadBalancer created on the Karmada API server and
// propagated to members: one VIP on the shared Alteon pair for every member, through the
// frontdoor kit (one LoadBalancer and BackendGroup per port, the Service's pods in every cluster
// the Service is propagated to). A Service is served when it has lbfed's loadBalancerClass
// (DefaultLoadBalancerClass, lbfed.io/radware; not elb-controller's, so that an elb-controller in
// a member never programs the propagated copy) or, with ClaimUnclassed, no class and the
// lb.zdns.cn/vip annotation: the rule and validation of package lbspec, shared with elb/servicelb
// (VIP from lb.zdns.cn/vip, else spec.loadBalancerIP; method from lb.zdns.cn/method).
//
// How the VIP reaches status without fighting Karmada's status aggregation, and the other design
// choices: docs/design/frontdoor-service.md.
package service
