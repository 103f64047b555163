package localup

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// A cluster started with ClusterOptions.NetNS runs its etcd, apiserver, controllers and kwok in
// a network namespace of its own, joined to the host by two veth pairs with addresses in
// 10.231.N.0/29 (a block that exists only in these namespaces):
//
//	peer link   host 10.231.N.1/30 — inside 10.231.N.2/30   what Karmada dials (PeerKubeconfigPath);
//	                                                        Link.Cut takes it down
//	admin link  host 10.231.N.5/30 — inside 10.231.N.6/30   everything else: tests, pod responder,
//	                                                        processes inside (Address, KubeconfigPath)
//
// so a test can partition a member from Karmada alone while the member keeps running, its pods
// keep answering on their 127.x addresses in the host namespace, and the test can still act on
// the member. A cut sets the INSIDE end of the peer link down: the host keeps its on-link route
// (flagged linkdown) and silently drops what it sends there, as a real partition does. Setting the
// host end down instead would remove that route, and the host would send 10.231.N.2 to its
// default gateway, i.e. out of the machine.

// netnsPrefix names every namespace localup creates: lbfed-<pid of the creating process>-<cluster>.
const netnsPrefix = "lbfed-"

// NetNSSupported returns nil when this process can give clusters network namespaces (root and
// the ip command), else why not — for a test to skip with.
func NetNSSupported() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root (this process runs as uid " + strconv.Itoa(os.Geteuid()) + ")")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("network namespaces need the ip command (iproute2): %w", err)
	}
	return nil
}

// netNamespace is one cluster's network namespace and its two links.
type netNamespace struct {
	name  string
	index int // N in 10.231.N.0/29
	// Host-side device names; the inside ends are called peerInside and adminInside.
	peerDev, adminDev string
	peerAddr          netip.Addr // inside end of the peer link: what Karmada dials
	adminAddr         netip.Addr // inside end of the admin link: Cluster.Address

	mu  sync.Mutex
	cut bool
}

const (
	peerInside  = "peer0"
	adminInside = "admin0"
)

func (n *netNamespace) hostAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 231, byte(n.index), byte(i)})
}

// createNetNamespace creates the namespace for cluster, with both links up.
func createNetNamespace(cluster string) (*netNamespace, error) {
	if err := NetNSSupported(); err != nil {
		return nil, err
	}
	removeStaleNetNamespaces()
	used := usedLinkIndexes()
	var lastErr error
	for attempts := 0; attempts < 20; attempts++ {
		i := rand.IntN(256)
		if used[i] {
			continue
		}
		n := &netNamespace{
			name:     fmt.Sprintf("%s%d-%s", netnsPrefix, os.Getpid(), cluster),
			index:    i,
			peerDev:  fmt.Sprintf("lbfp%d", i),
			adminDev: fmt.Sprintf("lbfa%d", i),
		}
		n.peerAddr, n.adminAddr = n.hostAddr(2), n.hostAddr(6)
		// Another run picking the same N at the same time fails on the device names.
		if lastErr = n.setUp(); lastErr == nil {
			return n, nil
		}
		n.remove()
		used[i] = true
	}
	return nil, fmt.Errorf("create network namespace for %s: %w", cluster, lastErr)
}

func (n *netNamespace) setUp() error {
	cmds := [][]string{
		{"netns", "add", n.name},
		{"-n", n.name, "link", "set", "lo", "up"},
	}
	for _, l := range []struct {
		dev, inside string
		host        int
	}{{n.peerDev, peerInside, 1}, {n.adminDev, adminInside, 5}} {
		cmds = append(cmds,
			[]string{"link", "add", l.dev, "type", "veth", "peer", "name", l.inside, "netns", n.name},
			[]string{"addr", "add", n.hostAddr(l.host).String() + "/30", "dev", l.dev},
			[]string{"link", "set", l.dev, "up"},
			[]string{"-n", n.name, "addr", "add", n.hostAddr(l.host+1).String() + "/30", "dev", l.inside},
			[]string{"-n", n.name, "link", "set", l.inside, "up"},
		)
	}
	for _, args := range cmds {
		if err := ip(args...); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes the links and the namespace. Deleting the host ends destroys the pairs even
// while a stray process still holds the namespace open.
func (n *netNamespace) remove() error {
	var errs []error
	for _, dev := range []string{n.peerDev, n.adminDev} {
		if err := ip("link", "del", dev); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err)
		}
	}
	if err := ip("netns", "del", n.name); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (n *netNamespace) setCut(cut bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	state := "up"
	if cut {
		state = "down"
	}
	if err := ip("-n", n.name, "link", "set", peerInside, state); err != nil {
		return err
	}
	n.cut = cut
	return nil
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// usedLinkIndexes returns the N of every 10.231.N.x address on the host.
func usedLinkIndexes() map[int]bool {
	used := map[int]bool{}
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return used
	}
	for _, f := range strings.Fields(string(out)) {
		if p, err := netip.ParsePrefix(f); err == nil && p.Addr().Is4() {
			if b := p.Addr().As4(); b[0] == 10 && b[1] == 231 {
				used[int(b[2])] = true
			}
		}
	}
	return used
}

// removeStaleNetNamespaces deletes the namespaces of localup runs whose process is gone (killed
// before Stop: its children died with it, the namespaces stay). Namespaces of live runs are left
// alone.
func removeStaleNetNamespaces() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], netnsPrefix) {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(f[0], netnsPrefix), "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			continue
		}
		_ = ip("netns", "del", f[0])
	}
}

// Link is the network link between a cluster in its own network namespace and the host, the
// path Karmada reaches the cluster's API server on.
type Link struct{ ns *netNamespace }

// Cut drops everything sent over the link from then on, in both directions, as a network
// partition does: established connections stall, new ones time out. The cluster keeps running.
func (l *Link) Cut() error { return l.ns.setCut(true) }

// Restore brings the link back up.
func (l *Link) Restore() error { return l.ns.setCut(false) }

// IsCut reports whether the link is cut.
func (l *Link) IsCut() bool {
	l.ns.mu.Lock()
	defer l.ns.mu.Unlock()
	return l.ns.cut
}

// Namespace is the network namespace's name (for `ip netns exec`).
func (l *Link) Namespace() string { return l.ns.name }

// PeerAddress is the cluster-side address of the link, the API server's address for Karmada.
func (l *Link) PeerAddress() netip.Addr { return l.ns.peerAddr }
