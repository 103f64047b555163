package alteonsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// apiError is an error envelope: {"status":"err","message":…,"testErr":…,"mibName":…}.
type apiError struct {
	status     int
	message    string
	testErr    string
	mibName    string
	appMessage string
}

func (e *apiError) body() map[string]any {
	m := map[string]any{"status": "err"}
	if e.message != "" {
		m["message"] = e.message
	}
	if e.testErr != "" {
		m["testErr"] = e.testErr
	}
	if e.mibName != "" {
		m["mibName"] = e.mibName
	}
	if e.appMessage != "" {
		m["application message"] = e.appMessage
	}
	return m
}

var (
	errMethodNotAllowed = &apiError{status: http.StatusMethodNotAllowed, message: "405 Method Not Allowed", appMessage: "REST API unknown error"}
	errNotFound         = &apiError{status: http.StatusNotFound, message: "404 Not Found"}
	errUnauthorized     = &apiError{status: http.StatusUnauthorized, message: "401 Unauthorized"}
	errBackupRejects    = &apiError{status: http.StatusForbidden, message: "403 Forbidden", appMessage: "Configuration changes are not allowed on the backup device."}
)

var okBody = map[string]any{"status": "ok"}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeErr(w http.ResponseWriter, e *apiError) { writeJSON(w, e.status, e.body()) }

// ServeHTTP records the request, runs the middleware and fault rules, then the REST API.
func (d *Device) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	start := time.Now()
	defer func() {
		d.rec.add(Request{Time: start, Device: d.opts.Name, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(body), Status: sw.status})
	}()
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = io.NopCloser(bytes.NewReader(body))
		d.serveWithFaults(w, r, body)
	})
	if mw := d.middleware.Load(); mw != nil {
		(*mw)(sw, r, inner)
		return
	}
	inner(sw, r)
}

func (d *Device) authenticate(w http.ResponseWriter, r *http.Request) bool {
	now := time.Now()
	if c, err := r.Cookie(sessionCookie); err == nil {
		d.mu.Lock()
		exp, ok := d.sessions[c.Value]
		if ok && now.Before(exp) {
			d.sessions[c.Value] = now.Add(sessionTTL)
			d.mu.Unlock()
			return true
		}
		d.mu.Unlock()
	}
	user, pass, ok := r.BasicAuth()
	d.mu.Lock()
	good := ok && user == d.opts.User && pass == d.opts.Password
	var sid string
	if good {
		sid = newSessionID()
		d.sessions[sid] = now.Add(sessionTTL)
		// Expired sessions are refused when presented (above); sweeping them is only for memory,
		// once a second: clients that send Basic auth every time start a session per request,
		// and a sweep per request made every request scan all of them.
		if now.Sub(d.sessionsSwept) >= time.Second {
			d.sessionsSwept = now
			for k, exp := range d.sessions {
				if now.After(exp) {
					delete(d.sessions, k)
				}
			}
		}
	}
	d.mu.Unlock()
	if !good {
		w.Header().Set("WWW-Authenticate", `Basic realm="Alteon"`)
		writeErr(w, errUnauthorized)
		return false
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sid, Path: "/", HttpOnly: true})
	return true
}

// serveAPI is the device's REST API proper.
func (d *Device) serveAPI(w http.ResponseWriter, r *http.Request, body []byte) {
	if !d.authenticate(w, r) {
		return
	}
	segs, ok := splitPath(r.URL.EscapedPath())
	if !ok {
		writeErr(w, errNotFound)
		return
	}
	q := r.URL.Query()
	if len(segs) == 0 {
		switch r.Method {
		case http.MethodGet:
			d.getScalars(w, q.Get("prop"))
		case http.MethodPost:
			if a := q.Get("action"); a != "" {
				d.action(w, a)
				return
			}
			writeErr(w, errMethodNotAllowed)
		case http.MethodPut:
			d.putScalars(w, body)
		default:
			writeErr(w, errMethodNotAllowed)
		}
		return
	}
	name := segs[0]
	switch {
	case name == "logout" && r.Method == http.MethodPost:
		if c, err := r.Cookie(sessionCookie); err == nil {
			d.mu.Lock()
			delete(d.sessions, c.Value)
			d.mu.Unlock()
		}
		writeJSON(w, http.StatusOK, okBody)
		return
	case (name == "getdiff" || name == "getdiffflash") && r.Method == http.MethodGet:
		d.mu.Lock()
		var text string
		if name == "getdiff" {
			text = d.pending.diff(d.running)
		} else {
			text = d.running.diff(d.flash)
		}
		d.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, text)
		return
	}
	if _, ok := scalars[name]; ok && len(segs) == 1 {
		if r.Method != http.MethodGet {
			writeErr(w, errMethodNotAllowed)
			return
		}
		d.getScalars(w, name)
		return
	}
	if v, ok := views[name]; ok {
		d.serveView(w, r, v, segs[1:], body)
		return
	}
	if g, ok := generated[name]; ok {
		if r.Method != http.MethodGet {
			writeErr(w, errMethodNotAllowed)
			return
		}
		idx, aerr := parseIndex(name, g.index, segs[1:])
		if aerr != nil {
			writeErr(w, aerr)
			return
		}
		d.mu.Lock()
		rows := g.rows(d)
		d.mu.Unlock()
		d.writeRows(w, r, name, g.index, idx, rows, func(r *row) map[string]any { return r.vals })
		return
	}
	writeErr(w, errNotFound)
}

// splitPath returns the unescaped segments after /config.
func splitPath(escaped string) ([]string, bool) {
	rest, ok := strings.CutPrefix(escaped, "/config")
	if !ok || (rest != "" && rest[0] != '/') {
		return nil, false
	}
	rest = strings.Trim(rest, "/")
	if rest == "" {
		return nil, true
	}
	parts := strings.Split(rest, "/")
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			return nil, false
		}
		parts[i] = u
	}
	return parts, true
}

// parseIndex parses up to len(cols) index segments.
func parseIndex(table string, cols []column, segs []string) ([]any, *apiError) {
	if len(segs) > len(cols) {
		return nil, errNotFound
	}
	out := make([]any, len(segs))
	for i, s := range segs {
		c := cols[i]
		var v any
		if c.kind == kindInt {
			v = json.Number(s)
		} else {
			v = s
		}
		p, ok := c.parse(v)
		if !ok {
			return nil, wrongInput(table, c.name, s)
		}
		out[i] = p
	}
	return out, nil
}

// viewIndexCols returns the store's index columns renamed to the view's spelling.
func viewIndexCols(v *view) []column {
	cols := append([]column(nil), v.store.index...)
	for i := range cols {
		cols[i].name = v.index[i]
	}
	return cols
}

func (d *Device) serveView(w http.ResponseWriter, r *http.Request, v *view, segs []string, body []byte) {
	idx, aerr := parseIndex(v.name, viewIndexCols(v), segs)
	if aerr != nil {
		writeErr(w, aerr)
		return
	}
	if r.Method == http.MethodGet {
		d.mu.Lock()
		cfg := d.pending
		if v.src == srcCur {
			cfg = d.running
		}
		rows := cfg.rowsUnder(v.store.name, idx)
		// Encoding reads derived columns from cfg, so it must happen under the lock; only the
		// rows asked for are encoded (writeRows selects them again, from these).
		out := make([]*row, 0, len(rows))
		for _, rw := range rows {
			out = append(out, &row{idx: rw.idx, vals: d.encodeRow(v, cfg, rw)})
		}
		d.mu.Unlock()
		d.writeRows(w, r, v.name, viewIndexCols(v), idx, out, func(r *row) map[string]any { return r.vals })
		return
	}
	if v.readOnly {
		writeErr(w, errMethodNotAllowed)
		return
	}
	if len(idx) != len(v.index) {
		writeErr(w, &apiError{status: http.StatusNotAcceptable, message: "406 Not Acceptable", testErr: "Incomplete index.", mibName: v.name})
		return
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut:
		var vals map[string]any
		if vals, aerr = decodeObject(v.name, body); aerr != nil {
			writeErr(w, aerr)
			return
		}
		d.mu.Lock()
		aerr = d.writeGuard()
		if aerr == nil {
			aerr = d.writeRow(v, idx, vals)
		}
		d.mu.Unlock()
	case http.MethodDelete:
		d.mu.Lock()
		aerr = d.writeGuard()
		if aerr == nil {
			aerr = d.deleteRow(v, idx)
		}
		d.mu.Unlock()
	default:
		aerr = errMethodNotAllowed
	}
	if aerr == errIgnored {
		aerr = nil
	}
	if aerr != nil {
		writeErr(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, okBody)
}

// errIgnored marks a write the backup swallowed (answered ok).
var errIgnored = &apiError{}

// writeGuard decides whether a configuration write may proceed (d.mu held).
func (d *Device) writeGuard() *apiError {
	if d.role != RoleMaster {
		switch d.opts.BackupWrites {
		case BackupReject:
			return errBackupRejects
		case BackupIgnore:
			return errIgnored
		}
	}
	if d.applyState == applyInProgress {
		return errApplyInProgress
	}
	return nil
}

// decodeObject parses a request body leniently: a trailing comma is tolerated and numbers are
// kept as json.Number so that columns can accept numbers or numeric strings.
func decodeObject(table string, body []byte) (map[string]any, *apiError) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(stripTrailingCommas(body)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, &apiError{status: http.StatusBadRequest, message: "400 Bad Request", appMessage: "Invalid JSON: " + errString(err), mibName: table}
	}
	return m, nil
}

func errString(err error) string {
	if err == nil {
		return "not an object"
	}
	return err.Error()
}

// stripTrailingCommas removes commas that directly precede } or ] outside strings, as the device
// parser tolerates them.
func stripTrailingCommas(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inStr, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			out = append(out, c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
		}
		if c == ',' {
			j := i + 1
			for j < len(b) && (b[j] == ' ' || b[j] == '\n' || b[j] == '\r' || b[j] == '\t') {
				j++
			}
			if j < len(b) && (b[j] == '}' || b[j] == ']') {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// writeRow creates or updates a row of the pending configuration (d.mu held). All columns are
// validated before anything changes.
func (d *Device) writeRow(v *view, idx []any, in map[string]any) *apiError {
	store := v.store
	type set struct {
		col *column
		val any
	}
	var sets []set
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw := in[k]
		if i, ok := v.isIndexKey(k); ok {
			c := viewIndexCols(v)[i]
			p, ok := c.parse(raw)
			if !ok || p != idx[i] {
				return wrongInput(v.name, v.index[i], raw)
			}
			continue
		}
		c, ok := v.lookupColumn(k)
		if !ok {
			return &apiError{status: http.StatusNotAcceptable, testErr: fmt.Sprintf("Unknown column %s.", k), mibName: v.name + "," + k}
		}
		if c.readOnly {
			return &apiError{status: http.StatusNotAcceptable, testErr: fmt.Sprintf("Column %s is read-only.", c.name), mibName: v.name + "," + c.name}
		}
		p, ok := c.parse(raw)
		if !ok {
			return wrongInput(v.name, c.name, raw)
		}
		sets = append(sets, set{c, p})
	}
	cfg := d.pending
	existing := cfg.get(store.name, idx)
	for _, s := range sets {
		if s.col.delete && s.val == int64(2) {
			if existing == nil {
				return notExist(v.name)
			}
			cfg.remove(store.name, idx)
			return nil
		}
	}
	if existing == nil {
		if store.name == stGroupMember {
			return &apiError{status: http.StatusNotAcceptable, testErr: fmt.Sprintf("Real server %v is not a member of group %v.", idx[1], idx[0]), mibName: v.name}
		}
		if store.parent != "" {
			pidx := idx[:len(stores[store.parent].index)]
			if cfg.get(store.parent, pidx) == nil {
				return &apiError{status: http.StatusNotAcceptable, testErr: fmt.Sprintf("%s %s does not exist.", parentNoun[store.parent], idxPath(pidx)), mibName: v.name}
			}
		}
		if v.continuation {
			// Continuation tables (…SeventhPartTable) extend an existing service.
			return &apiError{status: http.StatusNotAcceptable, testErr: fmt.Sprintf("Virtual service %s does not exist.", idxPath(idx)), mibName: v.name}
		}
	}
	// Action columns are checked against the state before any change.
	for _, s := range sets {
		if s.col.action && s.col.name == "RemoveServer" && cfg.get(stGroupMember, []any{idx[0], s.val}) == nil {
			return &apiError{status: http.StatusNotAcceptable, testErr: fmt.Sprintf("Real server %v is not a member of group %v.", s.val, idx[0]), mibName: v.name + ",RemoveServer"}
		}
	}
	r := existing
	if r == nil {
		r = &row{idx: idx, vals: map[string]any{}}
		for i := range store.cols {
			c := &store.cols[i]
			if !c.action && !c.delete && !c.readOnly {
				r.vals[c.name] = c.zero()
			}
		}
	} else {
		r = r.clone()
	}
	for _, s := range sets {
		switch {
		case s.col.delete:
		case s.col.action && s.col.name == "AddServer":
			key := []any{idx[0], s.val}
			if cfg.get(stGroupMember, key) == nil {
				cfg.put(stGroupMember, &row{idx: key, vals: map[string]any{"State": int64(1)}})
			}
		case s.col.action && s.col.name == "RemoveServer":
			cfg.remove(stGroupMember, []any{idx[0], s.val})
		default:
			r.vals[s.col.name] = s.val
		}
	}
	cfg.put(store.name, r)
	return nil
}

var parentNoun = map[string]string{stRealServer: "Real server", stGroup: "Group", stVirtServer: "Virtual server"}

func notExist(table string) *apiError {
	return &apiError{status: http.StatusNotFound, message: "404 Not Found", testErr: "Entry does not exist.", mibName: table}
}

func (d *Device) deleteRow(v *view, idx []any) *apiError {
	if !d.pending.remove(v.store.name, idx) {
		return notExist(v.name)
	}
	return nil
}

// encodeRow renders a row with the view's key spelling and derived columns (d.mu held).
func (d *Device) encodeRow(v *view, cfg *config, r *row) map[string]any {
	out := map[string]any{}
	for i, n := range v.index {
		out[n] = r.idx[i]
	}
	for _, c := range v.columns() {
		switch {
		case c.action:
			out[c.name] = 0
		case c.delete:
			out[c.name] = int64(1)
		case c.name == "NxtRportIdx" || c.name == "RealPortFreeIdx":
			out[c.name] = freeSlot(cfg.children(stRealPort, r.idx[:1]), 64)
		case c.name == "VirtServerFreeServiceIdx":
			out[c.name] = freeSlot(cfg.children(stVirtService, r.idx[:1]), 8)
		case c.name == "Status" && v.store.name == stVirtService:
			out[c.name] = d.serviceStatus(r)
		default:
			out[c.name] = r.vals[c.name]
		}
	}
	return out
}

// freeSlot is the first unused integer in the second index position, or 0 when all are used.
func freeSlot(rows []*row, max int64) int64 {
	used := map[int64]bool{}
	for _, r := range rows {
		if n, ok := r.idx[1].(int64); ok {
			used[n] = true
		}
	}
	for i := int64(1); i <= max; i++ {
		if !used[i] {
			return i
		}
	}
	return 0
}

// serviceStatus derives a virtual service's Status from the running configuration (d.mu held).
func (d *Device) serviceStatus(svc *row) int64 {
	cur := d.running.get(stVirtService, svc.idx)
	if cur == nil {
		return 2 // down: not applied
	}
	vs := d.running.get(stVirtServer, svc.idx[:1])
	if vs == nil || vs.int("VirtServerState") != 2 {
		return 3 // adminDown
	}
	for _, m := range d.running.children(stGroupMember, []any{cur.str("RealGroup")}) {
		rs := d.running.get(stRealServer, m.idx[1:2])
		if m.int("State") == 1 && rs != nil && rs.int("State") == 2 && d.dp.healthy(m.idxString(1)) {
			return 1
		}
	}
	return 2
}

// writeRows answers a GET on a table: rows under the index prefix, then filter, props and paging.
func (d *Device) writeRows(w http.ResponseWriter, r *http.Request, table string, idxCols []column, prefix []any, rows []*row, enc func(*row) map[string]any) {
	q := r.URL.Query()
	var sel []map[string]any
	filters, aerr := parseFilter(q.Get("filter"))
	if aerr != nil {
		writeErr(w, aerr)
		return
	}
	anyMatch := strings.EqualFold(q.Get("filtertype"), "any")
	for _, rw := range rows {
		if !hasIdxPrefix(rw.idx, prefix) {
			continue
		}
		m := enc(rw)
		if !matches(m, filters, anyMatch) {
			continue
		}
		sel = append(sel, m)
	}
	offset, _ := strconv.Atoi(q.Get("offset"))
	count := d.opts.DefaultPageSize
	if c, err := strconv.Atoi(q.Get("count")); err == nil && c > 0 {
		count = c
	}
	if offset < 0 {
		offset = 0
	}
	if offset > len(sel) {
		offset = len(sel)
	}
	end := offset + count
	if end > len(sel) {
		end = len(sel)
	}
	page := sel[offset:end]
	if props := q.Get("props"); props != "" {
		want := strings.Split(props, ",")
		for i, m := range page {
			pm := map[string]any{}
			for k, v := range m {
				for _, p := range want {
					if strings.EqualFold(strings.TrimSpace(p), k) {
						pm[k] = v
					}
				}
			}
			page[i] = pm
		}
	}
	if page == nil {
		page = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{table: page})
}

type filterTerm struct{ key, val string }

func parseFilter(s string) ([]filterTerm, *apiError) {
	if s == "" {
		return nil, nil
	}
	var out []filterTerm
	for _, t := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(t, ":")
		if !ok || k == "" {
			return nil, &apiError{status: http.StatusBadRequest, message: "400 Bad Request", appMessage: "Invalid filter " + t}
		}
		out = append(out, filterTerm{k, v})
	}
	return out, nil
}

func matches(m map[string]any, filters []filterTerm, anyMatch bool) bool {
	for _, f := range filters {
		found := false
		for k, v := range m {
			if !strings.EqualFold(k, f.key) {
				continue
			}
			s := fmt.Sprint(v)
			if anyMatch {
				found = strings.Contains(strings.ToLower(s), strings.ToLower(f.val))
			} else {
				found = s == f.val
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// --- scalars ---

type scalar struct {
	get func(d *Device) any
	// set performs a write (d.mu held); nil means read-only.
	set func(d *Device, v int64) *apiError
	// values lists the accepted written values.
	values []int64
	// config marks writes that change configuration state (subject to the backup write mode).
	config bool
}

func roleString(d *Device) any { return string(d.role) }

var scalars = map[string]scalar{
	"agApplyConfig": {get: func(d *Device) any { return d.applyState }, values: []int64{applyApply, applyIdle}, config: true,
		set: func(d *Device, v int64) *apiError {
			if v == applyIdle {
				if d.applyState == applyInProgress {
					return errApplyInProgress
				}
				d.applyState = applyIdle
				return nil
			}
			return d.startApply()
		}},
	"agSaveConfig": {get: func(d *Device) any { return d.saveState }, values: []int64{saveSave, saveIdle, saveNoBackup}, config: true,
		set: func(d *Device, v int64) *apiError {
			if v == saveIdle {
				if d.saveState != saveInProgress {
					d.saveState = saveIdle
				}
				return nil
			}
			return d.startSave()
		}},
	"agRevert": {get: func(*Device) any { return int64(1) }, values: []int64{2}, config: true,
		set: func(d *Device, _ int64) *apiError { return d.revert() }},
	"agRevertApply": {get: func(*Device) any { return int64(1) }, values: []int64{2}, config: true,
		set: func(d *Device, _ int64) *apiError { return d.revertApply() }},
	"agApplyPending": {get: func(d *Device) any {
		if d.pending.sameAs(d.running) {
			return int64(noApplyNeeded)
		}
		return int64(applyNeeded)
	}},
	"agSavePending": {get: func(d *Device) any {
		if d.running.sameAs(d.flash) {
			return int64(noSaveNeeded)
		}
		return int64(saveNeeded)
	}},
	"agSyncNeeded": {get: func(d *Device) any {
		if d.runningGen == d.syncedGen {
			return int64(syncNotNeeded)
		}
		return int64(syncNeeded)
	}},
	"agSyncStatus":          {get: func(d *Device) any { return d.syncStatus }},
	"agLastSyncErrorReason": {get: func(d *Device) any { return d.syncErr }},
	"slbOperConfigSync": {get: func(*Device) any { return int64(1) }, values: []int64{2}, config: true,
		set: func(d *Device, _ int64) *apiError { return d.startSync(2) }},
	"vrrpInfoHAState":   {get: roleString},
	"haSwitchInfoState": {get: roleString},
	"haCurCfgMode":      {get: func(d *Device) any { return d.haMode }},
	"haNewCfgMode": {get: func(d *Device) any { return d.haMode }, values: []int64{1, 2, 3, 4, 5},
		set: func(d *Device, v int64) *apiError { d.haMode = v; return nil }},
	"haOperSwitchBackup": {get: func(*Device) any { return int64(1) }, values: []int64{2},
		set: func(d *Device, _ int64) *apiError {
			if d.pair == nil || d.role != RoleMaster {
				return &apiError{status: http.StatusNotAcceptable, testErr: "Device is not the HA master.", mibName: "haOperSwitchBackup"}
			}
			// The role change itself runs outside d.mu (it locks both units).
			go d.pair.failoverFrom(d)
			return nil
		}},
}

func (d *Device) getScalars(w http.ResponseWriter, prop string) {
	if prop == "" {
		writeErr(w, errMethodNotAllowed)
		return
	}
	out := map[string]any{}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range strings.Split(prop, ",") {
		s, ok := scalars[strings.TrimSpace(p)]
		if !ok {
			// One unsupported scalar fails the whole read (radware-ansible #72).
			writeErr(w, errMethodNotAllowed)
			return
		}
		out[strings.TrimSpace(p)] = s.get(d)
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Device) putScalars(w http.ResponseWriter, body []byte) {
	in, aerr := decodeObject("", body)
	if aerr != nil {
		writeErr(w, aerr)
		return
	}
	if len(in) == 0 {
		writeErr(w, errMethodNotAllowed)
		return
	}
	type write struct {
		name string
		s    scalar
		v    int64
	}
	var writes []write
	for k, raw := range in {
		s, ok := scalars[k]
		if !ok {
			writeErr(w, &apiError{status: http.StatusNotAcceptable, testErr: fmt.Sprintf("Unknown object %s.", k), mibName: k})
			return
		}
		c := column{kind: kindInt, min: -1 << 31, max: 1<<31 - 1}
		p, ok := c.parse(raw)
		if !ok || s.set == nil || !containsInt(s.values, p.(int64)) {
			writeErr(w, &apiError{status: http.StatusNotAcceptable, testErr: fmt.Sprintf("Wrong input %v.", raw), mibName: k})
			return
		}
		writes = append(writes, write{k, s, p.(int64)})
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, wr := range writes {
		if wr.s.config && d.role != RoleMaster {
			if d.opts.BackupWrites == BackupReject {
				writeErr(w, errBackupRejects)
				return
			}
			if d.opts.BackupWrites == BackupIgnore {
				continue
			}
		}
		if aerr := wr.s.set(d, wr.v); aerr != nil {
			writeErr(w, aerr)
			return
		}
	}
	writeJSON(w, http.StatusOK, okBody)
}

func containsInt(list []int64, v int64) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// action runs POST /config?action=apply|save|revert|revertapply|sync.
func (d *Device) action(w http.ResponseWriter, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.role != RoleMaster {
		switch d.opts.BackupWrites {
		case BackupReject:
			writeErr(w, errBackupRejects)
			return
		case BackupIgnore:
			writeJSON(w, http.StatusOK, okBody)
			return
		}
	}
	var aerr *apiError
	switch strings.ToLower(name) {
	case "apply":
		aerr = d.startApply()
	case "save":
		aerr = d.startSave()
	case "revert":
		aerr = d.revert()
	case "revertapply":
		aerr = d.revertApply()
	case "sync":
		aerr = d.startSync(2)
	default:
		aerr = &apiError{status: http.StatusBadRequest, message: "400 Bad Request", appMessage: "Unknown action " + name}
	}
	if aerr != nil {
		writeErr(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, okBody)
}

// --- generated (non-configuration) tables ---

type genTable struct {
	index []column
	rows  func(d *Device) []*row // d.mu held
}

var generated = map[string]genTable{
	"AgApplyTable": {index: []column{intCol("Index", 1, 1<<20, 0)}, rows: func(d *Device) []*row { return textRows(d.applyErrs) }},
	"AgSaveTable":  {index: []column{intCol("Index", 1, 1<<20, 0)}, rows: func(d *Device) []*row { return textRows(d.saveErrs) }},
	"AgLastSyncInfoTable": {index: []column{intCol("Index", 1, 1<<20, 0)}, rows: func(d *Device) []*row {
		var out []*row
		for i, s := range d.lastSync {
			out = append(out, &row{idx: []any{int64(i + 1)}, vals: map[string]any{"Index": int64(i + 1), "LastSyncPeerIp": s.peerIP, "LastSyncType": s.typ, "LastSyncStatus": s.status}})
		}
		return out
	}},
	// Runtime state of real servers: running(2), failed(3), disabled(4).
	"SlbEnhRealServerInfoTable": {index: []column{strCol("Index", 1, 255)}, rows: func(d *Device) []*row {
		var out []*row
		for _, rs := range d.running.list(stRealServer) {
			st := int64(4)
			if rs.int("State") == 2 {
				st = 2
				if !d.dp.healthy(rs.idxString(0)) {
					st = 3
				}
			}
			out = append(out, &row{idx: rs.idx, vals: map[string]any{"Index": rs.idx[0], "IpAddr": rs.str("IpAddr"), "State": st}})
		}
		return out
	}},
	// Runtime state of group members: running(1), failed(2), disabled(3).
	"SlbOperEnhGroupRealServerTable": {index: []column{strCol("RealServGroupIndex", 1, 255), strCol("ServIndex", 1, 255)}, rows: func(d *Device) []*row {
		var out []*row
		for _, m := range d.running.list(stGroupMember) {
			rs := d.running.get(stRealServer, m.idx[1:2])
			st := int64(3)
			if rs != nil && rs.int("State") == 2 && m.int("State") == 1 {
				st = 1
				if !d.dp.healthy(m.idxString(1)) {
					st = 2
				}
			}
			out = append(out, &row{idx: m.idx, vals: map[string]any{"RealServGroupIndex": m.idx[0], "ServIndex": m.idx[1], "RuntimeStatus": st}})
		}
		return out
	}},
}

func textRows(texts []string) []*row {
	var out []*row
	for i, t := range texts {
		out = append(out, &row{idx: []any{int64(i + 1)}, vals: map[string]any{"Index": int64(i + 1), "StringVal": t}})
	}
	return out
}
