package servicelb

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/lbfed/lbfed/elb/radware"
	"github.com/lbfed/lbfed/lbspec"
)

// Wire strings of the Service API (zdnscloud/elb-controller compatible); the lb.zdns.cn
// annotations and the claim rule are lbspec's, shared with lbfed's Karmada front door.
const (
	// Finalizer holds a Service until its Alteon objects are removed.
	Finalizer = "lb.zdns.cn/protect"
	// LegacyFinalizer is zdnscloud/elb-controller's; it is removed together with Finalizer so that
	// Services taken over from it can be deleted.
	LegacyFinalizer = "lb.zcloud.cn/protect"
	// DefaultLoadBalancerClass is the spec.loadBalancerClass this controller claims by default.
	DefaultLoadBalancerClass = "lb.zdns.cn/radware"
	// LabelExcludeFromLB is the well-known node label that keeps a node out of load balancers.
	LabelExcludeFromLB = corev1.LabelNodeExcludeBalancers
	// idPrefix starts the Alteon ids of the load balancers this controller creates.
	idPrefix = "elb"
)

// owner is the mark on every Alteon object of a Service: elb/<cluster>/<namespace>/<name>.
func owner(cluster string, svc *corev1.Service) string {
	return fmt.Sprintf("elb/%s/%s/%s", cluster, svc.Namespace, svc.Name)
}

// vip reads the Service's virtual IP: the annotation, else spec.loadBalancerIP.
func vip(svc *corev1.Service) (netip.Addr, error) {
	return lbspec.ParseVIP(svc.Annotations, svc.Spec.LoadBalancerIP)
}

// desired computes the Service's load balancers: one per port (VIP:port/protocol), each over
// nodeIP:nodePort of the backend nodes. Ports that cannot be served are reported in skipped.
func desired(cluster string, svc *corev1.Service, nodes []corev1.Node, slices []discoveryv1.EndpointSlice) (out []radware.Desired, skipped []string, err error) {
	ip, err := vip(svc)
	if err != nil {
		return nil, nil, err
	}
	method, err := lbspec.ParseMethod(svc.Annotations)
	if err != nil {
		return nil, nil, err
	}
	ips := backendNodeIPs(svc, nodes, slices)
	own := owner(cluster, svc)
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		name := fmt.Sprintf("port %d/%s", p.Port, proto)
		if proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP {
			skipped = append(skipped, name+": only TCP and UDP are supported")
			continue
		}
		if p.NodePort == 0 {
			skipped = append(skipped, name+": no nodePort (spec.allocateLoadBalancerNodePorts is false)")
			continue
		}
		lb, err := radware.ParseLoadBalancer(map[string]string{
			lbspec.KeyVIP: ip.String(), lbspec.KeyPort: strconv.Itoa(int(p.Port)), lbspec.KeyProtocol: string(proto), lbspec.KeyMethod: method,
		})
		if err != nil {
			skipped = append(skipped, name+": "+err.Error())
			continue
		}
		lb.Owner, lb.Prefix = own, idPrefix
		backends := make([]radware.Backend, 0, len(ips))
		for _, nip := range ips {
			backends = append(backends, radware.Backend{IP: nip, Port: int(p.NodePort), Weight: radware.MinWeight})
		}
		out = append(out, radware.Desired{LoadBalancer: lb, Backends: backends})
	}
	return out, skipped, nil
}

// backendNodeIPs returns the addresses of the nodes that receive the Service's traffic: with
// externalTrafficPolicy Local the Ready nodes that hold a ready endpoint (traffic reaching other
// nodes would be dropped); otherwise every Ready, schedulable node not excluded from load
// balancers. Sorted, without duplicates.
func backendNodeIPs(svc *corev1.Service, nodes []corev1.Node, slices []discoveryv1.EndpointSlice) []netip.Addr {
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	var withEndpoints map[string]bool
	if local {
		withEndpoints = map[string]bool{}
		for _, s := range slices {
			for _, ep := range s.Endpoints {
				if ep.NodeName != nil && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
					withEndpoints[*ep.NodeName] = true
				}
			}
		}
	}
	seen := map[netip.Addr]bool{}
	var out []netip.Addr
	for i := range nodes {
		n := &nodes[i]
		if !nodeReady(n) || excluded(n) {
			continue
		}
		if local {
			if !withEndpoints[n.Name] {
				continue
			}
		} else if n.Spec.Unschedulable {
			continue
		}
		if ip, ok := nodeIP(n); ok && !seen[ip] {
			seen[ip] = true
			out = append(out, ip)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func excluded(n *corev1.Node) bool {
	_, ok := n.Labels[LabelExcludeFromLB]
	return ok
}

// nodeIP is the node's IPv4 InternalIP, else its IPv4 ExternalIP.
func nodeIP(n *corev1.Node) (netip.Addr, bool) {
	for _, typ := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); a.Type == typ && err == nil && ip.Is4() {
				return ip, true
			}
		}
	}
	return netip.Addr{}, false
}

// ingress is the status the Service should show for its VIP.
func ingress(ip netip.Addr) []corev1.LoadBalancerIngress {
	mode := corev1.LoadBalancerIPModeVIP
	return []corev1.LoadBalancerIngress{{IP: ip.String(), IPMode: &mode}}
}
