package interpreter

import (
	"sort"
	"strings"

	"github.com/go-logr/logr"
	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	webhook "github.com/karmada-io/karmada/pkg/webhook/interpreter"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

func (h *Handler) interpretDependency(log logr.Logger, kind string, req webhook.Request) (webhook.Response, Outcome) {
	obj, err := decodeObject(req.Object.Raw)
	if err != nil {
		// Failing keeps the attached bindings; an empty answer would remove the dependencies
		// from every member.
		return badObject(log, "object")
	}
	meta, spec := asMap(obj["metadata"]), asMap(obj["spec"])
	ns, _ := asString(meta["namespace"])
	var deps []configv1alpha1.DependentObjectReference
	switch kind {
	case lbcfv1beta1.KindBackendGroup:
		if name, _ := asString(asMap(spec["service"])["name"]); name != "" {
			deps = append(deps, configv1alpha1.DependentObjectReference{APIVersion: "v1", Kind: "Service", Namespace: ns, Name: name})
		}
		if mode, _ := asString(asMap(meta["annotations"])[MemberModeAnnotation]); mode == MemberModeStandalone {
			lbs, _ := spec["loadBalancers"].([]any)
			if name, ok := asString(spec["lbName"]); ok {
				lbs = append(append([]any(nil), lbs...), name)
			}
			for _, lb := range lbs {
				if name, _ := asString(lb); name != "" {
					deps = append(deps, lbcfRef(lbcfv1beta1.KindLoadBalancer, ns, name))
				}
			}
			if driver, _ := asString(asMap(spec["deregisterWebhook"])["driverName"]); driver != "" {
				deps = append(deps, lbcfRef(lbcfv1beta1.KindLoadBalancerDriver, ns, driver))
			}
		}
	default:
		if driver, _ := asString(spec["lbDriver"]); driver != "" {
			deps = append(deps, lbcfRef(lbcfv1beta1.KindLoadBalancerDriver, ns, driver))
		}
	}
	return dependenciesResponse(sortDependencies(deps)), OutcomeAnswered
}

// lbcfRef references an LBCF object named from an object in namespace ns: shared ("lbcf-")
// drivers and LoadBalancers live in kube-system.
func lbcfRef(kind, ns, name string) configv1alpha1.DependentObjectReference {
	if strings.HasPrefix(name, lbcfv1beta1.SystemDriverPrefix) {
		ns = lbcfv1beta1.SystemNamespace
	}
	return configv1alpha1.DependentObjectReference{APIVersion: lbcfv1beta1.APIVersion, Kind: kind, Namespace: ns, Name: name}
}

// sortDependencies sorts and de-duplicates like Karmada's declarative interpreter does.
func sortDependencies(deps []configv1alpha1.DependentObjectReference) []configv1alpha1.DependentObjectReference {
	key := func(d configv1alpha1.DependentObjectReference) string {
		return d.APIVersion + "\x00" + d.Kind + "\x00" + d.Namespace + "\x00" + d.Name
	}
	sort.Slice(deps, func(i, j int) bool { return key(deps[i]) < key(deps[j]) })
	out := deps[:0]
	for i, d := range deps {
		if i == 0 || key(d) != key(deps[i-1]) {
			out = append(out, d)
		}
	}
	return out
}
