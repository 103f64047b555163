package admission

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Paths of the readiness-gate injection webhooks: pods of opted-in namespaces get the gate when a
// BackendGroup selects them; elsewhere only when a selecting group opts in.
const (
	PathInjectReadinessGate       = "/mutate-pod-readiness-gate"
	PathInjectReadinessGateGroups = "/mutate-pod-readiness-gate-groups"
)

// ReadinessGateWebhooks injects lbfed's readiness gate (lbcfv1beta1.PodConditionBackendRegistered)
// into new pods, as cloud load-balancer controllers do: the pods of a Deployment that a
// BackendGroup selects then become Ready only once the front end sends them traffic, so a
// rolling update waits for it.
type ReadinessGateWebhooks struct {
	// Client lists BackendGroups (a cached client is fine).
	Client  client.Reader
	Decoder admission.Decoder
}

// Register adds both injection webhooks.
func (w *ReadinessGateWebhooks) Register(s Registrar) {
	s.Register(PathInjectReadinessGate, &admission.Webhook{Handler: admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		return w.inject(ctx, req, false)
	})})
	s.Register(PathInjectReadinessGateGroups, &admission.Webhook{Handler: admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		return w.inject(ctx, req, true)
	})})
}

// inject adds the gate when a group selects the pod: any group not opting out (namespace opted
// in), or only groups opting in (groupsOnly).
func (w *ReadinessGateWebhooks) inject(ctx context.Context, req admission.Request, groupsOnly bool) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := w.Decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	for _, g := range pod.Spec.ReadinessGates {
		if string(g.ConditionType) == lbcfv1beta1.PodConditionBackendRegistered {
			return admission.Allowed("already gated")
		}
	}
	groups := &lbcfv1beta1.BackendGroupList{}
	if err := w.Client.List(ctx, groups, client.InNamespace(req.Namespace)); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list backend groups: %w", err))
	}
	var by []string
	for i := range groups.Items {
		bg := &groups.Items[i]
		if bg.DeletionTimestamp != nil || !bg.SelectsPod(req.Namespace, pod.Name, pod.Labels) {
			continue
		}
		switch strings.ToLower(bg.Annotations[lbcfv1beta1.AnnotationReadinessGate]) {
		case "false":
			continue
		case "true":
		default:
			if groupsOnly {
				continue
			}
		}
		by = append(by, bg.Name)
	}
	if len(by) == 0 {
		return admission.Allowed("no BackendGroup opts this pod in")
	}
	gate := corev1.PodReadinessGate{ConditionType: lbcfv1beta1.PodConditionBackendRegistered}
	op := jsonpatch.Operation{Operation: "add", Path: "/spec/readinessGates/-", Value: gate}
	if len(pod.Spec.ReadinessGates) == 0 {
		op = jsonpatch.Operation{Operation: "add", Path: "/spec/readinessGates", Value: []corev1.PodReadinessGate{gate}}
	}
	return admission.Patched("readiness gate for BackendGroup "+strings.Join(by, ", "), op)
}

// ReadinessGateConfiguration is the MutatingWebhookConfiguration of the injection: pods of
// namespaces labelled lbfed.io/readiness-gate-inject=enabled and, with groupOptIn, pods of every
// other namespace not labelled disabled (for groups annotated lbfed.io/readiness-gate=true; every
// pod creation then calls the webhook). failurePolicy Ignore: pods are created even while
// lbcf-controller is down, only without the gate.
func ReadinessGateConfiguration(name string, cc ClientConfig, groupOptIn bool) *admissionregistrationv1.MutatingWebhookConfiguration {
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(5)
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	hook := func(n, path string, op metav1.LabelSelectorOperator, values ...string) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{
			Name: n + ".lbfed.io", ClientConfig: cc(path), Rules: rules, FailurePolicy: &ignore, SideEffects: &none,
			AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: &timeout,
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: lbcfv1beta1.LabelReadinessGateInject, Operator: op, Values: values}}},
		}
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{hook("inject-readiness-gate", PathInjectReadinessGate, metav1.LabelSelectorOpIn, "enabled")},
	}
	if groupOptIn {
		m.Webhooks = append(m.Webhooks, hook("inject-readiness-gate-groups", PathInjectReadinessGateGroups, metav1.LabelSelectorOpNotIn, "enabled", "disabled"))
	}
	return m
}
