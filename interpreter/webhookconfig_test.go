package interpreter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	"github.com/karmada-io/karmada/pkg/webhook/configuration"
	"github.com/karmada-io/karmada/pkg/webhook/resourceinterpretercustomization"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/lbfed/lbfed/interpreter"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

func configScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := configv1alpha1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// admissionRequest wraps obj as karmada-webhook receives it on CREATE.
func admissionRequest(t *testing.T, obj runtime.Object, kind string) admission.Request {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "a",
		Operation: admissionv1.Create,
		Kind:      metaGVK(schema.GroupVersionKind{Group: configv1alpha1.GroupVersion.Group, Version: configv1alpha1.GroupVersion.Version, Kind: kind}),
		Object:    runtime.RawExtension{Raw: raw},
	}}
}

// validateWebhookConfiguration runs karmada-webhook's own validation of the configuration.
func validateWebhookConfiguration(t *testing.T, cfg *configv1alpha1.ResourceInterpreterWebhookConfiguration) admission.Response {
	t.Helper()
	v := &configuration.ValidatingAdmission{Decoder: admission.NewDecoder(configScheme(t))}
	return v.Handle(context.Background(), admissionRequest(t, cfg, "ResourceInterpreterWebhookConfiguration"))
}

func TestWebhookConfigurationPassesKarmadaValidation(t *testing.T) {
	g := NewWithT(t)
	ca := selfSigned(t, time.Hour).CAPEM
	port := int32(9443)
	path := interpreter.InterpretPath
	for name, opts := range map[string]interpreter.WebhookConfigOptions{
		"url":     {URL: "https://127.0.0.1:9443/interpret", CABundle: ca},
		"service": {Service: &admissionregistrationv1.ServiceReference{Namespace: "lbfed-system", Name: "lbfed-interpreter", Port: &port, Path: &path}, CABundle: ca, TimeoutSeconds: 30},
	} {
		cfg, err := interpreter.WebhookConfiguration(opts)
		g.Expect(err).NotTo(HaveOccurred(), name)
		resp := validateWebhookConfiguration(t, cfg)
		g.Expect(resp.Allowed).To(BeTrue(), "%s: %v", name, resp.Result)

		hook := cfg.Webhooks[0]
		g.Expect(hook.Name).To(Equal(interpreter.DefaultWebhookName))
		g.Expect(hook.TimeoutSeconds).NotTo(BeNil(), "Karmada applies no deadline without it")
		g.Expect(hook.InterpreterContextVersions).To(Equal([]string{"v1alpha1"}))
		for _, rule := range hook.Rules {
			g.Expect(rule.Operations).NotTo(ContainElement(configv1alpha1.InterpreterOperationPrune))
			g.Expect(rule.Operations).NotTo(ContainElement(configv1alpha1.InterpreterOperationAll))
		}
	}

	// Negative control: the same validator refuses what karmada-webhook refuses.
	cfg, err := interpreter.WebhookConfiguration(interpreter.WebhookConfigOptions{URL: "https://127.0.0.1:9443/interpret", CABundle: ca})
	g.Expect(err).NotTo(HaveOccurred())
	cfg.Webhooks[0].Rules[0].Operations = append(cfg.Webhooks[0].Rules[0].Operations, configv1alpha1.InterpreterOperationPrune)
	g.Expect(validateWebhookConfiguration(t, cfg).Allowed).To(BeFalse(), "Prune is refused")
	cfg, _ = interpreter.WebhookConfiguration(interpreter.WebhookConfigOptions{URL: "https://127.0.0.1:9443/interpret", CABundle: ca})
	cfg.Webhooks[0].Name = "interpreter"
	g.Expect(validateWebhookConfiguration(t, cfg).Allowed).To(BeFalse(), "a name that is not fully qualified is refused")

	for _, bad := range []interpreter.WebhookConfigOptions{
		{URL: "http://127.0.0.1:9443/interpret", CABundle: ca},
		{CABundle: ca},
		{URL: "https://127.0.0.1:9443/interpret"},
		{URL: "https://127.0.0.1:9443/interpret", CABundle: ca, TimeoutSeconds: 31},
	} {
		_, err := interpreter.WebhookConfiguration(bad)
		g.Expect(err).To(HaveOccurred(), "%+v", bad)
	}
}

func TestWebhookConfigurationYAML(t *testing.T) {
	g := NewWithT(t)
	ca := selfSigned(t, time.Hour).CAPEM
	var out bytes.Buffer
	g.Expect(interpreter.WriteWebhookConfiguration(&out, interpreter.WebhookConfigOptions{URL: "https://127.0.0.1:9443/interpret", CABundle: ca})).To(Succeed())
	// caBundle is one base64 string (issues karmada#2806, #4439: not a list, not raw PEM).
	var generic map[string]any
	g.Expect(yaml.Unmarshal(out.Bytes(), &generic)).To(Succeed())
	cc := generic["webhooks"].([]any)[0].(map[string]any)["clientConfig"].(map[string]any)
	g.Expect(cc["caBundle"]).To(BeAssignableToTypeOf(""))
	g.Expect(cc["caBundle"]).NotTo(ContainSubstring("BEGIN CERTIFICATE"))
	var cfg configv1alpha1.ResourceInterpreterWebhookConfiguration
	g.Expect(yaml.UnmarshalStrict(out.Bytes(), &cfg)).To(Succeed())
	g.Expect(cfg.Webhooks[0].ClientConfig.CABundle).To(Equal(ca))
}

// TestCustomizationsPassKarmadaValidation runs karmada-webhook's validation of
// ResourceInterpreterCustomizations (Lua syntax, conflicts with existing customizations).
func TestCustomizationsPassKarmadaValidation(t *testing.T) {
	g := NewWithT(t)
	rics, err := interpreter.Customizations()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rics).To(HaveLen(2))
	scheme := configScheme(t)
	v := &resourceinterpretercustomization.ValidatingAdmission{
		Client:  fake.NewClientBuilder().WithScheme(scheme).Build(),
		Decoder: admission.NewDecoder(scheme),
	}
	for _, ric := range rics {
		resp := v.Handle(context.Background(), admissionRequest(t, ric, "ResourceInterpreterCustomization"))
		g.Expect(resp.Allowed).To(BeTrue(), "%s: %v", ric.Name, resp.Result)
	}
	// Negative control: a script that does not parse is refused by the same validator.
	broken := rics[0].DeepCopy()
	broken.Spec.Customizations.HealthInterpretation.LuaScript += "\nfunction unfinished("
	g.Expect(v.Handle(context.Background(), admissionRequest(t, broken, "ResourceInterpreterCustomization")).Allowed).To(BeFalse())
}

// TestCustomizationsRegisterTheWebhookOperations checks that the Lua customization and the
// webhook configuration cover the same operations per kind.
func TestCustomizationsRegisterTheWebhookOperations(t *testing.T) {
	g := NewWithT(t)
	ipt := newLuaInterpreter(t)
	for _, kind := range []string{lbcfv1beta1.KindBackendGroup, lbcfv1beta1.KindLoadBalancer} {
		gvk := schema.GroupVersionKind{Group: lbcfv1beta1.GroupName, Version: "v1beta1", Kind: kind}
		var enabled []configv1alpha1.InterpreterOperation
		for _, op := range parityOperations {
			if ipt.HookEnabled(gvk, op) {
				enabled = append(enabled, op)
			}
		}
		g.Expect(enabled).To(ConsistOf(interpreter.Operations[kind]), kind)
	}
}
