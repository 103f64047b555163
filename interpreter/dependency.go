package interpreter

import (
	"sort"
	"strings"

	"github.com/go-logr/logr"
	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	webhook "github.com/karmada-io/karmada/pkg/webhook/interpreter"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// dependencyView is what InterpretDependency reads of a template.
type dependencyView struct {
	Metadata struct {
		Namespace   string            `json:"namespace"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		// BackendGroup.
		LBName        *string  `json:"lbName"`
		LoadBalancers []string `json:"loadBalancers"`
		Service       *struct {
			Name string `json:"name"`
		} `json:"service"`
		DeregisterWebhook *struct {
			DriverName string `json:"driverName"`
		} `json:"deregisterWebhook"`
		// LoadBalancer.
		LBDriver string `json:"lbDriver"`
	} `json:"spec"`
}

func (h *Handler) interpretDependency(log logr.Logger, kind string, req webhook.Request) (webhook.Response, Outcome) {
	if !isJSONObject(req.Object.Raw) {
		// Failing keeps the attached bindings; an empty answer would remove the dependencies
		// from every member.
		return badObject(log, "object")
	}
	var v dependencyView
	if err := decodeLenient(req.Object.Raw, &v); err != nil {
		return badObject(log, "object")
	}
	ns := v.Metadata.Namespace
	var deps []configv1alpha1.DependentObjectReference
	switch kind {
	case lbcfv1beta1.KindBackendGroup:
		if v.Spec.Service != nil && v.Spec.Service.Name != "" {
			deps = append(deps, configv1alpha1.DependentObjectReference{APIVersion: "v1", Kind: "Service", Namespace: ns, Name: v.Spec.Service.Name})
		}
		if v.Metadata.Annotations[MemberModeAnnotation] == MemberModeStandalone {
			lbs := v.Spec.LoadBalancers
			if v.Spec.LBName != nil && *v.Spec.LBName != "" {
				lbs = append(append([]string(nil), lbs...), *v.Spec.LBName)
			}
			for _, lb := range lbs {
				if lb != "" {
					deps = append(deps, lbcfRef(lbcfv1beta1.KindLoadBalancer, ns, lb))
				}
			}
			if v.Spec.DeregisterWebhook != nil && v.Spec.DeregisterWebhook.DriverName != "" {
				deps = append(deps, lbcfRef(lbcfv1beta1.KindLoadBalancerDriver, ns, v.Spec.DeregisterWebhook.DriverName))
			}
		}
	default:
		if v.Spec.LBDriver != "" {
			deps = append(deps, lbcfRef(lbcfv1beta1.KindLoadBalancerDriver, ns, v.Spec.LBDriver))
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
