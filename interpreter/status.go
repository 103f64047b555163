package interpreter

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	webhook "github.com/karmada-io/karmada/pkg/webhook/interpreter"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// memberObject is what InterpretStatus reads of a member object. Status values are passed through
// as raw JSON: the candidates are already compact and must reach the ResourceBinding byte for byte.
type memberObject struct {
	Metadata struct {
		Generation  *int64            `json:"generation"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Status map[string]json.RawMessage `json:"status"`
}

// report is the common head of both kinds' InterpretStatus answers.
type report struct {
	// Generation is the member object's metadata.generation.
	Generation *int64 `json:"generation,omitempty"`
	// ResourceTemplateGeneration is the generation of the Karmada template the member object was
	// last built from.
	ResourceTemplateGeneration *int64 `json:"resourceTemplateGeneration,omitempty"`
	// ObservedGeneration is the member controller's status.observedGeneration, 0 when unset.
	ObservedGeneration json.RawMessage `json:"observedGeneration"`
}

// backendGroupReport is the InterpretStatus answer for a BackendGroup.
type backendGroupReport struct {
	report
	Backends           json.RawMessage `json:"backends,omitempty"`
	RegisteredBackends json.RawMessage `json:"registeredBackends,omitempty"`
	Conditions         json.RawMessage `json:"conditions,omitempty"`
	Candidates         json.RawMessage `json:"candidates,omitempty"`
}

// loadBalancerReport is the InterpretStatus answer for a LoadBalancer.
type loadBalancerReport struct {
	report
	LBInfo     json.RawMessage `json:"lbInfo,omitempty"`
	Conditions json.RawMessage `json:"conditions,omitempty"`
}

// present returns raw unless it is null, which counts as absent.
func present(raw json.RawMessage) json.RawMessage {
	if isNullRaw(raw) {
		return nil
	}
	return raw
}

func (h *Handler) interpretStatus(log logr.Logger, kind string, req webhook.Request) (webhook.Response, Outcome) {
	if !isJSONObject(req.Object.Raw) {
		return badObject(log, "object")
	}
	var obj memberObject
	if err := decodeLenient(req.Object.Raw, &obj); err != nil {
		return badObject(log, "object")
	}
	head := report{Generation: obj.Metadata.Generation, ObservedGeneration: json.RawMessage("0")}
	if g, ok := parseGeneration(obj.Metadata.Annotations[templateGenerationAnnotation]); ok {
		head.ResourceTemplateGeneration = &g
	}
	if og := present(obj.Status["observedGeneration"]); og != nil {
		head.ObservedGeneration = og
	}
	var out any
	switch kind {
	case lbcfv1beta1.KindBackendGroup:
		out = backendGroupReport{
			report:             head,
			Backends:           present(obj.Status["backends"]),
			RegisteredBackends: present(obj.Status["registeredBackends"]),
			Conditions:         present(obj.Status["conditions"]),
			Candidates:         present(obj.Status["candidates"]),
		}
	default:
		out = loadBalancerReport{
			report:     head,
			LBInfo:     present(obj.Status["lbInfo"]),
			Conditions: present(obj.Status["conditions"]),
		}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		// Only a status value that is not valid JSON gets here, which a decoded object cannot hold.
		log.Error(err, "Cannot encode status")
		return webhook.Errored(http.StatusInternalServerError, fmt.Errorf("encode status: %w", err)), OutcomeFailed
	}
	return statusResponse(raw), OutcomeAnswered
}

// healthView is what InterpretHealth reads of a member object.
type healthView struct {
	Metadata struct {
		Generation int64 `json:"generation"`
	} `json:"metadata"`
	Status struct {
		ObservedGeneration *int64 `json:"observedGeneration"`
		Backends           int64  `json:"backends"`
		RegisteredBackends int64  `json:"registeredBackends"`
		// Candidates is only tested for presence: it marks a member-mode report.
		Candidates *struct{} `json:"candidates"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

// condition returns the status of the condition of type t, "" when absent.
func (v *healthView) condition(t string) string {
	for _, c := range v.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// behind reports whether the member controller reported an observedGeneration older than the
// object's generation.
func (v *healthView) behind() bool {
	og := v.Status.ObservedGeneration
	return og != nil && v.Metadata.Generation > 0 && *og < v.Metadata.Generation
}

func (h *Handler) interpretHealth(log logr.Logger, kind string, req webhook.Request) (webhook.Response, Outcome) {
	if !isJSONObject(req.Object.Raw) {
		return badObject(log, "object")
	}
	var v healthView
	if err := decodeLenient(req.Object.Raw, &v); err != nil {
		return badObject(log, "object")
	}
	var healthy bool
	switch kind {
	case lbcfv1beta1.KindBackendGroup:
		ready := v.condition(lbcfv1beta1.BackendGroupReady)
		if v.Status.Candidates != nil || ready != "" {
			// Member mode: the member controller has caught up and reports no error.
			var og int64
			if v.Status.ObservedGeneration != nil {
				og = *v.Status.ObservedGeneration
			}
			healthy = og >= v.Metadata.Generation && ready != string(lbcfv1beta1.ConditionFalse)
		} else {
			// Standalone LBCF, or nothing reported yet (0 == 0).
			healthy = !v.behind() && v.Status.RegisteredBackends == v.Status.Backends
		}
	default:
		healthy = v.condition(string(lbcfv1beta1.LBCreated)) == string(lbcfv1beta1.ConditionTrue) &&
			v.condition(string(lbcfv1beta1.LBAttributesSynced)) != string(lbcfv1beta1.ConditionFalse) &&
			!v.behind()
	}
	return healthResponse(healthy), OutcomeAnswered
}
