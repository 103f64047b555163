package alteon

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Tx is one configuration transaction on the master unit, handed to the function given to
// Pair.Do. It reads before it writes and skips writes that change nothing (the device's pending
// configuration is global, and needless writes have been blamed for corrupting it). Reads are
// cached for the transaction's lifetime: Pair.Do serialises transactions, so nothing else changes
// the pending configuration meanwhile.
//
// A Tx is not safe for concurrent use.
type Tx struct {
	c        *Client
	tables   map[string]*tableCache
	writes   int
	readOnly bool // Pair.Read
}

var errReadOnly = errors.New("write in a read-only Alteon transaction")

type tableCache struct {
	rows     map[string]Row  // key -> row; a nil Row means "known absent"
	complete map[string]bool // index prefix key -> every row under it is cached
}

func newTx(c *Client) *Tx { return &Tx{c: c, tables: map[string]*tableCache{}} }

// Unit returns the client of the unit the transaction writes to.
func (tx *Tx) Unit() *Client { return tx.c }

// Writes is the number of write requests the device accepted (a refused write changes nothing).
func (tx *Tx) Writes() int { return tx.writes }

func key(idx []string) string { return strings.Join(idx, "\x00") }

func (tx *Tx) cache(table string) *tableCache {
	t := tx.tables[table]
	if t == nil {
		t = &tableCache{rows: map[string]Row{}, complete: map[string]bool{}}
		tx.tables[table] = t
	}
	return t
}

func rowIndex(table string, r Row) []string {
	keys := indexKeys[table]
	idx := make([]string, len(keys))
	for i, k := range keys {
		idx[i] = r.Str(k)
	}
	return idx
}

func (t *tableCache) knownAbsent(idx []string) bool {
	for n := 0; n <= len(idx); n++ {
		if t.complete[key(idx[:n])] {
			return true
		}
	}
	return false
}

// get reads one row through the cache.
func (tx *Tx) get(ctx context.Context, table string, idx ...string) (Row, bool, error) {
	t := tx.cache(table)
	if r, ok := t.rows[key(idx)]; ok {
		return r, r != nil, nil
	}
	if t.knownAbsent(idx) {
		return nil, false, nil
	}
	r, ok, err := tx.c.Get(ctx, table, idx...)
	if err != nil {
		return nil, false, fmt.Errorf("read %s %s: %w", table, strings.Join(idx, "/"), err)
	}
	t.rows[key(idx)] = r
	return r, ok, nil
}

// list reads all rows under an index prefix through the cache, in index order.
func (tx *Tx) list(ctx context.Context, table string, prefix ...string) ([]Row, error) {
	t := tx.cache(table)
	pk := key(prefix)
	if !t.knownAbsent(prefix) {
		rows, err := tx.c.List(ctx, table, prefix...)
		if err != nil {
			return nil, fmt.Errorf("list %s %s: %w", table, strings.Join(prefix, "/"), err)
		}
		for _, r := range rows {
			t.rows[key(rowIndex(table, r))] = r
		}
		t.complete[pk] = true
	}
	var out []Row
	var keys []string
	for k, r := range t.rows {
		if r != nil && (pk == "" || k == pk || strings.HasPrefix(k, pk+"\x00")) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, t.rows[k])
	}
	return out, nil
}

// put writes only the fields that differ from the cached row (all of them for a new row) and
// reports whether it wrote.
func (tx *Tx) put(ctx context.Context, table string, idx []string, want map[string]any) (bool, error) {
	cur, exists, err := tx.get(ctx, table, idx...)
	if err != nil {
		return false, err
	}
	diff := map[string]any{}
	for k, v := range want {
		if !exists || !sameValue(cur.Str(k), v) {
			diff[k] = v
		}
	}
	if exists && len(diff) == 0 {
		return false, nil
	}
	if err := tx.write(ctx, table, idx, diff); err != nil {
		return false, err
	}
	next := Row{}
	for k, v := range cur {
		next[k] = v
	}
	for i, k := range indexKeys[table] {
		next[k] = idx[i]
	}
	for k, v := range diff {
		next[k] = v
	}
	tx.cache(table).rows[key(idx)] = next
	return true, nil
}

func (tx *Tx) write(ctx context.Context, table string, idx []string, fields map[string]any) error {
	if tx.readOnly {
		return errReadOnly
	}
	if err := tx.c.Put(ctx, table, idx, fields); err != nil {
		return fmt.Errorf("write %s %s: %w", table, strings.Join(idx, "/"), err)
	}
	tx.writes++
	return nil
}

func sameValue(cur string, want any) bool {
	switch w := want.(type) {
	case string:
		return cur == w
	case int:
		return cur == strconv.Itoa(w)
	default:
		return cur == fmt.Sprint(w)
	}
}

// del deletes a row if it exists and forgets its children.
func (tx *Tx) del(ctx context.Context, table string, idx ...string) (bool, error) {
	_, exists, err := tx.get(ctx, table, idx...)
	if err != nil || !exists {
		return false, err
	}
	if tx.readOnly {
		return false, errReadOnly
	}
	if err := tx.c.Delete(ctx, table, idx...); err != nil {
		return false, fmt.Errorf("delete %s %s: %w", table, strings.Join(idx, "/"), err)
	}
	tx.writes++
	tx.cache(table).rows[key(idx)] = nil
	for _, child := range children[table] {
		t := tx.cache(child)
		pk := key(idx)
		for k := range t.rows {
			if k == pk || strings.HasPrefix(k, pk+"\x00") {
				delete(t.rows, k)
			}
		}
		t.complete[pk] = true
	}
	return true, nil
}

// --- real servers ---

// RealServer reads a real server.
func (tx *Tx) RealServer(ctx context.Context, index string) (RealServer, bool, error) {
	r, ok, err := tx.get(ctx, TableRealServer, index)
	if !ok || err != nil {
		return RealServer{}, false, err
	}
	return realServerFromRow(r), true, nil
}

// RealServers lists every real server.
func (tx *Tx) RealServers(ctx context.Context) ([]RealServer, error) {
	rows, err := tx.list(ctx, TableRealServer)
	if err != nil {
		return nil, err
	}
	out := make([]RealServer, len(rows))
	for i, r := range rows {
		out[i] = realServerFromRow(r)
	}
	return out, nil
}

// EnsureRealServer creates or updates a real server; it reports whether it wrote.
func (tx *Tx) EnsureRealServer(ctx context.Context, rs RealServer) (bool, error) {
	return tx.put(ctx, TableRealServer, []string{rs.Index}, rs.fields())
}

// SetRealServerHealth changes only a real server's health-check timing (its non-zero fields).
func (tx *Tx) SetRealServerHealth(ctx context.Context, index string, h HealthTiming) (bool, error) {
	f := map[string]any{}
	h.fields(f)
	if len(f) == 0 {
		return false, nil
	}
	return tx.put(ctx, TableRealServer, []string{index}, f)
}

// SetRealServerState changes only a real server's State.
func (tx *Tx) SetRealServerState(ctx context.Context, index string, st RealServerState) (bool, error) {
	return tx.put(ctx, TableRealServer, []string{index}, map[string]any{"State": int(st)})
}

// DeleteRealServer deletes a real server (and its ports) if it exists.
func (tx *Tx) DeleteRealServer(ctx context.Context, index string) (bool, error) {
	return tx.del(ctx, TableRealServer, index)
}

// EnsureRealServerPort sets a real server's port slot (1..64).
func (tx *Tx) EnsureRealServerPort(ctx context.Context, index string, slot, port int) (bool, error) {
	return tx.put(ctx, TableRealServerPort, []string{index, strconv.Itoa(slot)}, map[string]any{"RealPort": port})
}

// RealServerPorts lists a real server's ports by slot.
func (tx *Tx) RealServerPorts(ctx context.Context, index string) (map[int]int, error) {
	rows, err := tx.list(ctx, TableRealServerPort, index)
	if err != nil {
		return nil, err
	}
	out := map[int]int{}
	for _, r := range rows {
		out[r.Int("PortIndex")] = r.Int("RealPort")
	}
	return out, nil
}

// DeleteRealServerPort deletes a port slot if it exists.
func (tx *Tx) DeleteRealServerPort(ctx context.Context, index string, slot int) (bool, error) {
	return tx.del(ctx, TableRealServerPort, index, strconv.Itoa(slot))
}

// --- groups and membership ---

// Group reads a group.
func (tx *Tx) Group(ctx context.Context, index string) (Group, bool, error) {
	r, ok, err := tx.get(ctx, TableGroup, index)
	if !ok || err != nil {
		return Group{}, false, err
	}
	return groupFromRow(r), true, nil
}

// EnsureGroup creates or updates a group.
func (tx *Tx) EnsureGroup(ctx context.Context, g Group) (bool, error) {
	return tx.put(ctx, TableGroup, []string{g.Index}, g.fields())
}

// DeleteGroup deletes a group (and its memberships) if it exists.
func (tx *Tx) DeleteGroup(ctx context.Context, index string) (bool, error) {
	return tx.del(ctx, TableGroup, index)
}

// Members returns a group's members and their membership state.
func (tx *Tx) Members(ctx context.Context, group string) (map[string]MemberState, error) {
	rows, err := tx.list(ctx, TableGroupRealServer, group)
	if err != nil {
		return nil, err
	}
	out := make(map[string]MemberState, len(rows))
	for _, r := range rows {
		out[r.Str("ServIndex")] = MemberState(r.Int("State"))
	}
	return out, nil
}

// Member returns one member's state, and whether server is a member of group. The group's
// members are read once per transaction; unlike Members, a lookup does not copy them all: a
// batch of changes to a group of thousands of members looks one up per change.
func (tx *Tx) Member(ctx context.Context, group, server string) (MemberState, bool, error) {
	t := tx.cache(TableGroupRealServer)
	if !t.knownAbsent([]string{group}) {
		if _, err := tx.list(ctx, TableGroupRealServer, group); err != nil {
			return 0, false, err
		}
	}
	r := t.rows[key([]string{group, server})]
	if r == nil {
		return 0, false, nil
	}
	return MemberState(r.Int("State")), true, nil
}

// AddMember adds a real server to a group through the AddServer action column, unless it is a
// member already.
func (tx *Tx) AddMember(ctx context.Context, group, server string) (bool, error) {
	if _, ok, err := tx.Member(ctx, group, server); err != nil || ok {
		return false, err
	}
	if err := tx.write(ctx, TableGroup, []string{group}, map[string]any{"AddServer": server}); err != nil {
		return false, err
	}
	tx.cache(TableGroupRealServer).rows[key([]string{group, server})] = Row{"RealServGroupIndex": group, "ServIndex": server, "State": int(MemberEnabled)}
	return true, nil
}

// SetMemberState changes a member's state (e.g. MemberShutdownConnection to drain it).
func (tx *Tx) SetMemberState(ctx context.Context, group, server string, st MemberState) (bool, error) {
	cur, ok, err := tx.Member(ctx, group, server)
	if err != nil || !ok || cur == st {
		if err == nil && !ok {
			err = fmt.Errorf("real server %s is not a member of group %s", server, group)
		}
		return false, err
	}
	return tx.put(ctx, TableGroupRealServer, []string{group, server}, map[string]any{"State": int(st)})
}

// RemoveMember removes a real server from a group through the RemoveServer action column, if it
// is a member.
func (tx *Tx) RemoveMember(ctx context.Context, group, server string) (bool, error) {
	if _, ok, err := tx.Member(ctx, group, server); err != nil || !ok {
		return false, err
	}
	if err := tx.write(ctx, TableGroup, []string{group}, map[string]any{"RemoveServer": server}); err != nil {
		return false, err
	}
	tx.cache(TableGroupRealServer).rows[key([]string{group, server})] = nil
	return true, nil
}

// --- virtual servers and services ---

// VirtualServer reads a virtual server.
func (tx *Tx) VirtualServer(ctx context.Context, index string) (VirtualServer, bool, error) {
	r, ok, err := tx.get(ctx, TableVirtServer, index)
	if !ok || err != nil {
		return VirtualServer{}, false, err
	}
	return virtualServerFromRow(r), true, nil
}

// VirtualServers lists every virtual server.
func (tx *Tx) VirtualServers(ctx context.Context) ([]VirtualServer, error) {
	rows, err := tx.list(ctx, TableVirtServer)
	if err != nil {
		return nil, err
	}
	out := make([]VirtualServer, len(rows))
	for i, r := range rows {
		out[i] = virtualServerFromRow(r)
	}
	return out, nil
}

// EnsureVirtualServer creates or updates a virtual server.
func (tx *Tx) EnsureVirtualServer(ctx context.Context, v VirtualServer) (bool, error) {
	return tx.put(ctx, TableVirtServer, []string{v.Index}, v.fields())
}

// DeleteVirtualServer deletes a virtual server (and its services) if it exists.
func (tx *Tx) DeleteVirtualServer(ctx context.Context, index string) (bool, error) {
	return tx.del(ctx, TableVirtServer, index)
}

// VirtualService reads a virtual service and its group binding.
func (tx *Tx) VirtualService(ctx context.Context, server string, index int) (VirtualService, bool, error) {
	idx := []string{server, strconv.Itoa(index)}
	r, ok, err := tx.get(ctx, TableVirtService, idx...)
	if !ok || err != nil {
		return VirtualService{}, false, err
	}
	g, _, err := tx.get(ctx, TableVirtServiceGroup, idx...)
	if err != nil {
		return VirtualService{}, false, err
	}
	return VirtualService{
		Server: server, Index: index, VirtPort: r.Int("VirtPort"), RealPort: r.Int("RealPort"), Balance: Balance(r.Int("UDPBalance")),
		DBind: r.Int("DBind"), PBind: r.Int("PBind"),
		Group: g.Str("RealGroup"), PersistentTimeout: g.Int("PersistentTimeOut"), ProxyIPMode: g.Int("ProxyIpMode"),
	}, true, nil
}

// EnsureVirtualService creates or updates a virtual service, then its group binding (the
// continuation table can only extend an existing service).
func (tx *Tx) EnsureVirtualService(ctx context.Context, s VirtualService) (bool, error) {
	idx := []string{s.Server, strconv.Itoa(s.Index)}
	created, err := tx.put(ctx, TableVirtService, idx, s.mainFields())
	if err != nil {
		return false, err
	}
	if created {
		// The device filled in defaults for the seventh part; forget any cached absence.
		delete(tx.cache(TableVirtServiceGroup).rows, key(idx))
	}
	bound, err := tx.put(ctx, TableVirtServiceGroup, idx, s.groupFields())
	return created || bound, err
}

// DeleteVirtualService deletes a virtual service if it exists.
func (tx *Tx) DeleteVirtualService(ctx context.Context, server string, index int) (bool, error) {
	idx := []string{server, strconv.Itoa(index)}
	ok, err := tx.del(ctx, TableVirtService, idx...)
	if ok {
		tx.cache(TableVirtServiceGroup).rows[key(idx)] = nil
	}
	return ok, err
}

// VirtualServices lists a virtual server's services with their group bindings.
func (tx *Tx) VirtualServices(ctx context.Context, server string) ([]VirtualService, error) {
	rows, err := tx.list(ctx, TableVirtService, server)
	if err != nil {
		return nil, err
	}
	out := make([]VirtualService, 0, len(rows))
	for _, r := range rows {
		s, ok, err := tx.VirtualService(ctx, server, r.Int("Index"))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// Preload reads whole tables into the transaction's cache. A transaction about to touch many rows
// of a table saves one GET per row this way (one GET per page instead).
func (tx *Tx) Preload(ctx context.Context, tables ...string) error {
	for _, t := range tables {
		if _, ok := indexKeys[t]; !ok {
			return fmt.Errorf("preload %s: unknown table", t)
		}
		if _, err := tx.list(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// Groups lists every group.
func (tx *Tx) Groups(ctx context.Context) ([]Group, error) {
	rows, err := tx.list(ctx, TableGroup)
	if err != nil {
		return nil, err
	}
	out := make([]Group, len(rows))
	for i, r := range rows {
		out[i] = groupFromRow(r)
	}
	return out, nil
}
