package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"runtime/debug"
	"strings"

	"k8s.io/klog/v2"
)

// Driver is a load-balancer driver: one method per webhook. A method returns an error only when it
// could not produce an answer at all (the server then answers HTTP 500 and the caller retries
// with backoff); refusals and failures are answers (Deny, Fail, Running).
type Driver interface {
	Healthz(ctx context.Context, req *HealthzRequest) (*HealthzResponse, error)
	ValidateLoadBalancer(ctx context.Context, req *ValidateLoadBalancerRequest) (*ValidateLoadBalancerResponse, error)
	CreateLoadBalancer(ctx context.Context, req *CreateLoadBalancerRequest) (*CreateLoadBalancerResponse, error)
	EnsureLoadBalancer(ctx context.Context, req *EnsureLoadBalancerRequest) (*EnsureLoadBalancerResponse, error)
	DeleteLoadBalancer(ctx context.Context, req *DeleteLoadBalancerRequest) (*DeleteLoadBalancerResponse, error)
	ValidateBackend(ctx context.Context, req *ValidateBackendRequest) (*ValidateBackendResponse, error)
	GenerateBackendAddr(ctx context.Context, req *GenerateBackendAddrRequest) (*GenerateBackendAddrResponse, error)
	EnsureBackend(ctx context.Context, req *BackendOperationRequest) (*BackendOperationResponse, error)
	DeregisterBackend(ctx context.Context, req *BackendOperationRequest) (*BackendOperationResponse, error)
	JudgePodDeregister(ctx context.Context, req *JudgePodDeregisterRequest) (*JudgePodDeregisterResponse, error)
}

// DefaultMaxRequestBytes caps request bodies. judgePodDeregister carries whole Pod objects, so
// the cap is generous; anything larger is refused with 413.
const DefaultMaxRequestBytes = 16 << 20

// HandlerOptions configures NewHandler.
type HandlerOptions struct {
	// Prefix is a URL path prefix the webhooks are served under, e.g. "/radware".
	Prefix string
	// MaxRequestBytes caps request bodies (DefaultMaxRequestBytes when 0).
	MaxRequestBytes int64
}

// ErrorBody is the JSON body of every non-200 answer of the server kit.
type ErrorBody struct {
	Msg string `json:"msg"`
}

type route struct {
	newReq func() any
	call   func(ctx context.Context, req any) (any, error)
}

// NewHandler serves d's ten webhooks at <prefix>/<webhook>. Requests are POSTed JSON; the top
// level must have only the webhook's keys (in any case, like the original's decoder) so a
// misspelled key is refused rather than silently ignored. Nested Kubernetes objects are decoded
// leniently so that fields of newer Kubernetes versions do not break old drivers. Malformed
// input gets 400, unknown paths 404, other methods 405, a panicking driver 500 — always with
// a JSON {"msg": ...} body.
func NewHandler(d Driver, opts HandlerOptions) http.Handler {
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	prefix := "/" + strings.Trim(opts.Prefix, "/")
	if prefix == "/" {
		prefix = ""
	}
	routes := map[string]route{
		Healthz: {func() any { return &HealthzRequest{} }, func(ctx context.Context, r any) (any, error) {
			return d.Healthz(ctx, r.(*HealthzRequest))
		}},
		ValidateLoadBalancer: {func() any { return &ValidateLoadBalancerRequest{} }, func(ctx context.Context, r any) (any, error) {
			return d.ValidateLoadBalancer(ctx, r.(*ValidateLoadBalancerRequest))
		}},
		CreateLoadBalancer: {func() any { return &CreateLoadBalancerRequest{} }, func(ctx context.Context, r any) (any, error) {
			return d.CreateLoadBalancer(ctx, r.(*CreateLoadBalancerRequest))
		}},
		EnsureLoadBalancer: {func() any { return &EnsureLoadBalancerRequest{} }, func(ctx context.Context, r any) (any, error) {
			return d.EnsureLoadBalancer(ctx, r.(*EnsureLoadBalancerRequest))
		}},
		DeleteLoadBalancer: {func() any { return &DeleteLoadBalancerRequest{} }, func(ctx context.Context, r any) (any, error) {
			return d.DeleteLoadBalancer(ctx, r.(*DeleteLoadBalancerRequest))
		}},
		ValidateBackend: {func() any { return &ValidateBackendRequest{} }, func(ctx context.Context, r any) (any, error) {
			return d.ValidateBackend(ctx, r.(*ValidateBackendRequest))
		}},
		GenerateBackendAddr: {func() any { return &GenerateBackendAddrRequest{} }, func(ctx context.Context, r any) (any, error) {
			return d.GenerateBackendAddr(ctx, r.(*GenerateBackendAddrRequest))
		}},
		EnsureBackend: {func() any { return &BackendOperationRequest{} }, func(ctx context.Context, r any) (any, error) {
			return d.EnsureBackend(ctx, r.(*BackendOperationRequest))
		}},
		DeregisterBackend: {func() any { return &BackendOperationRequest{} }, func(ctx context.Context, r any) (any, error) {
			return d.DeregisterBackend(ctx, r.(*BackendOperationRequest))
		}},
		JudgePodDeregister: {func() any { return &JudgePodDeregisterRequest{} }, func(ctx context.Context, r any) (any, error) {
			return d.JudgePodDeregister(ctx, r.(*JudgePodDeregisterRequest))
		}},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, prefix+"/")
		rt, known := routes[name]
		if !ok || !known {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no webhook at %s", r.URL.Path))
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s: use POST", name))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, opts.MaxRequestBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%s: request body over %d bytes", name, tooBig.Limit))
				return
			}
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s: read request: %v", name, err))
			return
		}
		req := rt.newReq()
		if err := DecodeRequest(body, req); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s: %v", name, err))
			return
		}
		rsp, err := safeCall(r.Context(), rt, req)
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "driver webhook failed", "webhook", name)
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("%s: %v", name, err))
			return
		}
		if v := reflect.ValueOf(rsp); !v.IsValid() || (v.Kind() == reflect.Pointer && v.IsNil()) {
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("%s: driver returned no answer", name))
			return
		}
		out, err := json.Marshal(rsp)
		if err != nil {
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("%s: encode answer: %v", name, err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

// safeCall turns a driver panic into an error so one bad request never takes the server down.
func safeCall(ctx context.Context, rt route, req any) (rsp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			klog.FromContext(ctx).Error(fmt.Errorf("%v", p), "driver panicked", "stack", string(debug.Stack()))
			rsp, err = nil, fmt.Errorf("driver panicked: %v", p)
		}
	}()
	return rt.call(ctx, req)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(ErrorBody{Msg: msg})
}

// DecodeRequest decodes a webhook request body into req (a pointer to one of the request types).
// The body must be one JSON object whose keys are all fields of req, matched case-insensitively
// as encoding/json does; values inside nested Kubernetes objects are not checked for unknown keys.
func DecodeRequest(body []byte, req any) error {
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&top); err != nil {
		return fmt.Errorf("malformed JSON: %w", err)
	}
	if top == nil {
		return errors.New("malformed JSON: want an object, got null")
	}
	if dec.More() {
		return errors.New("malformed JSON: trailing data after the object")
	}
	known := jsonKeys(reflect.TypeOf(req).Elem())
	for k := range top {
		if !known[strings.ToLower(k)] {
			return fmt.Errorf("unknown field %q", k)
		}
	}
	if err := json.Unmarshal(body, req); err != nil {
		return fmt.Errorf("malformed request: %w", err)
	}
	return nil
}

// jsonKeys returns the lower-cased JSON keys of struct type t, following embedded structs.
func jsonKeys(t reflect.Type) map[string]bool {
	keys := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k := range jsonKeys(f.Type) {
				keys[k] = true
			}
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		keys[strings.ToLower(name)] = true
	}
	return keys
}
