package interpreter

import (
	"errors"
	"fmt"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// DecodeRequest decodes the body of a ResourceInterpreterContext request in one pass, like
// encoding/json into configv1alpha1.ResourceInterpreterContext would (keys case-sensitive), with
// the raw objects and member statuses pointing into body instead of copied. On error the
// returned request holds what was read before it — usually the uid, which Karmada sends first —
// so that even a failure can be answered with the right uid.
func DecodeRequest(body []byte) (*configv1alpha1.ResourceInterpreterRequest, error) {
	r := &jsonReader{b: body}
	var req *configv1alpha1.ResourceInterpreterRequest
	isObject := r.object(func(key string) {
		switch key {
		case "request":
			if r.isNull() {
				req = nil
				return
			}
			if req == nil {
				req = &configv1alpha1.ResourceInterpreterRequest{}
			}
			if !r.object(func(k string) { readRequestField(r, req, k) }) && r.err == nil {
				r.fail("request: not an object")
			}
		case "apiVersion", "kind":
			if _, k := r.stringValue(); k == kindMismatch {
				r.fail("%s: not a string", key)
			}
		default:
			r.skipValue(0)
		}
	})
	if !isObject && r.err == nil {
		r.fail("not a JSON object")
	}
	if err := r.end(); err != nil {
		return req, fmt.Errorf("decode ResourceInterpreterContext: %w", err)
	}
	if req == nil {
		return nil, errors.New("decode ResourceInterpreterContext: no request")
	}
	return req, nil
}

// readString reads a string into *into; null leaves it alone, another type is an error.
func readString(r *jsonReader, field string, into *string) {
	s, k := r.stringValue()
	switch k {
	case kindOK:
		*into = s
	case kindMismatch:
		r.fail("%s: not a string", field)
	}
}

func readRequestField(r *jsonReader, req *configv1alpha1.ResourceInterpreterRequest, key string) {
	str := func(into *string) { readString(r, "request."+key, into) }
	switch key {
	case "uid":
		s := string(req.UID)
		str(&s)
		req.UID = types.UID(s)
	case "kind":
		if r.isNull() {
			return
		}
		if !r.object(func(k string) {
			switch k {
			case "group":
				str(&req.Kind.Group)
			case "version":
				str(&req.Kind.Version)
			case "kind":
				str(&req.Kind.Kind)
			default:
				r.skipValue(0)
			}
		}) && r.err == nil {
			r.fail("request.kind: not an object")
		}
	case "name":
		str(&req.Name)
	case "namespace":
		str(&req.Namespace)
	case "operation":
		s := string(req.Operation)
		str(&s)
		req.Operation = configv1alpha1.InterpreterOperation(s)
	case "object":
		if raw := r.value(); raw != nil && string(raw) != "null" {
			req.Object = runtime.RawExtension{Raw: raw}
		}
	case "observedObject":
		if r.isNull() {
			req.ObservedObject = nil
			return
		}
		if raw := r.value(); raw != nil {
			req.ObservedObject = &runtime.RawExtension{Raw: raw}
		}
	case "replicas":
		n, k := r.intValue(32)
		switch k {
		case kindOK:
			v := int32(n)
			req.DesiredReplicas = &v
		case kindNull:
			req.DesiredReplicas = nil
		default:
			r.fail("request.replicas: not an int32")
		}
	case "aggregatedStatus":
		if r.isNull() {
			req.AggregatedStatus = nil
			return
		}
		items := req.AggregatedStatus[:0]
		if !r.array(func() {
			var item workv1alpha2.AggregatedStatusItem
			if r.isNull() {
				items = append(items, item)
				return
			}
			if !r.object(func(k string) { readStatusItemField(r, &item, k) }) && r.err == nil {
				r.fail("request.aggregatedStatus: item is not an object")
			}
			items = append(items, item)
		}) && r.err == nil {
			r.fail("request.aggregatedStatus: not an array")
		}
		req.AggregatedStatus = items
	default:
		r.skipValue(0)
	}
}

func readStatusItemField(r *jsonReader, item *workv1alpha2.AggregatedStatusItem, key string) {
	str := func(into *string) { readString(r, "request.aggregatedStatus."+key, into) }
	switch key {
	case "clusterName":
		str(&item.ClusterName)
	case "status":
		if r.isNull() {
			item.Status = nil
			return
		}
		if raw := r.value(); raw != nil {
			item.Status = &runtime.RawExtension{Raw: raw}
		}
	case "applied":
		b, k := r.boolValue()
		switch k {
		case kindOK:
			item.Applied = b
		case kindMismatch:
			r.fail("request.aggregatedStatus.applied: not a boolean")
		}
	case "appliedMessage":
		str(&item.AppliedMessage)
	case "health":
		s := string(item.Health)
		str(&s)
		item.Health = workv1alpha2.ResourceHealth(s)
	default:
		r.skipValue(0)
	}
}

// readMemberReport reads the counts of one member's InterpretStatus answer. Like the Lua
// customization (which sees the answer decoded into a map), the last occurrence of a key wins
// and a value of an unexpected type (a count that is not an integer, candidates that are not an
// object or a list) counts as unset.
func readMemberReport(raw []byte) (memberReport, error) {
	var rep memberReport
	r := &jsonReader{b: raw}
	readInt := func(into *int64) {
		*into, _ = r.integralValue()
	}
	r.object(func(key string) {
		switch key {
		case "observedGeneration":
			readInt(&rep.ObservedGeneration)
		case "backends":
			readInt(&rep.Backends)
		case "registeredBackends":
			readInt(&rep.RegisteredBackends)
		case "candidates":
			rep.Candidates = nil
			if r.peek() == '[' { // a Lua table too, without counts
				r.skipValue(0)
				rep.Candidates = &candidateCounts{}
				return
			}
			if r.peek() != '{' {
				r.skipValue(0)
				return
			}
			c := &candidateCounts{}
			r.object(func(k string) {
				switch k {
				case "total":
					readInt(&c.Total)
				case "ready":
					readInt(&c.Ready)
				default:
					r.skipValue(0)
				}
			})
			rep.Candidates = c
		default:
			r.skipValue(0)
		}
	})
	return rep, r.end()
}
