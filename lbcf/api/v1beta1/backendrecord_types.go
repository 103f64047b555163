package v1beta1

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=br,categories=lbcf
// +kubebuilder:printcolumn:name="LB",type=string,JSONPath=`.spec.lbName`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.backendAddr`
// +kubebuilder:printcolumn:name="Registered",type=string,JSONPath=`.status.conditions[?(@.type=="Registered")].status`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels.lbfed\.io/cluster`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Registered")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// BackendRecord is one backend bound to one LoadBalancer. System-generated; users must not edit.
// Its finalizer holds until the driver deregistered the backend.
type BackendRecord struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BackendRecordSpec `json:"spec"`
	// +optional
	Status BackendRecordStatus `json:"status,omitempty"`
}

// BackendRecordSpec is the desired state of a record.
type BackendRecordSpec struct {
	LBName   string `json:"lbName"`
	LBDriver string `json:"lbDriver"`
	// LBInfo is a snapshot of the LoadBalancer's status.lbInfo.
	// +optional
	// +nullable
	LBInfo map[string]string `json:"lbInfo"`
	// LBAttributes follow the LoadBalancer's spec.attributes.
	// +optional
	// +nullable
	LBAttributes map[string]string `json:"lbAttributes"`
	// Parameters follow the BackendGroup's spec.parameters (plus lbfed.io/cluster when federated).
	// +optional
	// +nullable
	Parameters map[string]string `json:"parameters"`
	// +optional
	PodBackendInfo *PodBackendRecord `json:"podBackend,omitempty"`
	// +optional
	ServiceBackendInfo *ServiceBackendRecord `json:"serviceBackend,omitempty"`
	// +optional
	StaticAddr *string `json:"staticAddr,omitempty"`
	// +optional
	EnsurePolicy *EnsurePolicyConfig `json:"ensurePolicy,omitempty"`
}

// PodBackendRecord identifies a pod backend.
type PodBackendRecord struct {
	Name string       `json:"name"`
	Port PortSelector `json:"port"`
}

// ServiceBackendRecord identifies a Service nodePort backend on one node.
type ServiceBackendRecord struct {
	Name     string       `json:"name"`
	Port     PortSelector `json:"port"`
	NodePort int32        `json:"nodePort"`
	NodeName string       `json:"nodeName"`
}

// BackendRecordStatus is the observed state of a record.
type BackendRecordStatus struct {
	// BackendAddr is generateBackendAddr's answer, or the static address.
	// +optional
	BackendAddr string `json:"backendAddr"`
	// InjectedInfo is returned by ensureBackend and sent back on later calls.
	// +optional
	// +nullable
	InjectedInfo map[string]string `json:"injectedInfo"`
	// +optional
	// +nullable
	Conditions []BackendRecordCondition `json:"conditions"`
	// ObservedGeneration is the generation ensureBackend last succeeded for (lbfed addition):
	// a spec change (parameters, attributes) is pushed to the driver exactly once.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// BackendRecordConditionType is the type of a record condition.
type BackendRecordConditionType string

// BackendRegistered is True once ensureBackend succeeded.
const BackendRegistered BackendRecordConditionType = "Registered"

// BackendRecordCondition is a condition of a record. Unlike the other LBCF conditions, message is
// always emitted (the original has no omitempty there).
type BackendRecordCondition struct {
	Type   BackendRecordConditionType `json:"type"`
	Status ConditionStatus            `json:"status"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message"`
}

// +kubebuilder:object:root=true

// BackendRecordList is a list of records.
type BackendRecordList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackendRecord `json:"items"`
}

// Condition returns the condition of the given type, or nil.
func (s *BackendRecordStatus) Condition(t BackendRecordConditionType) *BackendRecordCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// IsRegistered reports whether the record's Registered condition is True.
func (br *BackendRecord) IsRegistered() bool {
	c := br.Status.Condition(BackendRegistered)
	return c != nil && c.Status == ConditionTrue
}

// Deterministic record names: lower-case hex MD5 of the formats below, exactly as the original
// computes them, so records created by the original are recognised after a migration.

// PodRecordName names the record of a pod backend: lbName, groupName, pod UID, port, protocol.
func PodRecordName(lbName, groupName, podUID string, port int32, protocol string) string {
	return md5hex(fmt.Sprintf("%s_%s_%s_%d_%s", lbName, groupName, podUID, port, protocol))
}

// ServiceRecordName names the record of a Service backend on a node. port is the Service port,
// not the nodePort (as in the original).
func ServiceRecordName(lbName, groupName, svcName string, port int32, protocol, nodeName string) string {
	return md5hex(fmt.Sprintf("%s_%s_%s_%d_%s_%s", lbName, groupName, svcName, port, protocol, nodeName))
}

// StaticRecordName names the record of a static address.
func StaticRecordName(lbName, groupName, addr string) string {
	return md5hex(fmt.Sprintf("%s_%s_%s", lbName, groupName, addr))
}

// StaticAddrLabelValue is the value of LabelStaticAddr for addr: the address itself when it is a
// valid label value, otherwise the hex MD5 of it (32 characters, always a valid label value).
func StaticAddrLabelValue(addr string) string {
	if len(validation.IsValidLabelValue(addr)) == 0 {
		return addr
	}
	return md5hex(addr)
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
