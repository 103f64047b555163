package bfe

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
)

var update = flag.Bool("update", false, "rewrite golden files")

func intp(i int) *int { return &i }

func backend(member, addr string, weight int, clusterWeight *int) Backend {
	return Backend{Cluster: member, Addr: netip.MustParseAddrPort(addr), Weight: weight, ClusterWeight: clusterWeight}
}

func mustLB(t testing.TB, spec map[string]string) LoadBalancer {
	t.Helper()
	lb, err := ParseLoadBalancer(spec)
	if err != nil {
		t.Fatalf("parse lbSpec %v: %v", spec, err)
	}
	return lb
}

func buildModel(t testing.TB, lbs map[string][]Backend, specs map[string]map[string]string) *Model {
	t.Helper()
	m := NewModel()
	for name, spec := range specs {
		lb := mustLB(t, spec)
		if err := m.PutLoadBalancer(lb); err != nil {
			t.Fatal(err)
		}
		for _, b := range lbs[name] {
			if err := m.PutBackend(lb, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	return m
}

func TestGenerateGolden(t *testing.T) {
	scenarios := []struct {
		name     string
		specs    map[string]map[string]string
		backends map[string][]Backend
		reports  map[string]LBReport
	}{
		{
			name:    "empty",
			reports: map[string]LBReport{},
		},
		{
			name: "federated",
			specs: map[string]map[string]string{
				// Default sub-cluster weights: the members' instance weight sums (20:20 → 1:1).
				"web": {"name": "web", "host": "app.example.test"},
				// Explicit sub-cluster weights from parameters; member2's backends disagree → smallest.
				"api": {"name": "api", "host": "App.Example.Test", "path": "/api/*"},
				// Conditional routes on the same host+path turn it into ADVANCED_MODE.
				"api-canary": {"name": "api-canary", "host": "app.example.test", "path": "/api/*", "cookie": "version:v2|v3"},
				"api-both":   {"name": "api-both", "host": "app.example.test", "path": "/api/*", "cookie": "version:v2", "header": "X-Canary:yes"},
				"api-hdr":    {"name": "api-hdr", "host": "app.example.test", "path": "/api/*", "header": "X-Canary:yes"},
				"exact":      {"name": "exact", "host": "app.example.test", "path": "/login", "header": "X-Beta:1"},
				"wild":       {"name": "wild", "host": "*.example.org"},
				"any":        {"name": "any", "host": "*", "path": "/healthz"},
				// Not installed: no backends; every backend drained; weights sum to 0.
				"empty":   {"name": "empty", "host": "empty.example.test"},
				"drained": {"name": "drained", "host": "drained.example.test"},
				"zero":    {"name": "zero", "host": "zero.example.test"},
			},
			backends: map[string][]Backend{
				"web": {backend("member1", "10.0.1.1:8080", 10, nil), backend("member1", "10.0.1.2:8080", 10, nil), backend("member2", "10.0.2.1:8080", 20, nil)},
				"api": {backend("member1", "10.0.1.1:9090", 10, intp(80)), backend("member2", "10.0.2.1:9090", 10, intp(30)),
					backend("member2", "10.0.2.2:9090", 5, intp(20)), backend("member3", "10.0.3.1:9090", 0, intp(50))},
				"api-canary": {backend(DefaultSubCluster, "10.0.9.1:80", 1, nil)},
				"api-both":   {backend(DefaultSubCluster, "10.0.9.2:80", 1, nil)},
				"api-hdr":    {backend(DefaultSubCluster, "10.0.9.3:80", 1, nil)},
				"exact":      {backend(DefaultSubCluster, "10.0.9.4:80", 1, nil)},
				"wild":       {backend("member1", "[fd00::1]:80", 3, nil), backend("member2", "10.0.2.9:80", 6, intp(0))},
				"any":        {backend(DefaultSubCluster, "10.0.9.5:80", 1, nil)},
				"drained":    {backend("member1", "10.0.8.1:80", 0, nil)},
				"zero":       {backend("member1", "10.0.8.2:80", 10, intp(0)), backend("member2", "10.0.8.3:80", 10, intp(0))},
			},
			reports: map[string]LBReport{
				"web":        {Installed: true, SubClusters: map[string]int{"member1": 1, "member2": 1}},
				"api":        {Installed: true, SubClusters: map[string]int{"member1": 4, "member2": 1}, Reason: "member member3: every backend has weight 0"},
				"api-canary": {Installed: true, SubClusters: map[string]int{DefaultSubCluster: 1}},
				"api-both":   {Installed: true, SubClusters: map[string]int{DefaultSubCluster: 1}},
				"api-hdr":    {Installed: true, SubClusters: map[string]int{DefaultSubCluster: 1}},
				"exact":      {Installed: true, SubClusters: map[string]int{DefaultSubCluster: 1}},
				"wild":       {Installed: true, SubClusters: map[string]int{"member1": 1, "member2": 0}},
				"any":        {Installed: true, SubClusters: map[string]int{DefaultSubCluster: 1}},
				"empty":      {SubClusters: map[string]int{}, Reason: "no backends"},
				"drained":    {SubClusters: map[string]int{}, Reason: "no traffic: member member1: every backend has weight 0; sub-cluster weights sum to 0"},
				"zero":       {SubClusters: map[string]int{}, Reason: "no traffic: sub-cluster weights sum to 0"},
			},
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			g := NewWithT(t)
			m := buildModel(t, sc.backends, sc.specs)
			gen := Generate(m, Versions{ServerData: "7", GslbData: "9"}, GenerateOptions{})
			g.Expect(gen.Set.Validate()).To(Succeed())
			g.Expect(gen.Reports).To(Equal(sc.reports))
			files, err := gen.Set.Render()
			g.Expect(err).NotTo(HaveOccurred())
			dir := filepath.Join("testdata", "golden", sc.name)
			for _, rel := range files.Paths() {
				p := filepath.Join(dir, rel)
				if *update {
					g.Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
					g.Expect(os.WriteFile(p, files[rel], 0o644)).To(Succeed())
					continue
				}
				want, err := os.ReadFile(p)
				g.Expect(err).NotTo(HaveOccurred(), "golden file missing; run go test -run TestGenerateGolden -update")
				g.Expect(string(files[rel])).To(Equal(string(want)), "%s differs from golden file", rel)
			}
			// Same input, same bytes — regardless of map iteration order or insertion order.
			again, err := Generate(m.Clone(), Versions{ServerData: "7", GslbData: "9"}, GenerateOptions{}).Set.Render()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(files))
		})
	}
}

func TestRouteOrder(t *testing.T) {
	g := NewWithT(t)
	specs := map[string]map[string]string{
		"plain":     {"name": "plain", "host": "a.test", "path": "/p/*"},
		"cookie":    {"name": "cookie", "host": "a.test", "path": "/p/*", "cookie": "c:1"},
		"header":    {"name": "header", "host": "a.test", "path": "/p/*", "header": "h:1"},
		"both":      {"name": "both", "host": "a.test", "path": "/p/*", "cookie": "c:1", "header": "h:1"},
		"deeper":    {"name": "deeper", "host": "a.test", "path": "/p/q/*", "cookie": "c:1"},
		"exactpath": {"name": "exactpath", "host": "a.test", "path": "/p", "cookie": "c:1"},
		"longhost":  {"name": "longhost", "host": "long.a.test", "path": "/*", "cookie": "c:1"},
		"anyhost":   {"name": "anyhost", "host": "*", "path": "/*", "cookie": "c:1"},
	}
	backends := map[string][]Backend{}
	for name := range specs {
		backends[name] = []Backend{backend(DefaultSubCluster, "10.0.0.1:80", 1, nil)}
	}
	gen := Generate(buildModel(t, backends, specs), Versions{ServerData: "1", GslbData: "1"}, GenerateOptions{Product: "p"})
	g.Expect(gen.Set.Validate()).To(Succeed())
	var order []string
	for _, r := range gen.Set.RouteRule.ProductRule["p"] {
		order = append(order, r.ClusterName)
	}
	// Exact host before "*", longer host first; exact path before prefix; longer path first;
	// cookie+header > cookie > header > none.
	g.Expect(order).To(Equal([]string{"longhost", "exactpath", "deeper", "both", "cookie", "header", "plain", "anyhost"}))
	g.Expect(gen.Set.RouteRule.ProductRule["p"][len(order)-1].Cond).To(Equal(`req_cookie_value_in("c", "1", false)`))
}

func TestGenerateSingleBackendBasicRule(t *testing.T) {
	g := NewWithT(t)
	specs := map[string]map[string]string{"x": {"host": "x.test", "path": "/x/*"}}
	lb := mustLB(t, specs["x"])
	gen := Generate(buildModel(t, map[string][]Backend{lb.Name: {backend(DefaultSubCluster, "127.0.0.1:1", 10, nil)}},
		map[string]map[string]string{lb.Name: specs["x"]}), Versions{ServerData: "1", GslbData: "1"}, GenerateOptions{})
	g.Expect(gen.Set.RouteRule.BasicRule["lbfed"]).To(Equal([]bfeconf.BasicRule{{Hostname: []string{"x.test"}, Path: []string{"/x/*"}, ClusterName: lb.Name}}))
	g.Expect(gen.Set.Gslb.Clusters[lb.Name]).To(Equal(map[string]int{bfeconf.Blackhole: 0, lb.Name + ".default": 1}))
	g.Expect(gen.Set.ClusterConf.Config[lb.Name].GslbBasic.HashConf).To(Equal(bfeconf.HashConf{HashStrategy: 0, HashHeader: "bfe-non-existence"}))
}

// TestGenerateSubsetWeights: backends of subsets (the Services of an ingress-bfe balance.weight
// split) get one sub-cluster per subset and member; each subset's traffic share is its weight,
// whatever its number of members and backends, and inside a subset members split as without
// subsets (instance weight sums, or lbfed.io/cluster-weight).
func TestGenerateSubsetWeights(t *testing.T) {
	sub := func(b Backend, subset string, w *int) Backend { b.Subset, b.SubsetWeight = subset, w; return b }
	cases := []struct {
		name     string
		backends []Backend
		want     map[string]int // sub-cluster → GSLB weight
	}{
		{"80:20 across services, 1:3 members inside web", []Backend{
			sub(backend("m1", "10.0.0.1:80", 10, nil), "web", intp(80)),
			sub(backend("m2", "10.0.0.2:80", 10, nil), "web", intp(80)),
			sub(backend("m2", "10.0.0.3:80", 10, nil), "web", intp(80)),
			sub(backend("m2", "10.0.0.4:80", 10, nil), "web", intp(80)),
			sub(backend("m1", "10.0.1.1:80", 10, nil), "canary", intp(20)),
			sub(backend("m1", "10.0.1.2:80", 10, nil), "canary", intp(20)),
		}, map[string]int{"c.web.m1": 1, "c.web.m2": 3, "c.canary.m1": 1}},
		{"member weights inside a subset", []Backend{
			sub(backend("m1", "10.0.0.1:80", 10, intp(1)), "web", intp(1)),
			sub(backend("m2", "10.0.0.2:80", 10, intp(3)), "web", intp(1)),
			sub(backend("m1", "10.0.1.1:80", 10, nil), "api", intp(1)),
		}, map[string]int{"c.web.m1": 1, "c.web.m2": 3, "c.api.m1": 4}},
		{"a subset of weight 0 gets no traffic", []Backend{
			sub(backend("m1", "10.0.0.1:80", 10, nil), "web", intp(1)),
			sub(backend("m1", "10.0.1.1:80", 10, nil), "old", intp(0)),
		}, map[string]int{"c.web.m1": 1, "c.old.m1": 0}},
		{"without subsets, as before", []Backend{
			backend("m1", "10.0.0.1:80", 10, nil),
			backend("m2", "10.0.0.2:80", 10, nil),
			backend("m2", "10.0.0.3:80", 10, nil),
		}, map[string]int{"c.m1": 1, "c.m2": 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			m := buildModel(t, map[string][]Backend{"c": tc.backends}, map[string]map[string]string{"c": {"name": "c", "host": "a.test"}})
			gen := Generate(m, Versions{ServerData: "1", GslbData: "1"}, GenerateOptions{})
			g.Expect(gen.Set.Validate()).To(Succeed())
			want := map[string]int{bfeconf.Blackhole: 0}
			for k, v := range tc.want {
				want[k] = v
			}
			g.Expect(gen.Set.Gslb.Clusters["c"]).To(Equal(want))
			for name := range tc.want {
				g.Expect(gen.Set.ClusterTable.Config["c"]).To(HaveKey(name))
			}
		})
	}
}
