package localup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fieldOwner is the server-side-apply field manager of everything localup installs.
const fieldOwner = "lbfed-localup"

func newClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("create client for %s: %w", cfg.Host, err)
	}
	return c, nil
}

// DecodeManifests splits a multi-document YAML (or JSON) stream into objects, skipping empty
// documents.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode manifest: %w", err)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}

// applyAll server-side applies objs in order. Apply (rather than create) keeps a restarted
// run's manifests idempotent, and has no annotation size limit for Karmada's large CRDs.
func applyAll(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// InstallCRDs applies crds and waits until every one is Established, so that objects of the new
// kinds can be created as soon as it returns.
func InstallCRDs(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	objs := make([]*unstructured.Unstructured, 0, len(crds))
	for _, crd := range crds {
		u, err := crdToUnstructured(crd)
		if err != nil {
			return err
		}
		objs = append(objs, u)
	}
	if err := applyAll(ctx, c, objs); err != nil {
		return fmt.Errorf("install CRDs on %s: %w", cfg.Host, err)
	}
	return waitCRDsEstablished(ctx, c, objs)
}

func crdToUnstructured(crd *apiextensionsv1.CustomResourceDefinition) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return nil, fmt.Errorf("convert CRD %s: %w", crd.Name, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(apiextensionsv1.SchemeGroupVersion.String())
	u.SetKind("CustomResourceDefinition")
	// Status and server-set metadata are not part of what is applied.
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

func waitCRDsEstablished(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	return waitFor(ctx, time.Minute, "CRDs Established", nil, func(ctx context.Context) error {
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: o.GetName()}, &crd); err != nil {
				return err
			}
			established := false
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return fmt.Errorf("CRD %s not Established", crd.Name)
			}
		}
		return nil
	})
}
