package interpreter

import (
	"strconv"

	"github.com/go-logr/logr"
	webhook "github.com/karmada-io/karmada/pkg/webhook/interpreter"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// memberObject is what InterpretStatus and InterpretHealth read of a member object, in one pass
// of jsonReader: status values are kept as raw JSON (the candidates are already compact and must
// reach the ResourceBinding byte for byte, without being decoded or re-encoded).
type memberObject struct {
	generation *int64
	// templateGeneration is the raw value of Karmada's resourcetemplate.karmada.io/generation
	// annotation.
	templateGeneration string
	status             map[string][]byte
	// Decoded for InterpretHealth.
	observedGeneration *int64
	backends           int64
	registered         int64
	hasCandidates      bool
	conditions         []condition
}

type condition struct{ typ, status string }

// readMemberObject reads a member object. Like the Lua customization (which sees the object
// decoded into a map), the last occurrence of a key wins and a value of an unexpected type counts
// as unset.
func readMemberObject(raw []byte) (*memberObject, error) {
	o := &memberObject{}
	r := &jsonReader{b: raw}
	r.object(func(key string) {
		switch key {
		case "metadata":
			o.generation, o.templateGeneration = nil, ""
			r.object(func(key string) {
				switch key {
				case "generation":
					o.generation = nil
					if n, k := r.integralValue(); k == kindOK {
						o.generation = &n
					}
				case "annotations":
					o.templateGeneration = ""
					r.object(func(key string) {
						if key != templateGenerationAnnotation {
							r.skipValue(0)
							return
						}
						o.templateGeneration, _ = r.stringValue()
					})
				default:
					r.skipValue(0)
				}
			})
		case "status":
			*o = memberObject{generation: o.generation, templateGeneration: o.templateGeneration}
			if r.peek() != '{' {
				r.skipValue(0)
				return
			}
			o.status = map[string][]byte{}
			r.object(func(key string) { o.readStatusField(r, key) })
		default:
			r.skipValue(0)
		}
	})
	return o, r.end()
}

func (o *memberObject) readStatusField(r *jsonReader, key string) {
	start := r.peekStart()
	if start < 0 {
		return
	}
	switch key {
	case "observedGeneration":
		o.observedGeneration = nil
		if n, k := r.integralValue(); k == kindOK {
			o.observedGeneration = &n
		}
	case "backends":
		o.backends, _ = r.integralValue()
	case "registeredBackends":
		o.registered, _ = r.integralValue()
	case "candidates":
		c := r.peek()
		o.hasCandidates = c == '{' || c == '[' // a Lua table either way
		r.skipValue(0)
	case "conditions":
		o.conditions = nil
		r.array(func() {
			var c condition
			r.object(func(key string) {
				switch key {
				case "type":
					c.typ, _ = r.stringValue()
				case "status":
					c.status, _ = r.stringValue()
				default:
					r.skipValue(0)
				}
			})
			o.conditions = append(o.conditions, c)
		})
	default:
		r.skipValue(0)
	}
	if r.err == nil {
		if v := r.b[start:r.i]; string(v) != "null" {
			o.status[key] = v
		} else {
			delete(o.status, key)
		}
	}
}

// Status keys each kind reports, in answer order.
var reportedStatus = map[string][]string{
	lbcfv1beta1.KindBackendGroup: {"backends", "registeredBackends", "conditions", "candidates", "reportRequest"},
	lbcfv1beta1.KindLoadBalancer: {"lbInfo", "conditions"},
}

func (h *Handler) interpretStatus(log logr.Logger, kind string, req webhook.Request) (webhook.Response, Outcome) {
	if !isJSONObject(req.Object.Raw) {
		return badObject(log, "object")
	}
	o, err := readMemberObject(req.Object.Raw)
	if err != nil {
		return badObject(log, "object")
	}
	// The answer is assembled from the raw values: they were validated while reading.
	size := 96
	for _, k := range reportedStatus[kind] {
		size += len(k) + len(o.status[k]) + 4
	}
	out := make([]byte, 0, size)
	out = append(out, '{')
	if o.generation != nil {
		out = append(out, `"generation":`...)
		out = strconv.AppendInt(out, *o.generation, 10)
		out = append(out, ',')
	}
	if g, ok := parseGeneration(o.templateGeneration); ok {
		out = append(out, `"resourceTemplateGeneration":`...)
		out = strconv.AppendInt(out, g, 10)
		out = append(out, ',')
	}
	out = append(out, `"observedGeneration":`...)
	if og, ok := o.status["observedGeneration"]; ok {
		out = append(out, og...)
	} else {
		out = append(out, '0')
	}
	for _, k := range reportedStatus[kind] {
		if v, ok := o.status[k]; ok {
			out = append(out, ',', '"')
			out = append(out, k...)
			out = append(out, '"', ':')
			out = append(out, v...)
		}
	}
	out = append(out, '}')
	return statusResponse(out), OutcomeAnswered
}

// condition returns the status of the condition of type t, "" when absent.
func (o *memberObject) condition(t string) string {
	for _, c := range o.conditions {
		if c.typ == t {
			return c.status
		}
	}
	return ""
}

// behind reports whether the member controller reported an observedGeneration older than the
// object's generation.
func (o *memberObject) behind() bool {
	og := o.observedGeneration
	return og != nil && o.gen() > 0 && *og < o.gen()
}

func (o *memberObject) gen() int64 {
	if o.generation == nil {
		return 0
	}
	return *o.generation
}

func (h *Handler) interpretHealth(log logr.Logger, kind string, req webhook.Request) (webhook.Response, Outcome) {
	if !isJSONObject(req.Object.Raw) {
		return badObject(log, "object")
	}
	o, err := readMemberObject(req.Object.Raw)
	if err != nil {
		return badObject(log, "object")
	}
	var healthy bool
	switch kind {
	case lbcfv1beta1.KindBackendGroup:
		ready := o.condition(lbcfv1beta1.BackendGroupReady)
		if o.hasCandidates || ready != "" {
			// Member mode: the member controller has caught up and reports no error.
			var og int64
			if o.observedGeneration != nil {
				og = *o.observedGeneration
			}
			healthy = og >= o.gen() && ready != string(lbcfv1beta1.ConditionFalse)
		} else {
			// Standalone LBCF, or nothing reported yet (0 == 0).
			healthy = !o.behind() && o.registered == o.backends
		}
	default:
		healthy = o.condition(string(lbcfv1beta1.LBCreated)) == string(lbcfv1beta1.ConditionTrue) &&
			o.condition(string(lbcfv1beta1.LBAttributesSynced)) != string(lbcfv1beta1.ConditionFalse) &&
			!o.behind()
	}
	return healthResponse(healthy), OutcomeAnswered
}
