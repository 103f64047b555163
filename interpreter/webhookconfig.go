package interpreter

import (
	"bufio"
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strings"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Defaults of the generated ResourceInterpreterWebhookConfiguration.
const (
	DefaultConfigName     = "lbfed-interpreter"
	DefaultWebhookName    = "interpreter.lbfed.io"
	DefaultTimeoutSeconds = 10
)

// Operations lists, per kind, the operations registered with Karmada (webhook configuration and
// Lua customization alike). The replica operations are left to Karmada's default (0 replicas, no
// revision: the kinds are duplicated to every cluster), which is what the handler answers anyway
// and costs no call. LoadBalancer needs neither Retain (its admission only adds a finalizer,
// which Karmada keeps) nor AggregateStatus (its template status is not Karmada's to write). Prune
// is rejected by karmada-webhook, and "*" would also enable alpha operations.
var Operations = map[string][]configv1alpha1.InterpreterOperation{
	lbcfv1beta1.KindBackendGroup: {
		configv1alpha1.InterpreterOperationInterpretStatus,
		configv1alpha1.InterpreterOperationInterpretHealth,
		configv1alpha1.InterpreterOperationAggregateStatus,
		configv1alpha1.InterpreterOperationRetain,
		configv1alpha1.InterpreterOperationInterpretDependency,
	},
	lbcfv1beta1.KindLoadBalancer: {
		configv1alpha1.InterpreterOperationInterpretStatus,
		configv1alpha1.InterpreterOperationInterpretHealth,
		configv1alpha1.InterpreterOperationInterpretDependency,
	},
}

// WebhookConfigOptions describe where Karmada reaches the interpreter.
type WebhookConfigOptions struct {
	// Name of the configuration object (DefaultConfigName when empty).
	Name string
	// WebhookName is the fully qualified webhook name (DefaultWebhookName when empty).
	WebhookName string
	// URL (https) of the interpret endpoint, or Service; exactly one is set.
	URL     string
	Service *admissionregistrationv1.ServiceReference
	// CABundle is the PEM CA that signed the serving certificate.
	CABundle []byte
	// TimeoutSeconds per call, 1..30 (DefaultTimeoutSeconds when 0). Karmada applies no
	// deadline at all when it is unset, so it is always set.
	TimeoutSeconds int32
}

// WebhookConfiguration returns the ResourceInterpreterWebhookConfiguration that registers the
// interpreter for the LBCF kinds: one rule per kind with the Operations, a URL or a Service with
// the CA bundle, a timeout and interpreter context version v1alpha1, as karmada-webhook requires.
func WebhookConfiguration(o WebhookConfigOptions) (*configv1alpha1.ResourceInterpreterWebhookConfiguration, error) {
	if (o.URL == "") == (o.Service == nil) {
		return nil, errors.New("webhook configuration: exactly one of URL and Service is required")
	}
	if o.URL != "" && !strings.HasPrefix(o.URL, "https://") {
		return nil, fmt.Errorf("webhook configuration: URL %q is not https", o.URL)
	}
	if len(o.CABundle) == 0 {
		return nil, errors.New("webhook configuration: no CA bundle")
	}
	if o.Name == "" {
		o.Name = DefaultConfigName
	}
	if o.WebhookName == "" {
		o.WebhookName = DefaultWebhookName
	}
	if o.TimeoutSeconds == 0 {
		o.TimeoutSeconds = DefaultTimeoutSeconds
	}
	if o.TimeoutSeconds < 1 || o.TimeoutSeconds > 30 {
		return nil, fmt.Errorf("webhook configuration: timeout %d s outside 1..30", o.TimeoutSeconds)
	}
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: o.CABundle}
	if o.URL != "" {
		url := o.URL
		cc.URL = &url
	} else {
		svc := *o.Service
		cc.Service = &svc
	}
	timeout := o.TimeoutSeconds
	hook := configv1alpha1.ResourceInterpreterWebhook{
		Name:                       o.WebhookName,
		ClientConfig:               cc,
		TimeoutSeconds:             &timeout,
		InterpreterContextVersions: []string{configv1alpha1.GroupVersion.Version},
	}
	for _, kind := range []string{lbcfv1beta1.KindBackendGroup, lbcfv1beta1.KindLoadBalancer} {
		hook.Rules = append(hook.Rules, configv1alpha1.RuleWithOperations{
			Operations: append([]configv1alpha1.InterpreterOperation(nil), Operations[kind]...),
			Rule: configv1alpha1.Rule{
				APIGroups:   []string{lbcfv1beta1.GroupName},
				APIVersions: []string{lbcfv1beta1.SchemeGroupVersion.Version},
				Kinds:       []string{kind},
			},
		})
	}
	return &configv1alpha1.ResourceInterpreterWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: configv1alpha1.GroupVersion.String(), Kind: "ResourceInterpreterWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Webhooks:   []configv1alpha1.ResourceInterpreterWebhook{hook},
	}, nil
}

// WriteWebhookConfiguration writes the configuration as YAML (caBundle as a base64 string, as
// Karmada expects).
func WriteWebhookConfiguration(w io.Writer, o WebhookConfigOptions) error {
	cfg, err := WebhookConfiguration(o)
	if err != nil {
		return err
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode webhook configuration: %w", err)
	}
	_, err = w.Write(out)
	return err
}

// CustomizationsYAML is the Lua ResourceInterpreterCustomization for both kinds, the
// alternative to the webhook (apply one or the other, never both: Lua wins silently).
//
//go:embed customizations.yaml
var CustomizationsYAML []byte

// Customizations decodes CustomizationsYAML.
func Customizations() ([]*configv1alpha1.ResourceInterpreterCustomization, error) {
	dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(CustomizationsYAML)))
	var out []*configv1alpha1.ResourceInterpreterCustomization
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read customizations: %w", err)
		}
		if strings.TrimSpace(string(doc)) == "" {
			continue
		}
		ric := &configv1alpha1.ResourceInterpreterCustomization{}
		if err := yaml.UnmarshalStrict(doc, ric); err != nil {
			return nil, fmt.Errorf("decode customization: %w", err)
		}
		out = append(out, ric)
	}
}
