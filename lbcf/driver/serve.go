package driver

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbfed/lbfed/reloadfile"
)

// A driver webhook server is a remote control for a shared front end: whoever reaches its port
// can deregister every backend of a VIP. The server kit therefore authenticates its callers by
// mutual TLS (ServerOptions.ClientCAFile), for every driver served with it; plain HTTP and TLS
// without client certificates need an explicit InsecureNoClientAuth.

// Refusal reasons (label "reason" of lbfed_driver_auth_refusals_total).
const (
	RefusalNoCertificate     = "no_certificate"
	RefusalUntrusted         = "untrusted_certificate"
	RefusalSubjectNotAllowed = "subject_not_allowed"
)

// ServerOptions configure a driver webhook server.
type ServerOptions struct {
	// Addr is the listen address, e.g. ":8443".
	Addr string
	// CertFile and KeyFile are the serving certificate and key (PEM). Empty: plain HTTP, which
	// needs InsecureNoClientAuth. Both are re-read when they change (new connections get the new
	// certificate).
	CertFile, KeyFile string
	// ClientCAFiles are the CA bundles (PEM) a caller's client certificate must chain to (with
	// the clientAuth usage): e.g. the standalone controller's CA and the federation's. Re-read
	// when they change: the next request is checked against the new bundles.
	ClientCAFiles []string
	// AllowedClientNames, when not empty, are the only subject common names accepted.
	AllowedClientNames []string
	// InsecureNoClientAuth serves without authenticating callers: plain HTTP or TLS without client
	// certificates. Anyone who reaches the port can then program the front end.
	InsecureNoClientAuth bool
	// Registerer receives lbfed_driver_auth_refusals_total (nil: not registered).
	Registerer prometheus.Registerer
	// Log is the server's logger.
	Log logr.Logger
}

// ServerFlags are the command-line flags of ServerOptions, the same for every driver binary.
type ServerFlags struct {
	Addr, CertFile, KeyFile, ClientCAFile, AllowedClientNames string
	InsecureNoClientAuth                                      bool
}

// Register adds the flags to fs; defaultAddr is the default of --listen.
func (f *ServerFlags) Register(fs *flag.FlagSet, defaultAddr string) {
	fs.StringVar(&f.Addr, "listen", defaultAddr, "address of the webhook server")
	fs.StringVar(&f.CertFile, "tls-cert-file", "", "serving certificate (PEM), re-read when it changes; empty serves plain HTTP, which needs --insecure-no-client-auth")
	fs.StringVar(&f.KeyFile, "tls-key-file", "", "serving key (PEM), re-read when it changes")
	fs.StringVar(&f.ClientCAFile, "client-ca-file", "", "comma-separated CA bundles (PEM) that callers' client certificates must chain to (mutual TLS); re-read when they change. Calls without a certificate get 401, with another CA's or a refused subject 403")
	fs.StringVar(&f.AllowedClientNames, "client-allowed-names", "", "comma-separated subject common names accepted from --client-ca-file (empty: any certificate of that CA)")
	fs.BoolVar(&f.InsecureNoClientAuth, "insecure-no-client-auth", false, "serve without authenticating callers (plain HTTP without --tls-cert-file, or TLS without --client-ca-file): anyone who reaches the port can program the front end")
}

// Options returns the flags as ServerOptions.
func (f *ServerFlags) Options(reg prometheus.Registerer, log logr.Logger) ServerOptions {
	return ServerOptions{Addr: f.Addr, CertFile: f.CertFile, KeyFile: f.KeyFile, ClientCAFiles: splitList(f.ClientCAFile),
		AllowedClientNames: splitList(f.AllowedClientNames), InsecureNoClientAuth: f.InsecureNoClientAuth, Registerer: reg, Log: log}
}

func splitList(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// Server serves a driver's webhooks (a handler of NewHandler, or one wrapping it) with the
// server kit's transport security and caller authentication.
type Server struct {
	opts    ServerOptions
	handler http.Handler
	tls     *tls.Config
	auth    *ClientAuth
}

// NewServer checks opts and prepares h to be served. It refuses to serve without caller
// authentication unless opts.InsecureNoClientAuth says so, and then logs a warning.
func NewServer(h http.Handler, opts ServerOptions) (*Server, error) {
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		return nil, errors.New("driver server: the serving certificate needs both --tls-cert-file and --tls-key-file")
	}
	s := &Server{opts: opts}
	if opts.CertFile != "" {
		pair, err := reloadfile.KeyPair(opts.CertFile, opts.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("driver server: %w", err)
		}
		s.tls = &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				c, _, err := pair.Get()
				if err != nil && c != nil {
					opts.Log.Error(err, "Serving certificate files changed but cannot be loaded; serving the previous one", "cert", opts.CertFile)
					err = nil
				}
				return c, err
			},
		}
	}
	switch {
	case len(opts.ClientCAFiles) > 0:
		if s.tls == nil {
			return nil, errors.New("driver server: --client-ca-file needs TLS (--tls-cert-file, --tls-key-file)")
		}
		auth, err := NewClientAuth(opts.ClientCAFiles, opts.AllowedClientNames, opts.Registerer, opts.Log)
		if err != nil {
			return nil, fmt.Errorf("driver server: %w", err)
		}
		s.auth = auth
		// The certificate is asked for, not required, in the handshake: the handler then answers
		// a caller without one (401) or with a wrong one (403) in words instead of a TLS alert.
		s.tls.ClientAuth = tls.RequestClientCert
	case !opts.InsecureNoClientAuth:
		if s.tls == nil {
			return nil, errors.New("driver server: refusing to serve plain HTTP: anyone who reaches the port could program the front end. Set --tls-cert-file, --tls-key-file and --client-ca-file, or --insecure-no-client-auth to accept it")
		}
		return nil, errors.New("driver server: refusing to serve without client authentication: anyone who reaches the port could program the front end. Set --client-ca-file, or --insecure-no-client-auth to accept it")
	default:
		opts.Log.Info("WARNING: serving driver webhooks without client authentication (--insecure-no-client-auth): anyone who reaches the port can program the front end",
			"tls", s.tls != nil)
	}
	if h != nil {
		s.SetHandler(h)
	}
	return s, nil
}

// Authenticated reports whether callers are authenticated.
func (s *Server) Authenticated() bool { return s.auth != nil }

// TLS reports whether the server speaks TLS.
func (s *Server) TLS() bool { return s.tls != nil }

// Handler is the served handler, authentication included (for in-process use).
func (s *Server) Handler() http.Handler { return s.handler }

// SetHandler sets the driver's handler when it was not known to NewServer (a binary checks its
// server options before it builds the driver); call it before Serve.
func (s *Server) SetHandler(h http.Handler) {
	if s.auth != nil {
		h = s.auth.Wrap(h)
	}
	s.handler = h
}

// Serve serves on ln until ctx is done, then shuts down gracefully: calls in flight get at most
// shutdown to finish, then their connections are closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener, shutdown time.Duration) error {
	srv := &http.Server{Handler: s.handler, TLSConfig: s.tls, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() {
		if s.tls != nil {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	return nil
}

// ClientAuth authenticates driver callers by their TLS client certificate.
type ClientAuth struct {
	ca       *reloadfile.Parsed[*x509.CertPool]
	caFiles  []string
	allowed  map[string]bool
	refusals *prometheus.CounterVec
	log      logr.Logger

	// accepted remembers certificates already verified against a version of the client CAs, so
	// that a connection's many calls cost one chain verification (BenchmarkServerCall).
	mu       sync.Mutex
	accepted map[[sha256.Size]byte]acceptance
}

// acceptance is a verified certificate: valid until notAfter while the CAs stay at caVersion.
type acceptance struct {
	caVersion uint64
	notAfter  time.Time
}

// maxAccepted bounds the cache of verified certificates (a driver has a handful of callers).
const maxAccepted = 1024

// NewClientAuth accepts client certificates chaining to one of caFiles (re-read when they
// change), with a subject common name in allowed when allowed is not empty. Refusals are counted
// in lbfed_driver_auth_refusals_total{reason}, registered with reg when not nil.
func NewClientAuth(caFiles []string, allowed []string, reg prometheus.Registerer, log logr.Logger) (*ClientAuth, error) {
	ca, err := reloadfile.CertPool(caFiles...)
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	a := &ClientAuth{ca: ca, caFiles: caFiles, log: log,
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lbfed_driver_auth_refusals_total",
			Help: "Driver webhook calls refused for their client certificate, by reason: no_certificate (401), untrusted_certificate or subject_not_allowed (403)."}, []string{"reason"})}
	for _, r := range []string{RefusalNoCertificate, RefusalUntrusted, RefusalSubjectNotAllowed} {
		a.refusals.WithLabelValues(r)
	}
	if reg != nil {
		a.refusals = registerOrReuse(reg, a.refusals)
	}
	if len(allowed) > 0 {
		a.allowed = map[string]bool{}
		for _, n := range allowed {
			a.allowed[n] = true
		}
	}
	return a, nil
}

// Refusals is the refusal counter (for tests and metrics).
func (a *ClientAuth) Refusals() *prometheus.CounterVec { return a.refusals }

// Wrap lets through to h only requests whose client certificate is accepted.
func (a *ClientAuth) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, reason, msg := a.check(r)
		if code == 0 {
			h.ServeHTTP(w, r)
			return
		}
		a.refusals.WithLabelValues(reason).Inc()
		a.log.V(1).Info("Refused a driver call", "reason", reason, "remote", r.RemoteAddr, "path", r.URL.Path, "msg", msg)
		// A refused HTTP/1.1 connection is closed: a caller whose certificate was renewed comes
		// back with a new handshake instead of repeating the refused one. (The kit's client
		// opens new connections itself when its certificate files change, HTTP/2 included.)
		w.Header().Set("Connection", "close")
		writeError(w, code, msg)
	})
}

func (a *ClientAuth) check(r *http.Request) (code int, reason, msg string) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return http.StatusUnauthorized, RefusalNoCertificate,
			"client certificate required: this driver accepts only callers presenting a certificate of its client CA"
	}
	pool, caVersion, err := a.ca.Get()
	if err != nil && pool == nil {
		return http.StatusForbidden, RefusalUntrusted, "client CA not loaded"
	} else if err != nil {
		a.log.Error(err, "Client CA files changed but cannot be loaded; checking against the previous ones", "files", a.caFiles)
	}
	leaf := r.TLS.PeerCertificates[0]
	sum := sha256.Sum256(leaf.Raw)
	a.mu.Lock()
	hit, ok := a.accepted[sum]
	a.mu.Unlock()
	if ok && hit.caVersion == caVersion && time.Now().Before(hit.notAfter) {
		return 0, "", ""
	}
	opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, c := range r.TLS.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(opts); err != nil {
		return http.StatusForbidden, RefusalUntrusted,
			fmt.Sprintf("client certificate %q not accepted: %v", leaf.Subject.CommonName, err)
	}
	if a.allowed != nil && !a.allowed[leaf.Subject.CommonName] {
		return http.StatusForbidden, RefusalSubjectNotAllowed,
			fmt.Sprintf("client certificate subject %q is not allowed to call this driver", leaf.Subject.CommonName)
	}
	a.mu.Lock()
	if a.accepted == nil || len(a.accepted) >= maxAccepted {
		a.accepted = map[[sha256.Size]byte]acceptance{}
	}
	a.accepted[sum] = acceptance{caVersion: caVersion, notAfter: leaf.NotAfter}
	a.mu.Unlock()
	return 0, "", ""
}
