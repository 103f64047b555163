package interpreter_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/resourceinterpreter/customized/declarative"
	"github.com/karmada-io/karmada/pkg/resourceinterpreter/customized/webhook/request"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/lbfed/lbfed/interpreter"
)

// testCase is one entry of testdata/cases (see its README).
type testCase struct {
	Name        string                              `json:"name"`
	Operation   configv1alpha1.InterpreterOperation `json:"operation"`
	Object      map[string]any                      `json:"object"`
	Observed    map[string]any                      `json:"observed,omitempty"`
	StatusItems []workv1alpha2.AggregatedStatusItem `json:"statusItems,omitempty"`
	Replicas    int32                               `json:"replicas,omitempty"`
	Want        struct {
		Replicas     *int32                                     `json:"replicas,omitempty"`
		Healthy      *bool                                      `json:"healthy,omitempty"`
		Status       json.RawMessage                            `json:"status,omitempty"`
		Object       map[string]any                             `json:"object,omitempty"`
		Dependencies *[]configv1alpha1.DependentObjectReference `json:"dependencies,omitempty"`
	} `json:"want"`
	file string
}

// result is what either implementation answered, in the shape of testCase.Want.
type result struct {
	replicas     *int32
	healthy      *bool
	status       json.RawMessage
	object       map[string]any
	dependencies []configv1alpha1.DependentObjectReference
}

func loadCases(t testing.TB) []testCase {
	t.Helper()
	files, err := filepath.Glob("testdata/cases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no case files: %v", err)
	}
	var all []testCase
	names := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Cases []testCase `json:"cases"`
		}
		if err := yaml.UnmarshalStrict(data, &doc, func(d *json.Decoder) *json.Decoder { d.DisallowUnknownFields(); return d }); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i := range doc.Cases {
			c := &doc.Cases[i]
			c.file = filepath.Base(f)
			if prev, dup := names[c.Name]; dup {
				t.Fatalf("%s: case %q also in %s", f, c.Name, prev)
			}
			names[c.Name] = c.file
			if c.Object == nil {
				t.Fatalf("%s: case %q has no object", f, c.Name)
			}
		}
		all = append(all, doc.Cases...)
	}
	return all
}

// TestCases runs every case against the webhook (over its HTTP handler, with Karmada's request
// construction and response checks) and against the Lua customization in Karmada's Lua VM.
func TestCases(t *testing.T) {
	cases := loadCases(t)
	srv := newTestServer(t)
	lua := newLuaInterpreter(t)
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[coverageKey(tc)] = true
		t.Run(tc.file+"/"+tc.Name, func(t *testing.T) {
			t.Run("webhook", func(t *testing.T) {
				got, err := runWebhook(srv.HTTPHandler(), tc)
				if err != nil {
					t.Fatal(err)
				}
				check(t, tc, got, false)
			})
			t.Run("lua", func(t *testing.T) {
				got, err := runLua(lua, tc)
				if err != nil {
					t.Fatal(err)
				}
				check(t, tc, got, true)
			})
		})
	}
	// Every operation of both kinds, and both member modes where they differ, has cases.
	for _, kind := range []string{"BackendGroup", "LoadBalancer"} {
		for _, op := range []configv1alpha1.InterpreterOperation{
			configv1alpha1.InterpreterOperationInterpretReplica, configv1alpha1.InterpreterOperationReviseReplica,
			configv1alpha1.InterpreterOperationRetain, configv1alpha1.InterpreterOperationInterpretStatus,
			configv1alpha1.InterpreterOperationInterpretHealth, configv1alpha1.InterpreterOperationAggregateStatus,
			configv1alpha1.InterpreterOperationInterpretDependency,
		} {
			if !seen[kind+"/"+string(op)] {
				t.Errorf("no case for %s %s", kind, op)
			}
		}
	}
}

func coverageKey(tc testCase) string {
	kind, _ := tc.Object["kind"].(string)
	return kind + "/" + string(tc.Operation)
}

func newTestServer(t testing.TB) *interpreter.Server {
	t.Helper()
	certs, err := interpreter.NewSelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := interpreter.NewServer(interpreter.NewHandler(logr.Discard()), interpreter.ServerOptions{BindAddress: "127.0.0.1:0", Certificates: certs, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func newLuaInterpreter(t testing.TB) *declarative.ConfigurableInterpreter {
	t.Helper()
	rics, err := interpreter.Customizations()
	if err != nil {
		t.Fatal(err)
	}
	ipt := declarative.NewConfigurableInterpreter(nil)
	ipt.LoadConfig(rics)
	return ipt
}

// karmadaRequest builds the request body exactly as Karmada does, and returns it with its uid.
func karmadaRequest(tc testCase) (body []byte, uid string, err error) {
	attrs := &request.Attributes{
		Operation:        tc.Operation,
		Object:           &unstructured.Unstructured{Object: deepCopy(tc.Object)},
		ReplicasSet:      tc.Replicas,
		AggregatedStatus: tc.StatusItems,
	}
	if tc.Observed != nil {
		attrs.ObservedObj = &unstructured.Unstructured{Object: deepCopy(tc.Observed)}
	}
	id, obj, err := request.CreateResourceInterpreterContext([]string{"v1alpha1"}, attrs)
	if err != nil {
		return nil, "", err
	}
	ric := obj.(*configv1alpha1.ResourceInterpreterContext)
	ric.APIVersion, ric.Kind = configv1alpha1.GroupVersion.String(), "ResourceInterpreterContext"
	body, err = json.Marshal(ric)
	return body, string(id), err
}

// runWebhook posts the case to the server's handler and interprets the answer as Karmada does.
func runWebhook(h http.Handler, tc testCase) (result, error) {
	body, uid, err := karmadaRequest(tc)
	if err != nil {
		return result{}, err
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, interpreter.InterpretPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return result{}, fmt.Errorf("HTTP %d: %s", rec.Code, rec.Body)
	}
	var answer configv1alpha1.ResourceInterpreterContext
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
		return result{}, fmt.Errorf("decode answer: %w", err)
	}
	attrs, err := request.VerifyResourceInterpreterContext(types.UID(uid), tc.Operation, &answer)
	if err != nil {
		return result{}, fmt.Errorf("karmada rejects the answer: %w", err)
	}
	if !attrs.Successful {
		return result{}, fmt.Errorf("failed answer: %d %s", attrs.Status.Code, attrs.Status.Message)
	}
	var r result
	switch tc.Operation {
	case configv1alpha1.InterpreterOperationInterpretReplica:
		n := attrs.Replicas
		r.replicas = &n
		if attrs.ReplicaRequirements != nil {
			return r, fmt.Errorf("unexpected replica requirements %+v", attrs.ReplicaRequirements)
		}
	case configv1alpha1.InterpreterOperationInterpretHealth:
		h := attrs.Healthy
		r.healthy = &h
	case configv1alpha1.InterpreterOperationInterpretStatus:
		r.status = attrs.RawStatus.Raw
	case configv1alpha1.InterpreterOperationInterpretDependency:
		r.dependencies = attrs.Dependencies
	default:
		obj := &unstructured.Unstructured{Object: deepCopy(tc.Object)}
		if len(attrs.Patch) > 0 {
			patch, err := jsonpatch.DecodePatch(attrs.Patch)
			if err != nil {
				return r, fmt.Errorf("decode patch %s: %w", attrs.Patch, err)
			}
			raw, err := obj.MarshalJSON()
			if err != nil {
				return r, err
			}
			if raw, err = patch.Apply(raw); err != nil {
				return r, fmt.Errorf("apply patch %s: %w", attrs.Patch, err)
			}
			if err := obj.UnmarshalJSON(raw); err != nil {
				return r, err
			}
		}
		if tc.Operation == configv1alpha1.InterpreterOperationAggregateStatus {
			r.status = statusOf(obj.Object)
		} else {
			r.object = obj.Object
		}
	}
	return r, nil
}

// runLua runs the case in Karmada's Lua VM; operations the customization leaves out get
// Karmada's behaviour without a hook.
func runLua(ipt *declarative.ConfigurableInterpreter, tc testCase) (result, error) {
	obj := &unstructured.Unstructured{Object: deepCopy(tc.Object)}
	var r result
	switch tc.Operation {
	case configv1alpha1.InterpreterOperationInterpretReplica:
		n, req, enabled, err := ipt.GetReplicas(obj)
		if err != nil {
			return r, err
		}
		if !enabled {
			n, req = 0, nil
		}
		if req != nil {
			return r, fmt.Errorf("unexpected replica requirements %+v", req)
		}
		r.replicas = &n
	case configv1alpha1.InterpreterOperationReviseReplica:
		revised, enabled, err := ipt.ReviseReplica(obj, int64(tc.Replicas))
		if err != nil {
			return r, err
		}
		if !enabled {
			revised = obj
		}
		r.object = revised.Object
	case configv1alpha1.InterpreterOperationRetain:
		observed := &unstructured.Unstructured{Object: deepCopy(tc.Observed)}
		retained, enabled, err := ipt.Retain(obj, observed)
		if err != nil {
			return r, err
		}
		if !enabled {
			retained = obj
		}
		r.object = retained.Object
	case configv1alpha1.InterpreterOperationInterpretStatus:
		status, enabled, err := ipt.ReflectStatus(obj)
		if err != nil {
			return r, err
		}
		if !enabled {
			r.status = statusOf(obj.Object)
			if r.status == nil {
				r.status = json.RawMessage("{}")
			}
		} else {
			r.status = status.Raw
		}
	case configv1alpha1.InterpreterOperationInterpretHealth:
		healthy, enabled, err := ipt.InterpretHealth(obj)
		if err != nil {
			return r, err
		}
		if !enabled {
			healthy = true
		}
		r.healthy = &healthy
	case configv1alpha1.InterpreterOperationAggregateStatus:
		aggregated, enabled, err := ipt.AggregateStatus(obj, tc.StatusItems)
		if err != nil {
			return r, err
		}
		if !enabled {
			aggregated = obj
		}
		r.status = statusOf(aggregated.Object)
	case configv1alpha1.InterpreterOperationInterpretDependency:
		deps, _, err := ipt.GetDependencies(obj)
		if err != nil {
			return r, err
		}
		r.dependencies = deps
	default:
		return r, fmt.Errorf("operation %s not in the table's vocabulary", tc.Operation)
	}
	return r, nil
}

// check compares a result with the case's expectation. Lua results are compared after
// dropping null values and empty lists and maps, which Karmada's Lua conversion cannot keep.
func check(t *testing.T, tc testCase, got result, lua bool) {
	t.Helper()
	w := tc.Want
	norm := func(v any) any { return v }
	if lua {
		norm = dropEmpty
	}
	compare := func(what string, want, got any) {
		t.Helper()
		if !reflect.DeepEqual(norm(generic(t, want)), norm(generic(t, got))) {
			t.Errorf("%s:\n got: %s\nwant: %s", what, mustJSON(norm(generic(t, got))), mustJSON(norm(generic(t, want))))
		}
	}
	switch tc.Operation {
	case configv1alpha1.InterpreterOperationInterpretReplica:
		if w.Replicas == nil || got.replicas == nil || *w.Replicas != *got.replicas {
			t.Errorf("replicas: got %v, want %v", deref(got.replicas), deref(w.Replicas))
		}
	case configv1alpha1.InterpreterOperationInterpretHealth:
		if w.Healthy == nil || got.healthy == nil || *w.Healthy != *got.healthy {
			t.Errorf("healthy: got %v, want %v", deref(got.healthy), deref(w.Healthy))
		}
	case configv1alpha1.InterpreterOperationInterpretStatus, configv1alpha1.InterpreterOperationAggregateStatus:
		if w.Status == nil {
			t.Fatal("case has no want.status")
		}
		compare("status", w.Status, nullIfEmpty(got.status))
	case configv1alpha1.InterpreterOperationRetain, configv1alpha1.InterpreterOperationReviseReplica:
		if w.Object == nil {
			t.Fatal("case has no want.object")
		}
		compare("object", w.Object, got.object)
	case configv1alpha1.InterpreterOperationInterpretDependency:
		if w.Dependencies == nil {
			t.Fatal("case has no want.dependencies")
		}
		want, gotDeps := *w.Dependencies, got.dependencies
		if len(want) == 0 && len(gotDeps) == 0 {
			return
		}
		compare("dependencies", want, gotDeps)
	}
}

func statusOf(obj map[string]any) json.RawMessage {
	s, ok := obj["status"]
	if !ok {
		return nil
	}
	raw, _ := json.Marshal(s)
	return raw
}

func nullIfEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// generic converts v to plain JSON values (maps, slices, float64, strings, bools, nil).
func generic(t *testing.T, v any) any {
	t.Helper()
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	default:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			t.Fatalf("encode %T: %v", v, err)
		}
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return out
}

// dropEmpty removes, bottom-up, null values and empty lists and maps, in maps and in lists
// (Karmada's Lua conversion can represent none of them); an empty result is nil.
func dropEmpty(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			if val = dropEmpty(val); val != nil {
				out[k] = val
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		out := []any{}
		for _, val := range x {
			if val = dropEmpty(val); val != nil {
				out = append(out, val)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return v
}

func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return runtime.DeepCopyJSON(m)
}

func mustJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(raw)
}

func deref[T any](p *T) any {
	if p == nil {
		return "<none>"
	}
	return *p
}

func typesUID(s string) types.UID { return types.UID(s) }

func rawJSON(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }

// verifyResponse checks an answer the way Karmada does.
func verifyResponse(uid types.UID, op configv1alpha1.InterpreterOperation, answer *configv1alpha1.ResourceInterpreterContext) (*request.ResponseAttributes, error) {
	return request.VerifyResourceInterpreterContext(uid, op, answer)
}

func metaGVK(gvk schema.GroupVersionKind) metav1.GroupVersionKind {
	return metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
}
