package interpreter

import (
	"github.com/go-logr/logr"
	webhook "github.com/karmada-io/karmada/pkg/webhook/interpreter"
	"github.com/mattbaird/jsonpatch"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// retainSection is a part of a BackendGroup spec that LBCF's mutating admission rewrites: the
// keys it covers under parent (a path inside spec), and what admission makes of them.
type retainSection struct {
	parent []string
	keys   []string
	// admit applies the admission defaults to a copy of the section's values (missing keys are
	// absent from the map) and returns the result.
	admit func(section map[string]any) map[string]any
}

// backendGroupSections mirror LBCF's BackendGroup mutating webhook (CREATE and UPDATE):
// lbName → loadBalancers, deregisterPolicy → IfNotReady, service port (portNumber → port, protocol
// → TCP), pods.port merged into pods.ports with the same port normalisation.
var backendGroupSections = []retainSection{
	{keys: []string{"lbName", "loadBalancers"}, admit: admitLoadBalancers},
	{keys: []string{"deregisterPolicy"}, admit: admitDeregisterPolicy},
	{parent: []string{"service"}, keys: []string{"port"}, admit: admitServicePort},
	{parent: []string{"pods"}, keys: []string{"port", "ports"}, admit: admitPodPorts},
}

func (h *Handler) retain(log logr.Logger, kind string, req webhook.Request) (webhook.Response, Outcome) {
	if kind != lbcfv1beta1.KindBackendGroup {
		// LoadBalancer admission only adds a finalizer, which Karmada retains by itself.
		return webhook.Succeeded(""), OutcomeAnswered
	}
	desired, err := decodeObject(req.Object.Raw)
	if err != nil {
		// Never fail Retain: Karmada would stop collecting status for the object.
		log.Info("Desired object is not a JSON object; retaining nothing", "error", err.Error())
		return webhook.Succeeded(""), OutcomeNoop
	}
	var observed map[string]any
	if req.ObservedObject != nil {
		observed, err = decodeObject(req.ObservedObject.Raw)
	}
	if observed == nil {
		log.Info("Observed object is missing or not a JSON object; retaining nothing", "error", err)
		return webhook.Succeeded(""), OutcomeNoop
	}
	dspec, ospec := asMap(desired["spec"]), asMap(observed["spec"])
	if dspec == nil || ospec == nil {
		return webhook.Succeeded(""), OutcomeAnswered
	}
	return patchResponse(retainOps(backendGroupSections, dspec, ospec)), OutcomeAnswered
}

// retainOps returns the patch operations that give desired the observed values of every section
// whose observed values are exactly what admission makes of the desired ones.
func retainOps(sections []retainSection, desired, observed map[string]any) []jsonpatch.JsonPatchOperation {
	var ops []jsonpatch.JsonPatchOperation
	for _, sec := range sections {
		d, o := lookupMap(desired, sec.parent), lookupMap(observed, sec.parent)
		if d == nil || o == nil {
			continue
		}
		want := sec.admit(pick(d, sec.keys))
		if !semanticEqual(want, pick(o, sec.keys)) {
			continue // a real change of the template: admission applies it in the member
		}
		base := "/spec"
		for _, p := range sec.parent {
			base += "/" + p
		}
		for _, k := range sec.keys {
			dv, inD := d[k]
			ov, inO := o[k]
			switch {
			case inO && !inD:
				ops = append(ops, jsonpatch.NewPatch("add", base+"/"+k, ov))
			case inO && !rawEqual(dv, ov):
				ops = append(ops, jsonpatch.NewPatch("replace", base+"/"+k, ov))
			case !inO && inD:
				ops = append(ops, jsonpatch.NewPatch("remove", base+"/"+k, nil))
			}
		}
	}
	return ops
}

// lookupMap follows path from m through JSON objects; nil when a step is missing or not an object.
func lookupMap(m map[string]any, path []string) map[string]any {
	for _, p := range path {
		if m = asMap(m[p]); m == nil {
			return nil
		}
	}
	return m
}

// pick returns the keys of m that are set.
func pick(m map[string]any, keys []string) map[string]any {
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// rawEqual is exact equality of decoded JSON values (a null is not an absent key here: Karmada
// compares the retained object with the observed one exactly, after decoding both alike).
func rawEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !rawEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !rawEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// admitLoadBalancers moves a deprecated lbName into loadBalancers (appended unless listed).
func admitLoadBalancers(s map[string]any) map[string]any {
	name, ok := asString(s["lbName"])
	if !ok {
		return s
	}
	delete(s, "lbName")
	lbs, _ := s["loadBalancers"].([]any)
	for _, lb := range lbs {
		if lb == name {
			return s
		}
	}
	s["loadBalancers"] = append(append([]any(nil), lbs...), name)
	return s
}

// admitDeregisterPolicy defaults deregisterPolicy to IfNotReady.
func admitDeregisterPolicy(s map[string]any) map[string]any {
	if s["deregisterPolicy"] == nil {
		s["deregisterPolicy"] = string(lbcfv1beta1.DeregisterIfNotReady)
	}
	return s
}

// admitServicePort normalises the service backend's port selector.
func admitServicePort(s map[string]any) map[string]any {
	port := admitPort(asMap(s["port"]))
	s["port"] = port
	return s
}

// admitPodPorts merges the deprecated pods.port into pods.ports (unless a port with the same
// number and protocol is listed) and normalises every port selector.
func admitPodPorts(s map[string]any) map[string]any {
	old := asMap(s["port"])
	delete(s, "port")
	ports, _ := s["ports"].([]any)
	out := make([]any, 0, len(ports)+1)
	for _, p := range ports {
		out = append(out, admitPort(asMap(p)))
	}
	if old != nil {
		merged := admitPort(old)
		found := false
		for _, p := range out {
			pm := asMap(p)
			if semanticEqual(pm["port"], merged["port"]) && pm["protocol"] == merged["protocol"] {
				found = true
				break
			}
		}
		if !found {
			// Admission appends exactly {port, protocol}.
			out = append(out, map[string]any{"port": merged["port"], "protocol": merged["protocol"]})
		}
	}
	if len(out) > 0 {
		s["ports"] = out
	}
	return s
}

// admitPort normalises a port selector: portNumber becomes port (when port is unset) and is
// removed; protocol defaults to TCP.
func admitPort(p map[string]any) map[string]any {
	out := make(map[string]any, len(p)+1)
	for k, v := range p {
		out[k] = v
	}
	if pn, ok := out["portNumber"]; ok {
		delete(out, "portNumber")
		if n, ok := number(out["port"]); (!ok || n == 0) && pn != nil {
			out["port"] = pn
		}
	}
	if s, _ := asString(out["protocol"]); s == "" {
		out["protocol"] = "TCP"
	}
	return out
}
