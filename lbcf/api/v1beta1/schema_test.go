package v1beta1_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/lbfed/lbfed/lbcf/api/crd"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// schemaFor mimics what kube-apiserver does with a create request for a CRD-backed object:
// drop nulls of non-nullable fields, prune unknown fields, validate against the schema.
type schemaFor struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
}

func loadSchemas(t *testing.T) map[string]schemaFor {
	t.Helper()
	crds, err := crd.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]schemaFor{}
	for _, c := range crds {
		internal := &apiextensions.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(c.Spec.Versions[0].Schema.OpenAPIV3Schema, internal, nil); err != nil {
			t.Fatal(err)
		}
		s, err := structuralschema.NewStructural(internal)
		if err != nil {
			t.Fatalf("%s: not structural: %v", c.Name, err)
		}
		v, _, err := apiservervalidation.NewSchemaValidator(internal)
		if err != nil {
			t.Fatal(err)
		}
		out[c.Spec.Names.Kind] = schemaFor{s, v}
	}
	return out
}

// admit returns the fields the apiserver would prune and the validation errors.
func (s schemaFor) admit(obj map[string]interface{}) ([]string, field.ErrorList) {
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, s.structural)
	pruned := pruning.PruneWithOptions(obj, s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	return pruned, apiservervalidation.ValidateCustomResource(nil, obj, s.validator)
}

func readObject(t *testing.T, path string) map[string]interface{} {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return obj
}

func newTyped(kind string) runtime.Object {
	switch kind {
	case lbcfv1beta1.KindLoadBalancerDriver:
		return &lbcfv1beta1.LoadBalancerDriver{}
	case lbcfv1beta1.KindLoadBalancer:
		return &lbcfv1beta1.LoadBalancer{}
	case lbcfv1beta1.KindBackendGroup:
		return &lbcfv1beta1.BackendGroup{}
	case lbcfv1beta1.KindBackendRecord:
		return &lbcfv1beta1.BackendRecord{}
	}
	return nil
}

// Every object shape the original LBCF stored (nulls, deprecated fields, duration strings) is
// accepted by the v1 CRDs without losing a field, and decodes into the Go types.
func TestOriginalObjectsAreAccepted(t *testing.T) {
	schemas := loadSchemas(t)
	files, _ := filepath.Glob("testdata/original/*.yaml")
	if len(files) == 0 {
		t.Fatal("no test objects")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			g := NewWithT(t)
			obj := readObject(t, f)
			kind, _ := obj["kind"].(string)
			s, ok := schemas[kind]
			g.Expect(ok).To(BeTrue(), "no CRD for kind %q", kind)
			pruned, errs := s.admit(obj)
			g.Expect(errs).To(BeEmpty())
			g.Expect(pruned).To(BeEmpty(), "fields the schema does not know would be lost")

			raw, _ := json.Marshal(obj)
			typed := newTyped(kind)
			g.Expect(json.Unmarshal(raw, typed)).To(Succeed())
		})
	}
}

// What the original rejected when decoding into its Go types (its admission webhook denied it)
// is rejected by the schema too, so bad objects fail at the API server with a clear message.
func TestSchemaRejectsWhatTheOriginalCouldNotDecode(t *testing.T) {
	schemas := loadSchemas(t)
	cases := []struct {
		name, file, path string
		value            interface{}
	}{
		{"duration as number", "loadbalancer.yaml", "spec.ensurePolicy.minPeriod", 60},
		{"webhook timeout as number", "driver-null-status.yaml", "spec.webhooks", []interface{}{map[string]interface{}{"name": "healthz", "timeout": 10}}},
		{"port as string", "backendgroup-service.yaml", "spec.service.port.port", "80"},
		{"lbSpec value not a string", "loadbalancer.yaml", "spec.lbSpec.port", 80},
		{"parameters value not a string", "backendgroup-pods.yaml", "spec.parameters", map[string]interface{}{"weight": 3}},
		{"loadBalancers not a list", "backendgroup-pods.yaml", "spec.loadBalancers", "a-lb"},
		{"missing lbDriver", "loadbalancer.yaml", "spec.lbDriver", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := readObject(t, filepath.Join("testdata/original", tc.file))
			setPath(obj, tc.path, tc.value)
			_, errs := schemas[obj["kind"].(string)].admit(obj)
			g.Expect(errs).NotTo(BeEmpty())
		})
	}
}

func setPath(obj map[string]interface{}, path string, v interface{}) {
	parts := strings.Split(path, ".")
	m := obj
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			m[p] = next
		}
		m = next
	}
	if v == nil {
		delete(m, parts[len(parts)-1])
		return
	}
	m[parts[len(parts)-1]] = v
}

// The harness itself must see pruning, or TestOriginalObjectsAreAccepted could not fail.
func TestAdmitReportsPrunedFields(t *testing.T) {
	g := NewWithT(t)
	schemas := loadSchemas(t)
	obj := readObject(t, "testdata/original/loadbalancer.yaml")
	setPath(obj, "spec.notAField", "x")
	pruned, errs := schemas["LoadBalancer"].admit(obj)
	g.Expect(errs).To(BeEmpty())
	g.Expect(pruned).To(ConsistOf("spec.notAField"))
}
