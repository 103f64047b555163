package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupName is the API group of every LBCF kind.
const GroupName = "lbcf.tkestack.io"

var (
	// SchemeGroupVersion is lbcf.tkestack.io/v1beta1.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}

	// SchemeBuilder registers the LBCF kinds.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion}

	// AddToScheme adds the LBCF kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind names, used where objects are handled as unstructured data (interpreter, federation).
const (
	KindLoadBalancerDriver = "LoadBalancerDriver"
	KindLoadBalancer       = "LoadBalancer"
	KindBackendGroup       = "BackendGroup"
	KindBackendRecord      = "BackendRecord"
)

// Resource returns a GroupResource for the given resource name (e.g. "backendgroups").
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func init() {
	SchemeBuilder.Register(
		&LoadBalancerDriver{}, &LoadBalancerDriverList{},
		&LoadBalancer{}, &LoadBalancerList{},
		&BackendGroup{}, &BackendGroupList{},
		&BackendRecord{}, &BackendRecordList{},
	)
}
