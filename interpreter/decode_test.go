package interpreter

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	kjson "sigs.k8s.io/json"
)

var jsonSeeds = []string{
	`{}`, `[]`, `""`, `0`, `-0.5e+10`, `true`, `false`, `null`, ` {"a" : [1, 2.5, "x\"y", {"b": null}] } `,
	`"\u00e9\n\t\\/"`, `{"a":1,"a":2}`, `[[[[]]]]`, `"\xff"`,
	// Invalid.
	``, ` `, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `01`, `1.`, `.5`, `1e`, `-`, `+1`, `"\x01"`, `"\q"`,
	`"\u12g4"`, `tru`, `nul`, `{"a":1}x`, `[1 2]`, `{1:2}`, `"abc`, `'a'`, `{"a":1}}`,
}

// TestJSONReaderValidation checks the reader against encoding/json's notion of valid JSON.
func TestJSONReaderValidation(t *testing.T) {
	for _, s := range jsonSeeds {
		checkReaderValid(t, []byte(s))
	}
	deep := strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2)
	r := &jsonReader{b: []byte(deep)}
	if r.value(); r.err == nil {
		t.Error("nesting beyond maxDepth accepted")
	}
}

func FuzzJSONReaderValidation(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkReaderValid)
}

func checkReaderValid(t *testing.T, data []byte) {
	r := &jsonReader{b: data}
	v := r.value()
	err := r.end()
	if want := json.Valid(data); (err == nil) != want {
		t.Fatalf("%q: reader error %v, json.Valid %v", data, err, want)
	}
	if err == nil && !bytes.Equal(bytes.TrimSpace(v), bytes.TrimSpace(data)) {
		t.Fatalf("%q: value %q", data, v)
	}
}

var requestSeeds = []string{
	`{"kind":"ResourceInterpreterContext","apiVersion":"config.karmada.io/v1alpha1","request":{"uid":"u1","kind":{"group":"lbcf.tkestack.io","version":"v1beta1","kind":"BackendGroup"},"name":"web","namespace":"demo","operation":"AggregateStatus","object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendGroup","status":{"clusters":[]}},"replicas":0,"aggregatedStatus":[{"clusterName":"m1","status":{"candidates":{"items":["s|a"],"total":1,"ready":1}},"applied":true,"health":"Healthy"},{"clusterName":"m2","applied":false,"appliedMessage":"x"},null]}}`,
	`{"request":{"uid":"u2","operation":"Retain","object":{"spec":{}},"observedObject":{"spec":{"a":1}},"replicas":3}}`,
	`{"request":{"uid":"u3","observedObject":null,"object":null,"replicas":null,"aggregatedStatus":null,"kind":null}}`,
	`{"request":null}`, `{"request":{"uid":5}}`, `{"request":{"replicas":1.5}}`, `{"request":{"replicas":4294967296}}`,
	`{"request":{"aggregatedStatus":[1]}}`, `{"request":{"aggregatedStatus":{}}}`, `{"request":{"kind":"x"}}`,
	`{"request":{"uid":"a\u0062c","name":"\u00e9"}}`, `{"Request":{"uid":"case"}}`, `{"request":{"uid":"u","uid":"v"}}`,
	`{"request":{"aggregatedStatus":[{"status":null,"health":null,"applied":null}]}}`, `{"request":[]}`, `[]`, `{"kind":1}`,
}

// TestDecodeRequestMatchesKubernetesJSON checks DecodeRequest against Kubernetes' decoder
// (encoding/json with case-sensitive keys).
func TestDecodeRequestMatchesKubernetesJSON(t *testing.T) {
	for _, s := range requestSeeds {
		checkDecodeRequest(t, []byte(s))
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkDecodeRequest)
}

func checkDecodeRequest(t *testing.T, body []byte) {
	got, err := DecodeRequest(body)
	var ctx configv1alpha1.ResourceInterpreterContext
	stdErr := kjson.UnmarshalCaseSensitivePreserveInts(body, &ctx)
	if stdErr == nil && ctx.Request == nil {
		stdErr = errNoRequest
	}
	if (err == nil) != (stdErr == nil) {
		t.Fatalf("%q: DecodeRequest error %v, Kubernetes JSON error %v", body, err, stdErr)
	}
	if err != nil {
		return
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(ctx.Request)
	if !bytes.Equal(compact(t, a), compact(t, b)) {
		t.Fatalf("%q:\n got %s\nwant %s", body, a, b)
	}
}

var errNoRequest = errorString("no request")

type errorString string

func (e errorString) Error() string { return string(e) }

func compact(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return out.Bytes()
}

var reportSeeds = []string{
	`{"observedGeneration":3,"backends":2,"registeredBackends":1,"candidates":{"items":["p|a|b|c|80t|0|Rr"],"total":7,"ready":5}}`,
	`{"candidates":null}`, `{"candidates":"x","backends":"y"}`, `{"candidates":{"total":1.5,"ready":-2}}`,
	`{"backends":3,"backends":"x"}`, `{"candidates":{"total":1},"candidates":{"ready":2}}`, `{"candidates":{"total":1},"candidates":null}`,
	`{"observedGeneration":9223372036854775808}`, `[]`, `"x"`, `null`, `{"Backends":4}`, `{`, `{"candidates":[1]}`,
	`{"backends":1e2,"registeredBackends":-0}`,
}

// TestReadMemberReportMatchesMapSemantics checks the single-pass reader against the member
// status decoded into a map, the way the Lua customization sees it.
func TestReadMemberReportMatchesMapSemantics(t *testing.T) {
	for _, s := range reportSeeds {
		checkMemberReport(t, []byte(s))
	}
}

func FuzzReadMemberReport(f *testing.F) {
	for _, s := range reportSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkMemberReport)
}

func checkMemberReport(t *testing.T, raw []byte) {
	got, err := readMemberReport(raw)
	want, wantErr := referenceMemberReport(raw)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: reader error %v, reference error %v", raw, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: got %+v, want %+v", raw, got, want)
	}
}

// referenceMemberReport decodes the report into a map first (last key wins) and keeps integral
// counts only.
func referenceMemberReport(raw []byte) (memberReport, error) {
	var v any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &v); err != nil {
		return memberReport{}, err
	}
	var rep memberReport
	m, _ := v.(map[string]any)
	rep.ObservedGeneration = refInt(m["observedGeneration"])
	rep.Backends = refInt(m["backends"])
	rep.RegisteredBackends = refInt(m["registeredBackends"])
	switch c := m["candidates"].(type) {
	case map[string]any:
		rep.Candidates = &candidateCounts{Total: refInt(c["total"]), Ready: refInt(c["ready"])}
	case []any:
		rep.Candidates = &candidateCounts{}
	}
	return rep, nil
}

func refInt(v any) int64 {
	n, _ := integralOf(v)
	return n
}
