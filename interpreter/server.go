package interpreter

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	webhook "github.com/karmada-io/karmada/pkg/webhook/interpreter"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Paths served by Server.
const (
	// InterpretPath is where Karmada posts ResourceInterpreterContext requests.
	InterpretPath = "/interpret"
	HealthzPath   = "/healthz"
	ReadyzPath    = "/readyz"
	MetricsPath   = "/metrics"
)

// Request body limits. Karmada's own helper stops at 1 MiB and then answers without the request
// uid, which Karmada takes as a failure and backs off for minutes; an AggregateStatus request
// carries the template plus every member's status (up to the ResourceBinding's 1.5 MiB and
// more), so the limit must be far above that.
const (
	DefaultMaxRequestBytes = 32 << 20
	MinMaxRequestBytes     = 8 << 20
)

// CertificateSource provides the serving certificate. A source that also has
// Start(context.Context) error (like controller-runtime's certwatcher) is started with the server,
// which is how certificates are reloaded.
type CertificateSource interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// ServerOptions configure a Server.
type ServerOptions struct {
	// BindAddress is the HTTPS listen address, e.g. ":9443" or "127.0.0.1:0".
	BindAddress string
	// Certificates provides the serving certificate (required: the server speaks HTTPS only).
	Certificates CertificateSource
	// MaxRequestBytes limits request bodies; 0 means DefaultMaxRequestBytes. At least
	// MinMaxRequestBytes.
	MaxRequestBytes int64
	// Registerer receives the metrics (nil: not registered); Gatherer is served at /metrics (nil:
	// no /metrics).
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Log is the server's logger.
	Log logr.Logger
}

// Server serves the interpreter over HTTPS, with /healthz, /readyz and /metrics. It is a
// controller-runtime manager.Runnable that needs no leader election: every replica answers.
type Server struct {
	handler *Handler
	opts    ServerOptions
	metrics *Metrics
	log     logr.Logger
	mux     *http.ServeMux
	started chan struct{}
	mu      sync.Mutex
	addr    net.Addr
	serving bool
}

// NewServer returns a server for h.
func NewServer(h *Handler, opts ServerOptions) (*Server, error) {
	if opts.Certificates == nil {
		return nil, errors.New("interpreter server: no certificate source (HTTPS only)")
	}
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.MaxRequestBytes < MinMaxRequestBytes {
		return nil, fmt.Errorf("interpreter server: request body limit %d is below %d bytes", opts.MaxRequestBytes, MinMaxRequestBytes)
	}
	m, err := NewMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("interpreter server: register metrics: %w", err)
	}
	s := &Server{handler: h, opts: opts, metrics: m, log: opts.Log, started: make(chan struct{})}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc(InterpretPath, s.serveInterpret)
	s.mux.HandleFunc(HealthzPath, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	s.mux.HandleFunc(ReadyzPath, s.serveReadyz)
	if opts.Gatherer != nil {
		s.mux.Handle(MetricsPath, promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{}))
	}
	return s, nil
}

// HTTPHandler returns the server's routes without TLS, for in-process use.
func (s *Server) HTTPHandler() http.Handler { return s.mux }

// NeedLeaderElection implements controller-runtime's LeaderElectionRunnable: every replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

// Started is closed once Start has bound its listener (or failed to).
func (s *Server) Started() <-chan struct{} { return s.started }

// Addr returns the bound address once Started is closed, or nil when binding failed.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Start serves until ctx is done, then shuts down gracefully.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.BindAddress)
	if err != nil {
		close(s.started)
		return fmt.Errorf("interpreter server: listen on %s: %w", s.opts.BindAddress, err)
	}
	s.mu.Lock()
	s.addr = ln.Addr()
	s.mu.Unlock()

	if starter, ok := s.opts.Certificates.(interface{ Start(context.Context) error }); ok {
		go func() {
			if err := starter.Start(ctx); err != nil {
				// The loaded certificate keeps being served; only reloads stop.
				s.log.Error(err, "Certificate reloading stopped")
			}
		}()
	}

	srv := &http.Server{
		Handler: s.mux,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: s.opts.Certificates.GetCertificate,
			// Karmada speaks HTTP/1.1; not offering HTTP/2 also keeps its rapid-reset class of
			// attacks away, as controller-runtime does for webhooks.
			NextProtos: []string{"http/1.1"},
		},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	s.mu.Lock()
	s.serving = true
	s.mu.Unlock()
	close(s.started)
	s.log.Info("Serving resource interpreter", "address", ln.Addr().String(), "path", InterpretPath)

	select {
	case err := <-errc:
		s.setServing(false)
		return fmt.Errorf("interpreter server: %w", err)
	case <-ctx.Done():
	}
	s.setServing(false)
	// Answers take milliseconds; the grace period is for them. Connections that were opened but
	// never carried a request count as busy for net/http for 5 s, so they are closed after it.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		if cerr := srv.Close(); cerr != nil {
			return fmt.Errorf("interpreter server: close: %w", cerr)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("interpreter server: shutdown: %w", err)
		}
	}
	return nil
}

// shutdownGrace bounds how long Start waits for requests in flight once its context is done.
const shutdownGrace = 3 * time.Second

func (s *Server) setServing(v bool) {
	s.mu.Lock()
	s.serving = v
	s.mu.Unlock()
}

// serveReadyz answers 200 while the server is serving with a currently valid certificate.
func (s *Server) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	if err := s.ready(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

func (s *Server) ready() error {
	s.mu.Lock()
	serving := s.serving
	s.mu.Unlock()
	if !serving {
		return errors.New("not serving")
	}
	cert, err := s.opts.Certificates.GetCertificate(nil)
	if err != nil || cert == nil || len(cert.Certificate) == 0 {
		return fmt.Errorf("no serving certificate: %v", err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		return errors.New("serving certificate not parsed")
	}
	if now := time.Now(); now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		return fmt.Errorf("serving certificate valid from %s to %s only", leaf.NotBefore.Format(time.RFC3339), leaf.NotAfter.Format(time.RFC3339))
	}
	return nil
}

// serveInterpret decodes a ResourceInterpreterContext itself (no 1 MiB cap, media-type
// parameters accepted), answers it, and always replies with a ResourceInterpreterContext that
// carries the request uid whenever it can be found.
func (s *Server) serveInterpret(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.writeResponse(w, "", webhook.Errored(http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed", r.Method)))
		s.metrics.observe("", "", outcomeBadRequest, 0, start)
		return
	}
	buf := getBuffer()
	defer putBuffer(buf)
	body, err := readBody(buf, w, r, s.opts.MaxRequestBytes)
	if err != nil {
		var tooBig *http.MaxBytesError
		code := int32(http.StatusBadRequest)
		if errors.As(err, &tooBig) {
			code = http.StatusRequestEntityTooLarge
			err = fmt.Errorf("request body exceeds %d bytes", s.opts.MaxRequestBytes)
		}
		uid := peekUID(body)
		s.log.Error(err, "Cannot read interpreter request", "uid", uid)
		s.writeResponse(w, uid, webhook.Errored(code, err))
		s.metrics.observe("", "", outcomeBadRequest, len(body), start)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		err := fmt.Errorf("content type %q, expected application/json", r.Header.Get("Content-Type"))
		uid := peekUID(body)
		s.log.Error(err, "Cannot decode interpreter request", "uid", uid)
		s.writeResponse(w, uid, webhook.Errored(http.StatusUnsupportedMediaType, err))
		s.metrics.observe("", "", outcomeBadRequest, len(body), start)
		return
	}
	decoded, err := DecodeRequest(body)
	if err != nil {
		var uid types.UID
		if decoded != nil { // what was read before the error
			uid = decoded.UID
		}
		s.log.Error(err, "Cannot decode interpreter request", "uid", uid)
		s.writeResponse(w, uid, webhook.Errored(http.StatusBadRequest, err))
		s.metrics.observe("", "", outcomeBadRequest, len(body), start)
		return
	}
	req := webhook.Request{ResourceInterpreterRequest: *decoded}
	resp, outcome := s.handler.Interpret(r.Context(), req)
	s.writeResponse(w, req.UID, resp)
	kind := lbcfKind(req.Kind)
	if kind == "" && req.Kind.Kind != "" {
		kind = "other"
	}
	s.metrics.observe(req.Operation, kind, string(outcome), len(body), start)
}

// bodyBuffers recycles request buffers: AggregateStatus bodies are hundreds of kilobytes and
// would otherwise be the bulk of the server's garbage. Decoded requests point into the buffer,
// so it is only returned once the answer is written.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer keeps rare huge buffers out of the pool.
const maxPooledBuffer = 4 << 20

func getBuffer() *bytes.Buffer { return bodyBuffers.Get().(*bytes.Buffer) }

func putBuffer(b *bytes.Buffer) {
	if b.Cap() > maxPooledBuffer {
		return
	}
	b.Reset()
	bodyBuffers.Put(b)
}

// readBody reads the request body into buf, up to limit bytes (sized from Content-Length when
// given), and returns what was read even on error.
func readBody(buf *bytes.Buffer, w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > 0 && r.ContentLength <= limit {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	return buf.Bytes(), err
}

func (s *Server) writeResponse(w http.ResponseWriter, uid types.UID, resp webhook.Response) {
	resp.UID = uid
	if resp.Status == nil {
		resp.Status = &configv1alpha1.RequestStatus{Code: http.StatusOK}
	}
	out, err := encodeResponse(&resp.ResourceInterpreterResponse)
	if err != nil {
		// Only a handler bug gets here: answer a failure Karmada can read.
		s.log.Error(err, "Cannot encode interpreter response", "uid", uid)
		failed := webhook.Errored(http.StatusInternalServerError, fmt.Errorf("encode response: %w", err))
		failed.UID = uid
		out, _ = encodeResponse(&failed.ResourceInterpreterResponse)
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(out); err != nil {
		s.log.V(1).Info("Cannot write interpreter response", "uid", uid, "error", err.Error())
	}
}

// contextHead starts every answer: Karmada ignores the type, other readers like it.
var contextHead = `{"apiVersion":"` + configv1alpha1.GroupVersion.String() + `","kind":"ResourceInterpreterContext","response":`

// encodeResponse encodes a ResourceInterpreterContext holding resp. The raw status is spliced in
// as it is rather than re-validated by encoding/json: the handler builds it from JSON it has
// validated, and for a member with many candidates it is most of the answer.
func encodeResponse(resp *configv1alpha1.ResourceInterpreterResponse) ([]byte, error) {
	raw := resp.RawStatus
	shallow := *resp
	shallow.RawStatus = nil
	body, err := json.Marshal(&shallow)
	if err != nil {
		return nil, err
	}
	if raw != nil && !isJSONObject(raw.Raw) {
		return nil, fmt.Errorf("raw status is not a JSON object")
	}
	out := make([]byte, 0, len(contextHead)+len(body)+16+len(rawBytes(raw))+2)
	out = append(out, contextHead...)
	if raw != nil {
		// body always holds uid and successful, so it ends in "...}" after at least one member.
		out = append(out, body[:len(body)-1]...)
		out = append(out, `,"rawStatus":`...)
		out = append(out, raw.Raw...)
		out = append(out, '}')
	} else {
		out = append(out, body...)
	}
	return append(out, '}', '\n'), nil
}

func rawBytes(raw *runtime.RawExtension) []byte {
	if raw == nil {
		return nil
	}
	return raw.Raw
}

// peekUID finds request.uid in a body that could not be decoded (too large, truncated or
// otherwise malformed after its start): Karmada puts it first in the request, and an answer
// with the right uid fails fast instead of looking like a protocol error.
func peekUID(body []byte) types.UID {
	if req, _ := DecodeRequest(body); req != nil {
		return req.UID
	}
	return ""
}
