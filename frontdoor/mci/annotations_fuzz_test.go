package mci

import (
	"strings"
	"testing"

	"github.com/lbfed/lbfed/elb/bfe"
)

// FuzzAnnotations: a MultiClusterIngress's annotations come from any user of the namespace.
// Whatever they say, every problem names one of them; what is accepted keeps ingress-bfe's rules
// (Service names or "service@member", weights 0..10000 with a positive sum per backend); and an
// accepted router condition is one the BFE driver accepts in the LoadBalancers the front door
// generates from it, so a MultiClusterIngress accepted here is never refused there.
func FuzzAnnotations(f *testing.F) {
	f.Add(`{"api": {"api": 80, "api-v2": 20}}`, "beta:1", "X-Canary:yes", "")
	f.Add(`{"web": {"web@m1": 1, "web@m2": 3}}`, "", "", "bfe.ingress.kubernetes.io/router.path")
	f.Add(`{"a": {"a": 0}}`, ":", "k:", "x")
	f.Add(`{"a": {"A": 1.5}} trailing`, "k:v v", "(k):v", "")
	f.Fuzz(func(t *testing.T, balance, cookie, header, other string) {
		a := map[string]string{AnnotationBalanceWeight: balance, AnnotationRouterCookie: cookie, AnnotationRouterHeader: header}
		if other != "" {
			a[other] = "x"
		}
		ann, problems := parseAnnotations(a)
		for _, p := range problems {
			if _, ok := a[p.Annotation]; !ok || p.Message == "" {
				t.Fatalf("problem %+v does not name a given annotation", p)
			}
		}
		for name, services := range ann.balance {
			sum := 0
			for svc, w := range services {
				if err := checkBalanceKey(svc); err != nil || w < 0 || w > maxWeight {
					t.Fatalf("backend %q: accepted %q weight %d", name, svc, w)
				}
				sum += w
			}
			if sum <= 0 {
				t.Fatalf("backend %q: accepted with a sum of %d", name, sum)
			}
		}
		spec := map[string]string{bfe.SpecHost: "shop.example.test", bfe.SpecPath: "/*"}
		if ann.cookie != "" {
			spec[bfe.SpecCookie] = ann.cookie
		}
		if ann.header != "" {
			spec[bfe.SpecHeader] = ann.header
		}
		if _, err := bfe.ParseLoadBalancer(spec); err != nil {
			t.Fatalf("the front door accepts %v, the BFE driver refuses it: %v", spec, err)
		}
		if strings.HasPrefix(other, AnnotationPrefix) && other != AnnotationBalanceWeight && other != AnnotationRouterCookie &&
			other != AnnotationRouterHeader && other != AnnotationIngressStatus {
			found := false
			for _, p := range problems {
				found = found || p.Annotation == other
			}
			if !found {
				t.Fatalf("unsupported annotation %q silently ignored", other)
			}
		}
	})
}
