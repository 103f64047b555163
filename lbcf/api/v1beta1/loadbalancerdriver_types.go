package v1beta1

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DriverType is the kind of a LoadBalancerDriver. Only Webhook exists.
type DriverType string

// WebhookDriver is the only driver type: the driver is an HTTP(S) webhook server.
const WebhookDriver DriverType = "Webhook"

// DefaultWebhookTimeout is the timeout of a webhook that the driver does not configure.
const DefaultWebhookTimeout = 10 * time.Second

// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=driver,categories=lbcf
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=`.status.conditions[?(@.type=="Healthy")].status`
// +kubebuilder:printcolumn:name="Draining",type=string,JSONPath=`.metadata.labels.lbcf\.tkestack\.io/driver-draining`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// LoadBalancerDriver registers a driver webhook server. Drivers in kube-system named "lbcf-*" are
// shared by every namespace.
type LoadBalancerDriver struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec LoadBalancerDriverSpec `json:"spec"`
	// +optional
	Status LoadBalancerDriverStatus `json:"status,omitempty"`
}

// LoadBalancerDriverSpec is the desired state of a driver.
type LoadBalancerDriverSpec struct {
	// DriverType must be "Webhook". Immutable.
	DriverType string `json:"driverType"`
	// URL is the driver's base URL; webhook <name> is called at path.Join(url.Path, <name>). Immutable.
	URL string `json:"url"`
	// AcceptDryRunCall lets a controller running with --dry-run call this driver (with dryRun: true).
	// +optional
	AcceptDryRunCall bool `json:"acceptDryRunCall"`
	// Webhooks configures per-webhook timeouts. The mutating webhook fills in every known webhook
	// with a 10s timeout on creation.
	// +optional
	Webhooks []WebhookConfig `json:"webhooks,omitempty"`
}

// WebhookConfig configures one driver webhook.
type WebhookConfig struct {
	// Name is one of the known webhook names.
	Name string `json:"name"`
	// Timeout is a Go duration string, > 0 and ≤ 1m. Defaults to 10s.
	// +optional
	Timeout metav1.Duration `json:"timeout,omitempty"`
}

// LoadBalancerDriverConditionType is the type of a driver condition.
type LoadBalancerDriverConditionType string

// Driver condition types.
const (
	// DriverAccepted is set True once by the controller.
	DriverAccepted LoadBalancerDriverConditionType = "Accepted"
	// DriverHealthy reflects the driver's healthz webhook, when the driver lists it (lbfed addition).
	DriverHealthy LoadBalancerDriverConditionType = "Healthy"
)

// LoadBalancerDriverCondition is a condition of a driver.
type LoadBalancerDriverCondition struct {
	Type   LoadBalancerDriverConditionType `json:"type"`
	Status ConditionStatus                 `json:"status"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// LoadBalancerDriverStatus is the observed state of a driver.
type LoadBalancerDriverStatus struct {
	// +optional
	// +nullable
	Conditions []LoadBalancerDriverCondition `json:"conditions"`
}

// +kubebuilder:object:root=true

// LoadBalancerDriverList is a list of drivers.
type LoadBalancerDriverList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LoadBalancerDriver `json:"items"`
}

// IsDraining reports whether the driver carries the draining label set to "true" (any case).
func (d *LoadBalancerDriver) IsDraining() bool {
	v, ok := d.Labels[DriverDrainingLabel]
	return ok && strings.EqualFold(v, "true")
}

// WebhookTimeout returns the configured timeout of a webhook, or the 10s default.
func (d *LoadBalancerDriver) WebhookTimeout(name string) metav1.Duration {
	for _, w := range d.Spec.Webhooks {
		if w.Name == name && w.Timeout.Duration > 0 {
			return w.Timeout
		}
	}
	return metav1.Duration{Duration: DefaultWebhookTimeout}
}

// HasWebhook reports whether the driver lists the webhook in spec.webhooks.
func (d *LoadBalancerDriver) HasWebhook(name string) bool {
	for _, w := range d.Spec.Webhooks {
		if w.Name == name {
			return true
		}
	}
	return false
}

// DriverCondition returns the condition of the given type, or nil.
func (s *LoadBalancerDriverStatus) DriverCondition(t LoadBalancerDriverConditionType) *LoadBalancerDriverCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}
