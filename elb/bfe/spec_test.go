package bfe

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

func TestParseLoadBalancer(t *testing.T) {
	cases := []struct {
		name string
		spec map[string]string
		want *LoadBalancer // nil: only check the error
		err  string
	}{
		{"host only", map[string]string{"host": "App.Example.Test", "name": "web"},
			&LoadBalancer{Name: "web", Host: "app.example.test", Path: "/*"}, ""},
		{"all keys", map[string]string{"host": "a.test", "path": "/api/*", "cookie": "ver: v2|v3", "header": "X-Canary:yes", "name": "c1"},
			&LoadBalancer{Name: "c1", Host: "a.test", Path: "/api/*", Cookie: &Match{Key: "ver", Value: "v2|v3"}, Header: &Match{Key: "X-Canary", Value: "yes"}}, ""},
		{"exact path", map[string]string{"host": "*", "path": "/healthz", "name": "h"}, &LoadBalancer{Name: "h", Host: "*", Path: "/healthz"}, ""},
		{"wildcard host", map[string]string{"host": "*.example.org", "name": "w"}, &LoadBalancer{Name: "w", Host: "*.example.org", Path: "/*"}, ""},
		{"misspelled key", map[string]string{"hots": "a.test"}, nil, `unknown lbSpec key "hots"`},
		{"missing host", map[string]string{"path": "/x"}, nil, "lbSpec.host is required"},
		{"bad host", map[string]string{"host": "a b.test"}, nil, "invalid character"},
		{"bad wildcard", map[string]string{"host": "a.*.test"}, nil, "wildcard must be"},
		{"relative path", map[string]string{"host": "a.test", "path": "api"}, nil, "must start with /"},
		{"prefix without slash", map[string]string{"host": "a.test", "path": "/api*"}, nil, `a prefix must end in "/*"`},
		{"star inside", map[string]string{"host": "a.test", "path": "/a/*/b"}, nil, "* must appear as last character"},
		{"quote in path", map[string]string{"host": "a.test", "path": `/a"b`}, nil, "quotes, backslashes and spaces are not allowed"},
		{"cookie without value", map[string]string{"host": "a.test", "cookie": "ver"}, nil, `want "key:value"`},
		{"cookie with quote", map[string]string{"host": "a.test", "cookie": `ver:"x"`}, nil, "only printable ASCII"},
		{"header key with space", map[string]string{"host": "a.test", "header": "X Canary:yes"}, nil, "invalid character"},
		{"condition on wildcard host", map[string]string{"host": "*.a.test", "cookie": "a:b"}, nil, "need an exact host"},
		{"reserved name", map[string]string{"host": "a.test", "name": "ADVANCED_MODE"}, nil, "reserved by BFE"},
		{"bad name", map[string]string{"host": "a.test", "name": "a/b"}, nil, "only letters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			lb, err := ParseLoadBalancer(tc.spec)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lb).To(Equal(*tc.want))
			// lbInfo round-trips to the same LoadBalancer.
			again, err := ParseLoadBalancer(lb.Info())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(lb))
		})
	}
}

func TestDerivedName(t *testing.T) {
	g := NewWithT(t)
	a := mustLB(t, map[string]string{"host": "a.test", "path": "/x/*"})
	b := mustLB(t, map[string]string{"host": "A.test", "path": "/x/*"})
	c := mustLB(t, map[string]string{"host": "a.test", "path": "/x/*", "cookie": "k:v"})
	w := mustLB(t, map[string]string{"host": "*.a.test"})
	g.Expect(a.Name).To(MatchRegexp(`^lb_a\.test_[0-9a-f]{10}$`))
	g.Expect(b.Name).To(Equal(a.Name), "same route, same cluster")
	g.Expect(c.Name).NotTo(Equal(a.Name))
	g.Expect(w.Name).To(HavePrefix("lb_wildcard.a.test_"))
	g.Expect(checkClusterName(w.Name)).To(Succeed())
}

func TestParseBackend(t *testing.T) {
	cases := []struct {
		name   string
		addr   string
		params map[string]string
		want   *Backend
		err    string
	}{
		{"defaults", "10.0.0.1:80", nil, &Backend{Cluster: DefaultSubCluster, Addr: netip.MustParseAddrPort("10.0.0.1:80"), Weight: DefaultWeight}, ""},
		{"all parameters", " [fd00::1]:8080 ", map[string]string{"weight": "3", "lbfed.io/cluster": "member-1", "lbfed.io/cluster-weight": "80", "other": "x"},
			&Backend{Cluster: "member-1", Addr: netip.MustParseAddrPort("[fd00::1]:8080"), Weight: 3, ClusterWeight: intp(80)}, ""},
		{"v4-mapped address is unmapped", "[::ffff:10.0.0.1]:80", nil, &Backend{Cluster: DefaultSubCluster, Addr: netip.MustParseAddrPort("10.0.0.1:80"), Weight: DefaultWeight}, ""},
		{"zero weight", "10.0.0.1:80", map[string]string{"weight": "0"}, &Backend{Cluster: DefaultSubCluster, Addr: netip.MustParseAddrPort("10.0.0.1:80")}, ""},
		{"hostname", "backend.local:80", nil, nil, "want ip:port"},
		{"no port", "10.0.0.1", nil, nil, "want ip:port"},
		{"port 0", "10.0.0.1:0", nil, nil, "want ip:port"},
		{"negative weight", "10.0.0.1:80", map[string]string{"weight": "-1"}, nil, "parameter weight"},
		{"float weight", "10.0.0.1:80", map[string]string{"weight": "1.5"}, nil, "want an integer"},
		{"weight too big", "10.0.0.1:80", map[string]string{"weight": "10001"}, nil, "want an integer 0..10000"},
		{"bad cluster weight", "10.0.0.1:80", map[string]string{"lbfed.io/cluster-weight": "x"}, nil, "parameter lbfed.io/cluster-weight"},
		{"bad cluster name", "10.0.0.1:80", map[string]string{"lbfed.io/cluster": "a b"}, nil, "parameter lbfed.io/cluster"},
		{"subset", "10.0.0.1:80", map[string]string{"lbfed.io/subset": "web-v2", "lbfed.io/subset-weight": "20"},
			&Backend{Cluster: DefaultSubCluster, Addr: netip.MustParseAddrPort("10.0.0.1:80"), Weight: DefaultWeight, Subset: "web-v2", SubsetWeight: intp(20)}, ""},
		{"bad subset weight", "10.0.0.1:80", map[string]string{"lbfed.io/subset": "a", "lbfed.io/subset-weight": "1.5"}, nil, "parameter lbfed.io/subset-weight"},
		{"bad subset name", "10.0.0.1:80", map[string]string{"lbfed.io/subset": "a/b"}, nil, "parameter lbfed.io/subset"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b, err := ParseBackend(tc.addr, tc.params)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b).To(Equal(*tc.want))
		})
	}
}

func TestModelConflicts(t *testing.T) {
	g := NewWithT(t)
	m := NewModel()
	a := mustLB(t, map[string]string{"host": "a.test", "name": "a"})
	g.Expect(m.PutLoadBalancer(a)).To(Succeed())
	g.Expect(m.PutLoadBalancer(a)).To(Succeed(), "idempotent")
	dup := mustLB(t, map[string]string{"host": "A.TEST", "path": "/*", "name": "b"})
	g.Expect(m.PutLoadBalancer(dup)).To(MatchError(ContainSubstring("route conflicts with load balancer a")))
	g.Expect(m.PutBackend(dup, backend("m", "10.0.0.1:80", 1, nil))).To(HaveOccurred())
	g.Expect(m.LoadBalancers).To(HaveLen(1))

	// Backends create their LoadBalancer from lbInfo; deleting unknown things is a no-op.
	c := mustLB(t, map[string]string{"host": "c.test", "name": "c"})
	g.Expect(m.PutBackend(c, backend("m", "10.0.0.1:80", 1, nil))).To(Succeed())
	m.DeleteBackend("nope", "m/10.0.0.1:80")
	m.DeleteBackend("c", "m/10.0.0.9:80")
	lbs, backends := m.Size()
	g.Expect([]int{lbs, backends}).To(Equal([]int{2, 1}))
	clone := m.Clone()
	m.DeleteBackend("c", "m/10.0.0.1:80")
	g.Expect(clone.LoadBalancers["c"].Backends).To(HaveLen(1), "clone is deep")
}
