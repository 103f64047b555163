package driver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func answer(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
}

func TestClientCallsThePathBelowTheDriverURL(t *testing.T) {
	g := NewWithT(t)
	var gotPath, gotType string
	var gotBody map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotType = r.URL.Path, r.Header.Get("Content-Type")
		_ = json.NewDecoder(r.Body).Decode(&gotBody)
		answer(`{"status":"Succ","msg":"","minRetryDelayInSeconds":0,"backendAddr":"10.0.0.5:80"}`)(w, r)
	}))
	defer srv.Close()
	c := NewClient(ClientOptions{})
	pod := samplePod()
	rsp, err := c.GenerateBackendAddr(context.Background(), Endpoint{Name: "ns/d", URL: srv.URL + "/prefix/"},
		&GenerateBackendAddrRequest{RequestForRetryHooks: RequestForRetryHooks{RecordID: "r"}, PodBackend: &PodBackendInRequest{Pod: pod, Port: portSel(80)}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rsp.BackendAddr).To(Equal("10.0.0.5:80"))
	g.Expect(gotPath).To(Equal("/prefix/generateBackendAddr"))
	g.Expect(gotType).To(Equal("application/json"))
	g.Expect(gotBody["retryID"]).NotTo(BeEmpty(), "a fresh retryID is filled in")
	g.Expect(gotBody["podBackend"].(map[string]any)["port"]).To(HaveKeyWithValue("portNumber", BeNumerically("==", 80)),
		"portNumber repeats port for old drivers")
}

func TestClientErrorsNameDriverWebhookAndReason(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
		call    func(c *Client, e Endpoint) error
		invalid bool
		want    string
	}{
		{"http 500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) },
			func(c *Client, e Endpoint) error {
				_, err := c.EnsureBackend(context.Background(), e, &BackendOperationRequest{})
				return err
			},
			false, "http status code: 500, body: boom"},
		{"bad json", answer(`{"status":`),
			func(c *Client, e Endpoint) error {
				_, err := c.EnsureBackend(context.Background(), e, &BackendOperationRequest{})
				return err
			},
			true, "decode answer"},
		{"unknown status", answer(`{"status":"Done","msg":"ok"}`),
			func(c *Client, e Endpoint) error {
				_, err := c.CreateLoadBalancer(context.Background(), e, &CreateLoadBalancerRequest{})
				return err
			},
			true, `unsupported status: "Done", msg: ok`},
		{"succ without address", answer(`{"status":"Succ"}`),
			func(c *Client, e Endpoint) error {
				_, err := c.GenerateBackendAddr(context.Background(), e, &GenerateBackendAddrRequest{})
				return err
			},
			true, "without backendAddr"},
		{"judge echo without name", answer(`{"succ":true,"doNotDeregister":[{"metadata":{}}]}`),
			func(c *Client, e Endpoint) error {
				_, err := c.JudgePodDeregister(context.Background(), e, &JudgePodDeregisterRequest{})
				return err
			},
			true, "no metadata.name"},
		{"too large", answer(`{"status":"Succ","msg":"` + strings.Repeat("x", 2048) + `"}`),
			func(c *Client, e Endpoint) error {
				_, err := c.DeleteLoadBalancer(context.Background(), e, &DeleteLoadBalancerRequest{})
				return err
			},
			true, "larger than 1024 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			c := NewClient(ClientOptions{MaxResponseBytes: 1024})
			err := tc.call(c, Endpoint{Name: "team/radware", URL: srv.URL})
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(HavePrefix("driver team/radware webhook "))
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
			g.Expect(IsInvalidResponse(err)).To(Equal(tc.invalid))
		})
	}
}

func TestClientTimeoutPerWebhookAndCancellation(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := NewClient(ClientOptions{})
	e := Endpoint{Name: "ns/slow", URL: srv.URL, Timeouts: map[string]time.Duration{EnsureBackend: 50 * time.Millisecond}}

	_, err := c.EnsureBackend(context.Background(), e, &BackendOperationRequest{})
	g.Expect(err).To(MatchError(ContainSubstring("no answer within 50ms")))
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue())
	g.Expect(IsTimeout(err)).To(BeTrue())

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err = c.DeregisterBackend(ctx, e, &BackendOperationRequest{}) // default 10s timeout: only the cancel ends it
	g.Expect(errors.Is(err, context.Canceled)).To(BeTrue(), "%v", err)
	g.Expect(IsTimeout(err)).To(BeFalse(), "a cancelled call is not the driver's slowness")
}

func TestClientTLSWithCustomCA(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewTLSServer(answer(`{"healthy":true}`))
	defer srv.Close()

	// Without the CA the call fails verification.
	_, err := NewClient(ClientOptions{}).Healthz(context.Background(), Endpoint{Name: "ns/tls", URL: srv.URL})
	g.Expect(err).To(HaveOccurred())
	var unknown x509.UnknownAuthorityError
	g.Expect(errors.As(err, &unknown)).To(BeTrue(), "%v", err)

	caFile := filepath.Join(t.TempDir(), "ca.crt")
	g.Expect(os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)).To(Succeed())
	rt, err := NewFilesTransport(TLSFiles{CAFile: caFile})
	g.Expect(err).NotTo(HaveOccurred())
	rsp, err := NewClient(ClientOptions{Transport: rt}).Healthz(context.Background(), Endpoint{Name: "ns/tls", URL: srv.URL})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rsp.Healthy).To(BeTrue())

	_, err = NewFilesTransport(TLSFiles{CAFile: filepath.Join(t.TempDir(), "missing")})
	g.Expect(err).To(HaveOccurred())
	_, err = NewFilesTransport(TLSFiles{CertFile: caFile})
	g.Expect(err).To(MatchError(ContainSubstring("both the certificate and the key")))
	_ = tls.VersionTLS12
}

func TestClientMetrics(t *testing.T) {
	g := NewWithT(t)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			answer(`{"status":"Succ"}`)(w, r)
		case 2:
			answer(`{"status":"Fail","msg":"quota"}`)(w, r)
		default:
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	g.Expect(NewMetrics(reg)).NotTo(BeNil(), "registering twice reuses the collectors")
	c := NewClient(ClientOptions{Metrics: m})
	e := Endpoint{Name: "ns/d", URL: srv.URL}
	for i := 0; i < 3; i++ {
		_, _ = c.EnsureLoadBalancer(context.Background(), e, &EnsureLoadBalancerRequest{})
	}
	g.Expect(testutil.ToFloat64(m.Calls.WithLabelValues("ns/d", EnsureLoadBalancer))).To(Equal(3.0))
	g.Expect(testutil.ToFloat64(m.Fails.WithLabelValues("ns/d", EnsureLoadBalancer))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(m.Errors.WithLabelValues("ns/d", EnsureLoadBalancer))).To(Equal(1.0))
	g.Expect(testutil.CollectAndCount(m.Latency)).To(Equal(1))
	names, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var got []string
	for _, mf := range names {
		got = append(got, mf.GetName())
	}
	g.Expect(got).To(ConsistOf("webhook_calls", "webhook_errors", "webhook_fails", "webhook_latency"))
}

func TestClientRejectsBadURL(t *testing.T) {
	_, err := NewClient(ClientOptions{}).Healthz(context.Background(), Endpoint{Name: "ns/d", URL: "not a url"})
	if err == nil || !strings.Contains(err.Error(), "bad driver URL") {
		t.Fatalf("got %v", err)
	}
}

// A burst of calls to one driver needs a connection per call in flight (HTTP/1.1, or HTTP/2
// beyond the server's streams); the next burst must find them kept rather than dial again (with
// TLS a handshake on both ends per call). Before, 64 were kept per driver and 100 in all: every
// burst of the controller's default call budget (384) dialled ≥ 320 connections.
func TestClientKeepsConnectionsForABurst(t *testing.T) {
	const burst = 400
	for _, tc := range []struct {
		name   string
		client func(t *testing.T, srv *httptest.Server) *Client
		tls    bool
	}{
		{"default transport", func(*testing.T, *httptest.Server) *Client { return NewClient(ClientOptions{}) }, false},
		{"files transport", func(t *testing.T, srv *httptest.Server) *Client {
			caFile := filepath.Join(t.TempDir(), "ca.crt")
			if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
				t.Fatal(err)
			}
			rt, err := NewFilesTransport(TLSFiles{CAFile: caFile})
			if err != nil {
				t.Fatal(err)
			}
			return NewClient(ClientOptions{Transport: rt})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			type barrier struct {
				inFlight atomic.Int64
				release  chan struct{}
			}
			var cur atomic.Pointer[barrier]
			var dialled atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// Hold every call until the whole burst is in flight, so that it needs a
				// connection each.
				b := cur.Load()
				if b.inFlight.Add(1) == burst {
					close(b.release)
				}
				<-b.release
				answer(`{"healthy":true}`)(w, r)
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					dialled.Add(1)
				}
			}
			if tc.tls {
				srv.EnableHTTP2 = false // HTTP/1.1 drivers: one call per connection
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			c := tc.client(t, srv)
			wave := func() {
				cur.Store(&barrier{release: make(chan struct{})})
				errs := make(chan error, burst)
				for i := 0; i < burst; i++ {
					go func() {
						_, err := c.Healthz(context.Background(), Endpoint{Name: "ns/d", URL: srv.URL})
						errs <- err
					}()
				}
				for i := 0; i < burst; i++ {
					g.Expect(<-errs).To(Succeed())
				}
			}
			wave()
			g.Expect(dialled.Load()).To(BeNumerically("==", burst), "the first burst dials a connection per call")
			wave()
			g.Expect(dialled.Load()-burst).To(BeZero(), "the second burst reuses the first one's connections")
		})
	}
}
