package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lb,categories=lbcf
// +kubebuilder:printcolumn:name="Driver",type=string,JSONPath=`.spec.lbDriver`
// +kubebuilder:printcolumn:name="Created",type=string,JSONPath=`.status.conditions[?(@.type=="Created")].status`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="AttributesSynced")].status`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Created")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// LoadBalancer is a load balancer on an external front end, created and owned through its driver.
type LoadBalancer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec LoadBalancerSpec `json:"spec"`
	// +optional
	Status LoadBalancerStatus `json:"status,omitempty"`
}

// LoadBalancerSpec is the desired state of a LoadBalancer.
type LoadBalancerSpec struct {
	// LBDriver names the LoadBalancerDriver ("lbcf-*" names are looked up in kube-system). Immutable.
	LBDriver string `json:"lbDriver"`
	// LBSpec identifies the load balancer; driver-defined keys. Immutable.
	// +optional
	// +nullable
	LBSpec map[string]string `json:"lbSpec"`
	// Attributes are driver-defined, mutable settings; changing them re-runs ensureLoadBalancer.
	// +optional
	Attributes map[string]string `json:"attributes,omitempty"`
	// Scope lists the namespaces whose BackendGroups may use this LoadBalancer ("*" = all). Only
	// allowed on "lbcf-*" LoadBalancers in kube-system. Empty: same namespace only.
	// +optional
	// +nullable
	Scope []string `json:"scope"`
	// EnsurePolicy controls periodic ensureLoadBalancer.
	// +optional
	EnsurePolicy *EnsurePolicyConfig `json:"ensurePolicy,omitempty"`
}

// LoadBalancerStatus is the observed state of a LoadBalancer.
type LoadBalancerStatus struct {
	// LBInfo is returned by createLoadBalancer (lbSpec when the driver returned nothing) and sent
	// back to the driver in later calls.
	// +optional
	// +nullable
	LBInfo map[string]string `json:"lbInfo"`
	// +optional
	// +nullable
	Conditions []LoadBalancerCondition `json:"conditions"`
	// ObservedGeneration is the generation last handled by the controller (lbfed addition).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastSyncedAttributes are the attributes last accepted by ensureLoadBalancer (lbfed addition):
	// AttributesSynced holds only while they equal spec.attributes, so changed attributes always
	// reach the driver.
	// +optional
	LastSyncedAttributes map[string]string `json:"lastSyncedAttributes,omitempty"`
}

// LoadBalancerConditionType is the type of a LoadBalancer condition.
type LoadBalancerConditionType string

// LoadBalancer condition types.
const (
	LBCreated          LoadBalancerConditionType = "Created"
	LBAttributesSynced LoadBalancerConditionType = "AttributesSynced"
)

// LoadBalancerCondition is a condition of a LoadBalancer.
type LoadBalancerCondition struct {
	Type   LoadBalancerConditionType `json:"type"`
	Status ConditionStatus           `json:"status"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// +kubebuilder:object:root=true

// LoadBalancerList is a list of LoadBalancers.
type LoadBalancerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LoadBalancer `json:"items"`
}

// Condition returns the condition of the given type, or nil.
func (s *LoadBalancerStatus) Condition(t LoadBalancerConditionType) *LoadBalancerCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// IsCreated reports whether createLoadBalancer succeeded.
func (lb *LoadBalancer) IsCreated() bool {
	c := lb.Status.Condition(LBCreated)
	return c != nil && c.Status == ConditionTrue
}

// IsAllowedFor reports whether a BackendGroup in namespace ns may use this LoadBalancer: with a
// scope, ns must be listed or the scope must contain "*" (even for the LoadBalancer's own
// namespace); without one, both must share the namespace.
func (lb *LoadBalancer) IsAllowedFor(ns string) bool {
	if len(lb.Spec.Scope) == 0 {
		return lb.Namespace == ns
	}
	for _, s := range lb.Spec.Scope {
		if s == "*" || s == ns {
			return true
		}
	}
	return false
}
