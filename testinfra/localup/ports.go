package localup

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
)

// Ports are drawn at random from a range below Linux's default ephemeral range (32768-60999):
// a port chosen and released here can then not be taken by an outgoing connection's source port
// before the child process binds it, which is the usual flake of "listen on :0, close, pass the
// number on". Each candidate is checked by binding it, and ports handed out by this process are
// never handed out again.
const (
	portRangeLow  = 12000
	portRangeHigh = 32000
)

var issuedPorts struct {
	mu   sync.Mutex
	used map[int]bool
}

// FreePorts returns n distinct ports that were free on 127.0.0.1 when checked and that no other
// caller in this process has been given, for servers a test starts itself (e.g. a webhook).
func FreePorts(n int) ([]int, error) { return allocatePorts(n) }

// allocatePorts returns n distinct ports that were free on 127.0.0.1 when checked.
func allocatePorts(n int) ([]int, error) {
	issuedPorts.mu.Lock()
	defer issuedPorts.mu.Unlock()
	if issuedPorts.used == nil {
		issuedPorts.used = map[int]bool{}
	}
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts > 1000 {
			return nil, errors.New("allocate ports: no free port found in 1000 attempts")
		}
		port := portRangeLow + rand.IntN(portRangeHigh-portRangeLow)
		if issuedPorts.used[port] {
			continue
		}
		// Held open until all n are chosen so the same port cannot be picked twice.
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		listeners = append(listeners, l)
		issuedPorts.used[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// podNetwork is the loopback block of one cluster with fake nodes. Every 127.0.0.0/8 address is
// local on Linux, so pods that kwok "runs" get addresses a test can actually listen on and dial.
//
//	127.A.B.0/20, B a multiple of 16:
//	  127.A.B.1        sentinel: a listener held for the cluster's life marks the block as taken
//	  127.A.B.(10+i)   InternalIP of fake node i (1-based)
//	  127.A.(B+i).0/24 podCIDR of fake node i, i = 1..maxFakeNodes
//	  127.A.(B+15).0/24 kwok's fallback CIDR for nodes without a podCIDR
//
// A wide block, for nodes with more pods than a /24 holds (ClusterOptions.PodsPerNode), is
// the sixteen /20 blocks of 127.A.0.0/16 at once (their sixteen sentinels held, so that no
// other run takes one of them), laid out as the /20 at B = 0 except for the podCIDRs:
//
//	127.A.(16i).0/20 podCIDR of fake node i, i = 1..maxFakeNodes
type podNetwork struct {
	prefix    netip.Prefix
	sentinels []net.Listener
}

const maxFakeNodes = 14

// Pods a fake node's podCIDR holds: kwok hands out its addresses from the first, and would go
// past its end into the next node's.
const (
	narrowPodsPerNode = 254
	widePodsPerNode   = 4094
)

// sentinelPort is fixed so that two runs probing the same block collide on it.
const sentinelPort = 47999

func allocatePodNetwork(wide bool) (*podNetwork, error) {
	for attempts := 0; attempts < 200; attempts++ {
		a := byte(16 + rand.IntN(240)) // 127.16.0.0 .. 127.255.255.255: clear of 127.0.0.x
		blocks := []byte{byte(16 * rand.IntN(16))}
		bits := 20
		if wide {
			blocks, bits = nil, 16
			for b := 0; b < 256; b += 16 {
				blocks = append(blocks, byte(b))
			}
		}
		n := &podNetwork{prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{127, a, blocks[0], 0}), bits)}
		for _, b := range blocks {
			l, err := net.Listen("tcp", netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, a, b, 1}), sentinelPort).String())
			if err != nil {
				n.release()
				n = nil
				break
			}
			n.sentinels = append(n.sentinels, l)
		}
		if n != nil {
			return n, nil
		}
	}
	if wide {
		return nil, errors.New("allocate pod network: no free 127.x.0.0/16 block in 200 attempts")
	}
	return nil, errors.New("allocate pod network: no free 127.x.y.0/20 block in 200 attempts")
}

func (n *podNetwork) release() {
	for _, l := range n.sentinels {
		l.Close()
	}
}

func (n *podNetwork) wide() bool { return n.prefix.Bits() == 16 }

// podsPerNode is the most pods a fake node's podCIDR holds.
func (n *podNetwork) podsPerNode() int {
	if n.wide() {
		return widePodsPerNode
	}
	return narrowPodsPerNode
}

func (n *podNetwork) octets() (byte, byte) {
	b := n.prefix.Addr().As4()
	return b[1], b[2]
}

// nodeIP is the InternalIP of fake node i (1-based).
func (n *podNetwork) nodeIP(i int) string {
	a, b := n.octets()
	return netip.AddrFrom4([4]byte{127, a, b, byte(10 + i)}).String()
}

// nodePodCIDR is the podCIDR of fake node i (1-based).
func (n *podNetwork) nodePodCIDR(i int) string {
	a, b := n.octets()
	if n.wide() {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, a, byte(16 * i), 0}), 20).String()
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, a, b + byte(i), 0}), 24).String()
}

func (n *podNetwork) fallbackCIDR() string {
	a, b := n.octets()
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, a, b + 15, 0}), 24).String()
}

func checkFakeNodes(n int) error {
	if n < 0 || n > maxFakeNodes {
		return fmt.Errorf("fake nodes: %d out of range 0..%d", n, maxFakeNodes)
	}
	return nil
}
