package interpreter_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	webhook "github.com/karmada-io/karmada/pkg/webhook/interpreter"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lbfed/lbfed/interpreter"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// memberObject returns a member-mode BackendGroup as a member controller writes it: n pod
// candidates on n/25 nodes, most of them Ready.
func memberObject(cluster string, n int) map[string]any {
	nodes := n / 25
	if nodes == 0 {
		nodes = 1
	}
	list := make([]lbcfv1beta1.Candidate, n)
	for i := range list {
		node := fmt.Sprintf("%s-node-%03d", cluster, i%nodes)
		list[i] = lbcfv1beta1.Candidate{
			Kind:          lbcfv1beta1.CandidatePod,
			Name:          fmt.Sprintf("web-7d9c5b6f4-%05d", i),
			UID:           fmt.Sprintf("%08x", 0x1a2b0000+i),
			IPs:           []string{fmt.Sprintf("10.%d.%d.%d", 100+i%50, (i/250)%250, i%250+1)},
			Port:          8080,
			Protocol:      corev1.ProtocolTCP,
			NodeName:      node,
			NodeAddresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.%d.%d", i%nodes/250, i%nodes%250+1)}},
			Phase:         corev1.PodRunning,
			Ready:         i%10 != 0,
		}
	}
	cands, _ := lbcfv1beta1.EncodeCandidates(map[string]string{"weight": "10"}, list, 0)
	status := lbcfv1beta1.BackendGroupStatus{
		Backends:           cands.Ready,
		ObservedGeneration: 3,
		Candidates:         cands,
	}
	obj := map[string]any{
		"apiVersion": lbcfv1beta1.APIVersion,
		"kind":       lbcfv1beta1.KindBackendGroup,
		"metadata": map[string]any{
			"name": "web", "namespace": "demo", "generation": int64(3),
			"annotations": map[string]any{"resourcetemplate.karmada.io/generation": "5"},
		},
		"spec": map[string]any{
			"loadBalancers":    []any{"lb-a"},
			"deregisterPolicy": "IfNotReady",
			"pods": map[string]any{
				"ports":   []any{map[string]any{"port": int64(8080), "protocol": "TCP"}},
				"byLabel": map[string]any{"selector": map[string]any{"app": "web"}},
			},
		},
	}
	raw, err := json.Marshal(status)
	if err != nil {
		panic(err)
	}
	var st map[string]any
	if err := json.Unmarshal(raw, &st); err != nil {
		panic(err)
	}
	obj["status"] = st
	return obj
}

// aggregateFixture is an AggregateStatus request for clusters members of n candidates each, the
// status items being the webhook's own InterpretStatus answers.
func aggregateFixture(tb testing.TB, clusters, n int) (template map[string]any, items []workv1alpha2.AggregatedStatusItem) {
	tb.Helper()
	h := interpreter.NewHandler(logr.Discard())
	var previous []any
	for c := 0; c < clusters; c++ {
		name := fmt.Sprintf("member-%02d", c)
		raw, err := json.Marshal(memberObject(name, n))
		if err != nil {
			tb.Fatal(err)
		}
		resp := h.Handle(context.Background(), webhook.Request{ResourceInterpreterRequest: configv1alpha1.ResourceInterpreterRequest{
			UID: "u", Operation: configv1alpha1.InterpreterOperationInterpretStatus, Object: runtime.RawExtension{Raw: raw},
			Kind: lbcfGVK(lbcfv1beta1.KindBackendGroup),
		}})
		if !resp.Successful || resp.RawStatus == nil {
			tb.Fatalf("InterpretStatus failed: %+v", resp.Status)
		}
		items = append(items, workv1alpha2.AggregatedStatusItem{
			ClusterName: name, Status: &runtime.RawExtension{Raw: resp.RawStatus.Raw}, Applied: true, Health: workv1alpha2.ResourceHealthy,
		})
		// The previous aggregation differs in one count, so every run writes a patch.
		previous = append(previous, map[string]any{"name": name, "observedGeneration": int64(3), "candidates": int64(n), "ready": int64(n - 1), "health": "Healthy"})
	}
	template = memberObject("template", 0)
	template["status"] = map[string]any{"backends": int64(clusters * n), "registeredBackends": int64(clusters * n), "clusters": previous}
	return template, items
}

func lbcfGVK(kind string) metav1.GroupVersionKind {
	return metav1.GroupVersionKind{Group: lbcfv1beta1.GroupName, Version: "v1beta1", Kind: kind}
}

// BenchmarkAggregateStatus compares, in one run, AggregateStatus for 10 members × 500 candidates
// answered by the webhook in process (its handler alone, and its whole HTTP path: decode,
// interpret, encode) and by the Lua customization in Karmada's VM (Karmada's cost of calling it).
// Compare ns/op of the sub-benchmarks: lua is the baseline.
func BenchmarkAggregateStatus(b *testing.B) {
	template, items := aggregateFixture(b, 10, 500)
	rawTemplate, err := json.Marshal(template)
	if err != nil {
		b.Fatal(err)
	}
	body, _, err := karmadaRequest(testCase{Operation: configv1alpha1.InterpreterOperationAggregateStatus, Object: template, StatusItems: items})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("request body: %d bytes, %d bytes of member status", len(body), statusBytes(items))

	b.Run("lua", func(b *testing.B) {
		ipt := newLuaInterpreter(b)
		obj := &unstructured.Unstructured{Object: template}
		b.ReportAllocs()
		for b.Loop() {
			out, enabled, err := ipt.AggregateStatus(obj, items)
			if err != nil || !enabled || out == nil {
				b.Fatalf("lua: enabled=%v err=%v", enabled, err)
			}
		}
	})
	b.Run("webhook-handler", func(b *testing.B) {
		h := interpreter.NewHandler(logr.Discard())
		req := webhook.Request{ResourceInterpreterRequest: configv1alpha1.ResourceInterpreterRequest{
			UID: "u", Kind: lbcfGVK(lbcfv1beta1.KindBackendGroup), Operation: configv1alpha1.InterpreterOperationAggregateStatus,
			Object: runtime.RawExtension{Raw: rawTemplate}, AggregatedStatus: items,
		}}
		b.ReportAllocs()
		for b.Loop() {
			if resp := h.Handle(context.Background(), req); !resp.Successful || len(resp.Patch) == 0 {
				b.Fatalf("handler: %+v", resp.Status)
			}
		}
	})
	b.Run("webhook-http", func(b *testing.B) {
		h := newTestServer(b).HTTPHandler()
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, interpreter.InterpretPath, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(rec, req)
			if !bytes.Contains(rec.Body.Bytes(), []byte(`"patch"`)) {
				b.Fatalf("no patch: %s", rec.Body)
			}
		}
	})
}

func statusBytes(items []workv1alpha2.AggregatedStatusItem) int {
	n := 0
	for _, it := range items {
		n += len(it.Status.Raw)
	}
	return n
}

// BenchmarkServeTLS measures requests per second over TLS with keep-alive connections, as
// Karmada calls the webhook (client and server share the machine's cores), for the mix Karmada
// sends when a member reports: InterpretStatus and InterpretHealth of the member object, and
// AggregateStatus of the group. Two sizes: small groups (2 members × 3 candidates) and large ones
// (3 members × 500 candidates).
func BenchmarkServeTLS(b *testing.B) {
	certs, err := interpreter.NewSelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := interpreter.NewServer(interpreter.NewHandler(logr.Discard()), interpreter.ServerOptions{BindAddress: "127.0.0.1:0", Certificates: certs, Log: logr.Discard()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	<-srv.Started()
	url := "https://" + srv.Addr().String() + interpreter.InterpretPath
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CAPEM)

	for _, size := range []struct{ members, candidates int }{{2, 3}, {3, 500}} {
		b.Run(fmt.Sprintf("members=%d/candidates=%d", size.members, size.candidates), func(b *testing.B) {
			member := memberObject("m1", size.candidates)
			template, items := aggregateFixture(b, size.members, size.candidates)
			var bodies [][]byte
			for _, tc := range []testCase{
				{Operation: configv1alpha1.InterpreterOperationInterpretStatus, Object: member},
				{Operation: configv1alpha1.InterpreterOperationInterpretHealth, Object: member},
				{Operation: configv1alpha1.InterpreterOperationAggregateStatus, Object: template, StatusItems: items},
			} {
				body, _, err := karmadaRequest(tc)
				if err != nil {
					b.Fatal(err)
				}
				bodies = append(bodies, body)
			}
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 64}}
			defer client.CloseIdleConnections()
			// Karmada's client keeps its connections: open some before timing.
			for i := 0; i < 8; i++ {
				if err := postOK(client, url, bodies[i%len(bodies)]); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Uint64
			b.ReportAllocs()
			b.SetParallelism(4)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := postOK(client, url, bodies[next.Add(1)%uint64(len(bodies))]); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		})
	}
}

// postOK posts body and checks for a successful answer.
func postOK(c *http.Client, url string, body []byte) error {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(out), `"successful":true`) {
		return fmt.Errorf("answer %d: %.200s %v", resp.StatusCode, out, err)
	}
	return nil
}
