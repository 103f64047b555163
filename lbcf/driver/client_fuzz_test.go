package driver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// fuzzAnswer is a transport that answers every call with one status code and body.
type fuzzAnswer struct {
	code int
	body string
}

func (a fuzzAnswer) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: a.code, Body: io.NopCloser(strings.NewReader(a.body)), Header: http.Header{}}, nil
}

// FuzzClientAnswers: a driver's answers are untrusted (a driver anywhere on the network, a
// proxy in between). Whatever comes back, every call either fails with a CallError — marked
// Invalid when a 200 carries something the protocol does not allow — or returns an answer the
// controllers may act on: a status they know, an address with every Succ of generateBackendAddr,
// a name for every pod judgePodDeregister keeps.
func FuzzClientAnswers(f *testing.F) {
	f.Add(200, `{"status":"Succ","msg":"","backendAddr":"10.0.0.1:80"}`)
	f.Add(200, `{"status":"Succ"}`)
	f.Add(200, `{"status":"Running","minRetryDelayInSeconds":5}`)
	f.Add(200, `{"status":"Pending"}`)
	f.Add(200, `{"succ":true,"doNotDeregister":[null,{"metadata":{"name":""}}]}`)
	f.Add(200, `{"status":"Fail","msg":"boom","minRetryDelayInSeconds":-1}`)
	f.Add(500, `{"status":"Succ"}`)
	f.Add(200, `{"status":"Succ"}{"status":"Fail"}`)
	f.Add(200, ``)
	f.Fuzz(func(t *testing.T, code int, body string) {
		c := NewClient(ClientOptions{Transport: fuzzAnswer{code, body}, MaxResponseBytes: 1 << 16})
		e := Endpoint{Name: "fuzz", URL: "http://driver.invalid"}
		ctx := context.Background()
		check := func(webhook string, err error, status string, ok func() bool) {
			t.Helper()
			if err != nil {
				var ce *CallError
				if !errors.As(err, &ce) {
					t.Fatalf("%s: error %v is not a CallError", webhook, err)
				}
				if code == http.StatusOK && len(body) <= 1<<16 && !ce.Invalid {
					t.Fatalf("%s: a 200 that failed is not marked invalid: %v", webhook, err)
				}
				return
			}
			if code != http.StatusOK {
				t.Fatalf("%s: HTTP %d accepted", webhook, code)
			}
			if status != "" && status != StatusSucc && status != StatusFail && status != StatusRunning {
				t.Fatalf("%s: status %q accepted", webhook, status)
			}
			if ok != nil && !ok() {
				t.Fatalf("%s: answer %q accepted", webhook, body)
			}
		}
		g, err := c.GenerateBackendAddr(ctx, e, &GenerateBackendAddrRequest{})
		check(GenerateBackendAddr, err, g.Status, func() bool { return g.Status != StatusSucc || g.BackendAddr != "" })
		b, err := c.EnsureBackend(ctx, e, &BackendOperationRequest{})
		check(EnsureBackend, err, b.Status, nil)
		b, err = c.DeregisterBackend(ctx, e, &BackendOperationRequest{})
		check(DeregisterBackend, err, b.Status, nil)
		cr, err := c.CreateLoadBalancer(ctx, e, &CreateLoadBalancerRequest{})
		check(CreateLoadBalancer, err, cr.Status, nil)
		d, err := c.DeleteLoadBalancer(ctx, e, &DeleteLoadBalancerRequest{})
		check(DeleteLoadBalancer, err, d.Status, nil)
		j, err := c.JudgePodDeregister(ctx, e, &JudgePodDeregisterRequest{})
		check(JudgePodDeregister, err, "", func() bool {
			for _, p := range j.DoNotDeregister {
				if p == nil || p.Name == "" {
					return false
				}
			}
			return true
		})
		_, err = c.ValidateBackend(ctx, e, &ValidateBackendRequest{})
		check(ValidateBackend, err, "", nil)
		_, err = c.Healthz(ctx, e)
		check(Healthz, err, "", nil)
	})
}
