package v1beta1

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// APIVersion is the apiVersion string of every v1beta1 object.
const APIVersion = "lbcf.tkestack.io/v1beta1"

// SystemDriverPrefix marks shared ("system") drivers and LoadBalancers: objects whose name starts with
// it live in kube-system and may be used from other namespaces.
const SystemDriverPrefix = "lbcf-"

// SystemNamespace is where shared drivers and LoadBalancers live.
const SystemNamespace = "kube-system"

// Labels. Keep byte-for-byte: objects created by the original LBCF carry them.
const (
	// DriverDrainingLabel on a LoadBalancerDriver ("true", case-insensitive) is required before
	// deletion; draining drivers refuse new LoadBalancers and BackendGroups.
	DriverDrainingLabel = "lbcf.tkestack.io/driver-draining"
	// LabelDriverName is set on BackendRecords to the driver name.
	LabelDriverName = "lbcf.tkestack.io/lb-driver"
	// LabelLBName is set on BackendRecords to the LoadBalancer name, and on BackendGroups (by the
	// mutating webhook) to the first LoadBalancer.
	LabelLBName = "lbcf.tkestack.io/lb-name"
	// LabelLBNamePrefix + <lbName> = "True" is set on BackendGroups, one per LoadBalancer.
	LabelLBNamePrefix = "name.lb.lbcf.tkestack.io/"
	// LabelGroupName is set on BackendRecords to the owning BackendGroup.
	LabelGroupName = "lbcf.tkestack.io/backend-group"
	// LabelServiceName is set on service-type BackendRecords.
	LabelServiceName = "lbcf.tkestack.io/backend-service"
	// LabelPodName is set on pod-type BackendRecords.
	LabelPodName = "lbcf.tkestack.io/backend-pod"
	// LabelStaticAddr is set on static BackendRecords (the original documented it but never set it);
	// its value is the address when that is a valid label value, otherwise a hash. Never rely on it.
	LabelStaticAddr = "lbcf.tkestack.io/backend-static-addr"
	// LabelDoNotDelete on a LoadBalancer or BackendGroup (any value) blocks deletion in admission.
	LabelDoNotDelete = "lbcf.tkestack.io/do-not-delete"

	// LabelBindDriver, LabelBindName, LabelBindLB and LabelBindPod are set on BackendRecords owned by
	// a Bind (lbcf.tkestack.io/v1). Bind is out of scope; the strings are kept for recognition.
	LabelBindDriver = "lbcf.tkestack.io/driver"
	LabelBindName   = "lbcf.tkestack.io/bind"
	LabelBindLB     = "lbcf.tkestack.io/lb"
	LabelBindPod    = "lbcf.tkestack.io/pod"
)

// Finalizers.
const (
	// FinalizerDeleteLB is on every LoadBalancer until deleteLoadBalancer succeeded.
	// The "load-load" typo is part of the wire format.
	FinalizerDeleteLB = "lbcf.tkestack.io/delete-load-loadbalancer"
	// FinalizerDeregisterBackend is on every BackendRecord until deregisterBackend succeeded.
	FinalizerDeregisterBackend = "lbcf.tkestack.io/deregister-backend"
	// FinalizerDeregisterBackendGroup is defined by the original and unused.
	FinalizerDeregisterBackendGroup = "lbcf.tkestack.io/deregister-backend-group"
)

// Annotations.
const (
	// AnnotationValidationPolicy on a BackendGroup with value ValidationPolicyOptional lets a
	// referenced LoadBalancer be missing at admission time.
	AnnotationValidationPolicy = "lbcf.tkestack.io/validation-policy"
	ValidationPolicyOptional   = "optional"
)

// lbfed additions.
const (
	// LabelCluster is set on control-plane BackendRecords to the member cluster the backend lives in.
	LabelCluster = "lbfed.io/cluster"
	// ParamCluster is added to a federated backend's parameters so that drivers know the member
	// cluster of each backend (BFE maps it to a sub-cluster).
	ParamCluster = "lbfed.io/cluster"
	// ParamWeight is the conventional per-backend weight parameter (tkestack/web sets it).
	ParamWeight = "weight"

	// AnnotationMemberLossPolicy on a BackendGroup template chooses what the federation does with
	// the backends of a member it cannot observe (MemberLossPolicy values); the controller's
	// --federation-member-loss-policy flag is the default.
	AnnotationMemberLossPolicy = "lbfed.io/member-loss-policy"
	// AnnotationReadinessPanicThreshold on a BackendGroup overrides the controller's
	// --readiness-panic-threshold for the group: the share (0 to 1; 0 turns it off) of its
	// registered pods that may be deregistered at once because they turned not Ready.
	AnnotationReadinessPanicThreshold = "lbfed.io/readiness-panic-threshold"
	// AnnotationReportRequest is written by the federation on a BackendGroup template when a
	// withdrawn member returns; Karmada propagates it and the member controller echoes it in
	// status.reportRequest, so that only a report made after the member's return restores it.
	AnnotationReportRequest = "lbfed.io/report-request"
	// AnnotationCandidatesBudget is written by the federation on a BackendGroup template: each
	// member's share, in bytes, of the candidate data the group's ResourceBinding can hold.
	AnnotationCandidatesBudget = "lbfed.io/candidates-budget"
	// AnnotationRegistered is written by the federation on a BackendGroup template: per member,
	// which of the candidates of its latest report are registered on every LoadBalancer of the
	// group (Registration). Karmada propagates it; the member sets its pods' readiness gates from it.
	AnnotationRegistered = "lbfed.io/registered"

	// PodConditionBackendRegistered is the pod readiness gate lbfed sets: True once every backend
	// of the pod is registered on every LoadBalancer of every BackendGroup that selects it, False
	// (with a message) while not. A rolling update of pods carrying it waits for the front end.
	PodConditionBackendRegistered = "lbfed.io/backend-registered"
	// LabelReadinessGateInject on a namespace ("enabled") has the admission webhook add the
	// readiness gate to new pods that a BackendGroup of the namespace selects; "disabled" keeps
	// the namespace out even of group opt-in.
	LabelReadinessGateInject = "lbfed.io/readiness-gate-inject"
	// AnnotationReadinessGate on a BackendGroup: "true" opts the group's pods in (outside opted-in
	// namespaces, where the webhook is configured for every namespace), "false" opts them out.
	AnnotationReadinessGate = "lbfed.io/readiness-gate"
)

// MemberLossPolicy is what the federation does with the backends of a member Karmada cannot
// observe (Cluster NotReady or gone, binding missing) once the grace period has passed.
type MemberLossPolicy string

const (
	// MemberLossFailStatic (default) withdraws an unobserved member only while another member of
	// the group still serves; when every member is unobserved at once (a control-plane fault),
	// all keep their backends.
	MemberLossFailStatic MemberLossPolicy = "FailStatic"
	// MemberLossWithdraw withdraws an unobserved member after the grace period, whatever the
	// others do (a VIP may go empty on a control-plane fault).
	MemberLossWithdraw MemberLossPolicy = "Withdraw"
	// MemberLossKeep never withdraws an unobserved member: the front end's health checks decide.
	MemberLossKeep MemberLossPolicy = "Keep"
)

// ParseMemberLossPolicy returns the policy named s (case-insensitive), or false.
func ParseMemberLossPolicy(s string) (MemberLossPolicy, bool) {
	for _, p := range []MemberLossPolicy{MemberLossFailStatic, MemberLossWithdraw, MemberLossKeep} {
		if strings.EqualFold(s, string(p)) {
			return p, true
		}
	}
	return "", false
}

// ParseReadinessPanicThreshold parses the value of AnnotationReadinessPanicThreshold: a decimal
// share from 0 to 1, or a percentage ("50%").
func ParseReadinessPanicThreshold(s string) (float64, error) {
	s = strings.TrimSpace(s)
	div := 1.0
	if v, ok := strings.CutSuffix(s, "%"); ok {
		s, div = strings.TrimSpace(v), 100
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f/div > 1 {
		return 0, fmt.Errorf("%s: %q is not a share from 0 to 1 (or 0%% to 100%%)", AnnotationReadinessPanicThreshold, s)
	}
	return f / div, nil
}

// ConditionStatus is the status of an LBCF condition.
type ConditionStatus string

// Condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// ConditionReason is a machine-readable reason of an LBCF condition.
type ConditionReason string

// Condition reasons.
const (
	// ReasonOperationInProgress is emitted correctly spelled; readers also accept
	// ReasonOperationInProgressLegacy, the original's typo'd string.
	ReasonOperationInProgress       ConditionReason = "OperationInProgress"
	ReasonOperationInProgressLegacy ConditionReason = "OperationInProgres"
	ReasonOperationFailed           ConditionReason = "OperationFailed"
	ReasonInvalidResponse           ConditionReason = "InvalidResponse"
)

// IsOperationInProgress reports whether r is the in-progress reason in either spelling.
func (r ConditionReason) IsOperationInProgress() bool {
	return r == ReasonOperationInProgress || r == ReasonOperationInProgressLegacy
}

// String returns the reason string.
func (r ConditionReason) String() string { return string(r) }
