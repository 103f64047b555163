package alteonsim

import (
	"fmt"
	"iter"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// row is one table row: index values (string or int64, in INDEX order) and the other columns.
// A row is never changed once put in a configuration: a write puts a changed clone (rest.go's
// writeRow), so configurations share their rows and copying one copies no row.
type row struct {
	idx  []any
	vals map[string]any
}

func (r *row) clone() *row {
	out := &row{idx: append([]any(nil), r.idx...), vals: make(map[string]any, len(r.vals))}
	for k, v := range r.vals {
		out.vals[k] = v
	}
	return out
}

func (r *row) str(col string) string {
	s, _ := r.vals[col].(string)
	return s
}

func (r *row) int(col string) int64 {
	n, _ := r.vals[col].(int64)
	return n
}

func (r *row) idxString(i int) string { return fmt.Sprint(r.idx[i]) }

func rowKey(idx []any) string {
	var b strings.Builder
	for i, v := range idx {
		if i > 0 {
			b.WriteByte(0)
		}
		switch t := v.(type) {
		case int64:
			b.WriteByte('i')
			b.WriteString(strconv.FormatInt(t, 10))
		case string:
			b.WriteByte('s')
			b.WriteString(t)
		default:
			fmt.Fprintf(&b, "s%v", t)
		}
	}
	return b.String()
}

// idxValString is an index value as rowKey and lessIdx see it (without rowKey's type tag).
func idxValString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// hasIdxPrefix reports whether idx starts with prefix, as rowKey(idx[:len(prefix)]) ==
// rowKey(prefix) would, without building the keys: the simulator answers every read of a row by
// scanning its table, which made a benchmark's time that of the simulator's formatting.
func hasIdxPrefix(idx, prefix []any) bool {
	if len(idx) < len(prefix) {
		return false
	}
	for i, p := range prefix {
		a, aInt := idx[i].(int64)
		b, bInt := p.(int64)
		switch {
		case aInt != bInt:
			return false
		case aInt:
			if a != b {
				return false
			}
		default:
			if idxValString(idx[i]) != idxValString(p) {
				return false
			}
		}
	}
	return true
}

func lessIdx(a, b []any) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		switch x := a[i].(type) {
		case int64:
			y, _ := b[i].(int64)
			if x != y {
				return x < y
			}
		default:
			xs, ys := idxValString(a[i]), idxValString(b[i])
			if xs != ys {
				return xs < ys
			}
		}
	}
	return len(a) < len(b)
}

// config is one copy of the device configuration (pending, running or flash).
type config struct {
	tables map[string]map[string]*row
	// under indexes the rows of child stores (two-part index, the first part the parent's) by
	// rowKey of that first part, so that a parent's children, a real server's free port slot and a
	// cascading delete read a handful of rows instead of scanning the table: with the table scans
	// the simulator's own CPU grew with the square of the configuration and, on the benchmarks'
	// shared cores, slowed the controller it measures.
	under map[string]map[string]map[string]*row
	// ver changes with every change of the content and is kept by a clone: two configurations
	// with the same ver are equal without comparing them.
	ver uint64
	// memo is the last comparison sameAs made from this configuration.
	memo eqMemo
}

type eqMemo struct {
	self, other uint64
	equal, ok   bool
}

// versions hands out content versions, unique across configurations.
var versions atomic.Uint64

func newConfig() *config {
	c := &config{tables: map[string]map[string]*row{}, under: map[string]map[string]map[string]*row{}, ver: versions.Add(1)}
	for name := range stores {
		c.tables[name] = map[string]*row{}
	}
	return c
}

func (c *config) clone() *config {
	out := &config{tables: make(map[string]map[string]*row, len(c.tables)), under: map[string]map[string]map[string]*row{}, ver: c.ver}
	for name, rows := range c.tables {
		out.copyTable(name, rows)
	}
	return out
}

// replaceTable puts a copy of src's store into c.
func (c *config) replaceTable(store string, src *config) {
	c.ver = versions.Add(1)
	delete(c.under, store)
	c.copyTable(store, src.tables[store])
}

// copyTable makes store a copy of rows, indexed (its parent index dropped before). The rows
// themselves are shared (see row): every apply, save and sync copies whole configurations, and
// copying each row as well was a tenth of the benchmarks' own CPU, on the cores the controller
// it measures runs on.
func (c *config) copyTable(store string, rows map[string]*row) {
	t := make(map[string]*row, len(rows))
	for k, r := range rows {
		t[k] = r
		c.index(store, k, r)
	}
	c.tables[store] = t
}

// underParent reports a child store: its rows are indexed under their parent's (one-part) index.
func underParent(store string) bool { return stores[store].parent != "" }

func (c *config) get(store string, idx []any) *row { return c.tables[store][rowKey(idx)] }

func (c *config) put(store string, r *row) {
	c.ver = versions.Add(1)
	key := rowKey(r.idx)
	c.tables[store][key] = r
	c.index(store, key, r)
}

func (c *config) index(store, key string, r *row) {
	if !underParent(store) {
		return
	}
	parent := rowKey(r.idx[:1])
	byParent := c.under[store]
	if byParent == nil {
		byParent = map[string]map[string]*row{}
		c.under[store] = byParent
	}
	if byParent[parent] == nil {
		byParent[parent] = map[string]*row{}
	}
	byParent[parent][key] = r
}

// remove deletes a row and, recursively, the rows of child stores under it.
func (c *config) remove(store string, idx []any) bool {
	key := rowKey(idx)
	r, ok := c.tables[store][key]
	if !ok {
		return false
	}
	c.ver = versions.Add(1)
	delete(c.tables[store], key)
	if underParent(store) {
		parent := rowKey(r.idx[:1])
		delete(c.under[store][parent], key)
		if len(c.under[store][parent]) == 0 {
			delete(c.under[store], parent)
		}
	}
	for name, s := range stores {
		if s.parent != store {
			continue
		}
		for _, child := range sortRows(maps.Values(c.under[name][key])) {
			c.remove(name, child.idx)
		}
	}
	return true
}

// list returns the rows of a store in index order.
func (c *config) list(store string) []*row {
	return sortRows(maps.Values(c.tables[store]))
}

func sortRows(rows iter.Seq[*row]) []*row {
	out := slices.Collect(rows)
	sort.Slice(out, func(i, j int) bool { return lessIdx(out[i].idx, out[j].idx) })
	return out
}

// children lists the rows of store whose leading index values equal prefix, in index order.
func (c *config) children(store string, prefix []any) []*row {
	if len(prefix) == 1 && underParent(store) {
		return sortRows(maps.Values(c.under[store][rowKey(prefix)]))
	}
	return sortRows(func(yield func(*row) bool) {
		for _, r := range c.tables[store] {
			if hasIdxPrefix(r.idx, prefix) && !yield(r) {
				return
			}
		}
	})
}

// rowsUnder lists the rows of store whose index starts with idx (all of them for none), in index
// order, as a REST read of a table, one row or a parent's rows asks.
func (c *config) rowsUnder(store string, idx []any) []*row {
	switch {
	case len(idx) == 0:
		return c.list(store)
	case len(idx) >= len(stores[store].index):
		if r := c.get(store, idx); r != nil {
			return []*row{r}
		}
		return nil
	}
	return c.children(store, idx)
}

// equal compares two configurations, optionally ignoring some stores.
func (c *config) equal(o *config, ignore ...string) bool {
	if c.ver == o.ver {
		return true
	}
	for name := range stores {
		if contains(ignore, name) {
			continue
		}
		if !reflect.DeepEqual(c.tables[name], o.tables[name]) {
			return false
		}
	}
	return true
}

// sameAs is equal(o) remembered until either changes: the device's status scalars compare its
// configurations on every poll, while they change only with writes, applies and saves. Callers
// hold the device's lock.
func (c *config) sameAs(o *config) bool {
	if m := c.memo; m.ok && m.self == c.ver && m.other == o.ver {
		return m.equal
	}
	eq := c.equal(o)
	c.memo = eqMemo{self: c.ver, other: o.ver, equal: eq, ok: true}
	return eq
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// diff renders the differences from old to c as stable text lines: "+" added, "-" removed,
// "~" changed rows.
func (c *config) diff(old *config) string {
	names := make([]string, 0, len(stores))
	for name := range stores {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		seen := map[string]bool{}
		for _, r := range c.list(name) {
			k := rowKey(r.idx)
			seen[k] = true
			o := old.tables[name][k]
			switch {
			case o == nil:
				fmt.Fprintf(&b, "+ %s %s %s\n", name, idxPath(r.idx), renderVals(r.vals))
			case !reflect.DeepEqual(o.vals, r.vals):
				fmt.Fprintf(&b, "~ %s %s %s\n", name, idxPath(r.idx), renderChanges(o.vals, r.vals))
			}
		}
		for _, o := range old.list(name) {
			if !seen[rowKey(o.idx)] {
				fmt.Fprintf(&b, "- %s %s\n", name, idxPath(o.idx))
			}
		}
	}
	return b.String()
}

func idxPath(idx []any) string {
	parts := make([]string, len(idx))
	for i, v := range idx {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, "/")
}

func renderVals(vals map[string]any) string {
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, vals[k])
	}
	return strings.Join(parts, " ")
}

func renderChanges(old, cur map[string]any) string {
	keys := make([]string, 0, len(cur))
	for k := range cur {
		if !reflect.DeepEqual(old[k], cur[k]) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v->%v", k, old[k], cur[k])
	}
	return strings.Join(parts, " ")
}

// validate runs the cross-object checks the device performs at apply time and returns the
// messages it would put into AgApplyTable.
func (c *config) validate(knownHealthIDs map[string]bool) []string {
	var errs []string
	for _, rs := range c.list(stRealServer) {
		if rs.int("State") == 2 && rs.str("IpAddr") == "0.0.0.0" {
			errs = append(errs, fmt.Sprintf("Real server %s: IP address is not configured.", rs.idxString(0)))
		}
	}
	for _, g := range c.list(stGroup) {
		name := g.idxString(0)
		for _, m := range c.children(stGroupMember, g.idx) {
			if c.get(stRealServer, m.idx[1:2]) == nil {
				errs = append(errs, fmt.Sprintf("Group %s: real server %s does not exist.", name, m.idxString(1)))
			}
		}
		if hid := g.str("HealthID"); hid != "" && !knownHealthIDs[strings.ToLower(hid)] {
			errs = append(errs, fmt.Sprintf("Group %s: health check %s does not exist.", name, hid))
		}
		if b := g.str("BackupServer"); b != "" && c.get(stRealServer, []any{b}) == nil {
			errs = append(errs, fmt.Sprintf("Group %s: backup real server %s does not exist.", name, b))
		}
		if b := g.str("BackupGroup"); b != "" && c.get(stGroup, []any{b}) == nil {
			errs = append(errs, fmt.Sprintf("Group %s: backup group %s does not exist.", name, b))
		}
	}
	used := map[listenSpec]string{}
	for _, svc := range c.list(stVirtService) {
		vsName, idx := svc.idxString(0), svc.idx[1]
		vs := c.get(stVirtServer, svc.idx[:1])
		grp := svc.str("RealGroup")
		switch {
		case grp == "":
			errs = append(errs, fmt.Sprintf("Virtual server %s service %v: no real server group configured.", vsName, idx))
		case c.get(stGroup, []any{grp}) == nil:
			errs = append(errs, fmt.Sprintf("Virtual server %s service %v: group %s does not exist.", vsName, idx, grp))
		}
		if vs == nil || vs.int("VirtServerState") != 2 {
			continue
		}
		ip := vs.str("VirtServerIpAddress")
		if ip == "0.0.0.0" {
			errs = append(errs, fmt.Sprintf("Virtual server %s: IP address is not configured.", vsName))
			continue
		}
		for _, k := range listenKeys(ip, svc) {
			if other, ok := used[k]; ok {
				errs = append(errs, fmt.Sprintf("Virtual server %s service %v: duplicate virtual IP/port %s:%d, already used by %s.", vsName, idx, ip, k.port, other))
				continue
			}
			used[k] = fmt.Sprintf("%s/%v", vsName, idx)
		}
	}
	return errs
}

type listenSpec struct {
	ip   string
	port int64
	udp  bool
}

// listenKeys lists the transport endpoints a virtual service occupies.
func listenKeys(ip string, svc *row) []listenSpec {
	port := svc.int("VirtPort")
	switch svc.int("UDPBalance") {
	case 2: // udp
		return []listenSpec{{ip, port, true}}
	case 5: // tcpAndUdp
		return []listenSpec{{ip, port, false}, {ip, port, true}}
	default:
		return []listenSpec{{ip, port, false}}
	}
}
