package alteonsim

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	. "github.com/onsi/gomega"
)

// scanChildren is what children computed before the parent index: every row of the table.
func scanChildren(c *config, store string, prefix []any) []*row {
	var out []*row
	for _, r := range c.tables[store] {
		if hasIdxPrefix(r.idx, prefix) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return lessIdx(out[i].idx, out[j].idx) })
	return out
}

func deepEqualConfigs(a, b *config) bool {
	for name := range stores {
		if !reflect.DeepEqual(a.tables[name], b.tables[name]) {
			return false
		}
	}
	return true
}

// The parent index and the remembered comparisons answer as the table scans and the full
// comparison do, through random writes, cascading deletes, clones and table replacements of the
// three configurations a unit holds.
func TestConfigIndexAndMemoFollowTheTables(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	cfgs := []*config{newConfig(), newConfig(), newConfig()}
	rsName := func() string { return fmt.Sprintf("rs%d", rng.Intn(12)) }
	grpName := func() string { return fmt.Sprintf("g%d", rng.Intn(4)) }
	vsName := func() string { return fmt.Sprintf("vs%d", rng.Intn(3)) }
	for step := 0; step < 5000; step++ {
		c := cfgs[rng.Intn(len(cfgs))]
		switch op := rng.Intn(10); op {
		case 0, 1:
			c.put(stRealServer, &row{idx: []any{rsName()}, vals: map[string]any{"State": int64(rng.Intn(2) + 1)}})
		case 2:
			rs := rsName()
			if c.get(stRealServer, []any{rs}) != nil {
				c.put(stRealPort, &row{idx: []any{rs, int64(rng.Intn(4) + 1)}, vals: map[string]any{"RealPort": int64(80)}})
			}
		case 3:
			c.put(stGroup, &row{idx: []any{grpName()}, vals: map[string]any{}})
		case 4:
			g := grpName()
			if c.get(stGroup, []any{g}) != nil {
				c.put(stGroupMember, &row{idx: []any{g, rsName()}, vals: map[string]any{"State": int64(1)}})
			}
		case 5:
			vs := vsName()
			c.put(stVirtServer, &row{idx: []any{vs}, vals: map[string]any{}})
			c.put(stVirtService, &row{idx: []any{vs, int64(rng.Intn(3) + 1)}, vals: map[string]any{"VirtPort": int64(80)}})
		case 6:
			c.remove(stRealServer, []any{rsName()})
		case 7:
			switch rng.Intn(3) {
			case 0:
				c.remove(stGroup, []any{grpName()})
			case 1:
				c.remove(stGroupMember, []any{grpName(), rsName()})
			default:
				c.remove(stVirtServer, []any{vsName()})
			}
		case 8:
			cfgs[rng.Intn(len(cfgs))] = c.clone()
		case 9:
			out := cfgs[rng.Intn(len(cfgs))].clone()
			out.replaceTable(stPeer, c)
			cfgs[rng.Intn(len(cfgs))] = out
		}
		for i, a := range cfgs {
			for _, parent := range []struct{ store, child string }{{stRealServer, stRealPort}, {stGroup, stGroupMember}, {stVirtServer, stVirtService}} {
				for _, p := range a.list(parent.store) {
					if got, want := a.children(parent.child, p.idx), scanChildren(a, parent.child, p.idx); !reflect.DeepEqual(got, want) {
						t.Fatalf("step %d config %d: children of %s %v: %d rows, the scan %d", step, i, parent.store, p.idx, len(got), len(want))
					}
				}
			}
			for _, child := range []string{stRealPort, stGroupMember, stVirtService} {
				for _, r := range a.tables[child] {
					if a.get(stores[child].parent, r.idx[:1]) == nil {
						t.Fatalf("step %d config %d: %s %v outlived its parent", step, i, child, r.idx)
					}
				}
			}
			for j, b := range cfgs {
				if got, want := a.sameAs(b), deepEqualConfigs(a, b); got != want {
					t.Fatalf("step %d: config %d sameAs %d = %v, the full comparison %v", step, i, j, got, want)
				}
			}
		}
	}
}

// A change to a row that the configurations share (see row) is made on a copy: running and
// flash keep what was applied and saved until the next apply and save.
func TestChangedRowLeavesTheOtherConfigurations(t *testing.T) {
	g := NewWithT(t)
	d, c := startDevice(t, Options{})
	c.ok("POST", "/SlbNewCfgEnhRealServerTable/rs1", `{"IpAddr":"10.0.0.1","State":2}`)
	g.Expect(c.apply()).To(Equal("4"))
	c.ok("POST", "?action=save", "")
	g.Expect(c.waitState("agSaveConfig")).To(Equal("4"))
	c.ok("PUT", "/SlbNewCfgEnhRealServerTable/rs1", `{"IpAddr":"10.0.0.9","State":3}`)
	g.Expect(d.Snapshot(Pending).RealServer("rs1")).To(HaveKeyWithValue("IpAddr", "10.0.0.9"))
	for _, w := range []Which{Running, Flash} {
		g.Expect(d.Snapshot(w).RealServer("rs1")).To(And(HaveKeyWithValue("IpAddr", "10.0.0.1"), HaveKeyWithValue("State", int64(2))), "configuration %d", w)
	}
	c.ok("POST", "?action=revert", "")
	g.Expect(d.Snapshot(Pending).RealServer("rs1")).To(HaveKeyWithValue("IpAddr", "10.0.0.1"))
}

// BenchmarkConfigClone copies a configuration of 2,000 real servers in 1,000 groups (what an
// apply, a save and each side of a sync copy): "rows-copied" is the former copy of every row,
// the baseline in the same run.
func BenchmarkConfigClone(b *testing.B) {
	c := newConfig()
	for i := 0; i < 2000; i++ {
		rs, grp := fmt.Sprintf("rs%d", i), fmt.Sprintf("g%d", i/2)
		c.put(stRealServer, &row{idx: []any{rs}, vals: map[string]any{"IpAddr": fmt.Sprintf("10.0.%d.%d", i/250, i%250), "State": int64(2), "Name": "lbfed-" + rs}})
		c.put(stRealPort, &row{idx: []any{rs, int64(1)}, vals: map[string]any{"RealPort": int64(80)}})
		c.put(stGroup, &row{idx: []any{grp}, vals: map[string]any{"Name": "lbfed-" + grp}})
		c.put(stGroupMember, &row{idx: []any{grp, rs}, vals: map[string]any{"State": int64(1)}})
	}
	b.Run("rows-copied", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			out := &config{tables: map[string]map[string]*row{}, under: map[string]map[string]map[string]*row{}, ver: c.ver}
			for name, rows := range c.tables {
				t := make(map[string]*row, len(rows))
				for k, r := range rows {
					r = r.clone()
					t[k] = r
					out.index(name, k, r)
				}
				out.tables[name] = t
			}
		}
	})
	b.Run("rows-shared", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			c.clone()
		}
	})
}
