package driver

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

var update = flag.Bool("update", false, "rewrite golden files")

// The request keys of each webhook, as listed in the compatibility spec (reference/lbcf.md §5.3),
// with "(omitempty)" keys listed separately.
var specRequestKeys = map[string]struct{ always, omitempty []string }{
	Healthz:              {},
	ValidateLoadBalancer: {[]string{"dryRun", "lbSpec", "operation", "attributes"}, []string{"oldAttributes"}},
	CreateLoadBalancer:   {[]string{"recordID", "retryID", "dryRun", "lbSpec", "attributes"}, nil},
	EnsureLoadBalancer:   {[]string{"recordID", "retryID", "dryRun", "lbInfo", "attributes"}, nil},
	DeleteLoadBalancer:   {[]string{"recordID", "retryID", "dryRun", "lbInfo", "attributes"}, nil},
	ValidateBackend:      {[]string{"dryRun", "backendType", "lbInfo", "operation", "parameters"}, []string{"oldParameters"}},
	GenerateBackendAddr:  {[]string{"recordID", "retryID", "dryRun", "lbInfo", "lbAttributes", "parameters", "podBackend", "serviceBackend"}, nil},
	EnsureBackend:        {[]string{"recordID", "retryID", "dryRun", "lbInfo", "backendAddr", "parameters", "injectedInfo"}, nil},
	DeregisterBackend:    {[]string{"recordID", "retryID", "dryRun", "lbInfo", "backendAddr", "parameters", "injectedInfo"}, nil},
	JudgePodDeregister:   {[]string{"dryRun", "notReadyPods"}, nil},
}

var specResponseKeys = map[string][]string{
	Healthz:              {"healthy"},
	ValidateLoadBalancer: {"succ", "msg"},
	CreateLoadBalancer:   {"status", "msg", "minRetryDelayInSeconds", "lbInfo"},
	EnsureLoadBalancer:   {"status", "msg", "minRetryDelayInSeconds"},
	DeleteLoadBalancer:   {"status", "msg", "minRetryDelayInSeconds"},
	ValidateBackend:      {"succ", "msg"},
	GenerateBackendAddr:  {"status", "msg", "minRetryDelayInSeconds", "backendAddr"},
	EnsureBackend:        {"status", "msg", "minRetryDelayInSeconds", "injectedInfo"},
	DeregisterBackend:    {"status", "msg", "minRetryDelayInSeconds", "injectedInfo"},
	JudgePodDeregister:   {"succ", "msg", "doNotDeregister"},
}

func samplePod() corev1.Pod {
	return corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", UID: "3f2a1b4c-1111-4222-8333-444455556666"},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5"},
	}
}

// sampleRequests returns a fully populated request per webhook (omitempty keys set).
func sampleRequests() map[string]any {
	retry := func(w string) RequestForRetryHooks {
		return RequestForRetryHooks{RecordID: RecordID(w, "uid-1"), RetryID: "00000000-0000-4000-8000-000000000001"}
	}
	port := int32(80)
	info := map[string]string{"lbID": "lb-1"}
	pod := samplePod()
	return map[string]any{
		Healthz: &HealthzRequest{},
		ValidateLoadBalancer: &ValidateLoadBalancerRequest{LBSpec: map[string]string{"vip": "1.1.1.1"}, Operation: OperationUpdate,
			Attributes: map[string]string{"a": "2"}, OldAttributes: map[string]string{"a": "1"}},
		CreateLoadBalancer: &CreateLoadBalancerRequest{RequestForRetryHooks: retry(CreateLoadBalancer), LBSpec: map[string]string{"vip": "1.1.1.1"}, Attributes: map[string]string{"a": "1"}},
		EnsureLoadBalancer: &EnsureLoadBalancerRequest{RequestForRetryHooks: retry(EnsureLoadBalancer), LBInfo: info, Attributes: map[string]string{"a": "1"}},
		DeleteLoadBalancer: &DeleteLoadBalancerRequest{RequestForRetryHooks: retry(DeleteLoadBalancer), DryRun: true, LBInfo: info},
		ValidateBackend: &ValidateBackendRequest{BackendType: "Pod", LBInfo: info, Operation: OperationUpdate,
			Parameters: map[string]string{"weight": "2"}, OldParameters: map[string]string{"weight": "1"}},
		GenerateBackendAddr: &GenerateBackendAddrRequest{RequestForRetryHooks: retry(GenerateBackendAddr), LBInfo: info,
			LBAttributes: map[string]string{"a": "1"}, Parameters: map[string]string{"weight": "1"},
			PodBackend: &PodBackendInRequest{Pod: pod, Port: lbcfv1beta1.PortSelector{Port: 80, PortNumber: &port, Protocol: "TCP"}}},
		EnsureBackend: &BackendOperationRequest{RequestForRetryHooks: retry(EnsureBackend), LBInfo: info, BackendAddr: "10.0.0.5:80",
			Parameters: map[string]string{"weight": "1"}, InjectedInfo: map[string]string{"id": "x"}},
		DeregisterBackend:  &BackendOperationRequest{RequestForRetryHooks: retry(DeregisterBackend), LBInfo: info, BackendAddr: "10.0.0.5:80"},
		JudgePodDeregister: &JudgePodDeregisterRequest{NotReadyPods: []*corev1.Pod{&pod}},
	}
}

func topKeys(t *testing.T, data []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sorted(s ...[]string) []string {
	var out []string
	for _, x := range s {
		out = append(out, x...)
	}
	sort.Strings(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// Every request type's JSON matches the spec key by key, and the bytes match a reviewed golden file.
func TestRequestJSONMatchesSpec(t *testing.T) {
	reqs := sampleRequests()
	for _, w := range Webhooks {
		t.Run(w, func(t *testing.T) {
			g := NewWithT(t)
			spec := specRequestKeys[w]
			full, err := json.MarshalIndent(reqs[w], "", "  ")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(topKeys(t, full)).To(Equal(sorted(spec.always, spec.omitempty)))

			// A zero request still carries every key that is not omitempty (nulls included), as the original's did.
			zero, _ := json.Marshal(newRequest(w))
			g.Expect(topKeys(t, zero)).To(Equal(sorted(spec.always)))

			golden := filepath.Join("testdata", "golden", w+".request.json")
			if *update {
				g.Expect(os.MkdirAll(filepath.Dir(golden), 0o755)).To(Succeed())
				g.Expect(os.WriteFile(golden, append(full, '\n'), 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(golden)
			g.Expect(err).NotTo(HaveOccurred(), "run go test -update once to create the golden file")
			g.Expect(string(full) + "\n").To(Equal(string(want)))
		})
	}
}

func TestResponseJSONMatchesSpec(t *testing.T) {
	rsps := map[string]any{
		Healthz: &HealthzResponse{}, ValidateLoadBalancer: &ValidateLoadBalancerResponse{}, CreateLoadBalancer: &CreateLoadBalancerResponse{},
		EnsureLoadBalancer: &EnsureLoadBalancerResponse{}, DeleteLoadBalancer: &DeleteLoadBalancerResponse{}, ValidateBackend: &ValidateBackendResponse{},
		GenerateBackendAddr: &GenerateBackendAddrResponse{}, EnsureBackend: &BackendOperationResponse{}, DeregisterBackend: &BackendOperationResponse{},
		JudgePodDeregister: &JudgePodDeregisterResponse{},
	}
	for _, w := range Webhooks {
		data, _ := json.Marshal(rsps[w])
		if got, want := topKeys(t, data), sorted(specResponseKeys[w]); !equal(got, want) {
			t.Errorf("%s response keys %v, want %v", w, got, want)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func newRequest(w string) any {
	switch w {
	case Healthz:
		return &HealthzRequest{}
	case ValidateLoadBalancer:
		return &ValidateLoadBalancerRequest{}
	case CreateLoadBalancer:
		return &CreateLoadBalancerRequest{}
	case EnsureLoadBalancer:
		return &EnsureLoadBalancerRequest{}
	case DeleteLoadBalancer:
		return &DeleteLoadBalancerRequest{}
	case ValidateBackend:
		return &ValidateBackendRequest{}
	case GenerateBackendAddr:
		return &GenerateBackendAddrRequest{}
	case EnsureBackend, DeregisterBackend:
		return &BackendOperationRequest{}
	case JudgePodDeregister:
		return &JudgePodDeregisterRequest{}
	}
	return nil
}

// Decisions 1 and 2 of the compatibility spec.
func TestDecodingCompatibility(t *testing.T) {
	for _, tc := range []struct {
		body string
		want RetryDelay
		bad  bool
	}{
		{`{"status":"Fail","minRetryDelayInSeconds":30}`, 30, false},
		{`{"status":"Fail","minRetryDelayInSeconds":"30"}`, 30, false},
		{`{"status":"Fail","minRetryDelayinSeconds":"45"}`, 45, false}, // the docs' spelling
		{`{"status":"Fail","MINRETRYDELAYINSECONDS":7}`, 7, false},
		{`{"status":"Fail","minRetryDelayInSeconds":null}`, 0, false},
		{`{"status":"Fail","minRetryDelayInSeconds":30.0}`, 30, false},
		{`{"status":"Fail"}`, 0, false},
		{`{"status":"Fail","minRetryDelayInSeconds":"soon"}`, 0, true},
		{`{"status":"Fail","minRetryDelayInSeconds":-1}`, 0, true},
		{`{"status":"Fail","minRetryDelayInSeconds":1.5}`, 0, true},
	} {
		var r EnsureLoadBalancerResponse
		err := json.Unmarshal([]byte(tc.body), &r)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: want an error", tc.body)
			}
			continue
		}
		if err != nil || r.MinRetryDelayInSeconds != tc.want {
			t.Errorf("%s: got %d, %v; want %d", tc.body, r.MinRetryDelayInSeconds, err, tc.want)
		}
	}
	out, _ := json.Marshal(Fail("x", 30))
	if string(out) != `{"status":"Fail","msg":"x","minRetryDelayInSeconds":30}` {
		t.Errorf("minRetryDelayInSeconds must be written as an integer: %s", out)
	}

	var vb ValidateBackendRequest
	if err := DecodeRequest([]byte(`{"dryRun":false,"backendType":"Pod","lbInfo":{},"operation":"Update","parameters":{"w":"2"},"OldParameters":{"w":"1"}}`), &vb); err != nil {
		t.Fatal(err)
	}
	if vb.OldParameters["w"] != "1" {
		t.Errorf("the original's OldParameters key must be read, got %v", vb.OldParameters)
	}
	out, _ = json.Marshal(vb)
	var m map[string]any
	_ = json.Unmarshal(out, &m)
	if _, ok := m["oldParameters"]; !ok {
		t.Errorf("oldParameters must be written lower-case: %s", out)
	}
}
