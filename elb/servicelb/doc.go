// Package servicelb is the Service type=LoadBalancer controller that programs a Radware Alteon
// pair directly (zdnscloud/elb-controller's design, seed 004), built on controller-runtime and
// elb/radware.
//
// A Service is claimed when it has type LoadBalancer and either spec.loadBalancerClass equal to
// the controller's class, or no class and the annotation lb.zdns.cn/vip (when unclassed Services
// are claimed). lb.zdns.cn/vip gives the IPv4 VIP (spec.loadBalancerIP is accepted instead) and
// lb.zdns.cn/method the balancing method (rr, lc, hash; default rr).
//
// Each TCP/UDP port becomes one Alteon virtual service VIP:port over one group whose members are
// nodeIP:nodePort of the backend nodes: with externalTrafficPolicy Local the Ready nodes holding
// a ready endpoint of the Service, otherwise every Ready, schedulable node without the
// node.kubernetes.io/exclude-from-external-load-balancers label. Removed nodes are drained
// (shutdown-connection) before removal. Every Alteon object carries the owner mark
// elb/<cluster>/<namespace>/<name>, so a Service's objects are found again after restarts, ports
// or VIPs that changed are cleaned up, and another owner's VIP:port is refused (event
// LoadBalancerConflict) instead of taken over.
//
// The controller reacts to Service, EndpointSlice (Local policy) and Node changes, writes
// status.loadBalancer.ingress[].ip, and holds the Service with the finalizer lb.zdns.cn/protect
// until its Alteon objects are gone (zdnscloud's lb.zcloud.cn/protect is removed as well).
// An unavailable Alteon (unreachable, no master, another writer's edits pending: event
// ForeignAlteonEdits) is retried with exponential backoff capped at RetryMaxDelay for as long as it
// lasts. A change the device refuses (a rejected write, a failed apply) is retried up to
// MaxRetries, then reported with a SyncLoadBalancerGaveUp event and retried only on the next change
// or resync (the original dropped the task for good). Concurrent reconciles share Alteon transactions (one apply + save).
package servicelb
