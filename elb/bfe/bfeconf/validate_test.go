package bfeconf

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// minimal is the verified minimal configuration of the BFE reference: app.example.test /api/* →
// c_api (two backends), everything else → c_default.
func minimal() *Set {
	product := "app_product"
	return &Set{
		HostRule: HostRuleConf{Version: "v1", DefaultProduct: nil,
			Hosts: map[string][]string{"app_tag": {"app.example.test"}}, HostTags: map[string][]string{product: {"app_tag"}}},
		VipRule: VipRuleConf{Version: "1", Vips: map[string][]string{}},
		RouteRule: RouteRuleConf{Version: "v1",
			BasicRule:   map[string][]BasicRule{product: {{Hostname: []string{"app.example.test"}, Path: []string{"/api/*"}, ClusterName: "c_api"}}},
			ProductRule: map[string][]ProductRule{product: {{Cond: "default_t()", ClusterName: "c_default"}}}},
		ClusterConf: ClusterConf{Version: "v1", Config: map[string]Cluster{"c_api": validCluster(), "c_default": validCluster()}},
		NameConf:    NameConf{Version: "1", Config: map[string]string{}},
		ClusterTable: ClusterTableConf{Version: "v1", Config: map[string]map[string][]Instance{
			"c_api":     {"c_api.sub1": {{Name: "a", Addr: "127.0.0.1", Port: 19001, Weight: 1}, {Name: "b", Addr: "127.0.0.1", Port: 19002, Weight: 1}}},
			"c_default": {"c_default.sub1": {{Name: "c", Addr: "127.0.0.1", Port: 19003, Weight: 1}}},
		}},
		Gslb: GslbConf{Clusters: map[string]map[string]int{
			"c_api":     {Blackhole: 0, "c_api.sub1": 100},
			"c_default": {Blackhole: 0, "c_default.sub1": 100},
		}, Hostname: "driver", Ts: "v1"},
	}
}

func validCluster() Cluster {
	return Cluster{
		BackendConf: BackendConf{Protocol: "http", TimeoutConnSrv: 2000, TimeoutResponseHeader: 50000},
		CheckConf:   CheckConf{Schem: "http", Uri: "/healthcheck", Host: "app.example.test", StatusCode: 200, FailNum: 10, CheckInterval: 1000},
		GslbBasic:   GslbBasic{RetryMax: 2, BalanceMode: "WRR", HashConf: HashConf{HashStrategy: 0, HashHeader: NonExistentHashHeader}},
		ClusterBasic: ClusterBasic{TimeoutReadClient: 30000, TimeoutWriteClient: 60000, TimeoutReadClientAgain: 30000,
			ReqWriteBufferSize: 512, ResFlushInterval: -1},
	}
}

func TestValidate(t *testing.T) {
	product := "app_product"
	cases := []struct {
		name   string
		mutate func(s *Set)
		want   string // substring of the error; "" = valid
	}{
		{"minimal config is valid", func(*Set) {}, ""},
		// BFE's own checks.
		{"host_rule without Version", func(s *Set) { s.HostRule.Version = "" }, "host_rule.data: empty Version"},
		{"host_rule without Hosts", func(s *Set) { s.HostRule.Hosts = nil }, "no Hosts"},
		{"host_rule without HostTags", func(s *Set) { s.HostRule.HostTags = nil }, "no HostTags"},
		{"host tag not in HostTags", func(s *Set) { s.HostRule.Hosts["t3"] = []string{"x.test"} }, "hostTag[t3] in Hosts should also exist in HostTags"},
		{"duplicate host", func(s *Set) {
			s.HostRule.Hosts["t2"] = []string{"APP.example.test"}
			s.HostRule.HostTags[product] = append(s.HostRule.HostTags[product], "t2")
		}, "host duplicate for APP.example.test"},
		{"unknown default product", func(s *Set) { p := "nope"; s.HostRule.DefaultProduct = &p }, "defaultProduct[nope] must exist in HostTags"},
		{"invalid vip", func(s *Set) { s.VipRule.Vips[product] = []string{"1.2.3"} }, "invalid vip 1.2.3 for app_product"},
		{"route_rule without Version", func(s *Set) { s.RouteRule.Version = "" }, "route_rule.data: empty Version"},
		{"no product rule", func(s *Set) { s.RouteRule.BasicRule, s.RouteRule.ProductRule = nil, nil }, "no product rule"},
		{"condition syntax error", func(s *Set) { s.RouteRule.ProductRule[product][0].Cond = `req_host_in("x"` }, `error build [req_host_in("x"]`},
		{"unknown primitive", func(s *Set) { s.RouteRule.ProductRule[product][0].Cond = `req_foo_in("x")` }, "[1:1 primitive req_foo_in not found]"},
		{"empty cond", func(s *Set) { s.RouteRule.ProductRule[product][0].Cond = "" }, "no cond"},
		{"basic rule without host and path", func(s *Set) {
			s.RouteRule.BasicRule[product][0].Hostname, s.RouteRule.BasicRule[product][0].Path = nil, nil
		}, "no hostname or path in basic route rule"},
		{"star not last", func(s *Set) { s.RouteRule.BasicRule[product][0].Path = []string{"/a*/b"} }, "* must appear as last character of path"},
		{"two stars", func(s *Set) { s.RouteRule.BasicRule[product][0].Path = []string{"/a/**"} }, "only one * is allowed"},
		{"bad wildcard host", func(s *Set) { s.RouteRule.BasicRule[product][0].Hostname = []string{"a*.example.test"} }, `wildcard must be "*" or start with "*."`},
		{"duplicate host+path", func(s *Set) {
			s.RouteRule.BasicRule[product] = append(s.RouteRule.BasicRule[product],
				BasicRule{Hostname: []string{"app.example.test"}, Path: []string{"/api/*"}, ClusterName: "c_default"})
		}, "path[/api/*] is duplicated in same host, existing cluster: c_api"},
		{"route product unknown to host rule", func(s *Set) {
			s.RouteRule.ProductRule["other_product"] = []ProductRule{{Cond: "default_t()", ClusterName: "c_default"}}
		}, "product[other_product] in route should exist in host"},
		{"basic route to cluster missing in cluster_conf", func(s *Set) { s.RouteRule.BasicRule[product][0].ClusterName = "nope" }, "cluster[nope] in basic route should exist in cluster_conf"},
		{"advanced route to cluster missing in cluster_conf", func(s *Set) { s.RouteRule.ProductRule[product][0].ClusterName = "nope" }, "cluster[nope] in advanced route should exist in cluster_conf"},
		{"cluster_conf protocol", func(s *Set) {
			c := s.ClusterConf.Config["c_api"]
			c.BackendConf.Protocol = "grpc"
			s.ClusterConf.Config["c_api"] = c
		}, "protocol only support http/tcp/ws/fcgi/h2c/https, but is:grpc"},
		{"hash strategy 0 without header", func(s *Set) {
			c := s.ClusterConf.Config["c_api"]
			c.GslbBasic.HashConf.HashHeader = ""
			s.ClusterConf.Config["c_api"] = c
		}, "GslbBasic:no HashHeader"},
		{"hash strategy out of range", func(s *Set) {
			c := s.ClusterConf.Config["c_api"]
			c.GslbBasic.HashConf.HashStrategy = 4
			s.ClusterConf.Config["c_api"] = c
		}, "HashStrategy 4 not supported"},
		{"balance mode", func(s *Set) {
			c := s.ClusterConf.Config["c_api"]
			c.GslbBasic.BalanceMode = "RR"
			s.ClusterConf.Config["c_api"] = c
		}, "BalanceMode RR not supported"},
		{"health check uri", func(s *Set) {
			c := s.ClusterConf.Config["c_api"]
			c.CheckConf.Uri = "health"
			s.ClusterConf.Config["c_api"] = c
		}, "CheckConf.Uri must start with /"},
		{"cluster_table without Version", func(s *Set) { s.ClusterTable.Version = "" }, "cluster_table.data: empty Version"},
		{"instance without Name", func(s *Set) { s.ClusterTable.Config["c_api"]["c_api.sub1"][0].Name = "" }, "c_api c_api.sub1 0 no Name"},
		{"instance without Port", func(s *Set) { s.ClusterTable.Config["c_api"]["c_api.sub1"][0].Port = 0 }, "c_api c_api.sub1 0 no Port"},
		{"instance with hostname", func(s *Set) { s.ClusterTable.Config["c_api"]["c_api.sub1"][0].Addr = "backend.local" }, "invalid Addr backend.local"},
		{"sub-cluster without weight", func(s *Set) {
			for i := range s.ClusterTable.Config["c_api"]["c_api.sub1"] {
				s.ClusterTable.Config["c_api"]["c_api.sub1"][i].Weight = 0
			}
		}, "c_api c_api.sub1 no avail backend"},
		{"one zero weight is fine", func(s *Set) { s.ClusterTable.Config["c_api"]["c_api.sub1"][0].Weight = 0 }, ""},
		{"gslb without Ts", func(s *Set) { s.Gslb.Ts = "" }, "empty Ts"},
		{"gslb without Hostname", func(s *Set) { s.Gslb.Hostname = "" }, "empty Hostname"},
		{"gslb total weight 0", func(s *Set) { s.Gslb.Clusters["c_api"]["c_api.sub1"] = 0 }, "cluster[c_api]: total weight <= 0"},
		// Invariants BFE does not check.
		{"routed cluster missing in gslb", func(s *Set) { delete(s.Gslb.Clusters, "c_default") }, "cluster[c_default] is routed but missing in cluster_conf/gslb.data"},
		{"gslb cluster missing in cluster_table", func(s *Set) {
			s.Gslb.Clusters["c_ghost"] = map[string]int{"c_ghost.sub1": 100}
		}, "cluster[c_ghost] is in gslb but missing in cluster_conf/cluster_table.data"},
		{"gslb sub-cluster without instances", func(s *Set) { s.Gslb.Clusters["c_api"]["c_api.sub2"] = 50 }, "cluster[c_api] sub-cluster[c_api.sub2] has no instance list"},
		{"routed cluster missing in cluster_table", func(s *Set) { delete(s.ClusterTable.Config, "c_api") }, "missing in cluster_conf/cluster_table.data"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := minimal()
			tc.mutate(s)
			err := s.Validate()
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			// Each refusal is either BFE's own or marked as this project's policy (bfe.md §9, §14).
			bfe, policy := SplitPolicy(err)
			if policyCases[tc.name] {
				g.Expect(bfe).To(BeEmpty())
				g.Expect(policy).NotTo(BeEmpty())
			} else {
				g.Expect(bfe).NotTo(BeEmpty(), "%v", policy)
			}
		})
	}
}

// policyCases are the refusals BFE 1.8.5 does not make (measured, bfe.md §14).
var policyCases = map[string]bool{
	"host_rule without Version": true, "route_rule without Version": true, "cluster_table without Version": true,
	"gslb without Ts": true, "gslb without Hostname": true, "instance without Name": true, "instance without Port": true,
	"instance with hostname": true, "routed cluster missing in gslb": true, "gslb sub-cluster without instances": true,
	"duplicate host": true,
}

func TestCheckCond(t *testing.T) {
	cases := []struct {
		cond string
		want string
	}{
		{`default_t()`, ""},
		{`req_host_in("a.test") && req_path_element_prefix_in("/api", false)`, ""},
		{`req_host_in("a.test|b.test") && (req_cookie_value_in("v", "2", false) || !req_header_value_in("X-Canary", "yes", true))`, ""},
		{`  req_path_in("/a\"b", false)  `, ""},
		{``, "empty condition"},
		{`req_host_in("x"`, "[1:16 syntax error"},
		{`req_foo_in("x")`, "[1:1 primitive req_foo_in not found]"},
		{`req_host_in("x", "y")`, "primitive args len error, expect 1, got 2"},
		{`req_path_in("/a", "false")`, "arg 1 expect BOOL, got STRING"},
		{`req_host_in("x") &&`, "syntax error"},
		{`req_host_in("x") & req_host_in("y")`, "syntax error"},
		{`req_host_in("x) && default_t()`, "string literal not terminated"},
		{`my_cond`, "condition variable my_cond not defined"},
		{`req_host_in(x)`, "expected string or bool argument"},
		{`default_t() default_t()`, "syntax error"},
	}
	for _, tc := range cases {
		t.Run(tc.cond, func(t *testing.T) {
			g := NewWithT(t)
			err := CheckCond(tc.cond)
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			}
		})
	}
}

func TestParseIsStrict(t *testing.T) {
	good, err := minimal().Render()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		path   string
		mutate func(string) string
		want   string
	}{
		{"round trip", ClusterConfPath, func(s string) string { return s }, ""},
		{"misspelled key", ClusterConfPath, func(s string) string { return strings.Replace(s, `"BackendConf"`, `"BackendConff"`, 1) }, `unknown field "BackendConff"`},
		{"trailing garbage", GslbPath, func(s string) string { return s + "}" }, "trailing data"},
		{"truncated", ClusterTablePath, func(s string) string { return s[:len(s)/2] }, "unexpected EOF"},
		{"wrong type", HostRulePath, func(s string) string { return strings.Replace(s, `"Version": "v1"`, `"Version": 1`, 1) }, "cannot unmarshal number"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			files := Files{}
			for p, b := range good {
				files[p] = b
			}
			files[tc.path] = []byte(tc.mutate(string(files[tc.path])))
			s, err := Parse(files)
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(s.Validate()).To(Succeed())
				g.Expect(s).To(Equal(minimal()))
				return
			}
			g.Expect(err).To(MatchError(And(ContainSubstring(tc.path), ContainSubstring(tc.want))))
		})
	}
	t.Run("missing file", func(t *testing.T) {
		files := Files{}
		for p, b := range good {
			files[p] = b
		}
		delete(files, GslbPath)
		_, err := Parse(files)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("cluster_conf/gslb.data: missing")))
	})
}

func TestRenderIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	a, err := minimal().Render()
	g.Expect(err).NotTo(HaveOccurred())
	for i := 0; i < 20; i++ {
		b, err := minimal().Render()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b).To(Equal(a))
	}
	g.Expect(a.GroupEqual(a, ServerData)).To(BeTrue())
	other := minimal()
	other.Gslb.Ts = "v2"
	b, _ := other.Render()
	g.Expect(a.GroupEqual(b, ServerData)).To(BeTrue())
	g.Expect(a.GroupEqual(b, GslbData)).To(BeFalse())
}
