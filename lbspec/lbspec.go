// Package lbspec is the wire vocabulary of an L4 load balancer that several sides share: the
// lbSpec/lbInfo keys and their parser (the Radware driver's lbSpec, which the Karmada front doors
// generate), and the lb.zdns.cn Service annotations (elb-controller's, which the front doors read
// as well). It depends on no driver and no controller, so that the federation side does not
// import a vendor package to speak the same words.
package lbspec

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// lbSpec / lbInfo keys.
const (
	KeyVIP         = "vip"
	KeyPort        = "port"
	KeyProtocol    = "protocol"
	KeyMethod      = "method"
	KeyHealthCheck = "healthCheck"
	// KeyVirtualServer is added to lbInfo: the device object id, for people reading the status.
	KeyVirtualServer = "virtualServer"
	// KeyLoadBalancerUID is added to lbInfo: the UID of the LBCF LoadBalancer that created the
	// device objects, part of their owner mark (<driver owner>/<uid>), so that another
	// LoadBalancer with the same VIP:port is refused instead of sharing (and deleting) them.
	KeyLoadBalancerUID = "loadBalancerUID"
)

// Methods are the balancing methods (lbSpec "method", Service annotation lb.zdns.cn/method).
var Methods = map[string]bool{"rr": true, "lc": true, "hash": true}

// Health checks accepted in lbSpec "healthCheck" (the device's HealthID); "none" disables it.
var healthChecks = map[string]string{"tcp": "tcp", "udp": "udp", "icmp": "icmp", "http": "http", "none": ""}

// Spec is one parsed lbSpec or lbInfo: VIP:port/protocol balanced by Method.
type Spec struct {
	VIP      netip.Addr
	Port     int
	Protocol string // "TCP" or "UDP"
	Method   string // rr, lc or hash
	// HealthCheck is the device's HealthID ("" for none).
	HealthCheck string
	// UID is KeyLoadBalancerUID of an lbInfo ("" in an lbSpec).
	UID string
}

// Parse reads an lbSpec or lbInfo: vip (IPv4, required), port (1 or 9..65534, required),
// protocol (TCP or UDP, default TCP), method (rr, lc or hash, default rr) and healthCheck (tcp,
// udp, icmp, http or none; default tcp for TCP, udp for UDP). Unknown keys are refused, except
// KeyVirtualServer and KeyLoadBalancerUID (present in lbInfo).
func Parse(spec map[string]string) (Spec, error) {
	var lb Spec
	var unknown []string
	for k := range spec {
		switch k {
		case KeyVIP, KeyPort, KeyProtocol, KeyMethod, KeyHealthCheck, KeyVirtualServer, KeyLoadBalancerUID:
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return lb, fmt.Errorf("unknown lbSpec keys %s (known: vip, port, protocol, method, healthCheck)", strings.Join(unknown, ", "))
	}
	vip, err := netip.ParseAddr(strings.TrimSpace(spec[KeyVIP]))
	if err != nil || !vip.Is4() || vip.IsUnspecified() {
		return lb, fmt.Errorf("lbSpec vip %q: must be an IPv4 address", spec[KeyVIP])
	}
	lb.VIP = vip
	lb.UID = strings.TrimSpace(spec[KeyLoadBalancerUID])
	port, err := strconv.Atoi(strings.TrimSpace(spec[KeyPort]))
	if err != nil || !(port == 1 || (port >= 9 && port <= 65534)) {
		return lb, fmt.Errorf("lbSpec port %q: must be 9..65534 (or 1 for an IP service)", spec[KeyPort])
	}
	lb.Port = port
	lb.Protocol = strings.ToUpper(strings.TrimSpace(spec[KeyProtocol]))
	if lb.Protocol == "" {
		lb.Protocol = "TCP"
	}
	if lb.Protocol != "TCP" && lb.Protocol != "UDP" {
		return lb, fmt.Errorf("lbSpec protocol %q: must be TCP or UDP", spec[KeyProtocol])
	}
	lb.Method = strings.ToLower(strings.TrimSpace(spec[KeyMethod]))
	if lb.Method == "" {
		lb.Method = "rr"
	}
	if !Methods[lb.Method] {
		return lb, fmt.Errorf("lbSpec method %q: must be rr, lc or hash", spec[KeyMethod])
	}
	hc, ok := spec[KeyHealthCheck]
	hc = strings.ToLower(strings.TrimSpace(hc))
	switch {
	case !ok || hc == "":
		lb.HealthCheck = strings.ToLower(lb.Protocol)
	default:
		id, known := healthChecks[hc]
		if !known {
			return lb, fmt.Errorf("lbSpec healthCheck %q: must be tcp, udp, icmp, http or none", spec[KeyHealthCheck])
		}
		lb.HealthCheck = id
	}
	return lb, nil
}
