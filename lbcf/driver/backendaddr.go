package driver

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// Helpers for generateBackendAddr that the drivers share; each driver keeps its own rules on
// which addresses and ports its device takes.

// SelectedPort is the port the pod backend's selector names: port, else the deprecated
// portNumber (LBCF ≤ 1.1); 0 when neither is set.
func (p *PodBackendInRequest) SelectedPort() int32 {
	port := p.Port.Port
	if port == 0 && p.Port.PortNumber != nil {
		port = *p.Port.PortNumber
	}
	return port
}

// NodePort is the Service's nodePort for the selected port and protocol (TCP when unset, on
// either side, as the API server defaults it).
func (s *ServiceBackendInRequest) NodePort() (int32, error) {
	proto := corev1.ProtocolTCP
	if s.Port.Protocol != "" {
		proto = corev1.Protocol(s.Port.Protocol)
	}
	var nodePort int32
	for _, p := range s.Service.Spec.Ports {
		pp := p.Protocol
		if pp == "" {
			pp = corev1.ProtocolTCP // the API server's default
		}
		if p.Port == s.Port.Port && pp == proto {
			nodePort = p.NodePort
		}
	}
	if nodePort == 0 {
		return 0, fmt.Errorf("service %s/%s has no nodePort for port %d/%s", s.Service.Namespace, s.Service.Name, s.Port.Port, proto)
	}
	return nodePort, nil
}

// NodeAddr is the node's address, InternalIP preferred, then ExternalIP, among those that parse
// and keep accepts (nil: all); false when there is none.
func (s *ServiceBackendInRequest) NodeAddr(keep func(netip.Addr) bool) (netip.Addr, bool) {
	for _, typ := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, na := range s.NodeAddresses {
			if a, err := netip.ParseAddr(na.Address); na.Type == typ && err == nil && (keep == nil || keep(a)) {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}
