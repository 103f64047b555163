package mci

import (
	"fmt"
	"strings"

	networkingv1alpha1 "github.com/karmada-io/karmada/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/lbfed/lbfed/frontdoor"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Labels and lbSpec/parameter keys of the generated objects.
const (
	// Kind is the front door's frontdoor.LabelFrontDoor value; frontdoor.LabelFrontDoorName is the
	// MultiClusterIngress's name (frontdoor.NameLabel). Objects without these labels are never
	// touched.
	Kind = "multiclusteringress"

	// The BFE driver's lbSpec keys (package elb/bfe, kept here so the control plane does not
	// depend on the driver's code).
	specHost   = "host"
	specPath   = "path"
	specCookie = "cookie"
	specHeader = "header"

	// ParamSubset and ParamSubsetWeight carry balance.weight to the BFE driver: the backends of one
	// Service form a subset of the route's traffic, which gets the subset weight.
	ParamSubset       = "lbfed.io/subset"
	ParamSubsetWeight = "lbfed.io/subset-weight"
)

// Problem reasons. The Refused ones make the MultiClusterIngress not Accepted; the others leave
// part of it waiting.
const (
	ReasonInvalidAnnotation     = "InvalidAnnotation"
	ReasonUnsupportedAnnotation = "UnsupportedAnnotation"
	ReasonInvalidRule           = "InvalidRule"
	ReasonInvalidBackend        = "InvalidBackend"
	ReasonConflict              = "Conflict"
	// Waiting reasons.
	ReasonServiceNotFound      = "ServiceNotFound"
	ReasonServiceNotPropagated = "ServiceNotPropagated"
	ReasonRouteHeld            = "RouteHeld"
)

// Problem is one thing wrong with (or pending in) a MultiClusterIngress.
type Problem struct {
	Reason string
	// Annotation is the annotation at fault, if any.
	Annotation string
	Message    string
}

func (p Problem) String() string {
	if p.Annotation != "" {
		return fmt.Sprintf("annotation %s: %s", p.Annotation, p.Message)
	}
	return p.Message
}

// refuses reports whether the problem makes the whole MultiClusterIngress refused.
func (p Problem) refuses() bool {
	switch p.Reason {
	case ReasonServiceNotFound, ReasonServiceNotPropagated, ReasonRouteHeld:
		return false
	}
	return true
}

// Route is what a generated LoadBalancer receives on BFE: the BFE driver's lbSpec.
type Route struct {
	Host, Path, Cookie, Header string
}

func (r Route) String() string {
	s := r.Host + r.Path
	if r.Cookie != "" {
		s += " cookie " + r.Cookie
	}
	if r.Header != "" {
		s += " header " + r.Header
	}
	return s
}

func (r Route) lbSpec() map[string]string {
	m := map[string]string{specHost: r.Host, specPath: r.Path}
	if r.Cookie != "" {
		m[specCookie] = r.Cookie
	}
	if r.Header != "" {
		m[specHeader] = r.Header
	}
	return m
}

// routeOfLBSpec reads a LoadBalancer's lbSpec as the BFE driver does (host lower-cased, path
// "/*" by default), to compare a foreign LoadBalancer's route with ours.
func routeOfLBSpec(spec map[string]string) Route {
	r := Route{Host: strings.ToLower(strings.TrimSpace(spec[specHost])), Path: spec[specPath]}
	if r.Path == "" {
		r.Path = "/*"
	}
	if v, ok := spec[specCookie]; ok {
		r.Cookie, _ = parseMatch(v)
	}
	if v, ok := spec[specHeader]; ok {
		r.Header, _ = parseMatch(v)
	}
	return r
}

// inputs are what a translation reads besides the MultiClusterIngress.
type inputs struct {
	// services are the namespace's Services on the Karmada API server, by name.
	services map[string]*corev1.Service
	// placements are the member clusters each Service is propagated to (its ResourceBinding's
	// spec.clusters ∪ spec.requiredBy), by Service name; absent when it has no binding.
	placements map[string][]string
	// driver is the lbDriver of generated LoadBalancers.
	driver string
}

// translation is the desired state of one MultiClusterIngress.
type translation struct {
	routes map[Route]string // route → LoadBalancer name
	lbs    []*lbcfv1beta1.LoadBalancer
	bgs    []*lbcfv1beta1.BackendGroup
	pps    []*policyv1alpha1.PropagationPolicy
	// keepPolicies name the groups whose Service's placement is unobserved: their policies, if
	// any, are left as they are.
	keepPolicies []string
	problems     []Problem
}

func (t *translation) refused() bool {
	for _, p := range t.problems {
		if p.refuses() {
			return true
		}
	}
	return false
}

// ruleBackend is one route of a MultiClusterIngress with its backend, read without looking
// anything up (what conflict detection compares across MultiClusterIngresses).
type ruleBackend struct {
	route   Route
	backend networkingv1.IngressBackend
	where   string // "rule 0 path 1", for messages
}

// readRules turns the rules and the default backend into routes with their backends.
func readRules(mci *networkingv1alpha1.MultiClusterIngress, ann annotations) ([]ruleBackend, []Problem) {
	var out []ruleBackend
	var problems []Problem
	seen := map[Route]string{}
	add := func(host, path string, b networkingv1.IngressBackend, where string) {
		r := Route{Host: host, Path: path, Cookie: ann.cookie, Header: ann.header}
		if strings.HasPrefix(host, "*.") && (r.Cookie != "" || r.Header != "") {
			a := AnnotationRouterCookie
			if r.Cookie == "" {
				a = AnnotationRouterHeader
			}
			problems = append(problems, Problem{Reason: ReasonInvalidAnnotation, Annotation: a,
				Message: fmt.Sprintf("%s: BFE cannot put a cookie or header condition on the wildcard host %q (only an exact host or \"*\")", where, host)})
			return
		}
		if prev, ok := seen[r]; ok {
			problems = append(problems, Problem{Reason: ReasonInvalidRule, Message: fmt.Sprintf("%s: route %s is also %s", where, r, prev)})
			return
		}
		seen[r] = where
		out = append(out, ruleBackend{route: r, backend: b, where: where})
	}
	for i, rule := range mci.Spec.Rules {
		host, err := mapHost(rule.Host)
		if err != nil {
			problems = append(problems, Problem{Reason: ReasonInvalidRule, Message: fmt.Sprintf("rule %d: %v", i, err)})
			continue
		}
		if rule.HTTP == nil || len(rule.HTTP.Paths) == 0 {
			if mci.Spec.DefaultBackend == nil {
				problems = append(problems, Problem{Reason: ReasonInvalidRule, Message: fmt.Sprintf("rule %d (host %q) has no paths and there is no default backend", i, rule.Host)})
				continue
			}
			add(host, "/*", *mci.Spec.DefaultBackend, fmt.Sprintf("rule %d", i))
			continue
		}
		for j, p := range rule.HTTP.Paths {
			path, err := mapPath(p.Path, p.PathType)
			if err != nil {
				problems = append(problems, Problem{Reason: ReasonInvalidRule, Message: fmt.Sprintf("rule %d path %d: %v", i, j, err)})
				continue
			}
			add(host, path, p.Backend, fmt.Sprintf("rule %d path %d", i, j))
		}
	}
	if mci.Spec.DefaultBackend != nil {
		// A rule for any host and every path already takes all the default backend would get.
		if _, ok := seen[Route{Host: "*", Path: "/*", Cookie: ann.cookie, Header: ann.header}]; !ok {
			add("*", "/*", *mci.Spec.DefaultBackend, "the default backend")
		}
	}
	return out, problems
}

// mapHost maps an Ingress host onto the BFE driver's host: empty means any host ("*"); a
// "*.suffix" wildcard matches exactly one label, as in Ingress.
func mapHost(h string) (string, error) {
	h = strings.ToLower(strings.TrimSpace(h))
	if h == "" {
		return "*", nil
	}
	rest := strings.TrimPrefix(h, "*.")
	if strings.Contains(rest, "*") {
		return "", fmt.Errorf("host %q: a wildcard must be the whole first label (\"*.example.com\")", h)
	}
	for _, label := range strings.Split(rest, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("host %q: invalid label %q", h, label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')) {
				return "", fmt.Errorf("host %q: invalid character %q", h, c)
			}
		}
	}
	return h, nil
}

// mapPath maps an Ingress path onto the BFE driver's path syntax: Exact stays exact; Prefix
// (element-wise, as in Ingress) becomes "<path>/*", which BFE matches as /path, /path/ and below
// but not /pathx; ImplementationSpecific is a Prefix, as in ingress-bfe. BFE paths are literal and
// "*" is its wildcard, so paths with "*" (or characters the driver refuses) cannot be expressed.
func mapPath(p string, t *networkingv1.PathType) (string, error) {
	pt := networkingv1.PathTypeImplementationSpecific
	if t != nil {
		pt = *t
	}
	if p == "" && pt == networkingv1.PathTypeImplementationSpecific {
		p = "/"
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q must start with /", p)
	}
	if strings.Contains(p, "*") {
		return "", fmt.Errorf("path %q: BFE paths are literal and \"*\" is its wildcard, so a path with \"*\" cannot be expressed", p)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return "", fmt.Errorf("path %q: quotes, backslashes, spaces and control characters cannot be expressed", p)
		}
	}
	switch pt {
	case networkingv1.PathTypeExact:
		return p, nil
	case networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific:
		return strings.TrimRight(p, "/") + "/*", nil
	default:
		return "", fmt.Errorf("path %q: unknown pathType %q (Exact, Prefix or ImplementationSpecific)", p, pt)
	}
}

// translate computes the objects a MultiClusterIngress stands for. It is a pure function of its
// inputs with deterministic names, so every reconcile yields the same objects.
func translate(mci *networkingv1alpha1.MultiClusterIngress, in inputs) *translation {
	t := &translation{routes: map[Route]string{}}
	d := door(mci)
	ann, problems := parseAnnotations(mci.Annotations)
	t.problems = append(t.problems, problems...)
	rbs, problems := readRules(mci, ann)
	t.problems = append(t.problems, problems...)

	usedBalance := map[string]bool{}
	pending := map[string]bool{} // one waiting problem per Service
	for _, rb := range rbs {
		if rb.backend.Resource != nil {
			t.problems = append(t.problems, Problem{Reason: ReasonInvalidBackend, Message: fmt.Sprintf("%s: resource backends are not supported, only Services", rb.where)})
			continue
		}
		if rb.backend.Service == nil {
			t.problems = append(t.problems, Problem{Reason: ReasonInvalidBackend, Message: fmt.Sprintf("%s: no backend service", rb.where)})
			continue
		}
		lbName := frontdoor.HashName(mci.Name, "lb", rb.route.Host, rb.route.Path, rb.route.Cookie, rb.route.Header)
		lb := &lbcfv1beta1.LoadBalancer{
			ObjectMeta: d.Meta(lbName),
			Spec:       lbcfv1beta1.LoadBalancerSpec{LBDriver: in.driver, LBSpec: rb.route.lbSpec()},
		}
		t.routes[rb.route] = lbName
		t.lbs = append(t.lbs, lb)

		// The backend's Services: one, or the balance.weight split of its name.
		weights := map[string]int{rb.backend.Service.Name: -1}
		if split, ok := ann.balance[rb.backend.Service.Name]; ok {
			usedBalance[rb.backend.Service.Name] = true
			weights = split
		}
		for _, key := range sortedKeys(weights) {
			w := weights[key]
			if w == 0 {
				continue // no traffic: no backends at all
			}
			// "svc" is the Service in every member it is propagated to, "svc@member" in one.
			svcName, member, _ := strings.Cut(key, "@")
			svc := in.services[svcName]
			if svc == nil {
				if !pending[svcName] {
					pending[svcName] = true
					t.problems = append(t.problems, Problem{Reason: ReasonServiceNotFound, Message: fmt.Sprintf("Service %s/%s not found", mci.Namespace, svcName)})
				}
				continue
			}
			port, err := targetPort(svc, rb.backend.Service.Port)
			if err != nil {
				t.problems = append(t.problems, Problem{Reason: ReasonInvalidBackend, Message: fmt.Sprintf("%s: %v", rb.where, err)})
				continue
			}
			// Whether the Service is a balance.weight subset is part of the name: the BFE driver keys
			// backends by subset, so switching replaces the group (its backends are deregistered
			// under their old key) instead of changing its parameters.
			bgName := frontdoor.HashName(mci.Name, "bg", lbName, key, fmt.Sprint(w > 0))
			bg := &lbcfv1beta1.BackendGroup{
				ObjectMeta: d.Meta(bgName),
				Spec: lbcfv1beta1.BackendGroupSpec{
					LoadBalancers: []string{lbName},
					Pods: &lbcfv1beta1.PodBackend{
						ByLabel: &lbcfv1beta1.SelectPodByLabel{Selector: svc.Spec.Selector},
						Ports:   []lbcfv1beta1.PortSelector{{Port: port, Protocol: string(corev1.ProtocolTCP)}},
					},
				},
			}
			if w > 0 {
				bg.Spec.Parameters = map[string]string{ParamSubset: subsetName(svcName, member), ParamSubsetWeight: fmt.Sprint(w)}
			}
			t.bgs = append(t.bgs, bg)
			clusters := in.placements[svcName]
			// No binding, or one placing the Service nowhere, is unobserved, not gone (as for the
			// kit's Want.Clusters and the federation's member plan): the group's policy, if it has
			// one, stays as it is, or Karmada would take the group from every member at once.
			unobserved := len(clusters) == 0
			if member != "" {
				clusters = intersect(clusters, member)
			}
			if len(clusters) == 0 {
				where := "any member cluster"
				if member != "" {
					where = "member cluster " + member
				}
				msg := fmt.Sprintf("Service %s/%s is not propagated to %s yet", mci.Namespace, svcName, where)
				if unobserved {
					t.keepPolicies = append(t.keepPolicies, bgName)
					msg = fmt.Sprintf("Service %s/%s is not propagated to %s (its ResourceBinding is missing or places it nowhere): what is placed stays placed", mci.Namespace, svcName, where)
				}
				if !pending[key] {
					pending[key] = true
					t.problems = append(t.problems, Problem{Reason: ReasonServiceNotPropagated, Message: msg})
				}
				continue
			}
			t.pps = append(t.pps, &policyv1alpha1.PropagationPolicy{
				ObjectMeta: d.Meta(bgName),
				Spec: policyv1alpha1.PropagationSpec{
					ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: lbcfv1beta1.APIVersion, Kind: "BackendGroup", Name: bgName}},
					Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}},
				},
			})
		}
	}
	for _, name := range sortedKeys(ann.balance) {
		if !usedBalance[name] {
			t.problems = append(t.problems, Problem{Reason: ReasonInvalidAnnotation, Annotation: AnnotationBalanceWeight,
				Message: fmt.Sprintf("names backend %q, which no path of this MultiClusterIngress uses", name)})
		}
	}
	return t
}

// subsetName is the BFE driver subset of a balance.weight entry: the Service, or "<service>_<member>"
// for "service@member" (Service names have no "_").
func subsetName(svc, member string) string {
	if member == "" {
		return svc
	}
	return svc + "_" + member
}

func intersect(clusters []string, member string) []string {
	for _, c := range clusters {
		if c == member {
			return []string{member}
		}
	}
	return nil
}

// targetPort resolves an Ingress backend port to the pods' port through the Service: the
// BackendGroup selects the Service's pods on its targetPort.
func targetPort(svc *corev1.Service, p networkingv1.ServiceBackendPort) (int32, error) {
	if len(svc.Spec.Selector) == 0 {
		return 0, fmt.Errorf("service %s has no selector: lbfed selects the Service's pods by it", svc.Name)
	}
	for _, sp := range svc.Spec.Ports {
		if (p.Name != "" && sp.Name == p.Name) || (p.Name == "" && sp.Port == p.Number) {
			if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
				return 0, fmt.Errorf("service %s port %s is %s: BFE serves HTTP over TCP", svc.Name, portName(p), sp.Protocol)
			}
			switch {
			case sp.TargetPort.IntValue() > 0:
				return int32(sp.TargetPort.IntValue()), nil
			case sp.TargetPort.StrVal != "":
				return 0, fmt.Errorf("service %s port %s has the named targetPort %q: lbfed needs a number to select the pods' port", svc.Name, portName(p), sp.TargetPort.StrVal)
			default:
				return sp.Port, nil
			}
		}
	}
	return 0, fmt.Errorf("service %s has no port %s", svc.Name, portName(p))
}

func portName(p networkingv1.ServiceBackendPort) string {
	if p.Name != "" {
		return fmt.Sprintf("%q", p.Name)
	}
	return fmt.Sprint(p.Number)
}
