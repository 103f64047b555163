package interpreter

import (
	"errors"
	"math"
	"strconv"

	kjson "sigs.k8s.io/json"
)

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

// isEmpty reports whether v counts as unset in a Kubernetes object: absent, null, or an empty list
// or map (ignoring the nulls in it). The typed API (omitempty) and Lua (which cannot tell these apart)
// treat them alike, so Retain does too.
func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case []any:
		return len(withoutNulls(t)) == 0
	case map[string]any:
		for _, v := range t {
			if v != nil {
				return false
			}
		}
		return true
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
		if !ok {
			return false
		}
		// Lua lists cannot hold nulls: compare what remains without them.
		x, y = withoutNulls(x), withoutNulls(y)
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !semanticEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case int64, float64:
		x2, _ := number(x)
		y, ok := number(b)
		return ok && x2 == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}

func withoutNulls(l []any) []any {
	for _, v := range l {
		if v == nil {
			out := make([]any, 0, len(l))
			for _, v := range l {
				if v != nil {
					out = append(out, v)
				}
			}
			return out
		}
	}
	return l
}

// number returns v as a float64 when it is a JSON number (int64 or float64 once decoded).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// maxIntegral bounds the integers the interpreter reads, in both implementations: Lua numbers
// are float64, and this keeps every accepted value exactly representable in an int64.
const maxIntegral = 9.2e18

// integral returns f as an int64 when it is a whole number within ±maxIntegral.
func integral(f float64) (int64, bool) {
	if f != math.Trunc(f) || f > maxIntegral || f < -maxIntegral {
		return 0, false
	}
	return int64(f), true
}

// integralOf returns a decoded JSON number as an int64 when it is integral (see integral).
func integralOf(v any) (int64, bool) {
	f, ok := number(v)
	if !ok {
		return 0, false
	}
	return integral(f)
}

// count32 returns n when it fits a summary count (int32), else 0.
func count32(n int64) int32 {
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0
	}
	return int32(n)
}

// decodeObject decodes a JSON object the way Kubernetes (and then Karmada's Lua conversion)
// sees it: keys case-sensitive, the last of duplicate keys wins, integers kept as int64.
func decodeObject(raw []byte) (map[string]any, error) {
	var v any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &v); err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
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
// digits only (the Lua customization's ^%d+$), read as a number like Lua does.
func parseGeneration(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	return integral(f)
}
