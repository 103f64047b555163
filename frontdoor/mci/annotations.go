package mci

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// The ingress-bfe annotations (seed 001) lbfed understands on a MultiClusterIngress, with
// ingress-bfe's keys, value formats and validation.
const (
	// AnnotationPrefix is ingress-bfe's annotation prefix. Every key under it is either one of the
	// supported annotations below or refused.
	AnnotationPrefix = "bfe.ingress.kubernetes.io/"
	// AnnotationBalanceWeight splits a path's traffic across Services: {"svc": {"svc1": 80,
	// "svc2": 20}}, where "svc" is the backend Service name a path uses (it need not exist) and
	// svc1, svc2 are Services of the namespace; integers >= 0 with a positive sum. lbfed also
	// splits across members: "svc1@m1" is svc1's pods in member cluster m1 only.
	AnnotationBalanceWeight = AnnotationPrefix + "balance.weight"
	// AnnotationRouterCookie restricts every rule to requests carrying a cookie: "key:value".
	AnnotationRouterCookie = AnnotationPrefix + "router.cookie"
	// AnnotationRouterHeader restricts every rule to requests carrying a header: "Key:value".
	AnnotationRouterHeader = AnnotationPrefix + "router.header"
	// AnnotationIngressStatus is written by ingress-bfe's controller, not by users: accepted and
	// ignored so that an Ingress copied into a MultiClusterIngress is not refused for it.
	AnnotationIngressStatus = AnnotationPrefix + "bfe-ingress-status"

	// AnnotationIngressClass is the deprecated ingress class annotation, honoured when
	// spec.ingressClassName is empty.
	AnnotationIngressClass = "kubernetes.io/ingress.class"
)

// supportedAnnotations are the keys under AnnotationPrefix lbfed acts on, sorted.
var supportedAnnotations = []string{AnnotationBalanceWeight, AnnotationRouterCookie, AnnotationRouterHeader}

// Balance is a parsed balance.weight annotation: backend name → Service → weight.
type Balance map[string]map[string]int

// annotations are the parsed ingress-bfe annotations of one MultiClusterIngress.
type annotations struct {
	balance Balance
	cookie  string // "key:value", empty when absent
	header  string
}

// parseAnnotations reads the ingress-bfe annotations. Every problem names its annotation; keys
// under the ingress-bfe prefix that lbfed does not implement are problems too, never ignored.
func parseAnnotations(a map[string]string) (annotations, []Problem) {
	var out annotations
	var problems []Problem
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := a[k]
		switch {
		case k == AnnotationBalanceWeight:
			b, err := parseBalance(v)
			if err != nil {
				problems = append(problems, Problem{Reason: ReasonInvalidAnnotation, Annotation: k, Message: err.Error()})
				continue
			}
			out.balance = b
		case k == AnnotationRouterCookie || k == AnnotationRouterHeader:
			if strings.TrimSpace(v) == "" {
				continue // as in ingress-bfe: an empty condition is no condition
			}
			m, err := parseMatch(v)
			if err != nil {
				problems = append(problems, Problem{Reason: ReasonInvalidAnnotation, Annotation: k, Message: err.Error()})
				continue
			}
			if k == AnnotationRouterCookie {
				out.cookie = m
			} else {
				out.header = m
			}
		case k == AnnotationIngressStatus:
		case strings.HasPrefix(k, AnnotationPrefix):
			problems = append(problems, Problem{Reason: ReasonUnsupportedAnnotation, Annotation: k,
				Message: fmt.Sprintf("not supported by lbfed (supported: %s)", strings.Join(supportedAnnotations, ", "))})
		}
	}
	return out, problems
}

// parseBalance reads balance.weight as ingress-bfe does (integers only: a float or a string is
// refused by the JSON decoding) and checks its rules: weights >= 0, a positive sum per backend.
func parseBalance(v string) (Balance, error) {
	var b Balance
	dec := json.NewDecoder(bytes.NewReader([]byte(v)))
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("want JSON {\"service\": {\"service1\": 80, \"service2\": 20}} with integer weights: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON object")
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("no backend named")
	}
	for _, name := range sortedKeys(b) {
		services := b[name]
		if len(services) == 0 {
			return nil, fmt.Errorf("backend %q: no service named", name)
		}
		sum := 0
		for _, svc := range sortedKeys(services) {
			w := services[svc]
			if err := checkBalanceKey(svc); err != nil {
				return nil, fmt.Errorf("backend %q: %w", name, err)
			}
			if w < 0 {
				return nil, fmt.Errorf("backend %q: weight of service %q is %d: weights must be >= 0", name, svc, w)
			}
			if w > maxWeight {
				return nil, fmt.Errorf("backend %q: weight of service %q is %d: at most %d", name, svc, w, maxWeight)
			}
			sum += w
		}
		if sum == 0 {
			return nil, fmt.Errorf("backend %q: the sum of the weights must be > 0", name)
		}
	}
	return b, nil
}

// checkBalanceKey checks a balance.weight entry: a Service name, or "service@member" for the
// Service's pods in one member cluster (an lbfed extension: weights across members).
func checkBalanceKey(k string) error {
	svc, member, hasMember := strings.Cut(k, "@")
	if !isDNSLabel(svc) {
		return fmt.Errorf("%q: want a Service name or \"service@member\"", k)
	}
	if hasMember && !isDNSLabel(member) {
		return fmt.Errorf("%q: the member cluster %q is not a valid cluster name", k, member)
	}
	return nil
}

func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')) {
			return false
		}
	}
	return true
}

// maxWeight bounds a balance.weight value (the BFE driver's weight bound).
const maxWeight = 10000

// parseMatch checks ingress-bfe's "key:value" router condition (the BFE driver's lbSpec cookie and
// header syntax): a token key, a printable value without quotes, backslashes or spaces.
func parseMatch(s string) (string, error) {
	k, v, ok := strings.Cut(s, ":")
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	if !ok || k == "" || v == "" {
		return "", fmt.Errorf("%q: want \"key:value\"", s)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= 0x20 || c >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", rune(c)) {
			return "", fmt.Errorf("%q: key %q has the invalid character %q", s, k, c)
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return "", fmt.Errorf("%q: the value must be printable ASCII without quotes, backslashes or spaces", s)
		}
	}
	return k + ":" + v, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
