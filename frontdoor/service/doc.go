// Package service serves Services type=LoadBalancer created on the Karmada API server and
// propagated to members: one VIP on the shared Alteon pair for every member, through the
// frontdoor kit (one LoadBalancer and BackendGroup per port, the Service's pods in every cluster
// the Service is propagated to). A Service is served when it has lbfed's loadBalancerClass
// (DefaultLoadBalancerClass, lbfed.io/radware; not elb-controller's, so that an elb-controller in
// a member never programs the propagated copy) or, with ClaimUnclassed, no class and the
// lb.zdns.cn/vip annotation: the rule and validation of elb/servicelb (VIP from lb.zdns.cn/vip,
// else spec.loadBalancerIP; method from lb.zdns.cn/method).
//
// How the VIP reaches status without a writer fight. Karmada aggregates a Service template's
// status from its members (the default AggregateStatus for Services unions and dedupes the
// members' status.loadBalancer.ingress and replaces the template's status with it), so anything
// else writing the template's status would be overwritten on the next member change and would
// overwrite Karmada in turn. Two designs were possible:
//
//   - serve AggregateStatus for Services from lbfed's interpreter webhook. Rejected: a
//     ResourceInterpreterWebhookConfiguration entry for v1/Service replaces Karmada's built-in
//     interpretation for every Service in the federation, so lbfed's availability would gate
//     the status of Services it has nothing to do with (Karmada has no fail-open for
//     interpreter calls), and the members would still show no VIP.
//   - carry the VIP to the members and let them report it. Chosen: once the device serves the
//     VIP, the Karmada side (Reconciler) sets the template's annotation lbfed.io/load-balancer-
//     ingress (AnnotationIngress) with a merge patch of that key alone; Karmada propagates it
//     like any annotation, to Push and Pull members alike. In each member, lbcf-controller
//     --mode=member runs the StatusReflector, which sets that member Service's
//     status.loadBalancer.ingress from it. Karmada collects the members' status and aggregates it
//     into the template: every member shows the VIP, and so does the template.
//
// Each status has one writer: the template's is Karmada's, a member's is lbcf-controller's (for
// Services of lbfed's class, or unclassed ones with ClaimUnclassed: nothing else in the member
// may claim those). The Karmada side writes no status at all, and the annotation only when the
// VIP changes. When the VIP is withdrawn (conflict lost, Service no longer claimed) the
// annotation is emptied, not removed, and the members clear their status.
//
// Refusals (no or bad VIP, bad method, no TCP/UDP port, conflicts, taken names) are events on
// the Service: Karmada owns its status, so it carries no condition of lbfed's.
package service
