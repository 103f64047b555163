package alteonsim

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"
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
