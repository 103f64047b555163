package interpreter

import (
	"encoding/json"
	"errors"
	"strconv"
)

// decodeLenient decodes data into v, ignoring fields whose JSON type does not match v's: those
// keep their zero value (encoding/json goes on decoding after a type mismatch). It fails only
// when data is not JSON at all, so one odd field never hides the others.
func decodeLenient(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var typeErr *json.UnmarshalTypeError
	if err != nil && !errors.As(err, &typeErr) {
		return err
	}
	return nil
}

// isJSONObject reports whether data holds a JSON object (leading whitespace allowed).
func isJSONObject(data []byte) bool {
	for _, c := range data {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}

// isNullRaw reports whether a raw JSON value is absent or null.
func isNullRaw(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// isEmpty reports whether v counts as unset in a Kubernetes object: absent, null, or an empty list
// or map. The typed API (omitempty) and Lua (which cannot tell these apart) treat them alike, so
// Retain does too.
func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	}
	return false
}

// semanticEqual compares two values decoded from JSON, with isEmpty values equal to each other and
// a map key holding an empty value equal to a missing key.
func semanticEqual(a, b any) bool {
	if isEmpty(a) || isEmpty(b) {
		return isEmpty(a) && isEmpty(b)
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range x {
			if !semanticEqual(v, y[k]) {
				return false
			}
		}
		for k, v := range y {
			if _, seen := x[k]; !seen && !isEmpty(v) {
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
			if !semanticEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}

// asMap returns v as a JSON object, or nil.
func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// asString returns v as a string, or "" and false.
func asString(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

// parseGeneration parses Karmada's resourcetemplate.karmada.io/generation annotation: decimal
// digits only, like the Lua customization's ^%d+$ check.
func parseGeneration(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
