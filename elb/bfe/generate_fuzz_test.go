package bfe

import (
	"bytes"
	"testing"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
)

// FuzzGenerate: whatever LoadBalancers and backends users and members can give the BFE driver
// (anything ParseLoadBalancer and ParseBackend accept), the configuration it generates passes the
// validator BFE's reload is guarded by, and it round-trips: rendered, parsed strictly and rendered
// again, it is the same bytes.
func FuzzGenerate(f *testing.F) {
	f.Add("shop.example.test", "/*", "", "*.example.test", "/api/*", "beta:1", "m1", "10.12.0.7:8080", "10", "", "", "")
	f.Add("a.test", "/x", "", "a.test", "/x/*", "", "m2", "10.14.0.2:80", "0", "3", "web", "80")
	f.Add("*", "/*", "x:y", "b.test", "/", "", "", "[fd00::1]:8080", "", "0", "", "")
	f.Fuzz(func(t *testing.T, host1, path1, cookie1, host2, path2, header2, member, addr, weight, clusterWeight, subset, subsetWeight string) {
		m := NewModel()
		var lbs []LoadBalancer
		for _, spec := range []map[string]string{
			{SpecHost: host1, SpecPath: path1, SpecCookie: cookie1},
			{SpecHost: host2, SpecPath: path2, SpecHeader: header2},
		} {
			for k, v := range spec {
				if v == "" {
					delete(spec, k)
				}
			}
			lb, err := ParseLoadBalancer(spec)
			if err != nil {
				continue
			}
			if err := m.PutLoadBalancer(lb); err != nil {
				continue
			}
			lbs = append(lbs, lb)
		}
		params := map[string]string{}
		for k, v := range map[string]string{ParamCluster: member, ParamWeight: weight, ParamClusterWeight: clusterWeight, ParamSubset: subset, ParamSubsetWeight: subsetWeight} {
			if v != "" {
				params[k] = v
			}
		}
		if b, err := ParseBackend(addr, params); err == nil {
			for _, lb := range lbs {
				_ = m.PutBackend(lb, b)
			}
		}
		gen := Generate(m, Versions{ServerData: "v1", GslbData: "v1"}, GenerateOptions{})
		if err := gen.Set.Validate(); err != nil {
			t.Fatalf("generated configuration refused by the validator: %v\nmodel: %s", err, m)
		}
		files, err := gen.Set.Render()
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		parsed, err := bfeconf.Parse(files)
		if err != nil {
			t.Fatalf("the generated files do not parse strictly: %v", err)
		}
		again, err := parsed.Render()
		if err != nil {
			t.Fatalf("render again: %v", err)
		}
		for path, b := range files {
			if !bytes.Equal(b, again[path]) {
				t.Fatalf("%s does not round-trip:\n%s\n---\n%s", path, b, again[path])
			}
		}
	})
}

// FuzzParseLoadBalancer: an lbSpec parses to a route BFE can express, or is refused; what parses
// is canonical: its lbInfo parses to the same LoadBalancer.
func FuzzParseLoadBalancer(f *testing.F) {
	f.Add("Shop.Example.Test", "/api/*", "beta:1", "", "")
	f.Add("*.example.test", "/", "", "X-Canary: yes", "")
	f.Add("*", "", "", "", "my-cluster")
	f.Add("a..b", "/x*", "k", "k:v v", "UPPER")
	f.Fuzz(func(t *testing.T, host, path, cookie, header, name string) {
		spec := map[string]string{SpecHost: host}
		for k, v := range map[string]string{SpecPath: path, SpecCookie: cookie, SpecHeader: header, SpecName: name} {
			if v != "" {
				spec[k] = v
			}
		}
		lb, err := ParseLoadBalancer(spec)
		if err != nil {
			return
		}
		again, err := ParseLoadBalancer(lb.Info())
		if err != nil {
			t.Fatalf("lbInfo %v of %v does not parse: %v", lb.Info(), spec, err)
		}
		if again.Name != lb.Name || again.Host != lb.Host || again.Path != lb.Path || (again.Cookie == nil) != (lb.Cookie == nil) ||
			(again.Header == nil) != (lb.Header == nil) || (lb.Cookie != nil && *again.Cookie != *lb.Cookie) || (lb.Header != nil && *again.Header != *lb.Header) {
			t.Fatalf("lbInfo round trip: %+v → %+v", lb, again)
		}
	})
}
