package interpreter

import (
	"encoding/json"
	"reflect"
	"sort"

	"github.com/go-logr/logr"
	webhook "github.com/karmada-io/karmada/pkg/webhook/interpreter"
	"github.com/mattbaird/jsonpatch"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// memberReport is what AggregateStatus reads of one member's InterpretStatus answer. Only the
// counts are decoded; the candidate lists are skipped.
type memberReport struct {
	ObservedGeneration int64 `json:"observedGeneration"`
	Backends           int64 `json:"backends"`
	RegisteredBackends int64 `json:"registeredBackends"`
	Candidates         *candidateCounts `json:"candidates"`
}

type candidateCounts struct {
	Total int64 `json:"total"`
	Ready int64 `json:"ready"`
}

// templateStatus is what AggregateStatus reads of the template.
type templateStatus struct {
	Status json.RawMessage `json:"status"`
}

func (h *Handler) aggregateStatus(log logr.Logger, kind string, req webhook.Request) (webhook.Response, Outcome) {
	if kind != lbcfv1beta1.KindBackendGroup {
		// A LoadBalancer's template status belongs to the controller that creates it.
		return webhook.Succeeded(""), OutcomeAnswered
	}
	var tmpl templateStatus
	if !isJSONObject(req.Object.Raw) || decodeLenient(req.Object.Raw, &tmpl) != nil {
		// Never fail AggregateStatus: without an object there is nothing to patch.
		log.Info("Template is not a JSON object; leaving its status alone")
		return webhook.Succeeded(""), OutcomeNoop
	}
	var status struct {
		Clusters json.RawMessage `json:"clusters"`
	}
	hasStatus := isJSONObject(tmpl.Status)
	if hasStatus {
		_ = decodeLenient(tmpl.Status, &status)
	}
	var previous []lbcfv1beta1.ClusterSummary
	if !isNullRaw(status.Clusters) {
		if err := decodeLenient(status.Clusters, &previous); err != nil {
			log.Info("Ignoring unreadable status.clusters", "error", err.Error())
			previous = nil
		}
	}

	clusters := summarize(log, req, previous)

	var ops []jsonpatch.JsonPatchOperation
	switch {
	case len(clusters) == 0 && isNullRaw(status.Clusters):
	case len(clusters) == 0:
		ops = append(ops, jsonpatch.NewPatch("remove", "/status/clusters", nil))
	case !hasStatus:
		ops = append(ops, jsonpatch.NewPatch("add", "/status", map[string]any{"clusters": clusters}))
	case isNullRaw(status.Clusters):
		ops = append(ops, jsonpatch.NewPatch("add", "/status/clusters", clusters))
	case !sameJSON(status.Clusters, clusters):
		ops = append(ops, jsonpatch.NewPatch("replace", "/status/clusters", clusters))
	}
	return patchResponse(ops), OutcomeAnswered
}

// summarize builds the sorted per-member summaries from Karmada's aggregated status items.
func summarize(log logr.Logger, req webhook.Request, previous []lbcfv1beta1.ClusterSummary) []lbcfv1beta1.ClusterSummary {
	prev := make(map[string]lbcfv1beta1.ClusterSummary, len(previous))
	for _, p := range previous {
		prev[p.Name] = p
	}
	byName := make(map[string]lbcfv1beta1.ClusterSummary, len(req.AggregatedStatus))
	reported := make(map[string]bool, len(req.AggregatedStatus))
	for i := range req.AggregatedStatus {
		item := &req.AggregatedStatus[i]
		name := item.ClusterName
		if name == "" {
			log.Info("Ignoring aggregated status item without cluster name", "index", i)
			continue
		}
		if item.Status == nil || isNullRaw(item.Status.Raw) {
			// Karmada has no status for this member right now (applied=false at first propagation
			// and after a member recovers): keep what we knew, flagged as stale.
			if reported[name] {
				continue
			}
			s, ok := prev[name]
			if !ok {
				s = lbcfv1beta1.ClusterSummary{Name: name}
			}
			s.Stale = true
			if item.Health != "" {
				s.Health = string(item.Health)
			}
			byName[name] = s
			continue
		}
		r, err := readMemberReport(item.Status.Raw)
		if err != nil {
			log.Info("Ignoring unreadable member status", "cluster", name, "error", err.Error())
		}
		s := lbcfv1beta1.ClusterSummary{
			Name:               name,
			ObservedGeneration: r.ObservedGeneration,
			Candidates:         int32(r.Backends),
			Ready:              int32(r.RegisteredBackends),
			Health:             string(item.Health),
		}
		if r.Candidates != nil {
			s.Candidates, s.Ready = int32(r.Candidates.Total), int32(r.Candidates.Ready)
		}
		byName[name] = s
		reported[name] = true
	}
	out := make([]lbcfv1beta1.ClusterSummary, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// sameJSON reports whether raw and v encode the same JSON value.
func sameJSON(raw json.RawMessage, v any) bool {
	enc, err := json.Marshal(v)
	if err != nil {
		return false
	}
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal(enc, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}
