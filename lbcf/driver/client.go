package driver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/reloadfile"
)

// Endpoint is where and how to call one driver.
type Endpoint struct {
	// Name identifies the driver in errors and metrics: "namespace/name".
	Name string
	// URL is the driver's base URL; webhook <w> is at path.Join(URL.Path, w).
	URL string
	// Timeouts per webhook; DefaultTimeout applies to the others.
	Timeouts map[string]time.Duration
}

// EndpointFor returns the endpoint of a LoadBalancerDriver object.
func EndpointFor(d *lbcfv1beta1.LoadBalancerDriver) Endpoint {
	e := Endpoint{Name: d.Namespace + "/" + d.Name, URL: d.Spec.URL, Timeouts: map[string]time.Duration{}}
	for _, w := range d.Spec.Webhooks {
		if w.Timeout.Duration > 0 {
			e.Timeouts[w.Name] = w.Timeout.Duration
		}
	}
	return e
}

// DefaultTimeout is the timeout of a webhook the driver does not configure.
const DefaultTimeout = lbcfv1beta1.DefaultWebhookTimeout

// DefaultMaxResponseBytes caps driver answers.
const DefaultMaxResponseBytes = 16 << 20

// Invoker calls drivers' webhooks. It is the seam controllers are tested through: *Client
// implements it over HTTP, tests may substitute their own.
type Invoker interface {
	Healthz(ctx context.Context, e Endpoint) (*HealthzResponse, error)
	ValidateLoadBalancer(ctx context.Context, e Endpoint, req *ValidateLoadBalancerRequest) (*ValidateLoadBalancerResponse, error)
	CreateLoadBalancer(ctx context.Context, e Endpoint, req *CreateLoadBalancerRequest) (*CreateLoadBalancerResponse, error)
	EnsureLoadBalancer(ctx context.Context, e Endpoint, req *EnsureLoadBalancerRequest) (*EnsureLoadBalancerResponse, error)
	DeleteLoadBalancer(ctx context.Context, e Endpoint, req *DeleteLoadBalancerRequest) (*DeleteLoadBalancerResponse, error)
	ValidateBackend(ctx context.Context, e Endpoint, req *ValidateBackendRequest) (*ValidateBackendResponse, error)
	GenerateBackendAddr(ctx context.Context, e Endpoint, req *GenerateBackendAddrRequest) (*GenerateBackendAddrResponse, error)
	EnsureBackend(ctx context.Context, e Endpoint, req *BackendOperationRequest) (*BackendOperationResponse, error)
	DeregisterBackend(ctx context.Context, e Endpoint, req *BackendOperationRequest) (*BackendOperationResponse, error)
	JudgePodDeregister(ctx context.Context, e Endpoint, req *JudgePodDeregisterRequest) (*JudgePodDeregisterResponse, error)
}

// ClientOptions configures NewClient.
type ClientOptions struct {
	// TLS configures HTTPS to drivers (custom CA, client certificate). Nil: system roots. For
	// files re-read when they change, use Transport: NewFilesTransport.
	TLS *tls.Config
	// MaxResponseBytes caps answers (DefaultMaxResponseBytes when 0).
	MaxResponseBytes int64
	// Metrics receives call metrics; nil: metrics are kept but not registered anywhere.
	Metrics *Metrics
	// Transport overrides the HTTP transport (tests); TLS is ignored when set.
	Transport http.RoundTripper
}

// Client calls drivers over HTTP(S). It is safe for concurrent use.
type Client struct {
	http     *http.Client
	maxBytes int64
	metrics  *Metrics
}

var _ Invoker = &Client{}

// NewClient returns a client.
func NewClient(opts ClientOptions) *Client {
	rt := opts.Transport
	if rt == nil {
		rt = newTransport(opts.TLS)
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	return &Client{http: &http.Client{Transport: rt}, maxBytes: opts.MaxResponseBytes, metrics: opts.Metrics}
}

// TLSFiles are the files of a client's TLS towards drivers. Each is re-read when it changes:
// the client then opens new connections with the new content (calls in flight finish on their
// connection), so rotating the driver CA or the client certificate needs no restart.
type TLSFiles struct {
	// CAFile verifies the drivers' serving certificates (empty: system roots).
	CAFile string
	// CertFile and KeyFile are the client certificate presented to drivers (empty: none).
	CertFile, KeyFile string
}

// filesTransport is an HTTP transport whose TLS follows TLSFiles: when a file's content changes,
// the next call gets a new transport built from it and the old one's idle connections close.
type filesTransport struct {
	ca   *reloadfile.Parsed[*x509.CertPool]
	pair *reloadfile.Parsed[*tls.Certificate]

	mu       sync.Mutex
	caV, kpV uint64
	current  *http.Transport
}

// NewFilesTransport returns an HTTP transport (ClientOptions.Transport) whose TLS comes from f,
// re-read when the files change.
func NewFilesTransport(f TLSFiles) (http.RoundTripper, error) {
	t := &filesTransport{}
	var err error
	if f.CAFile != "" {
		if t.ca, err = reloadfile.CertPool(f.CAFile); err != nil {
			return nil, fmt.Errorf("driver CA: %w", err)
		}
	}
	if f.CertFile != "" || f.KeyFile != "" {
		if f.CertFile == "" || f.KeyFile == "" {
			return nil, errors.New("driver client certificate: both the certificate and the key are needed")
		}
		if t.pair, err = reloadfile.KeyPair(f.CertFile, f.KeyFile); err != nil {
			return nil, fmt.Errorf("driver client certificate: %w", err)
		}
	}
	t.transport()
	return t, nil
}

// transport returns the transport for the files' current content.
func (t *filesTransport) transport() *http.Transport {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	var caV, kpV uint64
	if t.ca != nil {
		// A file that cannot be read or parsed keeps its last good content.
		cfg.RootCAs, caV, _ = t.ca.Get()
	}
	if t.pair != nil {
		var cert *tls.Certificate
		cert, kpV, _ = t.pair.Get()
		cfg.Certificates = []tls.Certificate{*cert}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current != nil && caV == t.caV && kpV == t.kpV {
		return t.current
	}
	old := t.current
	t.current, t.caV, t.kpV = newTransport(cfg), caV, kpV
	if old != nil {
		old.CloseIdleConnections()
	}
	return t.current
}

func (t *filesTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.transport().RoundTrip(r)
}

// IdleConnsPerDriver is how many idle connections to one driver are kept for its next calls. A
// burst holds a connection per call in flight (HTTP/1.1; HTTP/2 beyond the driver's streams per
// connection), up to the controller's per-driver call budget (384 by default, 768 with 1,024
// record workers); connections beyond the kept ones are closed when their call ends, and the next
// burst dials (and with TLS handshakes) again. Idle connections close after the transport's idle
// timeout (90 s).
const IdleConnsPerDriver = 1024

func newTransport(cfg *tls.Config) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	t.MaxIdleConnsPerHost = IdleConnsPerDriver
	t.MaxIdleConns = 0 // no limit over all drivers beside the per-driver one
	return t
}

// CallError is a call that produced no valid answer. The controller treats it as a webhook
// error (retry with backoff; admission denied for validate webhooks).
type CallError struct {
	Driver, Webhook string
	// StatusCode is the HTTP status when the driver answered with one other than 200.
	StatusCode int
	// Invalid is set when the driver answered 200 with content that breaks the protocol
	// (e.g. an unknown status), which LBCF reports as an Invalid<Op> event.
	Invalid bool
	// Timeout is set when the driver did not answer within the webhook's timeout.
	Timeout bool
	Err     error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("driver %s webhook %s: %v", e.Driver, e.Webhook, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// IsTimeout reports whether err is a call the driver did not answer in time.
func IsTimeout(err error) bool {
	var ce *CallError
	return errors.As(err, &ce) && ce.Timeout
}

// IsInvalidResponse reports whether err is an answer that broke the protocol.
func IsInvalidResponse(err error) bool {
	var ce *CallError
	return errors.As(err, &ce) && ce.Invalid
}

func (c *Client) call(ctx context.Context, e Endpoint, webhook string, req, rsp any) (err error) {
	start := time.Now()
	labels := []string{e.Name, webhook}
	c.metrics.Calls.WithLabelValues(labels...).Inc()
	defer func() {
		c.metrics.Latency.WithLabelValues(labels...).Observe(time.Since(start).Seconds())
		if err != nil {
			c.metrics.Errors.WithLabelValues(labels...).Inc()
		}
	}()
	fail := func(code int, invalid bool, err error) error {
		return &CallError{Driver: e.Name, Webhook: webhook, StatusCode: code, Invalid: invalid, Err: err}
	}

	u, err := url.Parse(e.URL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fail(0, false, fmt.Errorf("bad driver URL %q", e.URL))
	}
	u.Path = path.Join(u.Path, webhook)
	body, err := json.Marshal(req)
	if err != nil {
		return fail(0, false, fmt.Errorf("encode request: %w", err))
	}
	timeout := e.Timeouts[webhook]
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return fail(0, false, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hrsp, err := c.http.Do(hreq)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			ce := fail(0, false, fmt.Errorf("no answer within %s: %w", timeout, err))
			ce.(*CallError).Timeout = true
			return ce
		}
		return fail(0, false, err)
	}
	defer hrsp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hrsp.Body, c.maxBytes+1))
	if err != nil {
		ce := fail(hrsp.StatusCode, false, fmt.Errorf("read answer: %w", err))
		ce.(*CallError).Timeout = errors.Is(ctx.Err(), context.DeadlineExceeded)
		return ce
	}
	if int64(len(data)) > c.maxBytes {
		return fail(hrsp.StatusCode, true, fmt.Errorf("answer larger than %d bytes", c.maxBytes))
	}
	if hrsp.StatusCode != http.StatusOK {
		return fail(hrsp.StatusCode, false, fmt.Errorf("http status code: %d, body: %s", hrsp.StatusCode, truncate(data, 512)))
	}
	if err := json.Unmarshal(data, rsp); err != nil {
		return fail(hrsp.StatusCode, true, fmt.Errorf("decode answer %s: %w", truncate(data, 256), err))
	}
	if err := validateAnswer(webhook, rsp); err != nil {
		return fail(hrsp.StatusCode, true, err)
	}
	if failed(rsp) {
		c.metrics.Fails.WithLabelValues(labels...).Inc()
	}
	return nil
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

// validateAnswer checks what the protocol requires of an answer beyond its JSON shape.
func validateAnswer(webhook string, rsp any) error {
	var common *ResponseForFailRetryHooks
	switch r := rsp.(type) {
	case *CreateLoadBalancerResponse:
		common = &r.ResponseForFailRetryHooks
	case *EnsureLoadBalancerResponse:
		common = &r.ResponseForFailRetryHooks
	case *DeleteLoadBalancerResponse:
		common = &r.ResponseForFailRetryHooks
	case *GenerateBackendAddrResponse:
		common = &r.ResponseForFailRetryHooks
		if r.Status == StatusSucc && r.BackendAddr == "" {
			return errors.New("status Succ without backendAddr")
		}
	case *BackendOperationResponse:
		common = &r.ResponseForFailRetryHooks
	case *JudgePodDeregisterResponse:
		for i, p := range r.DoNotDeregister {
			if p == nil || p.Name == "" {
				return fmt.Errorf("doNotDeregister[%d] has no metadata.name", i)
			}
		}
	}
	if common != nil {
		switch common.Status {
		case StatusSucc, StatusFail, StatusRunning:
		default:
			return fmt.Errorf("unsupported status: %q, msg: %s", common.Status, common.Msg)
		}
	}
	return nil
}

func failed(rsp any) bool {
	switch r := rsp.(type) {
	case *ValidateLoadBalancerResponse:
		return !r.Succ
	case *ValidateBackendResponse:
		return !r.Succ
	case *JudgePodDeregisterResponse:
		return !r.Succ
	case interface{ retryStatus() string }:
		return r.retryStatus() == StatusFail
	}
	return false
}

func (r *ResponseForFailRetryHooks) retryStatus() string { return r.Status }

func setRetryID(r *RequestForRetryHooks) {
	if r.RetryID == "" {
		r.RetryID = string(uuid.NewUUID())
	}
}

// Healthz calls healthz.
func (c *Client) Healthz(ctx context.Context, e Endpoint) (*HealthzResponse, error) {
	rsp := &HealthzResponse{}
	return rsp, c.call(ctx, e, Healthz, &HealthzRequest{}, rsp)
}

// ValidateLoadBalancer calls validateLoadBalancer.
func (c *Client) ValidateLoadBalancer(ctx context.Context, e Endpoint, req *ValidateLoadBalancerRequest) (*ValidateLoadBalancerResponse, error) {
	rsp := &ValidateLoadBalancerResponse{}
	return rsp, c.call(ctx, e, ValidateLoadBalancer, req, rsp)
}

// CreateLoadBalancer calls createLoadBalancer; an empty retryID is filled in.
func (c *Client) CreateLoadBalancer(ctx context.Context, e Endpoint, req *CreateLoadBalancerRequest) (*CreateLoadBalancerResponse, error) {
	setRetryID(&req.RequestForRetryHooks)
	rsp := &CreateLoadBalancerResponse{}
	return rsp, c.call(ctx, e, CreateLoadBalancer, req, rsp)
}

// EnsureLoadBalancer calls ensureLoadBalancer; an empty retryID is filled in.
func (c *Client) EnsureLoadBalancer(ctx context.Context, e Endpoint, req *EnsureLoadBalancerRequest) (*EnsureLoadBalancerResponse, error) {
	setRetryID(&req.RequestForRetryHooks)
	rsp := &EnsureLoadBalancerResponse{}
	return rsp, c.call(ctx, e, EnsureLoadBalancer, req, rsp)
}

// DeleteLoadBalancer calls deleteLoadBalancer; an empty retryID is filled in.
func (c *Client) DeleteLoadBalancer(ctx context.Context, e Endpoint, req *DeleteLoadBalancerRequest) (*DeleteLoadBalancerResponse, error) {
	setRetryID(&req.RequestForRetryHooks)
	rsp := &DeleteLoadBalancerResponse{}
	return rsp, c.call(ctx, e, DeleteLoadBalancer, req, rsp)
}

// ValidateBackend calls validateBackend.
func (c *Client) ValidateBackend(ctx context.Context, e Endpoint, req *ValidateBackendRequest) (*ValidateBackendResponse, error) {
	rsp := &ValidateBackendResponse{}
	return rsp, c.call(ctx, e, ValidateBackend, req, rsp)
}

// GenerateBackendAddr calls generateBackendAddr; an empty retryID is filled in, and a pod
// backend's port.portNumber is set to port for drivers written against LBCF ≤ 1.1.
func (c *Client) GenerateBackendAddr(ctx context.Context, e Endpoint, req *GenerateBackendAddrRequest) (*GenerateBackendAddrResponse, error) {
	setRetryID(&req.RequestForRetryHooks)
	if pb := req.PodBackend; pb != nil && pb.Port.PortNumber == nil && pb.Port.Port > 0 {
		n := pb.Port.Port
		pb.Port.PortNumber = &n
	}
	rsp := &GenerateBackendAddrResponse{}
	return rsp, c.call(ctx, e, GenerateBackendAddr, req, rsp)
}

// EnsureBackend calls ensureBackend; an empty retryID is filled in.
func (c *Client) EnsureBackend(ctx context.Context, e Endpoint, req *BackendOperationRequest) (*BackendOperationResponse, error) {
	setRetryID(&req.RequestForRetryHooks)
	rsp := &BackendOperationResponse{}
	return rsp, c.call(ctx, e, EnsureBackend, req, rsp)
}

// DeregisterBackend calls deregisterBackend; an empty retryID is filled in.
func (c *Client) DeregisterBackend(ctx context.Context, e Endpoint, req *BackendOperationRequest) (*BackendOperationResponse, error) {
	setRetryID(&req.RequestForRetryHooks)
	rsp := &BackendOperationResponse{}
	return rsp, c.call(ctx, e, DeregisterBackend, req, rsp)
}

// JudgePodDeregister calls judgePodDeregister.
func (c *Client) JudgePodDeregister(ctx context.Context, e Endpoint, req *JudgePodDeregisterRequest) (*JudgePodDeregisterResponse, error) {
	rsp := &JudgePodDeregisterResponse{}
	return rsp, c.call(ctx, e, JudgePodDeregister, req, rsp)
}

// Bound ties an Invoker to one endpoint so it satisfies Driver: the conformance suite and tools
// use it to talk to a driver at a URL as if it were local.
type Bound struct {
	Invoker  Invoker
	Endpoint Endpoint
}

var _ Driver = Bound{}

// Healthz implements Driver.
func (b Bound) Healthz(ctx context.Context, _ *HealthzRequest) (*HealthzResponse, error) {
	return b.Invoker.Healthz(ctx, b.Endpoint)
}

// ValidateLoadBalancer implements Driver.
func (b Bound) ValidateLoadBalancer(ctx context.Context, r *ValidateLoadBalancerRequest) (*ValidateLoadBalancerResponse, error) {
	return b.Invoker.ValidateLoadBalancer(ctx, b.Endpoint, r)
}

// CreateLoadBalancer implements Driver.
func (b Bound) CreateLoadBalancer(ctx context.Context, r *CreateLoadBalancerRequest) (*CreateLoadBalancerResponse, error) {
	return b.Invoker.CreateLoadBalancer(ctx, b.Endpoint, r)
}

// EnsureLoadBalancer implements Driver.
func (b Bound) EnsureLoadBalancer(ctx context.Context, r *EnsureLoadBalancerRequest) (*EnsureLoadBalancerResponse, error) {
	return b.Invoker.EnsureLoadBalancer(ctx, b.Endpoint, r)
}

// DeleteLoadBalancer implements Driver.
func (b Bound) DeleteLoadBalancer(ctx context.Context, r *DeleteLoadBalancerRequest) (*DeleteLoadBalancerResponse, error) {
	return b.Invoker.DeleteLoadBalancer(ctx, b.Endpoint, r)
}

// ValidateBackend implements Driver.
func (b Bound) ValidateBackend(ctx context.Context, r *ValidateBackendRequest) (*ValidateBackendResponse, error) {
	return b.Invoker.ValidateBackend(ctx, b.Endpoint, r)
}

// GenerateBackendAddr implements Driver.
func (b Bound) GenerateBackendAddr(ctx context.Context, r *GenerateBackendAddrRequest) (*GenerateBackendAddrResponse, error) {
	return b.Invoker.GenerateBackendAddr(ctx, b.Endpoint, r)
}

// EnsureBackend implements Driver.
func (b Bound) EnsureBackend(ctx context.Context, r *BackendOperationRequest) (*BackendOperationResponse, error) {
	return b.Invoker.EnsureBackend(ctx, b.Endpoint, r)
}

// DeregisterBackend implements Driver.
func (b Bound) DeregisterBackend(ctx context.Context, r *BackendOperationRequest) (*BackendOperationResponse, error) {
	return b.Invoker.DeregisterBackend(ctx, b.Endpoint, r)
}

// JudgePodDeregister implements Driver.
func (b Bound) JudgePodDeregister(ctx context.Context, r *JudgePodDeregisterRequest) (*JudgePodDeregisterResponse, error) {
	return b.Invoker.JudgePodDeregister(ctx, b.Endpoint, r)
}
