package servicelb

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lbfed/lbfed/elb/radware"
	"github.com/lbfed/lbfed/lbspec"
)

func node(name, ip string, mods ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}},
		},
	}
	for _, m := range mods {
		m(&n)
	}
	return n
}

func notReady(n *corev1.Node)     { n.Status.Conditions[0].Status = corev1.ConditionFalse }
func cordoned(n *corev1.Node)     { n.Spec.Unschedulable = true }
func excludedNode(n *corev1.Node) { n.Labels[LabelExcludeFromLB] = "" }
func externalOnly(n *corev1.Node) {
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.9"}}
}
func ipv6Only(n *corev1.Node) {
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "fd00::9"}}
}
func service(mods ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Annotations: map[string]string{lbspec.AnnotationVIP: "192.0.2.10"}},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}},
		},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func slice(endpoints ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{Endpoints: endpoints}
}

func ep(nodeName string, ready *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{NodeName: &nodeName, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

func TestClaim(t *testing.T) {
	other, ours := "example.com/other", DefaultLoadBalancerClass
	tests := []struct {
		name      string
		svc       *corev1.Service
		unclassed bool
		want      bool
	}{
		{"annotated, unclassed claimed", service(), true, true},
		{"annotated, unclassed not claimed", service(), false, false},
		{"our class without annotation", service(func(s *corev1.Service) { s.Spec.LoadBalancerClass = &ours; s.Annotations = nil }), false, true},
		{"another class", service(func(s *corev1.Service) { s.Spec.LoadBalancerClass = &other }), true, false},
		{"not a LoadBalancer", service(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }), true, false},
		{"unclassed without annotation", service(func(s *corev1.Service) { s.Annotations = nil }), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(lbspec.Claims(tt.svc, DefaultLoadBalancerClass, tt.unclassed)).To(Equal(tt.want))
		})
	}
}

func TestBackendNodes(t *testing.T) {
	nodes := []corev1.Node{
		node("n1", "10.0.0.1"), node("n2", "10.0.0.2"), node("n3", "10.0.0.3", notReady),
		node("n4", "10.0.0.4", cordoned), node("n5", "10.0.0.5", excludedNode), node("n6", "", externalOnly),
		node("n7", "", ipv6Only),
	}
	local := func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }
	tests := []struct {
		name   string
		svc    *corev1.Service
		slices []discoveryv1.EndpointSlice
		want   []string
	}{
		{"cluster: ready, schedulable, not excluded, IPv4", service(), nil, []string{"10.0.0.1", "10.0.0.2", "203.0.113.9"}},
		{"local: nodes with ready endpoints only", service(local), []discoveryv1.EndpointSlice{
			slice(ep("n2", nil), ep("n1", ptr.To(false))), slice(ep("n2", ptr.To(true)))}, []string{"10.0.0.2"}},
		{"local: a cordoned node with a ready endpoint still serves", service(local), []discoveryv1.EndpointSlice{
			slice(ep("n4", ptr.To(true)), ep("n3", ptr.To(true)), ep("n5", ptr.To(true)))}, []string{"10.0.0.4"}},
		{"local: no endpoints, no backends", service(local), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, ip := range backendNodeIPs(tt.svc, nodes, tt.slices) {
				got = append(got, ip.String())
			}
			NewWithT(t).Expect(got).To(Equal(tt.want))
		})
	}
}

func TestDesired(t *testing.T) {
	g := NewWithT(t)
	nodes := []corev1.Node{node("n1", "10.0.0.2"), node("n2", "10.0.0.1")}
	svc := service(func(s *corev1.Service) {
		s.Annotations[lbspec.AnnotationMethod] = "LC"
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "http", Port: 80, NodePort: 30080},
			{Name: "dns", Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP},
			{Name: "sctp", Port: 99, NodePort: 30099, Protocol: corev1.ProtocolSCTP},
			{Name: "none", Port: 81},
			{Name: "low", Port: 7, NodePort: 30007},
		}
	})
	got, skipped, err := desired("c1", svc, nodes, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(skipped).To(HaveLen(3))
	g.Expect(skipped[0]).To(ContainSubstring("port 99/SCTP: only TCP and UDP"))
	g.Expect(skipped[1]).To(ContainSubstring("port 81/TCP: no nodePort"))
	g.Expect(skipped[2]).To(ContainSubstring("port 7/TCP"))
	backends := func(port int) []radware.Backend {
		return []radware.Backend{{IP: netip.MustParseAddr("10.0.0.1"), Port: port, Weight: 1}, {IP: netip.MustParseAddr("10.0.0.2"), Port: port, Weight: 1}}
	}
	vip := netip.MustParseAddr("192.0.2.10")
	g.Expect(got).To(Equal([]radware.Desired{
		{LoadBalancer: radware.LoadBalancer{VIP: vip, Port: 80, Protocol: "TCP", Method: "lc", HealthCheck: "tcp", Owner: "elb/c1/ns/web", Prefix: "elb"}, Backends: backends(30080)},
		{LoadBalancer: radware.LoadBalancer{VIP: vip, Port: 53, Protocol: "UDP", Method: "lc", HealthCheck: "udp", Owner: "elb/c1/ns/web", Prefix: "elb"}, Backends: backends(30053)},
	}))
	g.Expect(got[0].LoadBalancer.ID()).To(Equal("elb_192.0.2.10_tcp_80"))

	invalid := []*corev1.Service{
		service(func(s *corev1.Service) { s.Annotations = nil }),
		service(func(s *corev1.Service) { s.Annotations[lbspec.AnnotationVIP] = "2001:db8::1" }),
		service(func(s *corev1.Service) { s.Annotations[lbspec.AnnotationVIP] = "not-an-ip" }),
		service(func(s *corev1.Service) { s.Annotations[lbspec.AnnotationMethod] = "random" }),
	}
	for _, s := range invalid {
		_, _, err := desired("c1", s, nodes, nil)
		var ie *lbspec.InvalidError
		g.Expect(err).To(BeAssignableToTypeOf(ie), "%v", s.Annotations)
	}
	// spec.loadBalancerIP stands in for the annotation.
	s := service(func(s *corev1.Service) { s.Annotations = nil; s.Spec.LoadBalancerIP = "192.0.2.77" })
	got, _, err = desired("c1", s, nodes, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got[0].LoadBalancer.VIP.String()).To(Equal("192.0.2.77"))
}
