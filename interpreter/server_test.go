package interpreter_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lbfed/lbfed/interpreter"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// The server runs under controller-runtime managers as it is.
var (
	_ manager.Runnable               = (*interpreter.Server)(nil)
	_ manager.LeaderElectionRunnable = (*interpreter.Server)(nil)
)

// startServer runs a server with certs on a free loopback port until the test ends.
func startServer(t *testing.T, certs interpreter.CertificateSource, reg *prometheus.Registry, limit int64) (*interpreter.Server, string) {
	t.Helper()
	opts := interpreter.ServerOptions{BindAddress: "127.0.0.1:0", Certificates: certs, MaxRequestBytes: limit, Log: logr.Discard()}
	if reg != nil {
		opts.Registerer, opts.Gatherer = reg, reg
	}
	srv, err := interpreter.NewServer(interpreter.NewHandler(logr.Discard()), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start returned %v after cancel", err)
		}
	})
	<-srv.Started()
	if srv.Addr() == nil {
		t.Fatalf("server did not start: %v", <-done)
	}
	return srv, "https://" + srv.Addr().String()
}

func tlsClient(caPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
}

func selfSigned(t *testing.T, validFor time.Duration) *interpreter.SelfSigned {
	t.Helper()
	ss, err := interpreter.NewSelfSigned([]string{"127.0.0.1", "localhost"}, validFor)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// post sends body as Karmada does and decodes the answer.
func post(t *testing.T, c *http.Client, url string, body []byte, contentType string) (*configv1alpha1.ResourceInterpreterResponse, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+interpreter.InterpretPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer configv1alpha1.ResourceInterpreterContext
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("answer is not a ResourceInterpreterContext: %v", err)
	}
	if answer.Response == nil {
		t.Fatal("answer without response")
	}
	return answer.Response, resp
}

func healthRequest(t *testing.T, uid string) []byte {
	t.Helper()
	body, err := json.Marshal(configv1alpha1.ResourceInterpreterContext{Request: &configv1alpha1.ResourceInterpreterRequest{
		UID: typesUID(uid), Kind: lbcfGVK(lbcfv1beta1.KindBackendGroup), Name: "web", Namespace: "demo",
		Operation: configv1alpha1.InterpreterOperationInterpretHealth,
		Object:    rawJSON(`{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendGroup","metadata":{"generation":1},"status":{"backends":1,"registeredBackends":1}}`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestServerServesHTTPSWithProbesAndMetrics(t *testing.T) {
	g := NewWithT(t)
	ss := selfSigned(t, time.Hour)
	reg := prometheus.NewRegistry()
	_, url := startServer(t, ss, reg, 0)
	c := tlsClient(ss.CAPEM)

	answer, resp := post(t, c, url, healthRequest(t, "u-1"), "application/json; charset=utf-8")
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(resp.Proto).To(Equal("HTTP/1.1"), "HTTP/2 is not offered")
	g.Expect(answer.UID).To(BeEquivalentTo("u-1"))
	g.Expect(answer.Successful).To(BeTrue())
	g.Expect(answer.Healthy).To(HaveValue(BeTrue()))

	for _, path := range []string{interpreter.HealthzPath, interpreter.ReadyzPath} {
		resp, err := c.Get(url + path)
		g.Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s: %s", path, body)
	}

	g.Expect(counterValue(t, reg, "lbfed_interpreter_requests_total", "InterpretHealth", "BackendGroup", "answered")).To(Equal(1.0))
	resp, err := c.Get(url + interpreter.MetricsPath)
	g.Expect(err).NotTo(HaveOccurred())
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(string(metrics)).To(ContainSubstring(`lbfed_interpreter_request_duration_seconds_count{operation="InterpretHealth"} 1`))
	g.Expect(string(metrics)).To(ContainSubstring(`lbfed_interpreter_request_size_bytes_count{operation="InterpretHealth"} 1`))

	// HTTPS only: plain HTTP on the port gets no interpreter answer.
	plain, err := http.Post("http://"+strings.TrimPrefix(url, "https://")+interpreter.InterpretPath, "application/json", bytes.NewReader(healthRequest(t, "u-2")))
	g.Expect(err).NotTo(HaveOccurred())
	plain.Body.Close()
	g.Expect(plain.StatusCode).To(Equal(http.StatusBadRequest))
}

// counterValue returns the value of the requests counter with the labels.
func counterValue(t *testing.T, reg *prometheus.Registry, name, op, kind, outcome string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["operation"] == op && labels["kind"] == kind && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{operation=%q,kind=%q,outcome=%q}", name, op, kind, outcome)
	return 0
}

func TestServerReloadsCertificateFolder(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	caA, created, err := interpreter.BootstrapSelfSigned(dir, []string{"127.0.0.1"}, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeTrue())
	again, created, err := interpreter.BootstrapSelfSigned(dir, []string{"127.0.0.1"}, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeFalse(), "existing certificate reused")
	g.Expect(again).To(Equal(caA))

	certs, err := interpreter.FileCertificates(dir, interpreter.DefaultCertName, interpreter.DefaultKeyName)
	g.Expect(err).NotTo(HaveOccurred())
	_, url := startServer(t, certs, nil, 0)
	answer, _ := post(t, tlsClient(caA), url, healthRequest(t, "before"), "application/json")
	g.Expect(answer.Successful).To(BeTrue())

	// Rotate: a new CA and certificate replace the files; new connections must present it.
	b := selfSigned(t, time.Hour)
	g.Expect(b.WriteFiles(dir)).To(Succeed())
	g.Eventually(func() error {
		c := tlsClient(b.CAPEM)
		resp, err := c.Get(url + interpreter.HealthzPath)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	_, err = tlsClient(caA).Get(url + interpreter.HealthzPath)
	g.Expect(err).To(HaveOccurred(), "the old certificate is no longer served")
}

func TestServerNotReadyWithExpiredCertificate(t *testing.T) {
	ss := selfSigned(t, -time.Minute)
	_, url := startServer(t, ss, nil, 0)
	c := tlsClient(ss.CAPEM)
	c.Transport.(*http.Transport).TLSClientConfig.InsecureSkipVerify = true // the certificate is expired
	resp, err := c.Get(url + interpreter.ReadyzPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "valid from") {
		t.Fatalf("readyz with an expired certificate: %d %s", resp.StatusCode, body)
	}
}

func TestServerStartFailsOnBusyAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv, err := interpreter.NewServer(interpreter.NewHandler(logr.Discard()), interpreter.ServerOptions{BindAddress: ln.Addr().String(), Certificates: selfSigned(t, time.Hour), Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err == nil {
		t.Fatal("Start on a busy address succeeded")
	}
	<-srv.Started()
	if srv.Addr() != nil {
		t.Fatal("Addr set after a failed start")
	}
}

func TestNewServerOptions(t *testing.T) {
	h := interpreter.NewHandler(logr.Discard())
	if _, err := interpreter.NewServer(h, interpreter.ServerOptions{BindAddress: ":0"}); err == nil {
		t.Error("a server without certificates was accepted")
	}
	if _, err := interpreter.NewServer(h, interpreter.ServerOptions{BindAddress: ":0", Certificates: selfSigned(t, time.Hour), MaxRequestBytes: 1 << 20}); err == nil {
		t.Error("a 1 MiB body limit was accepted")
	}
}

// TestServerRejectsMalformedRequests checks that every malformed request gets a well-formed
// failed answer, with the request uid whenever it can be found.
func TestServerRejectsMalformedRequests(t *testing.T) {
	h := newTestServer(t).HTTPHandler()
	valid := string(healthRequest(t, "u-7"))
	for _, tc := range []struct {
		name, method, contentType, body string
		code                            int32
		uid                             string
	}{
		{"GET", http.MethodGet, "application/json", "", http.StatusMethodNotAllowed, ""},
		{"wrong content type", http.MethodPost, "text/plain", valid, http.StatusUnsupportedMediaType, "u-7"},
		{"not JSON", http.MethodPost, "application/json", "hello", http.StatusBadRequest, ""},
		{"truncated after the uid", http.MethodPost, "application/json", valid[:len(valid)/2], http.StatusBadRequest, "u-7"},
		{"empty body", http.MethodPost, "application/json", "", http.StatusBadRequest, ""},
		{"no request", http.MethodPost, "application/json", `{"kind":"ResourceInterpreterContext"}`, http.StatusBadRequest, ""},
		{"request is a list", http.MethodPost, "application/json", `{"request":[]}`, http.StatusBadRequest, ""},
		{"uid is a number", http.MethodPost, "application/json", `{"request":{"uid":7}}`, http.StatusBadRequest, ""},
		{"status items are not objects", http.MethodPost, "application/json", `{"request":{"uid":"u-8","aggregatedStatus":["x"]}}`, http.StatusBadRequest, "u-8"},
		{"trailing garbage", http.MethodPost, "application/json", valid + "x", http.StatusBadRequest, "u-7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(tc.method, interpreter.InterpretPath, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.contentType)
			h.ServeHTTP(rec, req)
			var answer configv1alpha1.ResourceInterpreterContext
			if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Response == nil {
				t.Fatalf("answer %q: %v", rec.Body, err)
			}
			r := answer.Response
			if r.Successful || r.Status == nil || r.Status.Code != tc.code || r.Status.Message == "" || string(r.UID) != tc.uid {
				t.Fatalf("answer %s, want failure %d with uid %q", rec.Body, tc.code, tc.uid)
			}
		})
	}
}

// TestServerBodyLimit sends a member object of over 8 MiB (answered), and a body over the
// configured limit (refused with the uid).
func TestServerBodyLimit(t *testing.T) {
	g := NewWithT(t)
	ss := selfSigned(t, time.Hour)
	_, url := startServer(t, ss, nil, interpreter.MinMaxRequestBytes+1<<20)
	c := tlsClient(ss.CAPEM)

	big := memberObject("m1", 150000) // ≈ 8.5 MiB of candidates
	body, uid, err := karmadaRequest(testCase{Operation: configv1alpha1.InterpreterOperationInterpretStatus, Object: big})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(body)).To(BeNumerically(">", interpreter.MinMaxRequestBytes))
	g.Expect(len(body)).To(BeNumerically("<", interpreter.MinMaxRequestBytes+1<<20))
	answer, _ := post(t, c, url, body, "application/json")
	g.Expect(answer.Successful).To(BeTrue(), "%+v", answer.Status)
	g.Expect(string(answer.UID)).To(Equal(uid))
	var report struct {
		Candidates lbcfv1beta1.Candidates `json:"candidates"`
	}
	g.Expect(json.Unmarshal(answer.RawStatus.Raw, &report)).To(Succeed())
	g.Expect(report.Candidates.Items).To(HaveLen(150000))

	tooBig := append(body[:len(body)-2:len(body)-2], bytes.Repeat([]byte(" "), 2<<20)...)
	tooBig = append(tooBig, body[len(body)-2:]...)
	answer, _ = post(t, c, url, tooBig, "application/json")
	g.Expect(answer.Successful).To(BeFalse())
	g.Expect(answer.Status.Code).To(BeEquivalentTo(http.StatusRequestEntityTooLarge))
	g.Expect(string(answer.UID)).To(Equal(uid), "the uid is found at the start of the body")
}

// TestHandlerAnswersObjectsItCannotRead covers objects that are missing or not JSON objects:
// Retain and AggregateStatus never fail (a failure would stall Karmada's status collection);
// InterpretStatus, InterpretHealth and InterpretDependency fail, because an invented answer could
// erase good data.
func TestHandlerAnswersObjectsItCannotRead(t *testing.T) {
	h := newTestServer(t).HTTPHandler()
	for _, object := range []string{"", `[1,2]`, `"x"`, `null`} {
		for op, wantFail := range map[configv1alpha1.InterpreterOperation]bool{
			configv1alpha1.InterpreterOperationInterpretReplica:    false,
			configv1alpha1.InterpreterOperationReviseReplica:       false,
			configv1alpha1.InterpreterOperationRetain:              false,
			configv1alpha1.InterpreterOperationAggregateStatus:     false,
			configv1alpha1.InterpreterOperationInterpretStatus:     true,
			configv1alpha1.InterpreterOperationInterpretHealth:     true,
			configv1alpha1.InterpreterOperationInterpretDependency: true,
			configv1alpha1.InterpreterOperationPrune:               false,
			"Bogus":                                                false,
		} {
			t.Run(fmt.Sprintf("%s/%q", op, object), func(t *testing.T) {
				req := configv1alpha1.ResourceInterpreterRequest{UID: "u", Kind: lbcfGVK(lbcfv1beta1.KindBackendGroup), Operation: op}
				if object != "" {
					req.Object = rawJSON(object)
				}
				body, err := json.Marshal(configv1alpha1.ResourceInterpreterContext{Request: &req})
				if err != nil {
					t.Fatal(err)
				}
				rec := httptest.NewRecorder()
				hreq := httptest.NewRequest(http.MethodPost, interpreter.InterpretPath, bytes.NewReader(body))
				hreq.Header.Set("Content-Type", "application/json")
				h.ServeHTTP(rec, hreq)
				var answer configv1alpha1.ResourceInterpreterContext
				if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
					t.Fatal(err)
				}
				r := answer.Response
				if r.UID != "u" || r.Successful == wantFail {
					t.Fatalf("answer %s, want failed=%v", rec.Body, wantFail)
				}
				if !wantFail && len(r.Patch) > 0 {
					t.Fatalf("patch for an unreadable object: %s", r.Patch)
				}
				if wantFail && (r.Status == nil || r.Status.Code != http.StatusBadRequest) {
					t.Fatalf("failure without 400 status: %s", rec.Body)
				}
			})
		}
	}
}

// FuzzServeInterpret feeds arbitrary bodies to the HTTP handler: every answer must be a
// well-formed ResourceInterpreterContext, and a successful one must pass Karmada's own checks.
func FuzzServeInterpret(f *testing.F) {
	for _, tc := range loadCases(f) {
		body, _, err := karmadaRequest(tc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	f.Add([]byte(`{"request":{"uid":"x","operation":"AggregateStatus","kind":{"group":"lbcf.tkestack.io","version":"v1beta1","kind":"BackendGroup"},"object":{"status":{"clusters":7}},"aggregatedStatus":[{"clusterName":"m","status":[]}]}}`))
	h := newTestServer(f).HTTPHandler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, interpreter.InterpretPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("HTTP %d", rec.Code)
		}
		var answer configv1alpha1.ResourceInterpreterContext
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Response == nil {
			t.Fatalf("answer %q: %v", rec.Body, err)
		}
		decoded, err := interpreter.DecodeRequest(body)
		if err != nil {
			if answer.Response.Successful {
				t.Fatalf("undecodable request answered successfully: %s", rec.Body)
			}
			return
		}
		if _, err := verify(decoded, &answer); err != nil {
			t.Fatalf("Karmada would reject %s: %v", rec.Body, err)
		}
	})
}

func verify(req *configv1alpha1.ResourceInterpreterRequest, answer *configv1alpha1.ResourceInterpreterContext) (any, error) {
	switch req.Operation {
	case configv1alpha1.InterpreterOperationInterpretReplica, configv1alpha1.InterpreterOperationInterpretComponent,
		configv1alpha1.InterpreterOperationReviseReplica, configv1alpha1.InterpreterOperationInterpretStatus,
		configv1alpha1.InterpreterOperationPrune, configv1alpha1.InterpreterOperationRetain,
		configv1alpha1.InterpreterOperationAggregateStatus, configv1alpha1.InterpreterOperationInterpretHealth,
		configv1alpha1.InterpreterOperationInterpretDependency:
		return verifyResponse(req.UID, req.Operation, answer)
	}
	if answer.Response.UID != req.UID {
		return nil, errors.New("uid not echoed")
	}
	return nil, nil
}
