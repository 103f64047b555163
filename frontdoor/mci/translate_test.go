package mci

import (
	"testing"

	networkingv1alpha1 "github.com/karmada-io/karmada/pkg/apis/networking/v1alpha1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/lbfed/lbfed/frontdoor"
)

func pathType(t networkingv1.PathType) *networkingv1.PathType { return &t }

func svcBackend(name string, port int32) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: port}}}
}

func service(name string, port int32, target intstr.IntOrString, selector map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Name: "http", Port: port, TargetPort: target, Protocol: corev1.ProtocolTCP}}}}
}

func testInputs() inputs {
	return inputs{
		driver: "lbcf-bfe",
		services: map[string]*corev1.Service{
			"web":    service("web", 80, intstr.FromInt32(8080), map[string]string{"app": "web"}),
			"api":    service("api", 80, intstr.IntOrString{}, map[string]string{"app": "api"}),
			"canary": service("canary", 80, intstr.FromInt32(8081), map[string]string{"app": "web", "track": "canary"}),
			"named":  service("named", 80, intstr.FromString("http"), map[string]string{"app": "named"}),
			"manual": service("manual", 80, intstr.FromInt32(80), nil),
		},
		placements: map[string][]string{"web": {"m1", "m2"}, "api": {"m1"}, "canary": {"m2"}, "named": {"m1"}, "manual": {"m1"}},
	}
}

// TestMapPath: networking/v1 path types onto the BFE driver's path syntax, refusing what BFE
// cannot express.
func TestMapPath(t *testing.T) {
	cases := []struct {
		path string
		typ  *networkingv1.PathType
		want string
		err  string
	}{
		{"/api", pathType(networkingv1.PathTypeExact), "/api", ""},
		{"/api/", pathType(networkingv1.PathTypeExact), "/api/", ""},
		{"/api", pathType(networkingv1.PathTypePrefix), "/api/*", ""},
		{"/api/", pathType(networkingv1.PathTypePrefix), "/api/*", ""},
		{"/", pathType(networkingv1.PathTypePrefix), "/*", ""},
		{"/", pathType(networkingv1.PathTypeExact), "/", ""},
		{"/api", pathType(networkingv1.PathTypeImplementationSpecific), "/api/*", ""},
		{"/api", nil, "/api/*", ""},
		{"", nil, "/*", ""},
		{"api", pathType(networkingv1.PathTypePrefix), "", "must start with /"},
		{"/api/*", pathType(networkingv1.PathTypePrefix), "", "cannot be expressed"},
		{"/a*b", pathType(networkingv1.PathTypeExact), "", "cannot be expressed"},
		{"/a b", pathType(networkingv1.PathTypeExact), "", "cannot be expressed"},
		{`/a"b`, pathType(networkingv1.PathTypeExact), "", "cannot be expressed"},
		{"/a", pathType("Regex"), "", "unknown pathType"},
	}
	for _, tc := range cases {
		g := NewWithT(t)
		got, err := mapPath(tc.path, tc.typ)
		if tc.err != "" {
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)), "%q", tc.path)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), "%q", tc.path)
		g.Expect(got).To(Equal(tc.want), "%q %v", tc.path, tc.typ)
	}
}

// TestParseAnnotations: ingress-bfe's annotations with its validation; unsupported keys under its
// prefix are problems naming the annotation, never ignored.
func TestParseAnnotations(t *testing.T) {
	cases := []struct {
		name       string
		ann        map[string]string
		want       annotations
		reason     string // of the one expected problem
		annotation string
		message    string
	}{
		{name: "none"},
		{name: "cookie and header", ann: map[string]string{AnnotationRouterCookie: "beta: 1", AnnotationRouterHeader: "X-Canary:yes"},
			want: annotations{cookie: "beta:1", header: "X-Canary:yes"}},
		{name: "balance", ann: map[string]string{AnnotationBalanceWeight: `{"svc": {"web": 80, "canary": 20}}`},
			want: annotations{balance: Balance{"svc": {"web": 80, "canary": 20}}}},
		{name: "balance with a zero weight", ann: map[string]string{AnnotationBalanceWeight: `{"svc": {"web": 1, "canary": 0}}`},
			want: annotations{balance: Balance{"svc": {"web": 1, "canary": 0}}}},
		{name: "balance across members (lbfed extension)", ann: map[string]string{AnnotationBalanceWeight: `{"svc": {"web@m1": 1, "web@m2": 3, "canary": 1}}`},
			want: annotations{balance: Balance{"svc": {"web@m1": 1, "web@m2": 3, "canary": 1}}}},
		{name: "not a Service name", ann: map[string]string{AnnotationBalanceWeight: `{"svc": {"Web": 1}}`},
			reason: ReasonInvalidAnnotation, annotation: AnnotationBalanceWeight, message: "want a Service name"},
		{name: "no member after @", ann: map[string]string{AnnotationBalanceWeight: `{"svc": {"web@": 1}}`},
			reason: ReasonInvalidAnnotation, annotation: AnnotationBalanceWeight, message: "not a valid cluster name"},
		{name: "an empty condition is no condition, as in ingress-bfe", ann: map[string]string{AnnotationRouterCookie: "", AnnotationRouterHeader: " "}},
		{name: "ingress-bfe's own status annotation is not configuration", ann: map[string]string{AnnotationIngressStatus: `{"status":"success"}`}},
		{name: "other prefixes are not ours", ann: map[string]string{"nginx.ingress.kubernetes.io/rewrite-target": "/"}},
		{name: "float weight", ann: map[string]string{AnnotationBalanceWeight: `{"svc": {"web": 0.5, "canary": 0.5}}`},
			reason: ReasonInvalidAnnotation, annotation: AnnotationBalanceWeight, message: "integer weights"},
		{name: "negative weight", ann: map[string]string{AnnotationBalanceWeight: `{"svc": {"web": -1, "canary": 2}}`},
			reason: ReasonInvalidAnnotation, annotation: AnnotationBalanceWeight, message: "must be >= 0"},
		{name: "zero sum", ann: map[string]string{AnnotationBalanceWeight: `{"svc": {"web": 0, "canary": 0}}`},
			reason: ReasonInvalidAnnotation, annotation: AnnotationBalanceWeight, message: "sum of the weights must be > 0"},
		{name: "string weight", ann: map[string]string{AnnotationBalanceWeight: `{"svc": {"web": "80"}}`},
			reason: ReasonInvalidAnnotation, annotation: AnnotationBalanceWeight, message: "integer weights"},
		{name: "not JSON", ann: map[string]string{AnnotationBalanceWeight: `svc=web:80`},
			reason: ReasonInvalidAnnotation, annotation: AnnotationBalanceWeight, message: "want JSON"},
		{name: "cookie without value", ann: map[string]string{AnnotationRouterCookie: "beta"},
			reason: ReasonInvalidAnnotation, annotation: AnnotationRouterCookie, message: `want "key:value"`},
		{name: "header with a space in the value", ann: map[string]string{AnnotationRouterHeader: "X-A:a b"},
			reason: ReasonInvalidAnnotation, annotation: AnnotationRouterHeader, message: "printable ASCII"},
		{name: "unsupported ingress-bfe annotation", ann: map[string]string{AnnotationPrefix + "redirect.url-set": "https://x.test"},
			reason: ReasonUnsupportedAnnotation, annotation: AnnotationPrefix + "redirect.url-set", message: "not supported by lbfed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, problems := parseAnnotations(tc.ann)
			if tc.reason == "" {
				g.Expect(problems).To(BeEmpty())
				g.Expect(got).To(Equal(tc.want))
				return
			}
			g.Expect(problems).To(HaveLen(1))
			g.Expect(problems[0].Reason).To(Equal(tc.reason))
			g.Expect(problems[0].Annotation).To(Equal(tc.annotation))
			g.Expect(problems[0].String()).To(And(ContainSubstring(tc.annotation), ContainSubstring(tc.message)))
		})
	}
}

type wantBG struct {
	lbSpec   map[string]string
	selector map[string]string
	port     int32
	params   map[string]string
	clusters []string // PropagationPolicy placement; nil: no policy
}

// TestTranslate: rules, default backend and annotations become LoadBalancers (lbSpec), their
// BackendGroups (the Service's selector and targetPort, balance.weight parameters) and the
// groups' PropagationPolicies (the Service's placement).
func TestTranslate(t *testing.T) {
	cases := []struct {
		name     string
		ann      map[string]string
		spec     networkingv1.IngressSpec
		want     []wantBG
		problems []string // reasons
	}{
		{
			name: "host and paths",
			spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "Shop.Example.test", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
				{Path: "/", PathType: pathType(networkingv1.PathTypePrefix), Backend: svcBackend("web", 80)},
				{Path: "/api", PathType: pathType(networkingv1.PathTypeExact), Backend: svcBackend("api", 80)},
			}}}}}},
			want: []wantBG{
				{lbSpec: map[string]string{"host": "shop.example.test", "path": "/*"}, selector: map[string]string{"app": "web"}, port: 8080, clusters: []string{"m1", "m2"}},
				{lbSpec: map[string]string{"host": "shop.example.test", "path": "/api"}, selector: map[string]string{"app": "api"}, port: 80, clusters: []string{"m1"}},
			},
		},
		{
			name: "no host, wildcard host and the default backend",
			spec: networkingv1.IngressSpec{DefaultBackend: ptr.To(svcBackend("web", 80)), Rules: []networkingv1.IngressRule{
				{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
					{Path: "/api", PathType: pathType(networkingv1.PathTypePrefix), Backend: svcBackend("api", 80)}}}}},
				{Host: "*.example.test", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
					{Path: "/", PathType: pathType(networkingv1.PathTypePrefix), Backend: svcBackend("canary", 80)}}}}},
			}},
			want: []wantBG{
				{lbSpec: map[string]string{"host": "*", "path": "/api/*"}, selector: map[string]string{"app": "api"}, port: 80, clusters: []string{"m1"}},
				{lbSpec: map[string]string{"host": "*.example.test", "path": "/*"}, selector: map[string]string{"app": "web", "track": "canary"}, port: 8081, clusters: []string{"m2"}},
				{lbSpec: map[string]string{"host": "*", "path": "/*"}, selector: map[string]string{"app": "web"}, port: 8080, clusters: []string{"m1", "m2"}},
			},
		},
		{
			name: "a rule for any host and path takes the default backend's route",
			spec: networkingv1.IngressSpec{DefaultBackend: ptr.To(svcBackend("api", 80)), Rules: []networkingv1.IngressRule{
				{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
					{Path: "/", PathType: pathType(networkingv1.PathTypePrefix), Backend: svcBackend("web", 80)}}}}}}},
			want: []wantBG{{lbSpec: map[string]string{"host": "*", "path": "/*"}, selector: map[string]string{"app": "web"}, port: 8080, clusters: []string{"m1", "m2"}}},
		},
		{
			name: "cookie, header and balance.weight",
			ann: map[string]string{AnnotationRouterCookie: "beta:1", AnnotationRouterHeader: "X-Canary:yes",
				AnnotationBalanceWeight: `{"split": {"web": 80, "canary": 20}}`},
			spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "shop.example.test", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
				{Path: "/", PathType: pathType(networkingv1.PathTypePrefix), Backend: svcBackend("split", 80)}}}}}}},
			want: []wantBG{
				{lbSpec: map[string]string{"host": "shop.example.test", "path": "/*", "cookie": "beta:1", "header": "X-Canary:yes"}, selector: map[string]string{"app": "web", "track": "canary"}, port: 8081,
					params: map[string]string{ParamSubset: "canary", ParamSubsetWeight: "20"}, clusters: []string{"m2"}},
				{lbSpec: map[string]string{"host": "shop.example.test", "path": "/*", "cookie": "beta:1", "header": "X-Canary:yes"}, selector: map[string]string{"app": "web"}, port: 8080,
					params: map[string]string{ParamSubset: "web", ParamSubsetWeight: "80"}, clusters: []string{"m1", "m2"}},
			},
		},
		{
			name:     "a Service not yet propagated gets a group but no policy",
			spec:     networkingv1.IngressSpec{DefaultBackend: ptr.To(svcBackend("lonely", 80))},
			want:     []wantBG{{lbSpec: map[string]string{"host": "*", "path": "/*"}, selector: map[string]string{"app": "lonely"}, port: 80}},
			problems: []string{ReasonServiceNotPropagated},
		},
		{
			name:     "a missing Service is waited for",
			spec:     networkingv1.IngressSpec{DefaultBackend: ptr.To(svcBackend("nope", 80))},
			problems: []string{ReasonServiceNotFound},
		},
		{
			name:     "named targetPort, no selector, unknown port",
			spec:     networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "a.test", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/n", Backend: svcBackend("named", 80)}, {Path: "/m", Backend: svcBackend("manual", 80)}, {Path: "/p", Backend: svcBackend("web", 81)}}}}}}},
			problems: []string{ReasonInvalidBackend, ReasonInvalidBackend, ReasonInvalidBackend},
		},
		{
			name:     "a cookie on a *.suffix host cannot be expressed",
			ann:      map[string]string{AnnotationRouterCookie: "beta:1"},
			spec:     networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "*.example.test", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", Backend: svcBackend("web", 80)}}}}}}},
			problems: []string{ReasonInvalidAnnotation},
		},
		{
			name:     "duplicate route",
			spec:     networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "a.test", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/x", Backend: svcBackend("web", 80)}, {Path: "/x/", Backend: svcBackend("api", 80)}}}}}}},
			want:     []wantBG{{lbSpec: map[string]string{"host": "a.test", "path": "/x/*"}, selector: map[string]string{"app": "web"}, port: 8080, clusters: []string{"m1", "m2"}}},
			problems: []string{ReasonInvalidRule},
		},
		{
			name:     "balance.weight for a backend no path uses",
			ann:      map[string]string{AnnotationBalanceWeight: `{"other": {"web": 1}}`},
			spec:     networkingv1.IngressSpec{DefaultBackend: ptr.To(svcBackend("web", 80))},
			want:     []wantBG{{lbSpec: map[string]string{"host": "*", "path": "/*"}, selector: map[string]string{"app": "web"}, port: 8080, clusters: []string{"m1", "m2"}}},
			problems: []string{ReasonInvalidAnnotation},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			in := testInputs()
			in.services["lonely"] = service("lonely", 80, intstr.FromInt32(80), map[string]string{"app": "lonely"})
			mci := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns", UID: "u1", Annotations: tc.ann}, Spec: tc.spec}
			tr := translate(mci, in)
			var reasons []string
			for _, p := range tr.problems {
				reasons = append(reasons, p.Reason)
			}
			g.Expect(reasons).To(ConsistOf(tc.problems), "%v", tr.problems)

			lbs := map[string]map[string]string{}
			for _, lb := range tr.lbs {
				g.Expect(lb.Spec.LBDriver).To(Equal("lbcf-bfe"))
				g.Expect(lb.Labels).To(Equal(map[string]string{frontdoor.LabelFrontDoor: Kind, frontdoor.LabelFrontDoorName: "shop"}))
				g.Expect(lb.OwnerReferences).To(HaveLen(1))
				g.Expect(lb.OwnerReferences[0].UID).To(BeEquivalentTo("u1"))
				lbs[lb.Name] = lb.Spec.LBSpec
			}
			pps := map[string][]string{}
			for _, pp := range tr.pps {
				g.Expect(pp.Spec.ResourceSelectors).To(HaveLen(1))
				g.Expect(pp.Spec.ResourceSelectors[0].Name).To(Equal(pp.Name))
				pps[pp.Name] = pp.Spec.Placement.ClusterAffinity.ClusterNames
			}
			var got []wantBG
			for _, bg := range tr.bgs {
				g.Expect(bg.Spec.LoadBalancers).To(HaveLen(1))
				got = append(got, wantBG{lbSpec: lbs[bg.Spec.LoadBalancers[0]], selector: bg.Spec.Pods.ByLabel.Selector, port: bg.Spec.Pods.Ports[0].Port,
					params: bg.Spec.Parameters, clusters: pps[bg.Name]})
			}
			g.Expect(got).To(ConsistOf(tc.want))

			// Deterministic: the same input gives the same names.
			again := translate(mci, in)
			g.Expect(again.routes).To(Equal(tr.routes))
		})
	}
}
