package v1beta1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EnsurePolicyType says when ensureLoadBalancer / ensureBackend are called again.
// +kubebuilder:validation:Type=string
type EnsurePolicyType string

// Ensure policies.
const (
	// PolicyIfNotSucc calls ensure until it succeeded once (the behaviour when no policy is set).
	PolicyIfNotSucc EnsurePolicyType = "IfNotSucc"
	// PolicyAlways calls ensure periodically, every minPeriod.
	PolicyAlways EnsurePolicyType = "Always"
)

// Ensure period bounds.
const (
	// DefaultEnsurePeriod is the period of PolicyAlways when minPeriod is not set.
	DefaultEnsurePeriod = time.Minute
	// MinEnsurePeriod is the smallest accepted minPeriod.
	MinEnsurePeriod = 30 * time.Second
)

// EnsurePolicyConfig is shared by LoadBalancer, BackendGroup and BackendRecord.
type EnsurePolicyConfig struct {
	// Policy is IfNotSucc or Always. An absent config behaves as IfNotSucc.
	// Unknown strings are stored as-is (the original accepted them); admission rejects them.
	// +optional
	Policy EnsurePolicyType `json:"policy"`
	// MinPeriod is the period of PolicyAlways, a Go duration string (e.g. "30s", "1m"); ≥ 30s.
	// Forbidden with IfNotSucc.
	// +optional
	MinPeriod *metav1.Duration `json:"minPeriod,omitempty"`
}

// IsAlways reports whether p asks for periodic ensure.
func (p *EnsurePolicyConfig) IsAlways() bool {
	return p != nil && p.Policy == PolicyAlways
}

// Period returns the periodic-ensure period (DefaultEnsurePeriod when minPeriod is unset).
func (p *EnsurePolicyConfig) Period() time.Duration {
	if p == nil || p.MinPeriod == nil || p.MinPeriod.Duration <= 0 {
		return DefaultEnsurePeriod
	}
	return p.MinPeriod.Duration
}
