package interpreter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	webhook "github.com/karmada-io/karmada/pkg/webhook/interpreter"
	"github.com/mattbaird/jsonpatch"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Annotations read by the interpreter.
const (
	// MemberModeAnnotation on a BackendGroup template says how its members handle it. With
	// MemberModeStandalone (members run full LBCF and call drivers themselves) the BackendGroup's
	// dependencies include its LoadBalancers and its deregisterWebhook driver; otherwise (the
	// default, member mode) LoadBalancers stay in the control plane.
	MemberModeAnnotation = "lbfed.io/member-mode"
	MemberModeStandalone = "standalone"

	// templateGenerationAnnotation is set by Karmada on every object it propagates: the generation
	// of the resource template the object was built from.
	templateGenerationAnnotation = "resourcetemplate.karmada.io/generation"
)

// Outcome classifies an answer for metrics and logs.
type Outcome string

// Outcomes.
const (
	// OutcomeAnswered: the request concerned an LBCF kind and was interpreted.
	OutcomeAnswered Outcome = "answered"
	// OutcomeNoop: the interpreter did not understand the object or the operation and answered
	// what Karmada does without a hook.
	OutcomeNoop Outcome = "noop"
	// OutcomeFailed: the answer is a failure (Karmada retries).
	OutcomeFailed Outcome = "failed"
)

// Handler answers Karmada's resource interpreter requests for LoadBalancer and BackendGroup. It
// implements the Handler interface of Karmada's pkg/webhook/interpreter and is safe for concurrent
// use.
type Handler struct {
	log logr.Logger
}

var _ webhook.Handler = (*Handler)(nil)

// NewHandler returns a Handler that logs with log.
func NewHandler(log logr.Logger) *Handler {
	return &Handler{log: log}
}

// Handle answers one request. The response is complete (uid and status code set).
func (h *Handler) Handle(ctx context.Context, req webhook.Request) webhook.Response {
	resp, _ := h.Interpret(ctx, req)
	return resp
}

// Interpret answers one request and says how. It never panics on any input.
func (h *Handler) Interpret(_ context.Context, req webhook.Request) (resp webhook.Response, outcome Outcome) {
	log := h.log.WithValues("operation", req.Operation, "kind", req.Kind.Kind, "object", klog.KRef(req.Namespace, req.Name), "uid", req.UID)
	defer func() {
		if r := recover(); r != nil {
			// A bug must cost one failed answer (Karmada retries), never the process.
			log.Error(fmt.Errorf("panic: %v", r), "Interpreter panicked")
			resp, outcome = webhook.Errored(http.StatusInternalServerError, fmt.Errorf("interpreter panic: %v", r)), OutcomeFailed
		}
		resp.Complete(req)
	}()

	kind := lbcfKind(req.Kind)
	op := req.Operation
	if kind == "" {
		log.V(2).Info("Not an LBCF kind; answering as Karmada does without a hook")
		return noop(op, req.Object.Raw), OutcomeNoop
	}
	switch op {
	case configv1alpha1.InterpreterOperationInterpretReplica:
		return replicasResponse(), OutcomeAnswered
	case configv1alpha1.InterpreterOperationReviseReplica:
		return webhook.Succeeded(""), OutcomeAnswered
	case configv1alpha1.InterpreterOperationRetain:
		return h.retain(log, kind, req)
	case configv1alpha1.InterpreterOperationInterpretStatus:
		return h.interpretStatus(log, kind, req)
	case configv1alpha1.InterpreterOperationInterpretHealth:
		return h.interpretHealth(log, kind, req)
	case configv1alpha1.InterpreterOperationAggregateStatus:
		return h.aggregateStatus(log, kind, req)
	case configv1alpha1.InterpreterOperationInterpretDependency:
		return h.interpretDependency(log, kind, req)
	}
	log.V(2).Info("Operation not interpreted for LBCF kinds; answering as Karmada does without a hook")
	return noop(op, req.Object.Raw), OutcomeNoop
}

// lbcfKind returns the LBCF kind of gvk, or "" for anything else (other groups, versions, kinds).
func lbcfKind(gvk metav1.GroupVersionKind) string {
	if gvk.Group != lbcfv1beta1.GroupName || gvk.Version != lbcfv1beta1.SchemeGroupVersion.Version {
		return ""
	}
	switch gvk.Kind {
	case lbcfv1beta1.KindLoadBalancer, lbcfv1beta1.KindBackendGroup:
		return gvk.Kind
	}
	return ""
}

// noop is the answer equivalent to Karmada's behaviour when no interpreter hook exists.
func noop(op configv1alpha1.InterpreterOperation, object []byte) webhook.Response {
	switch op {
	case configv1alpha1.InterpreterOperationInterpretReplica:
		return replicasResponse()
	case configv1alpha1.InterpreterOperationInterpretHealth:
		return healthResponse(true)
	case configv1alpha1.InterpreterOperationInterpretStatus:
		// Karmada's default reflects the whole .status.
		obj, err := decodeObject(object)
		status := asMap(obj["status"])
		if err != nil || status == nil {
			return statusResponse([]byte("{}"))
		}
		raw, err := json.Marshal(status)
		if err != nil {
			return statusResponse([]byte("{}"))
		}
		return statusResponse(raw)
	}
	// Retain, ReviseReplica, AggregateStatus, Prune, InterpretComponent, InterpretDependency:
	// success without patch, components or dependencies.
	return webhook.Succeeded("")
}

func replicasResponse() webhook.Response {
	resp := webhook.Succeeded("")
	var zero int32
	resp.Replicas = &zero
	return resp
}

func healthResponse(healthy bool) webhook.Response {
	resp := webhook.Succeeded("")
	resp.Healthy = &healthy
	return resp
}

func statusResponse(raw []byte) webhook.Response {
	resp := webhook.Succeeded("")
	resp.RawStatus = &runtime.RawExtension{Raw: raw}
	return resp
}

func dependenciesResponse(deps []configv1alpha1.DependentObjectReference) webhook.Response {
	resp := webhook.Succeeded("")
	resp.Dependencies = deps
	return resp
}

// patchResponse answers with a JSON patch, or with no patch when ops is empty.
func patchResponse(ops []jsonpatch.JsonPatchOperation) webhook.Response {
	if len(ops) == 0 {
		return webhook.Succeeded("")
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return webhook.Errored(http.StatusInternalServerError, fmt.Errorf("encode patch: %w", err))
	}
	pt := configv1alpha1.PatchTypeJSONPatch
	resp := webhook.Succeeded("")
	resp.Patch = patch
	resp.PatchType = &pt
	return resp
}

// badObject is the failed answer for an object that is not a JSON object, where any invented
// answer could erase good data (Karmada keeps the previous result and retries).
func badObject(log logr.Logger, what string) (webhook.Response, Outcome) {
	err := fmt.Errorf("%s is not a JSON object", what)
	log.Error(err, "Cannot interpret request")
	return webhook.Errored(http.StatusBadRequest, err), OutcomeFailed
}
