// Package v1beta1 is the LBCF API (lbcf.tkestack.io/v1beta1): LoadBalancerDriver, LoadBalancer,
// BackendGroup and BackendRecord, wire-compatible with tkestack/lb-controlling-framework, plus the
// additive status fields lbfed needs to federate backends across Karmada member clusters.
//
// Wire strings (labels, finalizers, annotations, condition reasons) are kept byte-for-byte,
// including the historical typos, because objects created by the original carry them.
//
// +kubebuilder:object:generate=true
// +groupName=lbcf.tkestack.io
package v1beta1
