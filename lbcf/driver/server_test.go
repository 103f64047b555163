package driver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

func portSel(p int32) lbcfv1beta1.PortSelector {
	return lbcfv1beta1.PortSelector{Port: p, Protocol: "TCP"}
}

// echoDriver answers every webhook successfully and remembers the last request; panics and
// errors on demand.
type echoDriver struct {
	last    any
	panicOn string
	errOn   string
	nilOn   string
}

func (d *echoDriver) do(name string, req any) error {
	d.last = req
	if d.panicOn == name {
		panic("driver bug")
	}
	if d.errOn == name {
		return errors.New("device unreachable")
	}
	return nil
}

func (d *echoDriver) Healthz(_ context.Context, r *HealthzRequest) (*HealthzResponse, error) {
	return &HealthzResponse{Healthy: true}, d.do(Healthz, r)
}
func (d *echoDriver) ValidateLoadBalancer(_ context.Context, r *ValidateLoadBalancerRequest) (*ValidateLoadBalancerResponse, error) {
	return &ValidateLoadBalancerResponse{Allow()}, d.do(ValidateLoadBalancer, r)
}
func (d *echoDriver) CreateLoadBalancer(_ context.Context, r *CreateLoadBalancerRequest) (*CreateLoadBalancerResponse, error) {
	if d.nilOn == CreateLoadBalancer {
		return nil, nil
	}
	return &CreateLoadBalancerResponse{ResponseForFailRetryHooks: Succ(), LBInfo: r.LBSpec}, d.do(CreateLoadBalancer, r)
}
func (d *echoDriver) EnsureLoadBalancer(_ context.Context, r *EnsureLoadBalancerRequest) (*EnsureLoadBalancerResponse, error) {
	return &EnsureLoadBalancerResponse{Succ()}, d.do(EnsureLoadBalancer, r)
}
func (d *echoDriver) DeleteLoadBalancer(_ context.Context, r *DeleteLoadBalancerRequest) (*DeleteLoadBalancerResponse, error) {
	return &DeleteLoadBalancerResponse{Succ()}, d.do(DeleteLoadBalancer, r)
}
func (d *echoDriver) ValidateBackend(_ context.Context, r *ValidateBackendRequest) (*ValidateBackendResponse, error) {
	return &ValidateBackendResponse{Allow()}, d.do(ValidateBackend, r)
}
func (d *echoDriver) GenerateBackendAddr(_ context.Context, r *GenerateBackendAddrRequest) (*GenerateBackendAddrResponse, error) {
	return &GenerateBackendAddrResponse{ResponseForFailRetryHooks: Succ(), BackendAddr: "a:1"}, d.do(GenerateBackendAddr, r)
}
func (d *echoDriver) EnsureBackend(_ context.Context, r *BackendOperationRequest) (*BackendOperationResponse, error) {
	return &BackendOperationResponse{ResponseForFailRetryHooks: Succ()}, d.do(EnsureBackend, r)
}
func (d *echoDriver) DeregisterBackend(_ context.Context, r *BackendOperationRequest) (*BackendOperationResponse, error) {
	return &BackendOperationResponse{ResponseForFailRetryHooks: Succ()}, d.do(DeregisterBackend, r)
}
func (d *echoDriver) JudgePodDeregister(_ context.Context, r *JudgePodDeregisterRequest) (*JudgePodDeregisterResponse, error) {
	return &JudgePodDeregisterResponse{ResponseForNoRetryHooks: Allow(), DoNotDeregister: r.NotReadyPods}, d.do(JudgePodDeregister, r)
}

func post(h http.Handler, method, path, body string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

func TestHandlerRoutesEveryWebhookUnderThePrefix(t *testing.T) {
	d := &echoDriver{}
	h := NewHandler(d, HandlerOptions{Prefix: "/radware/"})
	for w, req := range sampleRequests() {
		t.Run(w, func(t *testing.T) {
			g := NewWithT(t)
			body, _ := json.Marshal(req)
			code, out := post(h, http.MethodPost, "/radware/"+w, string(body))
			g.Expect(code).To(Equal(http.StatusOK), out)
			g.Expect(d.last).To(Equal(req), "the driver gets exactly what the client sent")
			g.Expect(json.Valid([]byte(out))).To(BeTrue())
		})
	}
}

func TestHandlerClientRoundTrip(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(NewHandler(&echoDriver{}, HandlerOptions{}))
	defer srv.Close()
	b := Bound{Invoker: NewClient(ClientOptions{}), Endpoint: Endpoint{Name: "ns/echo", URL: srv.URL}}
	rsp, err := b.CreateLoadBalancer(context.Background(), &CreateLoadBalancerRequest{LBSpec: map[string]string{"vip": "1.1.1.1"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rsp.LBInfo).To(Equal(map[string]string{"vip": "1.1.1.1"}))
	j, err := b.JudgePodDeregister(context.Background(), &JudgePodDeregisterRequest{NotReadyPods: sampleRequests()[JudgePodDeregister].(*JudgePodDeregisterRequest).NotReadyPods})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.DoNotDeregister).To(HaveLen(1))
}

func TestHandlerRefusals(t *testing.T) {
	cases := []struct {
		name, method, path, body string
		driver                   *echoDriver
		code                     int
		msg                      string
	}{
		{"unknown webhook", "POST", "/nope", `{}`, &echoDriver{}, 404, "no webhook at /nope"},
		{"outside the prefix", "POST", "/healthz", `{}`, &echoDriver{}, 404, "no webhook"},
		{"GET", "GET", "/p/healthz", ``, &echoDriver{}, 405, "use POST"},
		{"not JSON", "POST", "/p/ensureBackend", `{`, &echoDriver{}, 400, "malformed JSON"},
		{"array", "POST", "/p/ensureBackend", `[]`, &echoDriver{}, 400, "malformed JSON"},
		{"null", "POST", "/p/ensureBackend", `null`, &echoDriver{}, 400, "want an object"},
		{"trailing data", "POST", "/p/ensureBackend", `{} {}`, &echoDriver{}, 400, "trailing data"},
		{"wrong type", "POST", "/p/ensureBackend", `{"dryRun":"yes"}`, &echoDriver{}, 400, "malformed request"},
		{"misspelled key", "POST", "/p/ensureBackend", `{"backendAdr":"x"}`, &echoDriver{}, 400, `unknown field "backendAdr"`},
		{"too large", "POST", "/p/ensureBackend", `{"backendAddr":"` + strings.Repeat("x", 200) + `"}`, &echoDriver{}, 413, "over 100 bytes"},
		{"driver panics", "POST", "/p/ensureBackend", `{}`, &echoDriver{panicOn: EnsureBackend}, 500, "driver panicked: driver bug"},
		{"driver error", "POST", "/p/ensureBackend", `{}`, &echoDriver{errOn: EnsureBackend}, 500, "device unreachable"},
		{"driver returns nil", "POST", "/p/createLoadBalancer", `{}`, &echoDriver{nilOn: CreateLoadBalancer}, 500, "no answer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := NewHandler(tc.driver, HandlerOptions{Prefix: "p", MaxRequestBytes: 100})
			code, body := post(h, tc.method, tc.path, tc.body)
			g.Expect(code).To(Equal(tc.code))
			var e ErrorBody
			g.Expect(json.Unmarshal([]byte(body), &e)).To(Succeed(), "error bodies are JSON: %s", body)
			g.Expect(e.Msg).To(ContainSubstring(tc.msg))
		})
	}
}

func TestHandlerAcceptsKeysInAnyCase(t *testing.T) {
	g := NewWithT(t)
	d := &echoDriver{}
	code, _ := post(NewHandler(d, HandlerOptions{}), "POST", "/ensureBackend", `{"RecordID":"r","BACKENDADDR":"a:1"}`)
	g.Expect(code).To(Equal(200))
	g.Expect(d.last.(*BackendOperationRequest).BackendAddr).To(Equal("a:1"))
}

// Nested Kubernetes objects may carry fields this build does not know (newer clusters).
func TestHandlerIsLenientInsideObjects(t *testing.T) {
	g := NewWithT(t)
	code, out := post(NewHandler(&echoDriver{}, HandlerOptions{}), "POST", "/judgePodDeregister",
		`{"dryRun":false,"notReadyPods":[{"metadata":{"name":"p","futureField":1},"spec":{"futureSpec":true}}]}`)
	g.Expect(code).To(Equal(200), out)
}

func FuzzHandler(f *testing.F) {
	for _, req := range sampleRequests() {
		b, _ := json.Marshal(req)
		f.Add("ensureBackend", string(b))
	}
	f.Add("judgePodDeregister", `{"notReadyPods":[null,{"metadata":null}]}`)
	f.Add("generateBackendAddr", `{"podBackend":{"port":{"portNumber":null}},"serviceBackend":{}}`)
	f.Add("validateBackend", `{"OldParameters":{"a":"b"}}`)
	f.Add("healthz", `{"a":`)
	d := &echoDriver{}
	h := NewHandler(d, HandlerOptions{})
	f.Fuzz(func(t *testing.T, webhook, body string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/", strings.NewReader(body))
		req.URL.Path = "/" + webhook // any path, even one that is not a valid request target
		h.ServeHTTP(rec, req)
		if rec.Code == 500 {
			t.Fatalf("500 for %s %q: %s", webhook, body, rec.Body.String())
		}
		if rec.Code != 200 && rec.Code != 400 && rec.Code != 404 {
			t.Fatalf("unexpected %d", rec.Code)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("not JSON: %s", rec.Body.String())
		}
	})
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add(`{"minRetryDelayInSeconds":"30"}`)
	f.Add(`{"podBackend":{"pod":{"metadata":{"name":"x"}},"port":{"port":80}}}`)
	f.Add(`{"notReadyPods":[{}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		for _, w := range Webhooks {
			_ = DecodeRequest([]byte(body), newRequest(w))
		}
		var r BackendOperationResponse
		_ = json.Unmarshal([]byte(body), &r)
	})
}
