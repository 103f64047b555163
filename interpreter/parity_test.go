package interpreter_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// parityInput is what FuzzLuaParity decodes from its bytes.
type parityInput struct {
	Object   map[string]any                      `json:"object"`
	Observed map[string]any                      `json:"observed,omitempty"`
	Items    []workv1alpha2.AggregatedStatusItem `json:"items,omitempty"`
}

var parityOperations = []configv1alpha1.InterpreterOperation{
	configv1alpha1.InterpreterOperationInterpretReplica, configv1alpha1.InterpreterOperationReviseReplica,
	configv1alpha1.InterpreterOperationRetain, configv1alpha1.InterpreterOperationInterpretStatus,
	configv1alpha1.InterpreterOperationInterpretHealth, configv1alpha1.InterpreterOperationAggregateStatus,
	configv1alpha1.InterpreterOperationInterpretDependency,
}

// FuzzLuaParity gives arbitrary objects to the webhook and to the Lua customization, as both
// LBCF kinds and for every operation, and requires the same answer: the case table pins the
// semantics, this keeps the two implementations from drifting on inputs nobody wrote down.
func FuzzLuaParity(f *testing.F) {
	for _, tc := range loadCases(f) {
		seed, err := json.Marshal(parityInput{Object: tc.Object, Observed: tc.Observed, Items: tc.StatusItems})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seed)
	}
	srv := newTestServer(f)
	lua := newLuaInterpreter(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var in parityInput
		if json.Unmarshal(data, &in) != nil || in.Object == nil {
			return
		}
		for _, kind := range []string{lbcfv1beta1.KindBackendGroup, lbcfv1beta1.KindLoadBalancer} {
			obj := deepCopy(in.Object)
			obj["apiVersion"], obj["kind"] = lbcfv1beta1.APIVersion, kind
			observed := deepCopy(in.Observed)
			if observed == nil {
				observed = deepCopy(in.Object)
			}
			observed["apiVersion"], observed["kind"] = lbcfv1beta1.APIVersion, kind
			for _, op := range parityOperations {
				tc := testCase{Name: kind + "/" + string(op), Operation: op, Object: obj, StatusItems: in.Items, Replicas: 2}
				if op == configv1alpha1.InterpreterOperationRetain {
					tc.Observed = observed
				}
				web, werr := runWebhook(srv.HTTPHandler(), tc)
				got, lerr := runLua(lua, tc)
				if werr == nil && lerr != nil && karmadaConversionError(lerr) {
					continue // Karmada cannot run any Lua on this object; the webhook can
				}
				if werr != nil || lerr != nil {
					t.Fatalf("%s on %s:\nwebhook error: %v\nlua error: %v", tc.Name, data, werr, lerr)
				}
				if diff := resultDiff(t, web, got); diff != "" {
					t.Fatalf("%s on %s: %s", tc.Name, data, diff)
				}
			}
		}
	})
}

// karmadaConversionError reports errors of Karmada's conversion between Go and Lua values
// (luavm/lua_convert.go), which fails on some objects whatever the script: e.g. an empty object
// under an empty key.
func karmadaConversionError(err error) bool {
	return strings.HasPrefix(err.Error(), "convert empty object back to empty slice failed") ||
		strings.HasPrefix(err.Error(), "json unmarshal obj failed") ||
		strings.HasPrefix(err.Error(), "encode lua result to json failed")
}

// resultDiff compares two results after the Lua normalisation (nulls and empty values dropped).
func resultDiff(t *testing.T, a, b result) string {
	t.Helper()
	if !reflect.DeepEqual(deref(a.replicas), deref(b.replicas)) || !reflect.DeepEqual(deref(a.healthy), deref(b.healthy)) {
		return "replicas/healthy: webhook " + mustJSON([]any{deref(a.replicas), deref(a.healthy)}) + ", lua " + mustJSON([]any{deref(b.replicas), deref(b.healthy)})
	}
	for _, pair := range [][2]any{
		{nullIfEmpty(a.status), nullIfEmpty(b.status)},
		{a.object, b.object},
		{a.dependencies, b.dependencies},
	} {
		x, y := dropEmpty(generic(t, pair[0])), dropEmpty(generic(t, pair[1]))
		if !reflect.DeepEqual(x, y) {
			return "\nwebhook: " + mustJSON(x) + "\n    lua: " + mustJSON(y)
		}
	}
	return ""
}
