package alteonsim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FaultKind is what a matching fault rule does to a request.
type FaultKind int

const (
	// FaultLatency only delays the request (by Fault.Delay) and then serves it.
	FaultLatency FaultKind = iota
	// FaultStatus answers Fault.Status (default 500) with an error envelope; nothing is executed.
	FaultStatus
	// FaultUnauthorized answers a spurious 401; nothing is executed.
	FaultUnauthorized
	// FaultErrorOK answers HTTP 200 with {"status":"err","message":Fault.Message}; nothing is executed.
	FaultErrorOK
	// FaultReset drops the connection without an answer; nothing is executed.
	FaultReset
	// FaultResetAfter executes the request and then drops the connection without an answer.
	FaultResetAfter
	// FaultEmptyBody executes the request and answers 200 with Content-Length: 0.
	FaultEmptyBody
	// FaultMalformedJSON executes the request and answers with raw newlines and U+0085 inside
	// JSON strings (invalid JSON the device is known to emit).
	FaultMalformedJSON
	// FaultNumbersAsStrings executes the request and answers with every number quoted.
	FaultNumbersAsStrings
	// FaultHook runs Fault.Hook (e.g. a failover) and then serves the request.
	FaultHook
)

// Fault is one fault-injection rule of a unit. A request matches when Method, Path (prefix of the
// URL path) and Query (substring of the raw query) match; empty fields match anything.
type Fault struct {
	Method string
	Path   string
	Query  string
	Kind   FaultKind
	// Status for FaultStatus; Message for FaultStatus and FaultErrorOK.
	Status  int
	Message string
	// Delay is added before any kind.
	Delay time.Duration
	// Skip lets the first Skip matching requests through untouched.
	Skip int
	// Times limits how often the rule fires (0 = unlimited).
	Times int
	// Probability in (0,1) fires the rule on that share of matching requests (0 = always).
	Probability float64
	// Hook is run by FaultHook.
	Hook func()
}

type faultRule struct {
	Fault
	id      int
	seen    int
	applied int
}

type faultSet struct {
	mu    sync.Mutex
	rules []*faultRule
	next  int
	rnd   *rand.Rand
}

// FaultID identifies an installed fault rule.
type FaultID int

// AddFault installs a fault rule; rules are evaluated in order and the first one that fires wins.
func (d *Device) AddFault(f Fault) FaultID {
	d.faults.mu.Lock()
	defer d.faults.mu.Unlock()
	d.faults.next++
	d.faults.rules = append(d.faults.rules, &faultRule{Fault: f, id: d.faults.next})
	return FaultID(d.faults.next)
}

// RemoveFault uninstalls one rule.
func (d *Device) RemoveFault(id FaultID) {
	d.faults.mu.Lock()
	defer d.faults.mu.Unlock()
	for i, r := range d.faults.rules {
		if r.id == int(id) {
			d.faults.rules = append(d.faults.rules[:i], d.faults.rules[i+1:]...)
			return
		}
	}
}

// ClearFaults removes every rule and queued apply/save/sync fault.
func (d *Device) ClearFaults() {
	d.faults.mu.Lock()
	d.faults.rules = nil
	d.faults.mu.Unlock()
	d.mu.Lock()
	d.applyFaults, d.saveFaults, d.syncFaults = nil, nil, nil
	d.mu.Unlock()
}

// FaultFired reports how often a rule has fired.
func (d *Device) FaultFired(id FaultID) int {
	d.faults.mu.Lock()
	defer d.faults.mu.Unlock()
	for _, r := range d.faults.rules {
		if r.id == int(id) {
			return r.applied
		}
	}
	return 0
}

func (s *faultSet) match(r *http.Request) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.rules {
		if f.Method != "" && !strings.EqualFold(f.Method, r.Method) {
			continue
		}
		if f.Path != "" && !strings.HasPrefix(r.URL.Path, f.Path) {
			continue
		}
		if f.Query != "" && !strings.Contains(r.URL.RawQuery, f.Query) {
			continue
		}
		f.seen++
		if f.seen <= f.Skip || (f.Times > 0 && f.applied >= f.Times) {
			continue
		}
		if f.Probability > 0 && f.Probability < 1 {
			if s.rnd == nil {
				s.rnd = rand.New(rand.NewPCG(1, 2))
			}
			if s.rnd.Float64() >= f.Probability {
				continue
			}
		}
		f.applied++
		out := f.Fault
		return &out
	}
	return nil
}

// Middleware wraps the unit's REST handling (the Avi AKO fake-controller pattern): it may answer
// by itself or call next to get the simulator's normal behaviour.
type Middleware func(w http.ResponseWriter, r *http.Request, next http.Handler)

// SetMiddleware installs m in front of the REST API (replacing any previous one).
func (d *Device) SetMiddleware(m Middleware) { d.middleware.Store(&m) }

// ResetMiddleware removes the middleware.
func (d *Device) ResetMiddleware() { d.middleware.Store(nil) }

func (d *Device) serveWithFaults(w http.ResponseWriter, r *http.Request, body []byte) {
	f := d.faults.match(r)
	if f == nil {
		d.serveAPI(w, r, body)
		return
	}
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	switch f.Kind {
	case FaultLatency:
		d.serveAPI(w, r, body)
	case FaultHook:
		if f.Hook != nil {
			f.Hook()
		}
		d.serveAPI(w, r, body)
	case FaultStatus:
		st := f.Status
		if st == 0 {
			st = http.StatusInternalServerError
		}
		msg := f.Message
		if msg == "" {
			msg = strconv.Itoa(st) + " " + http.StatusText(st)
		}
		writeErr(w, &apiError{status: st, message: msg})
	case FaultUnauthorized:
		writeErr(w, errUnauthorized)
	case FaultErrorOK:
		msg := f.Message
		if msg == "" {
			msg = "Internal error"
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "err", "message": msg})
	case FaultReset:
		resetConn(w)
	default:
		rec := httptest.NewRecorder()
		d.serveAPI(rec, r, body)
		out := rec.Body.Bytes()
		switch f.Kind {
		case FaultResetAfter:
			resetConn(w)
			return
		case FaultEmptyBody:
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusOK)
			return
		case FaultMalformedJSON:
			out = corruptStrings(out)
		case FaultNumbersAsStrings:
			out = quoteNumbers(out)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		w.WriteHeader(rec.Code)
		_, _ = w.Write(out)
	}
}

// resetConn closes the client connection with a TCP RST and no HTTP answer.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// corruptStrings appends a raw newline and U+0085 to every JSON string value.
func corruptStrings(b []byte) []byte {
	var out bytes.Buffer
	inStr, esc, isKey := false, false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if !isKey {
					out.WriteString("\n\u0085")
				}
			}
			out.WriteByte(c)
			continue
		}
		if c == '"' {
			inStr = true
			// A string followed by ':' is a key; look ahead past the closing quote.
			isKey = isJSONKey(b, i)
		}
		out.WriteByte(c)
	}
	return out.Bytes()
}

func isJSONKey(b []byte, start int) bool {
	esc := false
	for j := start + 1; j < len(b); j++ {
		switch {
		case esc:
			esc = false
		case b[j] == '\\':
			esc = true
		case b[j] == '"':
			k := j + 1
			for k < len(b) && (b[k] == ' ' || b[k] == '\n') {
				k++
			}
			return k < len(b) && b[k] == ':'
		}
	}
	return false
}

// quoteNumbers re-encodes a JSON document with every number as a string.
func quoteNumbers(b []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return b
	}
	var walk func(any) any
	walk = func(v any) any {
		switch t := v.(type) {
		case json.Number:
			return t.String()
		case map[string]any:
			for k, x := range t {
				t[k] = walk(x)
			}
		case []any:
			for i, x := range t {
				t[i] = walk(x)
			}
		}
		return v
	}
	out, _ := json.Marshal(walk(v))
	return out
}

// --- recording ---

// Request is one recorded REST request.
type Request struct {
	Time   time.Time
	Device string
	Method string
	Path   string
	Query  string
	Body   string
	Status int
}

type recorder struct {
	mu    sync.Mutex
	limit int
	reqs  []Request
	count map[string]int
}

func (r *recorder) add(req Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) >= r.limit {
		r.reqs = append(r.reqs[:0], r.reqs[len(r.reqs)/2:]...)
	}
	r.reqs = append(r.reqs, req)
	if r.count == nil {
		r.count = map[string]int{}
	}
	r.count[countKey(req.Method, req.Path, req.Query)]++
}

// countKey groups requests by method and table (index segments dropped) or action.
func countKey(method, path, query string) string {
	p := strings.TrimPrefix(path, "/config")
	p = strings.Trim(p, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		p = p[:i]
	}
	if p == "" && query != "" {
		p = "?" + query
	}
	return method + " " + p
}

// Requests returns a copy of the recorded requests.
func (d *Device) Requests() []Request {
	d.rec.mu.Lock()
	defer d.rec.mu.Unlock()
	return append([]Request(nil), d.rec.reqs...)
}

// RequestCounts returns request counts keyed "METHOD Table" (index dropped), or "METHOD ?query"
// for requests on /config itself (e.g. "POST ?action=apply", "GET ?prop=agApplyConfig").
func (d *Device) RequestCounts() map[string]int {
	d.rec.mu.Lock()
	defer d.rec.mu.Unlock()
	out := make(map[string]int, len(d.rec.count))
	for k, v := range d.rec.count {
		out[k] = v
	}
	return out
}

// ResetRecording clears recorded requests and counters.
func (d *Device) ResetRecording() {
	d.rec.mu.Lock()
	defer d.rec.mu.Unlock()
	d.rec.reqs, d.rec.count = nil, nil
}

// statusWriter captures the answered status code and keeps Hijack/Flush available.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := s.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("hijacking not supported")
	}
	s.status = 0 // no answer
	return hj.Hijack()
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
