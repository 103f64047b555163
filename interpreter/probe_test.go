package interpreter_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbfed/lbfed/interpreter"
)

// TestProbe: Probe's request is one the interpreter answers successfully (counted as an
// InterpretHealth of a LoadBalancer), and anything short of that is an error naming it.
func TestProbe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ss := selfSigned(t, time.Hour)
	reg := prometheus.NewRegistry()
	_, url := startServer(t, ss, reg, 0)

	t.Run("the interpreter answers", func(t *testing.T) {
		g := NewWithT(t)
		healthy, err := interpreter.Probe(ctx, tlsClient(ss.CAPEM), url+interpreter.InterpretPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(healthy).To(BeFalse(), "a LoadBalancer without status is not healthy")
		g.Expect(counterValue(t, reg, "lbfed_interpreter_requests_total", "InterpretHealth", "LoadBalancer", "answered")).To(Equal(1.0))
	})
	t.Run("another CA", func(t *testing.T) {
		_, err := interpreter.Probe(ctx, tlsClient(selfSigned(t, time.Hour).CAPEM), url+interpreter.InterpretPath)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("certificate signed by unknown authority")))
	})
	t.Run("not the interpreter's path", func(t *testing.T) {
		_, err := interpreter.Probe(ctx, tlsClient(ss.CAPEM), url+"/healthz")
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("is not a ResourceInterpreterContext")))
	})
	for name, tc := range map[string]struct {
		status     int
		body, want string
	}{
		"an HTTP error":          {http.StatusServiceUnavailable, "busy", "HTTP 503: busy"},
		"an unsuccessful answer": {http.StatusOK, `{"response":{"uid":"lbfed-probe","successful":false,"status":{"code":400,"message":"bad"}}}`, "unsuccessfully: 400 bad"},
		"another request's uid":  {http.StatusOK, `{"response":{"uid":"x","successful":true,"healthy":true}}`, `for request "x"`},
		"no verdict":             {http.StatusOK, `{"response":{"uid":"lbfed-probe","successful":true}}`, "without a health verdict"},
		"no response":            {http.StatusOK, `{}`, "has no response"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			_, err := interpreter.Probe(ctx, srv.Client(), srv.URL)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}
