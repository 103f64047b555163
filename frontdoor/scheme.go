package frontdoor

import (
	networkingv1alpha1 "github.com/karmada-io/karmada/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/runtime"
)

// AddToScheme adds the Karmada kinds the front doors read and write.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{networkingv1alpha1.Install, policyv1alpha1.Install, workv1alpha2.Install} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}
