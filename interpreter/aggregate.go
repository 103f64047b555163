package interpreter

import (
	"encoding/json"
	"reflect"
	"sort"

	"github.com/go-logr/logr"
	webhook "github.com/karmada-io/karmada/pkg/webhook/interpreter"
	"github.com/mattbaird/jsonpatch"
	kjson "sigs.k8s.io/json"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// memberReport is what AggregateStatus reads of one member's InterpretStatus answer. Only the
// counts are decoded; the candidate lists are skipped.
type memberReport struct {
	ObservedGeneration int64            `json:"observedGeneration"`
	Backends           int64            `json:"backends"`
	RegisteredBackends int64            `json:"registeredBackends"`
	Candidates         *candidateCounts `json:"candidates"`
}

type candidateCounts struct {
	Total int64 `json:"total"`
	Ready int64 `json:"ready"`
}

func (h *Handler) aggregateStatus(log logr.Logger, kind string, req webhook.Request) (webhook.Response, Outcome) {
	if kind != lbcfv1beta1.KindBackendGroup {
		// A LoadBalancer's template status belongs to the controller that creates it.
		return webhook.Succeeded(""), OutcomeAnswered
	}
	tmpl, err := decodeObject(req.Object.Raw)
	if err != nil {
		// Never fail AggregateStatus: without an object there is nothing to patch.
		log.Info("Template is not a JSON object; leaving its status alone", "error", err.Error())
		return webhook.Succeeded(""), OutcomeNoop
	}
	status, hasStatus := tmpl["status"].(map[string]any)
	existing := status["clusters"]

	clusters := summarize(log, req, previousSummaries(existing))

	var ops []jsonpatch.JsonPatchOperation
	switch {
	case len(clusters) == 0 && existing == nil:
	case len(clusters) == 0:
		ops = append(ops, jsonpatch.NewPatch("remove", "/status/clusters", nil))
	case !hasStatus:
		ops = append(ops, jsonpatch.NewPatch("add", "/status", map[string]any{"clusters": clusters}))
	case existing == nil:
		ops = append(ops, jsonpatch.NewPatch("add", "/status/clusters", clusters))
	case !sameValue(existing, clusters):
		ops = append(ops, jsonpatch.NewPatch("replace", "/status/clusters", clusters))
	}
	return patchResponse(ops), OutcomeAnswered
}

// previousSummaries reads the template's current status.clusters; unreadable entries are
// ignored.
func previousSummaries(v any) []lbcfv1beta1.ClusterSummary {
	list, _ := v.([]any)
	out := make([]lbcfv1beta1.ClusterSummary, 0, len(list))
	for _, e := range list {
		m := asMap(e)
		name, ok := asString(m["name"])
		if !ok {
			continue
		}
		s := lbcfv1beta1.ClusterSummary{Name: name}
		s.ObservedGeneration, _ = integralOf(m["observedGeneration"])
		c, _ := integralOf(m["candidates"])
		r, _ := integralOf(m["ready"])
		s.Candidates, s.Ready = count32(c), count32(r)
		s.Health, _ = asString(m["health"])
		out = append(out, s)
	}
	return out
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
		if item.Status == nil || len(item.Status.Raw) == 0 || string(item.Status.Raw) == "null" {
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
			Candidates:         count32(r.Backends),
			Ready:              count32(r.RegisteredBackends),
			Health:             string(item.Health),
		}
		if r.Candidates != nil {
			s.Candidates, s.Ready = count32(r.Candidates.Total), count32(r.Candidates.Ready)
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

// sameValue reports whether the decoded JSON value v and the Go value x encode alike.
func sameValue(v any, x any) bool {
	raw, err := json.Marshal(x)
	if err != nil {
		return false
	}
	var decoded any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &decoded); err != nil {
		return false
	}
	return reflect.DeepEqual(v, decoded)
}
