// Package driver is the LBCF driver webhook protocol kit: the request and response types of the
// ten webhooks, a client that calls drivers, a server kit that turns a Go Driver into an
// http.Handler, and (in subpackages) an in-memory reference driver and a conformance suite.
//
// The wire format follows tkestack/lb-controlling-framework with the decisions of lbfed's
// compatibility spec: minRetryDelayInSeconds is read as an integer or a numeric string under any
// key case and always written as an integer; validateBackend writes oldParameters and reads
// OldParameters too; ensureLoadBalancer sends lbInfo and generateBackendAddr sends parameters;
// pods and services travel as JSON objects.
package driver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Webhook names, which are also the URL path of each webhook below the driver's URL.
const (
	Healthz              = "healthz"
	ValidateLoadBalancer = "validateLoadBalancer"
	CreateLoadBalancer   = "createLoadBalancer"
	EnsureLoadBalancer   = "ensureLoadBalancer"
	DeleteLoadBalancer   = "deleteLoadBalancer"
	ValidateBackend      = "validateBackend"
	GenerateBackendAddr  = "generateBackendAddr"
	EnsureBackend        = "ensureBackend"
	DeregisterBackend    = "deregisterBackend"
	JudgePodDeregister   = "judgePodDeregister"
)

// Webhooks lists all ten webhooks in protocol order.
var Webhooks = []string{
	Healthz, ValidateLoadBalancer, CreateLoadBalancer, EnsureLoadBalancer, DeleteLoadBalancer,
	ValidateBackend, GenerateBackendAddr, EnsureBackend, DeregisterBackend, JudgePodDeregister,
}

// KnownWebhooks are the names a LoadBalancerDriver may list in spec.webhooks (judgePodDeregister is
// not one of them: its timeout is fixed). All but healthz must be listed; healthz is optional.
var KnownWebhooks = []string{
	Healthz, ValidateLoadBalancer, CreateLoadBalancer, EnsureLoadBalancer, DeleteLoadBalancer,
	ValidateBackend, GenerateBackendAddr, EnsureBackend, DeregisterBackend,
}

// IsKnownWebhook reports whether name may appear in a driver's spec.webhooks.
func IsKnownWebhook(name string) bool {
	for _, w := range KnownWebhooks {
		if w == name {
			return true
		}
	}
	return false
}

// IsRetryHook reports whether the webhook answers with status Succ/Fail/Running and is retried.
func IsRetryHook(name string) bool {
	switch name {
	case CreateLoadBalancer, EnsureLoadBalancer, DeleteLoadBalancer, GenerateBackendAddr, EnsureBackend, DeregisterBackend:
		return true
	}
	return false
}

// Status of a retryable webhook's answer.
const (
	StatusSucc    = "Succ"
	StatusFail    = "Fail"
	StatusRunning = "Running"
)

// OperationType tells validate webhooks why they are called.
type OperationType string

// Operations.
const (
	OperationCreate OperationType = "Create"
	OperationUpdate OperationType = "Update"
)

// RequestForRetryHooks is common to the six retryable webhooks.
type RequestForRetryHooks struct {
	// RecordID is stable across retries of one operation: "<webhook>(<object UID>)".
	RecordID string `json:"recordID"`
	// RetryID is fresh on every call.
	RetryID string `json:"retryID"`
}

// RecordID returns the recordID of webhook for the object with the given UID.
func RecordID(webhook, uid string) string { return webhook + "(" + uid + ")" }

// ResponseForFailRetryHooks is common to the answers of the six retryable webhooks.
type ResponseForFailRetryHooks struct {
	Status string `json:"status"`
	Msg    string `json:"msg"`
	// MinRetryDelayInSeconds asks the caller to wait at least this long before the next call.
	MinRetryDelayInSeconds RetryDelay `json:"minRetryDelayInSeconds"`
}

// ResponseForNoRetryHooks is the answer of validate webhooks.
type ResponseForNoRetryHooks struct {
	Succ bool   `json:"succ"`
	Msg  string `json:"msg"`
}

// RetryDelay is a delay in seconds. It is written as a JSON integer and read from an integer or a
// numeric string: the original code uses an integer, its documentation a string.
type RetryDelay int32

// UnmarshalJSON accepts 30, "30", 30.0 and null.
func (d *RetryDelay) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*d = 0
		return nil
	}
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1<<31-1 || f != float64(int64(f)) {
		return fmt.Errorf("minRetryDelayInSeconds: want a non-negative whole number of seconds, got %s", string(b))
	}
	*d = RetryDelay(f)
	return nil
}

// HealthzRequest is the request of healthz: an empty object.
type HealthzRequest struct{}

// HealthzResponse is the answer of healthz.
type HealthzResponse struct {
	Healthy bool `json:"healthy"`
}

// ValidateLoadBalancerRequest is the request of validateLoadBalancer.
type ValidateLoadBalancerRequest struct {
	DryRun        bool              `json:"dryRun"`
	LBSpec        map[string]string `json:"lbSpec"`
	Operation     OperationType     `json:"operation"`
	Attributes    map[string]string `json:"attributes"`
	OldAttributes map[string]string `json:"oldAttributes,omitempty"`
}

// ValidateLoadBalancerResponse is the answer of validateLoadBalancer.
type ValidateLoadBalancerResponse struct {
	ResponseForNoRetryHooks
}

// CreateLoadBalancerRequest is the request of createLoadBalancer.
type CreateLoadBalancerRequest struct {
	RequestForRetryHooks
	DryRun     bool              `json:"dryRun"`
	LBSpec     map[string]string `json:"lbSpec"`
	Attributes map[string]string `json:"attributes"`
}

// CreateLoadBalancerResponse is the answer of createLoadBalancer.
type CreateLoadBalancerResponse struct {
	ResponseForFailRetryHooks
	LBInfo map[string]string `json:"lbInfo"`
}

// EnsureLoadBalancerRequest is the request of ensureLoadBalancer.
type EnsureLoadBalancerRequest struct {
	RequestForRetryHooks
	DryRun     bool              `json:"dryRun"`
	LBInfo     map[string]string `json:"lbInfo"`
	Attributes map[string]string `json:"attributes"`
}

// EnsureLoadBalancerResponse is the answer of ensureLoadBalancer.
type EnsureLoadBalancerResponse struct {
	ResponseForFailRetryHooks
}

// DeleteLoadBalancerRequest is the request of deleteLoadBalancer.
type DeleteLoadBalancerRequest struct {
	RequestForRetryHooks
	DryRun     bool              `json:"dryRun"`
	LBInfo     map[string]string `json:"lbInfo"`
	Attributes map[string]string `json:"attributes"`
}

// DeleteLoadBalancerResponse is the answer of deleteLoadBalancer.
type DeleteLoadBalancerResponse struct {
	ResponseForFailRetryHooks
}

// ValidateBackendRequest is the request of validateBackend.
type ValidateBackendRequest struct {
	DryRun bool `json:"dryRun"`
	// BackendType is Pod, Service or Static.
	BackendType string            `json:"backendType"`
	LBInfo      map[string]string `json:"lbInfo"`
	Operation   OperationType     `json:"operation"`
	Parameters  map[string]string `json:"parameters"`
	// OldParameters is sent on Update. The original wrote the key "OldParameters"; keys are
	// matched case-insensitively on decoding, so both spellings are read.
	OldParameters map[string]string `json:"oldParameters,omitempty"`
}

// ValidateBackendResponse is the answer of validateBackend.
type ValidateBackendResponse struct {
	ResponseForNoRetryHooks
}

// GenerateBackendAddrRequest is the request of generateBackendAddr. Exactly one of PodBackend and
// ServiceBackend is set; the other is null.
type GenerateBackendAddrRequest struct {
	RequestForRetryHooks
	DryRun         bool                     `json:"dryRun"`
	LBInfo         map[string]string        `json:"lbInfo"`
	LBAttributes   map[string]string        `json:"lbAttributes"`
	Parameters     map[string]string        `json:"parameters"`
	PodBackend     *PodBackendInRequest     `json:"podBackend"`
	ServiceBackend *ServiceBackendInRequest `json:"serviceBackend"`
}

// PodBackendInRequest is a pod backend in generateBackendAddr.
type PodBackendInRequest struct {
	Pod corev1.Pod `json:"pod"`
	// Port carries portNumber too (= port) for drivers written against LBCF ≤ 1.1.
	Port lbcfv1beta1.PortSelector `json:"port"`
}

// ServiceBackendInRequest is a Service nodePort backend on one node in generateBackendAddr.
type ServiceBackendInRequest struct {
	Service       corev1.Service           `json:"service"`
	Port          lbcfv1beta1.PortSelector `json:"port"`
	NodeName      string                   `json:"nodeName"`
	NodeAddresses []corev1.NodeAddress     `json:"nodeAddresses"`
}

// GenerateBackendAddrResponse is the answer of generateBackendAddr.
type GenerateBackendAddrResponse struct {
	ResponseForFailRetryHooks
	BackendAddr string `json:"backendAddr"`
}

// BackendOperationRequest is the request of ensureBackend and deregisterBackend.
type BackendOperationRequest struct {
	RequestForRetryHooks
	DryRun       bool              `json:"dryRun"`
	LBInfo       map[string]string `json:"lbInfo"`
	BackendAddr  string            `json:"backendAddr"`
	Parameters   map[string]string `json:"parameters"`
	InjectedInfo map[string]string `json:"injectedInfo"`
}

// BackendOperationResponse is the answer of ensureBackend and deregisterBackend.
type BackendOperationResponse struct {
	ResponseForFailRetryHooks
	InjectedInfo map[string]string `json:"injectedInfo"`
}

// JudgePodDeregisterRequest is the request of judgePodDeregister.
type JudgePodDeregisterRequest struct {
	DryRun bool `json:"dryRun"`
	// NotReadyPods are the group's pods that are not Ready and not being deleted.
	NotReadyPods []*corev1.Pod `json:"notReadyPods"`
}

// JudgePodDeregisterResponse is the answer of judgePodDeregister.
type JudgePodDeregisterResponse struct {
	ResponseForNoRetryHooks
	// DoNotDeregister echoes the pods that stay registered (at least name, namespace and uid).
	DoNotDeregister []*corev1.Pod `json:"doNotDeregister"`
}

// Succ is a successful answer of a retryable webhook.
func Succ() ResponseForFailRetryHooks { return ResponseForFailRetryHooks{Status: StatusSucc} }

// Fail is a failed answer; the caller retries after at least delaySeconds (its default when 0).
func Fail(msg string, delaySeconds int32) ResponseForFailRetryHooks {
	return ResponseForFailRetryHooks{Status: StatusFail, Msg: msg, MinRetryDelayInSeconds: RetryDelay(delaySeconds)}
}

// Running is an "accepted, still in progress" answer; the caller polls again with the same
// recordID after at least delaySeconds (its default when 0).
func Running(msg string, delaySeconds int32) ResponseForFailRetryHooks {
	return ResponseForFailRetryHooks{Status: StatusRunning, Msg: msg, MinRetryDelayInSeconds: RetryDelay(delaySeconds)}
}

// Allow is a successful answer of a validate webhook.
func Allow() ResponseForNoRetryHooks { return ResponseForNoRetryHooks{Succ: true} }

// Deny is a refusal of a validate webhook with the reason shown to the user.
func Deny(msg string) ResponseForNoRetryHooks { return ResponseForNoRetryHooks{Msg: msg} }
