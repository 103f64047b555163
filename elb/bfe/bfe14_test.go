package bfe_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/elb/bfe"
	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
	"github.com/lbfed/lbfed/elb/bfe/fakebfe"
)

// bfeTarget is a BFE that configurations are reloaded into and requests sent to: the fake, or a
// real BFE process (BFE_BIN).
type bfeTarget interface {
	// reload loads group g from dir (?path=) and returns BFE's answer body.
	reload(g bfeconf.Group, dir string) string
	// get sends a request and returns the status and, on 200, the cluster that answered.
	get(host, path, cookie string) (int, string)
	// gslbTs is the active GSLB data's Ts.
	gslbTs() string
}

type fakeTarget struct {
	t *testing.T
	f *fakebfe.BFE
}

func (ft fakeTarget) reload(g bfeconf.Group, dir string) string {
	return httpBody(ft.t, ft.f.URL+"/reload/"+string(g)+"?path="+url.QueryEscape(dir))
}

func (ft fakeTarget) get(host, path, cookie string) (int, string) {
	r := httptest.NewRequest(http.MethodGet, "http://"+host+path, nil)
	if cookie != "" {
		r.Header.Set("Cookie", cookie)
	}
	a, err := ft.f.Route(r)
	if err != nil {
		ft.t.Fatalf("fake cannot route %s%s: %v", host, path, err)
	}
	if a.Status != http.StatusOK {
		return a.Status, ""
	}
	return a.Status, a.Cluster
}

func (ft fakeTarget) gslbTs() string {
	_, g := ft.f.Active()
	if g == nil {
		return ""
	}
	return g.Gslb.Ts
}

type realTarget struct {
	t *testing.T
	b *realBFE
	c *http.Client
}

func (rt realTarget) reload(g bfeconf.Group, dir string) string {
	return httpBody(rt.t, rt.b.monitorURL+"/reload/"+string(g)+"?path="+url.QueryEscape(dir))
}

func (rt realTarget) get(host, path, cookie string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, rt.b.httpURL+path, nil)
	if err != nil {
		rt.t.Fatal(err)
	}
	req.Host = host
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := rt.c.Do(req)
	if err != nil {
		rt.t.Fatalf("request %s%s: %v", host, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, ""
	}
	return resp.StatusCode, string(b)
}

func (rt realTarget) gslbTs() string {
	v, err := (&bfe.Monitor{BaseURL: rt.b.monitorURL}).Versions(rt.t.Context())
	if err != nil {
		rt.t.Fatal(err)
	}
	return v.GslbTs
}

func httpBody(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d (BFE always answers 200)", u, resp.StatusCode)
	}
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}

// clusters14 are the clusters of the §14 configurations; each backend answers its cluster's name.
var clusters14 = []string{"c_main", "c_beta", "c_any", "c_wild", "c_v6"}

// base14 is a valid configuration: shop.example.test /* → c_main, every cluster balanced.
// addrs gives each cluster's instance (IPv6 in brackets, as BFE needs them).
func base14(addrs map[string][2]string) *bfeconf.Set {
	p := "p"
	s := &bfeconf.Set{
		HostRule: bfeconf.HostRuleConf{Version: "base", DefaultProduct: &p,
			Hosts: map[string][]string{"p": {"shop.example.test"}}, HostTags: map[string][]string{"p": {"p"}}},
		VipRule: bfeconf.VipRuleConf{Version: "base", Vips: map[string][]string{}},
		RouteRule: bfeconf.RouteRuleConf{Version: "base",
			BasicRule:   map[string][]bfeconf.BasicRule{p: {{Hostname: []string{"shop.example.test"}, Path: []string{"/*"}, ClusterName: "c_main"}}},
			ProductRule: map[string][]bfeconf.ProductRule{p: {}}},
		ClusterConf:  bfeconf.ClusterConf{Version: "base", Config: map[string]bfeconf.Cluster{}},
		NameConf:     bfeconf.NameConf{Version: "1", Config: map[string]string{}},
		ClusterTable: bfeconf.ClusterTableConf{Version: "base", Config: map[string]map[string][]bfeconf.Instance{}},
		Gslb:         bfeconf.GslbConf{Clusters: map[string]map[string]int{}, Hostname: "test", Ts: "base"},
	}
	for _, c := range clusters14 {
		s.ClusterConf.Config[c] = bfe.DefaultClusterSettings()
		var port int
		fmt.Sscan(addrs[c][1], &port)
		s.ClusterTable.Config[c] = map[string][]bfeconf.Instance{c + ".s": {{Name: c, Addr: addrs[c][0], Port: port, Weight: 1}}}
		s.Gslb.Clusters[c] = map[string]int{bfeconf.Blackhole: 0, c + ".s": 1}
	}
	return s
}

type probe14 struct {
	host, path, cookie string
	want               string // cluster that answers, or "500"
}

type case14 struct {
	name   string
	mutate func(s *bfeconf.Set)
	raw    func(files bfeconf.Files) // edits of the rendered files
	// refused is a substring of BFE's answer when BFE refuses the configuration ("" = accepted).
	refused string
	// policy is a substring of the fake's Policy() entry for a configuration BFE accepts but the
	// driver's validator refuses ("" = the driver accepts it too).
	policy string
	probes []probe14
	// gslbTs is the GSLB Ts active afterwards, when the case checks it.
	gslbTs string
}

func basic(host, path, cluster string) bfeconf.BasicRule {
	r := bfeconf.BasicRule{Path: []string{path}, ClusterName: cluster}
	if host != "" {
		r.Hostname = []string{host}
	}
	return r
}

func editCluster(s *bfeconf.Set, name string, edit func(c *bfeconf.Cluster)) {
	c := s.ClusterConf.Config[name]
	edit(&c)
	s.ClusterConf.Config[name] = c
}

// cases14 are the behaviours of BFE 1.8.5 measured against lbfed's configuration (bfe.md §14), plus
// the load-time checks the fake must share with BFE.
func cases14() []case14 {
	addRules := func(rules ...bfeconf.BasicRule) func(s *bfeconf.Set) {
		return func(s *bfeconf.Set) { s.RouteRule.BasicRule["p"] = append(s.RouteRule.BasicRule["p"], rules...) }
	}
	product := func(cond, cluster string) func(s *bfeconf.Set) {
		return func(s *bfeconf.Set) {
			s.RouteRule.ProductRule["p"] = append(s.RouteRule.ProductRule["p"], bfeconf.ProductRule{Cond: cond, ClusterName: cluster})
		}
	}
	replaceIn := func(path, old, new string) func(bfeconf.Files) {
		return func(f bfeconf.Files) { f[path] = bytes.Replace(f[path], []byte(old), []byte(new), 1) }
	}
	main := probe14{"shop.example.test", "/", "", "c_main"}
	return []case14{
		{name: "a good reload answers exactly {\"error\":null}", probes: []probe14{main,
			{"SHOP.Example.test:8080", "/x", "", "c_main"}}},
		{name: "a refused reload keeps the last good configuration",
			mutate: func(s *bfeconf.Set) {
				editCluster(s, "c_main", func(c *bfeconf.Cluster) { c.BackendConf.Protocol = "grpc" })
			},
			refused: "protocol only support http/tcp/ws/fcgi/h2c/https, but is:grpc", probes: []probe14{main}},
		{name: "missing Version is refused", raw: replaceIn(bfeconf.RouteRulePath, `"Version": "case",`, ""), refused: "no Version"},
		// Duplicates BFE refuses at load.
		{name: "the same path twice once * hosts are expanded",
			mutate: addRules(basic("", "/dup", "c_any"), basic("*", "/dup", "c_any")), refused: "path[/dup] is duplicated in same host"},
		{name: "/p/* beside /p*",
			mutate: addRules(basic("shop.example.test", "/p/*", "c_main"), basic("shop.example.test", "/p*", "c_beta")), refused: "is duplicated in same host"},
		{name: "invalid regexp in req_host_regmatch", mutate: product(`req_host_regmatch("(")`, "c_any"), refused: "compile regexp err"},
		{name: "invalid regexp in req_header_value_regmatch", mutate: product(`req_header_value_regmatch("X-A", "a[")`, "c_any"), refused: "compile regexp err"},
		{name: "condition strings keep backslashes as they are",
			mutate: func(s *bfeconf.Set) {
				s.RouteRule.BasicRule["p"] = nil
				product(`req_host_regmatch("^shop\\.example\\.test$")`, "c_any")(s) // a literal backslash, then any character
				product(`req_host_regmatch("^shop\.example\.test$")`, "c_main")(s)  // "\." is not unescaped: the regexp gets \.
			},
			probes: []probe14{main}},
		{name: "a port inside req_host_in", mutate: product(`req_host_in("shop.example.test:80")`, "c_any"), refused: "port should not be included in host"},
		// Accepted by BFE, refused by the driver's stricter validator.
		{name: "a defaulted cluster_conf entry", raw: func(f bfeconf.Files) {
			s, err := bfeconf.Parse(f)
			if err != nil {
				panic(err)
			}
			cc := fmt.Sprintf(`{"Version": %q, "Config": {"c_main": {}`, s.ClusterConf.Version)
			for _, c := range clusters14[1:] {
				b, _ := jsonMarshal(s.ClusterConf.Config[c])
				cc += fmt.Sprintf(", %q: %s", c, b)
			}
			f[bfeconf.ClusterConfPath] = []byte(cc + "}}")
		}, policy: "cluster[c_main]: BackendConf is absent", probes: []probe14{main}},
		{name: "Protocol in upper case", mutate: func(s *bfeconf.Set) {
			editCluster(s, "c_main", func(c *bfeconf.Cluster) { c.BackendConf.Protocol = "HTTP" })
		}, policy: "Protocol HTTP must be lower case", probes: []probe14{main}},
		{name: "BalanceMode wrr", mutate: func(s *bfeconf.Set) {
			editCluster(s, "c_main", func(c *bfeconf.Cluster) { c.GslbBasic.BalanceMode = "wrr" })
		}, policy: "BalanceMode wrr must be upper case", probes: []probe14{main}},
		{name: "FailNum 0", mutate: func(s *bfeconf.Set) {
			editCluster(s, "c_main", func(c *bfeconf.Cluster) { c.CheckConf.FailNum = 0 })
		}, policy: "FailNum and CheckInterval must be > 0", probes: []probe14{main}},
		{name: "empty Version", mutate: func(s *bfeconf.Set) { s.RouteRule.Version = "" }, policy: "empty Version", probes: []probe14{main}},
		{name: "empty Ts", mutate: func(s *bfeconf.Set) { s.Gslb.Ts = "" }, policy: "empty Ts", probes: []probe14{main}, gslbTs: ""},
		{name: "a negative gslb weight", mutate: func(s *bfeconf.Set) {
			s.ClusterTable.Config["c_main"]["c_main.neg"] = s.ClusterTable.Config["c_main"]["c_main.s"]
			s.Gslb.Clusters["c_main"]["c_main.neg"] = -5
		}, policy: "negative weight -5", probes: []probe14{main}},
		{name: "a gslb sub-cluster without instances", mutate: func(s *bfeconf.Set) { s.Gslb.Clusters["c_main"]["c_main.ghost"] = 0 },
			policy: "sub-cluster[c_main.ghost] has no instance list", probes: []probe14{main}},
		{name: "localhost as an instance address", mutate: func(s *bfeconf.Set) {
			s.ClusterTable.Config["c_beta"]["c_beta.s"][0].Addr = "localhost"
			addRules(basic("shop.example.test", "/beta/*", "c_beta"))(s)
		}, policy: "invalid Addr localhost", probes: []probe14{main, {"shop.example.test", "/beta/x", "", "c_beta"}}},
		{name: "trailing bytes after the JSON", raw: func(f bfeconf.Files) { f[bfeconf.RouteRulePath] = append(f[bfeconf.RouteRulePath], "}garbage"...) },
			policy: "trailing bytes after the JSON value", probes: []probe14{main}},
		{name: "hash, tag, context, body, session and response primitives",
			mutate: func(s *bfeconf.Set) {
				for _, c := range []string{`req_cookie_value_hash_in("uid", "0-9", false)`, `req_tag_match("k", "v")`,
					`req_context_value_in("k", "v", false)`, `req_body_json_in("a.b", "v", false)`, `ses_tls_sni_in("shop.example.test")`,
					`res_code_in("200")`} {
					product(c, "c_any")(s)
				}
			}, policy: "primitive req_cookie_value_hash_in is not allowed in route rules", probes: []probe14{main}},
		// IPv6 instances: BFE dials Addr:Port.
		{name: "an IPv6 instance in brackets serves", mutate: addRules(basic("shop.example.test", "/v6/*", "c_v6")),
			probes: []probe14{{"shop.example.test", "/v6/x", "", "c_v6"}}},
		{name: "an IPv6 instance without brackets loads and fails every request", mutate: func(s *bfeconf.Set) {
			in := &s.ClusterTable.Config["c_v6"]["c_v6.s"][0]
			in.Addr = strings.Trim(in.Addr, "[]")
			addRules(basic("shop.example.test", "/v6/*", "c_v6"))(s)
		}, policy: "an IPv6 address must be written [::1]", probes: []probe14{{"shop.example.test", "/v6/x", "", "500"}, main}},
		// Routing.
		{name: "ADVANCED_MODE never falls through to another basic rule",
			mutate: func(s *bfeconf.Set) {
				addRules(basic("shop.example.test", "/checkout/*", bfeconf.AdvancedMode))(s)
				product(`req_host_in("shop.example.test") && req_path_element_prefix_in("/checkout", false) && req_cookie_value_in("beta", "1", false)`, "c_beta")(s)
			},
			probes: []probe14{{"shop.example.test", "/checkout/pay", "", "500"}, {"shop.example.test", "/checkout/pay", "beta=1", "c_beta"},
				{"shop.example.test", "/other", "", "c_main"}}},
		{name: "an exact host never falls back to * on a path miss",
			mutate: func(s *bfeconf.Set) {
				s.RouteRule.BasicRule["p"] = []bfeconf.BasicRule{basic("shop.example.test", "/api/*", "c_main"), basic("*", "/static/*", "c_any")}
			},
			probes: []probe14{{"shop.example.test", "/api/x", "", "c_main"}, {"shop.example.test", "/static/x", "", "500"},
				{"other.example.test", "/static/x", "", "c_any"}}},
		{name: "an exact host never falls back to *.suffix on a path miss",
			mutate: func(s *bfeconf.Set) {
				s.RouteRule.BasicRule["p"] = []bfeconf.BasicRule{basic("shop.example.test", "/api/*", "c_main"), basic("*.example.test", "/*", "c_wild")}
			},
			probes: []probe14{{"shop.example.test", "/x", "", "500"}, {"a.example.test", "/x", "", "c_wild"}}},
		{name: "*.suffix matches exactly one label",
			mutate: addRules(basic("*.example.test", "/*", "c_wild")),
			probes: []probe14{{"a.example.test", "/", "", "c_wild"}, {"a.b.example.test", "/", "", "500"}, {"example.test", "/", "", "500"}}},
		{name: "*.suffix matches exactly one label, deeper hosts go to *",
			mutate: addRules(basic("*.example.test", "/*", "c_wild"), basic("*", "/*", "c_any")),
			probes: []probe14{{"a.example.test", "/", "", "c_wild"}, {"a.b.example.test", "/", "", "c_any"}, {"example.test", "/", "", "c_any"}}},
		{name: "an unknown host without a default product answers 500",
			mutate: func(s *bfeconf.Set) { s.HostRule.DefaultProduct = nil },
			probes: []probe14{main, {"nope.test", "/", "", "500"}}},
		{name: "gslb naming a cluster missing from cluster_table is reported and applied anyway",
			mutate: func(s *bfeconf.Set) {
				s.Gslb.Clusters["c_ghost"] = map[string]int{"c_ghost.s": 1}
				s.Gslb.Ts = "ghost"
			},
			refused: "error in BalTableReload() for [c_ghost]", gslbTs: "ghost", probes: []probe14{main}},
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func writeFiles(t *testing.T, dir string, files bfeconf.Files) {
	t.Helper()
	for rel, b := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// run14 runs every §14 case against target. policyOf returns the policy findings so far (the
// fake's; nil for the real BFE, whose acceptance is what is checked).
func run14(t *testing.T, target bfeTarget, addrs map[string][2]string, policyOf func() []string) {
	load := func(t *testing.T, s *bfeconf.Set, raw func(bfeconf.Files)) (bfeconf.Files, []string) {
		files, err := s.Render()
		if err != nil {
			t.Fatal(err)
		}
		if raw != nil {
			raw(files)
		}
		dir := t.TempDir()
		writeFiles(t, dir, files)
		var bodies []string
		for _, g := range []bfeconf.Group{bfeconf.GslbData, bfeconf.ServerData} {
			if b := target.reload(g, filepath.Join(dir, g.Dir())); b != `{"error":null}` {
				bodies = append(bodies, b)
			}
		}
		return files, bodies
	}
	for _, tc := range cases14() {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, bodies := load(t, base14(addrs), nil)
			g.Expect(bodies).To(BeEmpty(), "base configuration")
			var before int
			if policyOf != nil {
				before = len(policyOf())
			}
			s := base14(addrs)
			s.RouteRule.Version, s.Gslb.Ts = "case", "case"
			if tc.mutate != nil {
				tc.mutate(s)
			}
			files, bodies := load(t, s, tc.raw)
			if tc.refused == "" {
				g.Expect(bodies).To(BeEmpty())
			} else {
				g.Expect(bodies).To(ContainElement(ContainSubstring(tc.refused)))
			}
			if policyOf != nil {
				found := policyOf()[before:]
				if tc.policy == "" {
					g.Expect(found).To(BeEmpty())
				} else {
					g.Expect(found).To(ContainElement(ContainSubstring(tc.policy)))
				}
			}
			// The driver's own validator refuses everything BFE refuses and everything marked policy.
			parsed, err := bfeconf.Parse(files)
			if err == nil {
				err = parsed.Validate()
			}
			if tc.refused == "" && tc.policy == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(HaveOccurred())
			}
			for _, p := range tc.probes {
				status, who := target.get(p.host, p.path, p.cookie)
				if p.want == "500" {
					g.Expect(status).To(Equal(http.StatusInternalServerError), "%+v answered by %s", p, who)
				} else {
					g.Expect([]any{status, who}).To(Equal([]any{http.StatusOK, p.want}), "%+v", p)
				}
			}
			if tc.gslbTs != "" || tc.name == "empty Ts" {
				g.Expect(target.gslbTs()).To(Equal(tc.gslbTs))
			}
		})
	}
}

// TestBFE14Fake checks that the fake BFE behaves like BFE 1.8.5 in every measured case.
func TestBFE14Fake(t *testing.T) {
	f := fakebfe.New()
	defer f.Close()
	addrs := map[string][2]string{}
	for _, c := range clusters14 {
		addrs[c] = [2]string{"127.0.0.1", "1"}
	}
	addrs["c_v6"] = [2]string{"[::1]", "1"}
	run14(t, fakeTarget{t, f}, addrs, f.Policy)
}

// TestBFE14Real runs the same cases against a real BFE (BFE_BIN, v1.8.4+) with one loopback backend
// per cluster, the IPv6 one on [::1].
func TestBFE14Real(t *testing.T) {
	bin := os.Getenv("BFE_BIN")
	if bin == "" {
		t.Skip("BFE_BIN is not set: the real-BFE test needs a BFE binary")
	}
	b := startBFE(t, bin)
	addrs := map[string][2]string{}
	for _, c := range clusters14 {
		host, port, _ := net.SplitHostPort(backendServer(t, c))
		addrs[c] = [2]string{host, port}
	}
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	v6 := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "c_v6")
	})}}
	v6.Start()
	t.Cleanup(v6.Close)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	addrs["c_v6"] = [2]string{"[::1]", port}
	run14(t, realTarget{t, b, &http.Client{Timeout: 10 * time.Second}}, addrs, nil)
}
