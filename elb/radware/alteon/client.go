package alteon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
)

// Config configures the client of one Alteon unit.
type Config struct {
	// URL is the unit's base URL, e.g. https://10.0.0.5 (the API lives under /config).
	URL string
	// User and Password are sent as HTTP Basic credentials on every request.
	User, Password string
	// PasswordSource, when set, gives the password for each request instead of Password, with
	// a version that changes when the password does (a mounted Secret re-read when it changes,
	// so rotating the password needs no restart). A new password lifts AuthHold at once.
	PasswordSource func() (password string, version uint64)
	// HTTPClient carries TLS settings and timeouts (default: 30s timeout, system roots).
	HTTPClient *http.Client
	// Attempts is how often one request is tried on transient failures: 406 while an apply runs,
	// 5xx, errors with HTTP 200, broken or empty answers, connection errors (default 10, as
	// goalteon does). A 401 is tried again once only (the device's spurious session expiry): a
	// wrong password must not lock the account.
	Attempts int
	// AuthHold is how long the client refuses to send credentials again after the unit rejected
	// them twice in a row (default 1m): health checks, retries and resyncs would otherwise keep
	// feeding a wrong password to the device's lockout counter.
	AuthHold time.Duration
	// RetryDelay is the pause between attempts (default 350ms).
	RetryDelay time.Duration
	// PageSize is the count= used when listing tables (default 1000).
	PageSize int
	// Logger receives request-level logs at V(4) and retry notes at V(2).
	Logger logr.Logger
	// OnRequest, when set, is called after every HTTP request (each attempt), e.g. for metrics.
	OnRequest func(RequestInfo)
}

// RequestInfo describes one HTTP request to a unit.
type RequestInfo struct {
	Unit   string
	Method string
	// Target is the table, "config" for scalars and actions, or "getdiff".
	Target string
	// Status is the HTTP status, 0 when no answer came (connection error, timeout).
	Status   int
	Duration time.Duration
}

func target(path string) string {
	p := strings.Trim(path, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		p = p[:i]
	}
	if p == "" {
		return "config"
	}
	return p
}

func (c *Client) observe(method, path string, status int, start time.Time) {
	if c.cfg.OnRequest != nil {
		c.cfg.OnRequest(RequestInfo{Unit: c.Name(), Method: method, Target: target(path), Status: status, Duration: time.Since(start)})
	}
}

// Client talks to one unit. It is safe for concurrent use; configuration changes should go
// through Pair, which serialises them.
type Client struct {
	cfg  Config
	base *url.URL
	log  logr.Logger

	requests atomic.Int64
	retries  atomic.Int64
	// rejected holds the last confirmed credential rejection (an *AuthError) while AuthHold runs.
	rejected atomic.Pointer[AuthError]
}

// AuthError is a unit rejecting the credentials: two 401 answers in a row. It is final; the client
// does not send the credentials again until Until.
type AuthError struct {
	Unit  string
	Until time.Time
	Err   *APIError
	// passwordVersion is the version of the rejected password (Config.PasswordSource).
	passwordVersion uint64
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("Alteon %s rejected the credentials (wrong user or password?); not trying again before %s: %v",
		e.Unit, e.Until.Format(time.RFC3339), e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

// IsUnauthorized reports that a unit rejected the credentials (a 401 that was not spurious).
func IsUnauthorized(err error) bool {
	var ae *AuthError
	return errors.As(err, &ae)
}

// NewClient validates cfg and returns a client.
func NewClient(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(cfg.URL, "/"))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("alteon URL %q: must be scheme://host[:port]", cfg.URL)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 10
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 350 * time.Millisecond
	}
	if cfg.AuthHold <= 0 {
		cfg.AuthHold = time.Minute
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 1000
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	return &Client{cfg: cfg, base: u, log: cfg.Logger.WithValues("unit", u.Host)}, nil
}

// Name identifies the unit (host:port of its URL).
func (c *Client) Name() string { return c.base.Host }

// Requests is the number of HTTP requests sent, retries included.
func (c *Client) Requests() int64 { return c.requests.Load() }

// APIError is an error answer of the device: a non-2xx status, or {"status":"err"} with any
// status (the device reports some errors with HTTP 200).
type APIError struct {
	Method, Path string
	HTTPStatus   int
	Message      string
	TestErr      string
	MibName      string
	AppMessage   string
}

func (e *APIError) Error() string {
	var parts []string
	for _, p := range []string{e.Message, e.AppMessage, e.TestErr} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if e.MibName != "" {
		parts = append(parts, "mib "+e.MibName)
	}
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.HTTPStatus, strings.Join(parts, "; "))
}

// IsNotFound reports a missing row or object.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.HTTPStatus == http.StatusNotFound || strings.Contains(strings.ToLower(ae.TestErr), "not exist"))
}

// IsValidation reports a per-column validation failure (406 with testErr): the request itself is
// wrong and retrying cannot help.
func IsValidation(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.HTTPStatus == http.StatusNotAcceptable && ae.TestErr != ""
}

// IsForbidden reports a 403, which a unit in the backup role may answer to writes.
func IsForbidden(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.HTTPStatus == http.StatusForbidden
}

// transient says whether another attempt of the same request may succeed.
func transient(ae *APIError) bool {
	switch {
	case ae.HTTPStatus == http.StatusUnauthorized: // spurious session expiry: once (do)
		return true
	case ae.HTTPStatus == http.StatusNotAcceptable: // apply in progress, unless a column was rejected
		return ae.TestErr == ""
	case ae.HTTPStatus >= 500:
		return true
	case ae.HTTPStatus == http.StatusOK: // {"status":"err"} with 200: no detail, try again
		return true
	}
	return false
}

// password is the password to send and its version.
func (c *Client) password() (string, uint64) {
	if c.cfg.PasswordSource != nil {
		return c.cfg.PasswordSource()
	}
	return c.cfg.Password, 0
}

// heldOff returns the rejection that still holds the credentials back: one within AuthHold of
// the same password.
func (c *Client) heldOff() *AuthError {
	r := c.rejected.Load()
	if r == nil {
		return nil
	}
	if _, v := c.password(); v == r.passwordVersion && time.Now().Before(r.Until) {
		return r
	}
	c.rejected.CompareAndSwap(r, nil)
	return nil
}

// errEmptyAnswer is returned for a read that got no body.
var errEmptyAnswer = errors.New("empty answer")

// do sends one request with retries and returns the decoded JSON object (nil for an empty
// answer to a write). path is relative to /config ("" for /config itself).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body any) (map[string]any, error) {
	var payload []byte
	if body != nil {
		// Pretty-printed: the device is known to mis-parse compact bodies.
		b, err := json.MarshalIndent(body, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		payload = b
	}
	// path is already escaped segment by segment (escapePath).
	rawURL := c.base.String() + "/config" + path
	if len(query) > 0 {
		rawURL += "?" + query.Encode()
	}
	if r := c.heldOff(); r != nil {
		return nil, r
	}
	var last error
	unauthorized := 0
	for attempt := 1; attempt <= c.cfg.Attempts; attempt++ {
		if attempt > 1 {
			c.retries.Add(1)
			c.log.V(2).Info("retrying request", "method", method, "path", path, "attempt", attempt, "err", last.Error())
			t := time.NewTimer(c.cfg.RetryDelay)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("%s %s: %w (last error: %v)", method, path, ctx.Err(), last)
			case <-t.C:
			}
		}
		out, retry, err := c.once(ctx, method, rawURL, path, payload)
		if err == nil {
			return out, nil
		}
		var ae *APIError
		if errors.As(err, &ae) && ae.HTTPStatus == http.StatusUnauthorized {
			// The device sometimes answers 401 to a good session once; twice in a row means the
			// credentials are wrong, and every further try counts towards a lockout.
			if unauthorized++; unauthorized >= 2 {
				_, v := c.password()
				r := &AuthError{Unit: c.Name(), Until: time.Now().Add(c.cfg.AuthHold), Err: ae, passwordVersion: v}
				c.rejected.Store(r)
				c.log.Error(ae, "credentials rejected; holding off", "until", r.Until)
				return nil, r
			}
		}
		last = err
		if !retry || ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, last
}

func (c *Client) once(ctx context.Context, method, rawURL, path string, payload []byte) (map[string]any, bool, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return nil, false, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	pw, _ := c.password()
	req.SetBasicAuth(c.cfg.User, pw)
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.requests.Add(1)
	start := time.Now()
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		c.observe(method, path, 0, start)
		return nil, ctx.Err() == nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		c.observe(method, path, 0, start)
		return nil, true, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	c.observe(method, path, resp.StatusCode, start)
	c.log.V(4).Info("request", "method", method, "path", path, "status", resp.StatusCode)
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		if resp.StatusCode/100 == 2 {
			if method == http.MethodGet {
				return nil, true, fmt.Errorf("%s %s: %w", method, path, errEmptyAnswer)
			}
			return nil, false, nil // Content-Length with an empty body: an empty 200 (goalteon)
		}
		ae := &APIError{Method: method, Path: path, HTTPStatus: resp.StatusCode, Message: resp.Status}
		return nil, transient(ae), ae
	}
	m, err := decodeLenient(raw)
	if err != nil {
		if resp.StatusCode/100 != 2 {
			ae := &APIError{Method: method, Path: path, HTTPStatus: resp.StatusCode, Message: strings.TrimSpace(string(raw))}
			return nil, transient(ae), ae
		}
		return nil, true, fmt.Errorf("%s %s: undecodable answer: %w", method, path, err)
	}
	status, _ := m["status"].(string)
	if resp.StatusCode/100 != 2 || strings.EqualFold(status, "err") || strings.EqualFold(status, "error") {
		ae := &APIError{Method: method, Path: path, HTTPStatus: resp.StatusCode,
			Message: str(m["message"]), TestErr: str(m["testErr"]), MibName: str(m["mibName"]), AppMessage: str(m["application message"])}
		return nil, transient(ae), ae
	}
	return m, false, nil
}

func str(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	default:
		return fmt.Sprint(t)
	}
}

// decodeLenient decodes a device answer after removing what the device is known to emit inside
// strings but JSON forbids: raw control characters and U+0085 (goalteon d134ea5, 1c9fdf7).
func decodeLenient(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(sanitize(raw)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

func sanitize(b []byte) []byte {
	if !bytes.ContainsAny(b, "\n\r\t\u0085") {
		return b
	}
	out := make([]byte, 0, len(b))
	inStr, esc := false, false
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == '\u0085' {
			i += size
			continue
		}
		c := b[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			case c < 0x20:
				i++
				continue
			}
		} else if c == '"' {
			inStr = true
		}
		out = append(out, b[i:i+size]...)
		i += size
	}
	return out
}

// Row is one table row as the device returns it; getters are case-insensitive and accept numbers
// or strings, as the device's typing is loose.
type Row map[string]any

func (r Row) get(key string) (any, bool) {
	if v, ok := r[key]; ok {
		return v, true
	}
	for k, v := range r {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return nil, false
}

// Str returns a column as a string.
func (r Row) Str(key string) string {
	v, _ := r.get(key)
	return str(v)
}

// Int returns a column as an integer (0 when absent or not numeric).
func (r Row) Int(key string) int {
	v, _ := r.get(key)
	switch t := v.(type) {
	case json.Number:
		n, _ := strconv.Atoi(t.String())
		return n
	case string:
		n, _ := strconv.Atoi(strings.TrimSpace(t))
		return n
	case float64:
		return int(t)
	case int:
		return t
	case int64:
		return int(t)
	}
	return 0
}

func escapePath(table string, idx ...string) string {
	var b strings.Builder
	b.WriteString("/" + table)
	for _, i := range idx {
		b.WriteString("/" + url.PathEscape(i))
	}
	return b.String()
}

// maxListRows bounds what List reads of one table: far above any device's table sizes, it stops a
// unit (or a proxy) that keeps answering full pages.
const maxListRows = 1 << 20

// List reads all rows of a table under an index prefix, page by page. A unit that answers a page
// equal to the one before (it ignores offset), or pages without end, is an error: its answers
// are untrusted and must not loop the client for ever.
func (c *Client) List(ctx context.Context, table string, prefix ...string) ([]Row, error) {
	var out []Row
	var previous []byte
	for offset := 0; ; offset += c.cfg.PageSize {
		if offset >= maxListRows {
			return nil, fmt.Errorf("list %s: more than %d rows: the unit does not end its pages", table, maxListRows)
		}
		q := url.Values{"count": {strconv.Itoa(c.cfg.PageSize)}, "offset": {strconv.Itoa(offset)}}
		m, err := c.do(ctx, http.MethodGet, escapePath(table, prefix...), q, nil)
		if err != nil {
			return nil, err
		}
		rows, err := rowsOf(m, table)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", table, err)
		}
		out = append(out, rows...)
		if len(rows) < c.cfg.PageSize {
			return out, nil
		}
		// The page's ends stand for it: a unit that ignores offset repeats them.
		page, err := json.Marshal([]Row{rows[0], rows[len(rows)-1]})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", table, err)
		}
		if bytes.Equal(page, previous) {
			return nil, fmt.Errorf("list %s: the page at offset %d repeats the one before: the unit ignores offset", table, offset)
		}
		previous = page
	}
}

// Get reads one row; ok is false when it does not exist.
func (c *Client) Get(ctx context.Context, table string, idx ...string) (Row, bool, error) {
	m, err := c.do(ctx, http.MethodGet, escapePath(table, idx...), nil, nil)
	if err != nil {
		return nil, false, err
	}
	rows, err := rowsOf(m, table)
	if err != nil {
		return nil, false, fmt.Errorf("get %s: %w", table, err)
	}
	if len(rows) == 0 {
		return nil, false, nil
	}
	return rows[0], true, nil
}

func rowsOf(m map[string]any, table string) ([]Row, error) {
	var list any
	for k, v := range m {
		if strings.EqualFold(k, table) {
			list = v
		}
	}
	items, ok := list.([]any)
	if !ok {
		return nil, fmt.Errorf("answer has no %s list", table)
	}
	out := make([]Row, 0, len(items))
	for _, it := range items {
		r, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("answer row is %T, not an object", it)
		}
		out = append(out, Row(r))
	}
	return out, nil
}

// Put creates or updates a row (PUT is an upsert on the device).
func (c *Client) Put(ctx context.Context, table string, idx []string, fields map[string]any) error {
	_, err := c.do(ctx, http.MethodPut, escapePath(table, idx...), nil, fields)
	return err
}

// Delete removes a row; a missing row is not an error.
func (c *Client) Delete(ctx context.Context, table string, idx ...string) error {
	_, err := c.do(ctx, http.MethodDelete, escapePath(table, idx...), nil, nil)
	if err != nil && IsNotFound(err) {
		return nil
	}
	return err
}

// Scalars reads scalar objects with GET /config?prop=….
func (c *Client) Scalars(ctx context.Context, names ...string) (Row, error) {
	m, err := c.do(ctx, http.MethodGet, "", url.Values{"prop": {strings.Join(names, ",")}}, nil)
	if err != nil {
		return nil, err
	}
	return Row(m), nil
}

// Action runs POST /config?action=<name> (apply, save, revert, revertapply, sync).
func (c *Client) Action(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodPost, "", url.Values{"action": {name}}, nil)
	return err
}

// SetScalars writes scalar objects with PUT /config/.
func (c *Client) SetScalars(ctx context.Context, values map[string]any) error {
	_, err := c.do(ctx, http.MethodPut, "/", nil, values)
	return err
}

// Role reads the unit's HA state ("master", "backup", …, lower-cased) from vrrpInfoHAState,
// falling back to haSwitchInfoState on firmware that rejects the former.
func (c *Client) Role(ctx context.Context) (string, error) {
	r, err := c.Scalars(ctx, "vrrpInfoHAState")
	if err == nil {
		return strings.ToLower(strings.TrimSpace(r.Str("vrrpInfoHAState"))), nil
	}
	var ae *APIError
	if !errors.As(err, &ae) || ae.HTTPStatus != http.StatusMethodNotAllowed {
		return "", fmt.Errorf("read HA role of %s: %w", c.Name(), err)
	}
	m, err := c.do(ctx, http.MethodGet, "/haSwitchInfoState", nil, nil)
	if err != nil {
		return "", fmt.Errorf("read HA role of %s: %w", c.Name(), err)
	}
	return strings.ToLower(strings.TrimSpace(Row(m).Str("haSwitchInfoState"))), nil
}

// Diff returns the device's text diff of the pending against the running configuration
// (GET /config/getdiff), for messages to people. One attempt, no retries.
func (c *Client) Diff(ctx context.Context) (string, error) {
	if r := c.heldOff(); r != nil {
		return "", r
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.String()+"/config/getdiff", nil)
	if err != nil {
		return "", err
	}
	pw, _ := c.password()
	req.SetBasicAuth(c.cfg.User, pw)
	c.requests.Add(1)
	start := time.Now()
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		c.observe(http.MethodGet, "/getdiff", 0, start)
		return "", fmt.Errorf("GET /getdiff: %w", err)
	}
	defer resp.Body.Close()
	c.observe(http.MethodGet, "/getdiff", resp.StatusCode, start)
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("GET /getdiff: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("GET /getdiff: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return string(b), nil
}
