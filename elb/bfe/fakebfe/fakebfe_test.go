package fakebfe_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
	"github.com/lbfed/lbfed/elb/bfe/fakebfe"
)

func write(t *testing.T, dir string, s *bfeconf.Set) {
	t.Helper()
	files, err := s.Render()
	if err != nil {
		t.Fatal(err)
	}
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

func set(clusters ...string) *bfeconf.Set {
	s := &bfeconf.Set{
		HostRule:     bfeconf.HostRuleConf{Version: "1", Hosts: map[string][]string{"p": {"a.test"}}, HostTags: map[string][]string{"p": {"p"}}},
		VipRule:      bfeconf.VipRuleConf{Version: "1", Vips: map[string][]string{}},
		RouteRule:    bfeconf.RouteRuleConf{Version: "1", BasicRule: map[string][]bfeconf.BasicRule{"p": {}}},
		ClusterConf:  bfeconf.ClusterConf{Version: "1", Config: map[string]bfeconf.Cluster{}},
		NameConf:     bfeconf.NameConf{Version: "1", Config: map[string]string{}},
		ClusterTable: bfeconf.ClusterTableConf{Version: "1", Config: map[string]map[string][]bfeconf.Instance{}},
		Gslb:         bfeconf.GslbConf{Clusters: map[string]map[string]int{}, Hostname: "test", Ts: "1"},
	}
	for _, c := range clusters {
		s.RouteRule.BasicRule["p"] = append(s.RouteRule.BasicRule["p"], bfeconf.BasicRule{Hostname: []string{"a.test"}, Path: []string{"/" + c + "/*"}, ClusterName: c})
		s.ClusterConf.Config[c] = bfeconf.Cluster{BackendConf: bfeconf.BackendConf{Protocol: "http", TimeoutConnSrv: 1, TimeoutResponseHeader: 1},
			CheckConf: bfeconf.CheckConf{Schem: "tcp", FailNum: 1, CheckInterval: 1},
			GslbBasic: bfeconf.GslbBasic{BalanceMode: "WRR", HashConf: bfeconf.HashConf{HashStrategy: 1}}}
		s.ClusterTable.Config[c] = map[string][]bfeconf.Instance{c + ".s": {{Name: "i", Addr: "127.0.0.1", Port: 1, Weight: 1}}}
		s.Gslb.Clusters[c] = map[string]int{c + ".s": 1}
	}
	return s
}

// The fake flags exactly the reload orders that would make BFE answer 500.
func TestFakeDetectsUnsafeOrder(t *testing.T) {
	g := NewWithT(t)
	f := fakebfe.New()
	defer f.Close()
	root, next := t.TempDir(), t.TempDir()
	write(t, root, set("a"))
	write(t, next, set("a", "b"))
	g.Expect(f.Load(root)).To(Succeed())

	reload := func(g bfeconf.Group, dir string) string {
		resp, err := f.Client().Get(f.URL + "/reload/" + string(g) + "?path=" + filepath.Join(dir, g.Dir()))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		return string(b[:n])
	}
	// Routes to b before b is balanced: unsafe.
	g.Expect(reload(bfeconf.ServerData, next)).To(Equal(`{"error":null}`))
	g.Expect(f.Unsafe()).To(HaveLen(1))
	g.Expect(f.Unsafe()[0]).To(ContainSubstring("cluster[b] is routed but missing"))
	g.Expect(reload(bfeconf.GslbData, next)).To(Equal(`{"error":null}`))
	g.Expect(f.Unsafe()).To(HaveLen(1))

	// GSLB data naming a cluster without instances: reported, applied anyway.
	ghost := set("a", "b")
	ghost.Gslb.Clusters["ghost"] = map[string]int{"ghost.s": 1}
	write(t, next, ghost)
	g.Expect(reload(bfeconf.GslbData, next)).To(Equal(`{"error":"error in BalTableReload() for [ghost]"}`))
	_, gslb := f.Active()
	g.Expect(gslb.Gslb.Clusters).To(HaveKey("ghost"))

	// Invalid server data is refused and the old data stays.
	bad := set("a", "b", "c")
	bad.ClusterConf.Config["c"] = bfeconf.Cluster{}
	write(t, next, bad)
	g.Expect(reload(bfeconf.ServerData, next)).To(ContainSubstring("protocol only support"))
	server, _ := f.Active()
	g.Expect(server.ClusterConf.Config).NotTo(HaveKey("c"))
	g.Expect(reload("cluster_table_conf", next)).To(Equal(`{"error":"handler not exist, type[reload], command[cluster_table_conf]"}`))
}
