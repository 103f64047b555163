package driver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lbfed/lbfed/servingcert"
)

// testCA signs certificates for the tests.
type testCA struct{ *servingcert.CA }

func newTestCA(t testing.TB, cn string) *testCA {
	t.Helper()
	ca, err := servingcert.NewCA(cn, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{ca}
}

// issue returns a PEM certificate and key for cn at 127.0.0.1 with the given extended usage.
func (ca *testCA) issue(t testing.TB, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(cn, []string{"127.0.0.1"}, usage)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// writeFile replaces path as a Secret volume update does (a new file renamed over the old).
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// countingDriver counts the calls that reach the driver.
type countingDriver struct {
	echoDriver
	mu    sync.Mutex
	calls int
}

func (d *countingDriver) DeregisterBackend(ctx context.Context, r *BackendOperationRequest) (*BackendOperationResponse, error) {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
	return d.echoDriver.DeregisterBackend(ctx, r)
}

func (d *countingDriver) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// authFixture is a driver served by the kit with mutual TLS on loopback.
type authFixture struct {
	dir      string
	serverCA *testCA
	clientCA *testCA
	driver   *countingDriver
	server   *Server
	url      string
}

func startAuthFixture(t *testing.T, allowed ...string) *authFixture {
	t.Helper()
	f := &authFixture{dir: t.TempDir(), serverCA: newTestCA(t, "serving-ca"), clientCA: newTestCA(t, "client-ca"), driver: &countingDriver{}}
	crt, key := f.serverCA.issue(t, "driver", x509.ExtKeyUsageServerAuth)
	writeFile(t, f.path("tls.crt"), crt)
	writeFile(t, f.path("tls.key"), key)
	writeFile(t, f.path("client-ca.crt"), f.clientCA.PEM)
	writeFile(t, f.path("serving-ca.crt"), f.serverCA.PEM)
	srv, err := NewServer(NewHandler(f.driver, HandlerOptions{}), ServerOptions{
		CertFile: f.path("tls.crt"), KeyFile: f.path("tls.key"), ClientCAFiles: []string{f.path("client-ca.crt")},
		AllowedClientNames: allowed, Registerer: prometheus.NewRegistry(), Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	f.server = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 100*time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	f.url = "https://" + ln.Addr().String()
	return f
}

func (f *authFixture) path(name string) string { return filepath.Join(f.dir, name) }

// client returns a driver client presenting the certificate in files prefix.crt/prefix.key
// (none when prefix is empty), trusting the serving CA.
func (f *authFixture) client(t *testing.T, prefix string) *Client {
	t.Helper()
	files := TLSFiles{CAFile: f.path("serving-ca.crt")}
	if prefix != "" {
		files.CertFile, files.KeyFile = f.path(prefix+".crt"), f.path(prefix+".key")
	}
	rt, err := NewFilesTransport(files)
	if err != nil {
		t.Fatal(err)
	}
	return NewClient(ClientOptions{Transport: rt})
}

func (f *authFixture) writeClientCert(t *testing.T, prefix string, ca *testCA, cn string, usage x509.ExtKeyUsage) {
	crt, key := ca.issue(t, cn, usage)
	writeFile(t, f.path(prefix+".crt"), crt)
	writeFile(t, f.path(prefix+".key"), key)
}

func (f *authFixture) deregister(c *Client) error {
	_, err := c.DeregisterBackend(context.Background(), Endpoint{Name: "ns/d", URL: f.url}, &BackendOperationRequest{BackendAddr: "10.0.0.1:80"})
	return err
}

func statusOf(err error) int {
	if ce, ok := err.(*CallError); ok {
		return ce.StatusCode
	}
	return 0
}

func TestServerAuthenticatesCallersByClientCertificate(t *testing.T) {
	other := newTestCA(t, "other-ca")
	cases := []struct {
		name    string
		cert    func(f *authFixture) string // files prefix of the client certificate, "" for none
		allowed []string
		code    int
		reason  string
		msg     string
	}{
		{name: "no certificate", cert: func(*authFixture) string { return "" }, code: 401, reason: RefusalNoCertificate, msg: "client certificate required"},
		{name: "certificate of another CA", cert: func(f *authFixture) string {
			f.writeClientCert(t, "other", other, "lbfed-controller", x509.ExtKeyUsageClientAuth)
			return "other"
		}, code: 403, reason: RefusalUntrusted, msg: "not accepted"},
		{name: "the CA's certificate without client usage", cert: func(f *authFixture) string {
			f.writeClientCert(t, "server-usage", f.clientCA, "lbfed-controller", x509.ExtKeyUsageServerAuth)
			return "server-usage"
		}, code: 403, reason: RefusalUntrusted, msg: "not accepted"},
		{name: "subject not allowed", allowed: []string{"lbfed-controller"}, cert: func(f *authFixture) string {
			f.writeClientCert(t, "someone", f.clientCA, "someone-else", x509.ExtKeyUsageClientAuth)
			return "someone"
		}, code: 403, reason: RefusalSubjectNotAllowed, msg: "is not allowed to call this driver"},
		{name: "the controller's certificate", allowed: []string{"lbfed-controller"}, cert: func(f *authFixture) string {
			f.writeClientCert(t, "controller", f.clientCA, "lbfed-controller", x509.ExtKeyUsageClientAuth)
			return "controller"
		}, code: 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := startAuthFixture(t, tc.allowed...)
			err := f.deregister(f.client(t, tc.cert(f)))
			refusals := f.server.auth.Refusals()
			if tc.code == 200 {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(f.driver.count()).To(Equal(1), "the accepted call reached the driver")
				g.Expect(testutil.CollectAndCount(refusals)).To(Equal(3), "every reason is exported from the start")
				for _, r := range []string{RefusalNoCertificate, RefusalUntrusted, RefusalSubjectNotAllowed} {
					g.Expect(testutil.ToFloat64(refusals.WithLabelValues(r))).To(BeZero())
				}
				return
			}
			g.Expect(statusOf(err)).To(Equal(tc.code), "%v", err)
			g.Expect(err).To(MatchError(ContainSubstring(tc.msg)))
			g.Expect(f.driver.count()).To(BeZero(), "a refused call never reaches the driver")
			g.Expect(testutil.ToFloat64(refusals.WithLabelValues(tc.reason))).To(Equal(1.0))
			// The same server accepts the controller's certificate: it was alive and able to act.
			f.writeClientCert(t, "controller", f.clientCA, "lbfed-controller", x509.ExtKeyUsageClientAuth)
			g.Expect(f.deregister(f.client(t, "controller"))).To(Succeed())
			g.Expect(f.driver.count()).To(Equal(1))
		})
	}
}

func TestServerRefusesToServeUnauthenticatedUnlessTold(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "ca")
	crt, key := ca.issue(t, "driver", x509.ExtKeyUsageServerAuth)
	writeFile(t, filepath.Join(dir, "tls.crt"), crt)
	writeFile(t, filepath.Join(dir, "tls.key"), key)
	writeFile(t, filepath.Join(dir, "ca.crt"), ca.PEM)
	tlsFiles := ServerOptions{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	cases := []struct {
		name string
		opts ServerOptions
		err  string
	}{
		{"plain HTTP", ServerOptions{}, "refusing to serve plain HTTP"},
		{"TLS without a client CA", tlsFiles, "refusing to serve without client authentication"},
		{"a client CA without TLS", ServerOptions{ClientCAFiles: []string{filepath.Join(dir, "ca.crt")}}, "needs TLS"},
		{"a certificate without its key", ServerOptions{CertFile: tlsFiles.CertFile}, "both"},
		{"a missing client CA", ServerOptions{CertFile: tlsFiles.CertFile, KeyFile: tlsFiles.KeyFile, ClientCAFiles: []string{filepath.Join(dir, "nope")}}, "client CA"},
		{"plain HTTP, insecure on purpose", ServerOptions{InsecureNoClientAuth: true}, ""},
		{"TLS without client CA, insecure on purpose", ServerOptions{CertFile: tlsFiles.CertFile, KeyFile: tlsFiles.KeyFile, InsecureNoClientAuth: true}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.opts.Log = logr.Discard()
			s, err := NewServer(http.NotFoundHandler(), tc.opts)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Authenticated()).To(BeFalse())
		})
	}
}

// Certificates are rotated by replacing files, as Kubernetes updates a mounted Secret: the
// running server and client use the new ones without a restart.
func TestServerAndClientFollowRotatedCertificates(t *testing.T) {
	g := NewWithT(t)
	f := startAuthFixture(t)
	f.writeClientCert(t, "controller", f.clientCA, "lbfed-controller", x509.ExtKeyUsageClientAuth)
	c := f.client(t, "controller")
	g.Expect(f.deregister(c)).To(Succeed())

	// A new serving certificate: new connections get it.
	crt, key := f.serverCA.issue(t, "driver-renewed", x509.ExtKeyUsageServerAuth)
	writeFile(t, f.path("tls.crt"), crt)
	writeFile(t, f.path("tls.key"), key)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.serverCA.PEM)
	conn, err := tls.Dial("tcp", f.url[len("https://"):], &tls.Config{RootCAs: pool})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conn.ConnectionState().PeerCertificates[0].Subject.CommonName).To(Equal("driver-renewed"))
	conn.Close()

	// A new client CA: the old client certificate is refused from the next call on…
	newCA := newTestCA(t, "client-ca-2")
	writeFile(t, f.path("client-ca.crt"), newCA.PEM)
	err = f.deregister(c)
	g.Expect(statusOf(err)).To(Equal(403), "%v", err)
	// …and the same client, once its certificate files are replaced, is accepted again.
	f.writeClientCert(t, "controller", newCA, "lbfed-controller", x509.ExtKeyUsageClientAuth)
	g.Expect(f.deregister(c)).To(Succeed())
	g.Expect(f.driver.count()).To(Equal(2))

	// A new driver CA on the client side: the client verifies against it from the next call.
	otherServing := newTestCA(t, "serving-ca-2")
	crt, key = otherServing.issue(t, "driver-3", x509.ExtKeyUsageServerAuth)
	writeFile(t, f.path("tls.crt"), crt)
	writeFile(t, f.path("tls.key"), key)
	writeFile(t, f.path("serving-ca.crt"), newTestCA(t, "unrelated").PEM)
	g.Expect(f.deregister(c)).To(MatchError(ContainSubstring("certificate signed by unknown authority")), "the client verifies against the file's new content")
	writeFile(t, f.path("serving-ca.crt"), otherServing.PEM)
	g.Expect(f.deregister(c)).To(Succeed())
	g.Expect(f.driver.count()).To(Equal(3))
}

// BenchmarkServerCall measures one driver call through the kit over loopback with keep-alive:
// plain HTTP, TLS without client authentication, and mutual TLS (the client certificate checked
// against the client CA on every call).
//
//	go test -run '^$' -bench BenchmarkServerCall -benchtime 3000x ./lbcf/driver/
func BenchmarkServerCall(b *testing.B) {
	t := &testing.T{}
	for _, mode := range []string{"http", "tls", "mutual-tls"} {
		b.Run(mode, func(b *testing.B) {
			f := &authFixture{dir: b.TempDir(), serverCA: newTestCA(t, "serving-ca"), clientCA: newTestCA(t, "client-ca"), driver: &countingDriver{}}
			opts := ServerOptions{Log: logr.Discard(), InsecureNoClientAuth: mode != "mutual-tls"}
			files := TLSFiles{}
			if mode != "http" {
				crt, key := f.serverCA.issue(t, "driver", x509.ExtKeyUsageServerAuth)
				writeFile(t, f.path("tls.crt"), crt)
				writeFile(t, f.path("tls.key"), key)
				writeFile(t, f.path("serving-ca.crt"), f.serverCA.PEM)
				opts.CertFile, opts.KeyFile = f.path("tls.crt"), f.path("tls.key")
				files.CAFile = f.path("serving-ca.crt")
			}
			if mode == "mutual-tls" {
				writeFile(t, f.path("client-ca.crt"), f.clientCA.PEM)
				f.writeClientCert(t, "controller", f.clientCA, "lbfed-controller", x509.ExtKeyUsageClientAuth)
				opts.ClientCAFiles = []string{f.path("client-ca.crt")}
				opts.AllowedClientNames = []string{"lbfed-controller"}
				files.CertFile, files.KeyFile = f.path("controller.crt"), f.path("controller.key")
			}
			srv, err := NewServer(NewHandler(f.driver, HandlerOptions{}), opts)
			if err != nil {
				b.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _ = srv.Serve(ctx, ln, 100*time.Millisecond) }()
			scheme := "http://"
			if mode != "http" {
				scheme = "https://"
			}
			f.url = scheme + ln.Addr().String()
			rt, err := NewFilesTransport(files)
			if err != nil {
				b.Fatal(err)
			}
			c := NewClient(ClientOptions{Transport: rt})
			if err := f.deregister(c); err != nil { // connection set up outside the timing
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := f.deregister(c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
