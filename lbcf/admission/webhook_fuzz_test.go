package admission_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	jsonpatch "github.com/mattbaird/jsonpatch"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lbcfadmission "github.com/lbfed/lbfed/lbcf/admission"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// mux is a Registrar for the fuzz target: the webhooks behind a plain ServeMux.
type mux struct {
	*http.ServeMux
	paths map[string]bool
}

func (m mux) Register(path string, h http.Handler) { m.Handle(path, h); m.paths[path] = true }

// driverAnswers answers every driver call with success (validate webhooks).
type driverAnswers struct{}

func (driverAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(`{"succ":true,"msg":""}`)), Header: http.Header{}}, nil
}

// FuzzAdmission: admission requests carry objects anyone allowed to write them composed. Whatever
// the object and old object, each webhook answers 200 with the request's uid, allows or denies
// with a reason, and patches only a JSON object, with a well-formed JSON patch.
func FuzzAdmission(f *testing.F) {
	f.Add("/validate-backend-group", "CREATE", `{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendGroup","metadata":{"name":"g","namespace":"n","annotations":{"lbfed.io/readiness-panic-threshold":"2"}},"spec":{"loadBalancers":["a"],"pods":{"byLabel":{"selector":{"app":"x"}},"ports":[{"port":80}]}}}`, ``)
	f.Add("/mutate-backend-broup", "CREATE", `{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendGroup","metadata":{"name":"g","namespace":"n"},"spec":{"lbName":"a","pods":{"port":{"portNumber":80},"byName":["p"]}}}`, ``)
	f.Add("/validate-load-balancer", "UPDATE", `{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"LoadBalancer","metadata":{"name":"a","namespace":"n"},"spec":{"lbDriver":"d","lbSpec":{"vip":"1.1.1.1"}}}`,
		`{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"LoadBalancer","metadata":{"name":"a","namespace":"n"},"spec":{"lbDriver":"d","lbSpec":{"vip":"1.1.1.2"}}}`)
	f.Add("/validate-load-balancer-driver", "DELETE", ``, `{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"LoadBalancerDriver","metadata":{"name":"d","namespace":"n"},"spec":{"driverType":"Webhook","url":"http://d"}}`)
	f.Add("/mutate-load-balancer", "CREATE", `{"kind":"LoadBalancer","spec":{"ensurePolicy":{"policy":"Always","minPeriod":"-1s"}}}`, ``)
	f.Add("/mutate-load-balancer-driver", "CREATE", `[]`, `null`)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = lbcfv1beta1.AddToScheme(scheme)
	hooks := &lbcfadmission.Webhooks{Client: fake.NewClientBuilder().WithScheme(scheme).Build(),
		Invoker: driver.NewClient(driver.ClientOptions{Transport: driverAnswers{}}), Decoder: admission.NewDecoder(scheme)}
	m := mux{http.NewServeMux(), map[string]bool{}}
	hooks.Register(m)
	f.Fuzz(func(t *testing.T, path, operation, object, old string) {
		// The path is the webhook configuration's, not the requester's: the API server calls the
		// registered paths only (what a ServeMux does with others is not the webhooks' concern).
		if !m.paths[path] {
			return
		}
		review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "fuzz-uid", Operation: admissionv1.Operation(operation), Namespace: "n", Name: "x"}}
		if json.Valid([]byte(object)) {
			review.Request.Object = runtime.RawExtension{Raw: []byte(object)}
		}
		if json.Valid([]byte(old)) {
			review.Request.OldObject = runtime.RawExtension{Raw: []byte(old)}
		}
		body, err := json.Marshal(review)
		if err != nil {
			return
		}
		req := httptest.NewRequest(http.MethodPost, "https://admission.invalid"+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: HTTP %d: %s", path, rec.Code, rec.Body.String())
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("%s: not an AdmissionReview: %v %s", path, err, rec.Body.String())
		}
		if out.Response.UID != "fuzz-uid" {
			t.Fatalf("%s: uid %q", path, out.Response.UID)
		}
		if !out.Response.Allowed && (out.Response.Result == nil || out.Response.Result.Message == "") {
			t.Fatalf("%s: denied without a reason", path)
		}
		if len(out.Response.Patch) > 0 {
			var ops []jsonpatch.JsonPatchOperation
			if err := json.Unmarshal(out.Response.Patch, &ops); err != nil {
				t.Fatalf("%s: patch is not a JSON patch: %v", path, err)
			}
			if !json.Valid([]byte(object)) {
				t.Fatalf("%s: a patch for an object that was not JSON", path)
			}
		}
	})
}
