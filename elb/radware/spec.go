package radware

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lbfed/lbfed/elb/radware/alteon"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbspec"
)

// Methods (lbSpec "method", Service annotation lb.zdns.cn/method; lbspec.Methods) and their
// group metrics.
var methods = map[string]alteon.Metric{
	"rr":   alteon.MetricRoundRobin,
	"lc":   alteon.MetricLeastConnections,
	"hash": alteon.MetricHash,
}

// LoadBalancer is one L4 virtual service on the Alteon: VIP:port/protocol balanced over one group.
type LoadBalancer struct {
	VIP      netip.Addr
	Port     int
	Protocol string // "TCP" or "UDP"
	Method   string // rr, lc or hash
	// HealthCheck is the group's HealthID ("" for none).
	HealthCheck string
	// Owner marks the device objects this load balancer creates (their Name/Vname); objects with
	// another owner are never changed or deleted.
	Owner string
	// Prefix starts every device id of the load balancer (default "lbfed").
	Prefix string
	// UID is the LBCF LoadBalancer's UID (driver only; empty for load balancers created before
	// owner marks carried it, and for Services).
	UID string
	// Health is the real servers' health-check timing from the load balancer's attributes (zero
	// fields: the frontend's); nil when the caller does not know it (ensureBackend gets no
	// attributes), and then the frontend uses what it last wrote for the load balancer.
	Health *HealthTiming
}

// MaxMarkLen is the longest owner mark written: the device's shortest name column that carries one
// (virtual server Vname, SIZE(0..128) in the MIB; group and real server names take 255).
const MaxMarkLen = 128

// Mark is the owner mark written for owner: owner itself when it fits MaxMarkLen, else its start
// and a hash of all of it (so that two long owners sharing a start stay apart), always the same
// for the same owner.
func Mark(owner string) string {
	if len(owner) <= MaxMarkLen {
		return owner
	}
	sum := sha256.Sum256([]byte(owner))
	suffix := "~" + hex.EncodeToString(sum[:8])
	head := owner[:MaxMarkLen-len(suffix)]
	for !utf8.ValidString(head) { // do not cut a character in two
		head = head[:len(head)-1]
	}
	return head + suffix
}

// marked returns lb with its Owner as written on the device.
func (lb LoadBalancer) marked() LoadBalancer {
	lb.Owner = Mark(lb.Owner)
	return lb
}

// ID is the index of the load balancer's virtual server and group:
// <prefix>_<vip>_<protocol>_<port>.
func (lb LoadBalancer) ID() string {
	p := lb.Prefix
	if p == "" {
		p = "lbfed"
	}
	return fmt.Sprintf("%s_%s_%s_%d", p, lb.VIP, strings.ToLower(lb.Protocol), lb.Port)
}

// String is the load balancer as people write it.
func (lb LoadBalancer) String() string {
	return fmt.Sprintf("%s:%d/%s", lb.VIP, lb.Port, lb.Protocol)
}

func (lb LoadBalancer) metric() alteon.Metric { return methods[lb.Method] }

func (lb LoadBalancer) balance() alteon.Balance {
	if lb.Protocol == "UDP" {
		return alteon.BalanceUDP
	}
	return alteon.BalanceTCP
}

// realServerID is the real server index of a backend: <lb id>_<ip>_<port>. Real servers are per
// load balancer so that deleting one never touches another's.
func (lb LoadBalancer) realServerID(b Backend) string {
	return fmt.Sprintf("%s_%s_%d", lb.ID(), b.IP, b.Port)
}

// owns reports whether a real server index belongs to this load balancer's namespace of ids.
func (lb LoadBalancer) owns(realServer string) bool {
	return strings.HasPrefix(realServer, lb.ID()+"_")
}

// Info is the lbInfo a created load balancer is known by: the canonical spec plus the device id.
func (lb LoadBalancer) Info() map[string]string {
	hc := lb.HealthCheck
	if hc == "" {
		hc = "none"
	}
	info := map[string]string{
		lbspec.KeyVIP: lb.VIP.String(), lbspec.KeyPort: strconv.Itoa(lb.Port), lbspec.KeyProtocol: lb.Protocol,
		lbspec.KeyMethod: lb.Method, lbspec.KeyHealthCheck: hc, lbspec.KeyVirtualServer: lb.ID(),
	}
	if lb.UID != "" {
		info[lbspec.KeyLoadBalancerUID] = lb.UID
	}
	return info
}

// ParseLoadBalancer reads an lbSpec or lbInfo (lbspec.Parse: the keys, their defaults and
// their checks).
func ParseLoadBalancer(spec map[string]string) (LoadBalancer, error) {
	s, err := lbspec.Parse(spec)
	if err != nil {
		return LoadBalancer{}, err
	}
	return LoadBalancer{VIP: s.VIP, Port: s.Port, Protocol: s.Protocol, Method: s.Method,
		HealthCheck: s.HealthCheck, UID: s.UID}, nil
}

// Backend is one real server of a load balancer.
type Backend struct {
	IP     netip.Addr
	Port   int
	Weight int // 1..48
}

// Real server weight range of the device.
const (
	MinWeight = 1
	MaxWeight = 48
)

// ParseBackend reads a backend address ("ip:port", IPv4) and its parameters: weight (1..48,
// default 1). Other parameters (e.g. lbfed.io/cluster) are accepted and ignored.
func ParseBackend(addr string, params map[string]string) (Backend, error) {
	ap, err := netip.ParseAddrPort(strings.TrimSpace(addr))
	if err != nil || !ap.Addr().Is4() || ap.Port() == 0 {
		return Backend{}, fmt.Errorf("backend address %q: must be IPv4 ip:port", addr)
	}
	if ap.Port() < 5 || ap.Port() > 65534 {
		return Backend{}, fmt.Errorf("backend address %q: port must be 5..65534", addr)
	}
	w, err := ParseWeight(params)
	if err != nil {
		return Backend{}, err
	}
	return Backend{IP: ap.Addr(), Port: int(ap.Port()), Weight: w}, nil
}

// ParseWeight reads parameters.weight (default 1).
func ParseWeight(params map[string]string) (int, error) {
	s, ok := params[lbcfv1beta1.ParamWeight]
	if !ok || strings.TrimSpace(s) == "" {
		return MinWeight, nil
	}
	w, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || w < MinWeight || w > MaxWeight {
		return 0, fmt.Errorf("parameter weight %q: must be an integer %d..%d (the Alteon real server weight range)", s, MinWeight, MaxWeight)
	}
	return w, nil
}

func (b Backend) String() string { return netip.AddrPortFrom(b.IP, uint16(b.Port)).String() }
