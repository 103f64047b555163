package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bg,categories=lbcf
// +kubebuilder:printcolumn:name="LoadBalancers",type=string,JSONPath=`.spec.loadBalancers`
// +kubebuilder:printcolumn:name="Backends",type=integer,JSONPath=`.status.backends`
// +kubebuilder:printcolumn:name="Registered",type=integer,JSONPath=`.status.registeredBackends`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// BackendGroup selects backends (pods × ports, Service nodePort × nodes, or static addresses) and
// binds them to LoadBalancers.
type BackendGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BackendGroupSpec `json:"spec"`
	// +optional
	Status BackendGroupStatus `json:"status,omitempty"`
}

// DeregPolicy says when a registered pod backend is deregistered.
type DeregPolicy string

// Deregister policies. Registration always requires the pod to be Ready.
const (
	DeregisterIfNotReady   DeregPolicy = "IfNotReady"
	DeregisterIfNotRunning DeregPolicy = "IfNotRunning"
	DeregisterWebhook      DeregPolicy = "Webhook"
)

// DeregFailurePolicy applies when judgePodDeregister fails under the Webhook policy.
type DeregFailurePolicy string

// Failure policies of the Webhook deregister policy.
const (
	FailurePolicyDoNothing    DeregFailurePolicy = "DoNothing"
	FailurePolicyIfNotReady   DeregFailurePolicy = "IfNotReady"
	FailurePolicyIfNotRunning DeregFailurePolicy = "IfNotRunning"
)

// BackendGroupSpec is the desired state of a BackendGroup. Exactly one of service, pods and
// static is set.
type BackendGroupSpec struct {
	// LBName is deprecated (LBCF ≤ 1.1): use loadBalancers. The mutating webhook moves it.
	// +optional
	// +nullable
	LBName *string `json:"lbName"`
	// LoadBalancers are the LoadBalancers every backend is registered to.
	// +optional
	// +nullable
	LoadBalancers []string `json:"loadBalancers"`
	// DeregisterPolicy: IfNotReady (default), IfNotRunning or Webhook.
	// +optional
	// +nullable
	DeregisterPolicy *DeregPolicy `json:"deregisterPolicy"`
	// DeregisterWebhook configures the Webhook deregister policy.
	// +optional
	// +nullable
	DeregisterWebhook *DeregisterWebhookSpec `json:"deregisterWebhook"`
	// +optional
	Service *ServiceBackend `json:"service,omitempty"`
	// +optional
	Pods *PodBackend `json:"pods,omitempty"`
	// Static addresses, opaque to LBCF.
	// +optional
	Static []string `json:"static,omitempty"`
	// Parameters are driver-defined and mutable (e.g. "weight").
	// +optional
	Parameters map[string]string `json:"parameters,omitempty"`
	// EnsurePolicy is copied into every BackendRecord.
	// +optional
	EnsurePolicy *EnsurePolicyConfig `json:"ensurePolicy,omitempty"`
}

// DeregisterWebhookSpec configures judgePodDeregister.
type DeregisterWebhookSpec struct {
	// DriverName is the driver whose judgePodDeregister is called.
	// +optional
	DriverName string `json:"driverName"`
	// FailurePolicy: DoNothing (default), IfNotReady or IfNotRunning.
	// +optional
	// +nullable
	FailurePolicy *DeregFailurePolicy `json:"failurePolicy"`
}

// ServiceBackend selects a NodePort Service's nodePort on every selected node.
type ServiceBackend struct {
	// Name of the Service in the BackendGroup's namespace.
	// +optional
	Name string `json:"name"`
	// Port is the Service port (not the nodePort).
	// +optional
	Port PortSelector `json:"port,omitempty"`
	// NodeSelector selects the nodes; all nodes when empty.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// PodBackend selects pods × ports.
type PodBackend struct {
	// Port is deprecated: use ports. The mutating webhook merges it into ports.
	// +optional
	// +nullable
	Port *PortSelector `json:"port"`
	// +optional
	// +nullable
	Ports []PortSelector `json:"ports"`
	// +optional
	ByLabel *SelectPodByLabel `json:"byLabel,omitempty"`
	// +optional
	ByName []string `json:"byName,omitempty"`
}

// PortSelector is a port and protocol.
type PortSelector struct {
	// PortNumber is deprecated: use port.
	// +optional
	PortNumber *int32 `json:"portNumber,omitempty"`
	// Port is 1..65535.
	// +optional
	Port int32 `json:"port"`
	// Protocol is TCP (default) or UDP.
	// +optional
	Protocol string `json:"protocol,omitempty"`
}

// SelectPodByLabel selects pods of the BackendGroup's namespace by labels.
type SelectPodByLabel struct {
	// +optional
	// +nullable
	Selector map[string]string `json:"selector"`
	// Except lists pod names to leave out.
	// +optional
	Except []string `json:"except,omitempty"`
}

// BackendGroupStatus is the observed state of a BackendGroup.
//
// Field ownership: in a member cluster the member-mode controller writes candidates, backends,
// observedGeneration and conditions. On the Karmada template the interpreter's AggregateStatus
// owns clusters; the federation controller owns backends, registeredBackends and conditions.
type BackendGroupStatus struct {
	// Backends is the number of expected backend records (member mode: eligible candidates).
	// +optional
	Backends int32 `json:"backends"`
	// RegisteredBackends is the number of records with Registered=True.
	// +optional
	RegisteredBackends int32 `json:"registeredBackends"`
	// ObservedGeneration is the generation last handled by the writer of this status (lbfed addition).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions (lbfed addition): Ready, CandidatesTruncated.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Candidates is written by a member-mode controller: every selected backend, compactly encoded
	// (see Candidates). Never written on the Karmada template.
	// +optional
	Candidates *Candidates `json:"candidates,omitempty"`
	// Clusters is the per-member summary written on the Karmada template by the interpreter's
	// AggregateStatus, sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	Clusters []ClusterSummary `json:"clusters,omitempty"`
	// Members is each member's part in the group as the federation controller sees it, written on
	// the Karmada template by the federation (never by AggregateStatus), sorted by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	Members []MemberStatus `json:"members,omitempty"`
	// ReportRequest is written by a member-mode controller: the value of the template's
	// lbfed.io/report-request annotation it last reported for.
	// +optional
	ReportRequest string `json:"reportRequest,omitempty"`
}

// MemberState is a member's part in a federated BackendGroup.
type MemberState string

const (
	// MemberContributing: the member is Ready and its current report's backends are registered.
	MemberContributing MemberState = "Contributing"
	// MemberStale: the member is Ready but Karmada delivers no current report for it; its last
	// known backends are kept.
	MemberStale MemberState = "Stale"
	// MemberUnobserved: Karmada cannot observe the member (Cluster NotReady or gone, binding
	// missing) and the grace period has not passed; its backends are kept.
	MemberUnobserved MemberState = "Unobserved"
	// MemberHeld: unobserved past the grace period, but kept: no other member serves (fail-static
	// floor) or the group's policy is Keep.
	MemberHeld MemberState = "Held"
	// MemberWithdrawn: the member's backends are deregistered.
	MemberWithdrawn MemberState = "Withdrawn"
	// MemberRecovering: a withdrawn member is observed again; its backends come back with the
	// first report it makes after its return (status.reportRequest ≥ Request).
	MemberRecovering MemberState = "Recovering"
)

// MemberStatus is one member cluster's part in a federated BackendGroup.
type MemberStatus struct {
	// Name of the member cluster.
	Name string `json:"name"`
	// State of the member in this group.
	State MemberState `json:"state"`
	// Reason is a CamelCase reason for the state (ClusterNotReady, ClusterGone, BindingMissing,
	// RemovedFromPlacement, NoOtherMemberServes, PolicyKeep, …).
	// +optional
	Reason string `json:"reason,omitempty"`
	// Since is when the member entered this state.
	// +optional
	Since metav1.Time `json:"since,omitempty"`
	// Message says what the federation does about it.
	// +optional
	Message string `json:"message,omitempty"`
	// Request is the report request a Recovering member's report must echo.
	// +optional
	Request string `json:"request,omitempty"`
	// Truncated: the member's report is cut to its byte budget (see its CandidatesTruncated).
	// +optional
	Truncated bool `json:"truncated,omitempty"`
	// UnobservedCandidates is the number of the member's reported pods that are not Ready on its
	// control plane's evidence alone (their node unreachable or NotReady, Ready cleared by the
	// node lifecycle controller while the containers are ready): kept as unobserved, not gone
	// (see the group's ReadinessUnobserved condition).
	// +optional
	UnobservedCandidates int32 `json:"unobservedCandidates,omitempty"`
}

// BackendGroup condition types (lbfed additions; metav1.Condition).
const (
	// BackendGroupReady: member mode: candidates reported for the current generation;
	// federation: every expected backend registered.
	BackendGroupReady = "Ready"
	// BackendGroupCandidatesTruncated: the member's candidates exceed its byte budget; the list was
	// cut and the federation must not deregister what is missing from it.
	BackendGroupCandidatesTruncated = "CandidatesTruncated"
	// BackendGroupMembersWithdrawn (federation): True while some member's backends are withdrawn;
	// the message names them, with reason and time.
	BackendGroupMembersWithdrawn = "MembersWithdrawn"
	// BackendGroupFailStatic (federation): True while unobserved members are kept past their grace
	// period because no other member serves (or the policy is Keep): the front end's health checks
	// decide for them.
	BackendGroupFailStatic = "FailStatic"
	// BackendGroupBindingMissing (federation): True while the group's ResourceBinding is missing or
	// places it on no member; nothing is withdrawn before the grace period, and never below the floor.
	BackendGroupBindingMissing = "BindingMissing"
	// BackendGroupReadinessUnobserved: True while registered pods that are not Ready on
	// control-plane evidence alone (node unreachable or NotReady, Ready cleared by the node
	// lifecycle controller while the containers are ready) keep their records: within the grace
	// period, by the floor (no other backend of the group is eligible) or by policy Keep.
	BackendGroupReadinessUnobserved = "ReadinessUnobserved"
	// BackendGroupReadinessPanic: True while more of the group's registered pods are not Ready
	// than the panic threshold lets go at once: they all stay registered and the front end's health
	// checks decide.
	BackendGroupReadinessPanic = "ReadinessPanic"
)

// ClusterSummary is one member cluster's state of a federated BackendGroup.
type ClusterSummary struct {
	// Name of the member cluster.
	Name string `json:"name"`
	// ObservedGeneration of the member object as reported by the member controller.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Candidates is the number of candidate backends the member reported.
	Candidates int32 `json:"candidates"`
	// Ready is the number of those that are Ready.
	Ready int32 `json:"ready"`
	// Health is Karmada's health of the member object: Healthy, Unhealthy or Unknown.
	// +optional
	Health string `json:"health,omitempty"`
	// Stale is true when this entry is the member's last known summary: Karmada delivered no status
	// for it in the latest aggregation.
	// +optional
	Stale bool `json:"stale,omitempty"`
}

// +kubebuilder:object:root=true

// BackendGroupList is a list of BackendGroups.
type BackendGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackendGroup `json:"items"`
}

// GetLoadBalancers returns loadBalancers, or the deprecated lbName.
func (s *BackendGroupSpec) GetLoadBalancers() []string {
	if len(s.LoadBalancers) > 0 {
		return s.LoadBalancers
	}
	if s.LBName != nil && *s.LBName != "" {
		return []string{*s.LBName}
	}
	return nil
}

// GetDeregisterPolicy returns the deregister policy, IfNotReady when unset.
func (s *BackendGroupSpec) GetDeregisterPolicy() DeregPolicy {
	if s.DeregisterPolicy == nil || *s.DeregisterPolicy == "" {
		return DeregisterIfNotReady
	}
	return *s.DeregisterPolicy
}

// GetFailurePolicy returns the Webhook policy's failure policy, DoNothing when unset.
func (w *DeregisterWebhookSpec) GetFailurePolicy() DeregFailurePolicy {
	if w == nil || w.FailurePolicy == nil || *w.FailurePolicy == "" {
		return FailurePolicyDoNothing
	}
	return *w.FailurePolicy
}

// GetPortSelectors returns ports, or the deprecated port.
func (p *PodBackend) GetPortSelectors() []PortSelector {
	if len(p.Ports) > 0 {
		return p.Ports
	}
	if p.Port != nil {
		return []PortSelector{*p.Port}
	}
	return nil
}

// GetPort returns port, or the deprecated portNumber.
func (p PortSelector) GetPort() int32 {
	if p.Port > 0 {
		return p.Port
	}
	if p.PortNumber != nil {
		return *p.PortNumber
	}
	return 0
}

// GetProtocol returns the protocol, TCP when unset.
func (p PortSelector) GetProtocol() string {
	if p.Protocol == "" {
		return "TCP"
	}
	return p.Protocol
}

// BackendType returns "Pod", "Service" or "Static" ("" when none is set).
func (s *BackendGroupSpec) BackendType() string {
	switch {
	case s.Pods != nil:
		return BackendTypePod
	case s.Service != nil:
		return BackendTypeService
	case len(s.Static) > 0:
		return BackendTypeStatic
	}
	return ""
}

// Backend types as sent in validateBackend's backendType.
const (
	BackendTypePod     = "Pod"
	BackendTypeService = "Service"
	BackendTypeStatic  = "Static"
)
