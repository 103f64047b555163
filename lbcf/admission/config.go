package admission

import (
	"context"
	"fmt"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// ClientConfig returns how the API server reaches the webhook at path: a URL (local processes)
// or a Service reference (in-cluster), with the serving CA.
type ClientConfig func(path string) admissionregistrationv1.WebhookClientConfig

// URLClientConfig reaches the webhooks at base (e.g. https://127.0.0.1:9443).
func URLClientConfig(base string, caBundle []byte) ClientConfig {
	return func(path string) admissionregistrationv1.WebhookClientConfig {
		u := base + path
		return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: caBundle}
	}
}

// ServiceClientConfig reaches the webhooks through a Service.
func ServiceClientConfig(namespace, name string, port int32, caBundle []byte) ClientConfig {
	return func(path string) admissionregistrationv1.WebhookClientConfig {
		p := path
		return admissionregistrationv1.WebhookClientConfig{
			Service:  &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: name, Path: &p, Port: &port},
			CABundle: caBundle,
		}
	}
}

// ConfigOptions adjusts the webhook configurations.
type ConfigOptions struct {
	// SpecUpdatesOnly: updates that leave the spec alone (labels, annotations, finalizers,
	// status through the main resource) are not sent to the webhooks at all (a matchCondition),
	// so that they pass even while the webhooks are down: on karmada-apiserver, where Karmada's
	// controllers write the templates' metadata.
	SpecUpdatesOnly bool
	// ExemptUsers and ExemptGroups: updates by these users, or by members of these groups, skip
	// the webhooks (a matchCondition): on karmada-apiserver, Karmada's own controllers, which
	// write the templates' labels, annotations and finalizers. Creations and deletions are
	// never exempt.
	ExemptUsers, ExemptGroups []string
}

// Configurations returns the webhook configurations that route LBCF objects to these webhooks
// (failurePolicy Fail, as the original: an LBCF object never skips validation).
func Configurations(name string, cc ClientConfig) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	return ConfigurationsWith(name, cc, ConfigOptions{})
}

// MatchConditions returns the matchConditions that exempt o's users and groups from updates
// (none when o exempts nobody).
func (o ConfigOptions) MatchConditions() []admissionregistrationv1.MatchCondition {
	var out []admissionregistrationv1.MatchCondition
	if o.SpecUpdatesOnly {
		out = append(out, admissionregistrationv1.MatchCondition{Name: "spec-changed",
			Expression: "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"})
	}
	if len(o.ExemptUsers) > 0 {
		out = append(out, admissionregistrationv1.MatchCondition{Name: "exempt-users",
			Expression: "request.operation != 'UPDATE' || !(request.userInfo.username in " + celList(o.ExemptUsers) + ")"})
	}
	if len(o.ExemptGroups) > 0 {
		out = append(out, admissionregistrationv1.MatchCondition{Name: "exempt-groups",
			Expression: "request.operation != 'UPDATE' || !has(request.userInfo.groups) || !request.userInfo.groups.exists(g, g in " + celList(o.ExemptGroups) + ")"})
	}
	return out
}

// celList writes a CEL list of string literals (as JSON writes it, which the chart uses).
func celList(items []string) string {
	b := []byte{'['}
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, it)
	}
	return string(append(b, ']'))
}

// ConfigurationsWith is Configurations with options.
func ConfigurationsWith(name string, cc ClientConfig, o ConfigOptions) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	conditions := o.MatchConditions()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(15) // validate calls the driver, whose own timeout defaults to 10s
	rule := func(resource string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: ops,
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{lbcfv1beta1.GroupName}, APIVersions: []string{"v1beta1"}, Resources: []string{resource},
			},
		}}
	}
	create, update, del := admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete
	mutating := func(n, path, resource string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{
			Name: n + ".lbcf.tkestack.io", ClientConfig: cc(path), Rules: rule(resource, ops...), FailurePolicy: &fail,
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: &timeout, MatchConditions: conditions,
		}
	}
	validating := func(n, path, resource string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: n + ".lbcf.tkestack.io", ClientConfig: cc(path), Rules: rule(resource, ops...), FailurePolicy: &fail,
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: &timeout, MatchConditions: conditions,
		}
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			mutating("mutate-driver", PathMutateDriver, "loadbalancerdrivers", create),
			mutating("mutate-lb", PathMutateLoadBalancer, "loadbalancers", create),
			mutating("mutate-bg", PathMutateBackendGroup, "backendgroups", create, update),
		},
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			validating("validate-driver", PathValidateDriver, "loadbalancerdrivers", create, update, del),
			validating("validate-lb", PathValidateLoadBalancer, "loadbalancers", create, update, del),
			validating("validate-bg", PathValidateBackendGroup, "backendgroups", create, update, del),
		},
	}
	return m, v
}

// Apply creates or updates the webhook configurations named name.
func Apply(ctx context.Context, c client.Client, name string, cc ClientConfig) error {
	return ApplyWith(ctx, c, name, cc, ConfigOptions{})
}

// ApplyWith is Apply with options.
func ApplyWith(ctx context.Context, c client.Client, name string, cc ClientConfig, o ConfigOptions) error {
	m, v := ConfigurationsWith(name, cc, o)
	return apply(ctx, c, name, m, v)
}

// ApplyReadinessGate creates or updates the readiness-gate injection configuration.
func ApplyReadinessGate(ctx context.Context, c client.Client, name string, cc ClientConfig, groupOptIn bool) error {
	return apply(ctx, c, name, ReadinessGateConfiguration(name, cc, groupOptIn))
}

func apply(ctx context.Context, c client.Client, name string, objs ...client.Object) error {
	for _, obj := range objs {
		existing := obj.DeepCopyObject().(client.Object)
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing)
		switch {
		case apierrors.IsNotFound(err):
			err = c.Create(ctx, obj)
		case err == nil:
			obj.SetResourceVersion(existing.GetResourceVersion())
			err = c.Update(ctx, obj)
		}
		if err != nil {
			return fmt.Errorf("apply %T %s: %w", obj, name, err)
		}
	}
	return nil
}
