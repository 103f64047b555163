package localup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestKustomizeCRDs(t *testing.T) {
	write := func(dir, name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	render := strings.NewReplacer("https://{{name}}.{{namespace}}.svc:443", "https://127.0.0.1:9999", "{{caBundle}}", "Q0E=").Replace

	tests := []struct {
		name    string
		kust    string
		wantErr string
		check   func(g Gomega, objs []*unstructured.Unstructured)
	}{
		{
			name: "resources and a conversion patch",
			kust: "resources:\n- bases/a.yaml\n- bases/b.yaml\npatches:\n- path: patches/a.yaml\n",
			check: func(g Gomega, objs []*unstructured.Unstructured) {
				g.Expect(objs).To(HaveLen(2))
				g.Expect(objs[0].GetName()).To(Equal("as.example.io"))
				url, _, _ := unstructured.NestedString(objs[0].Object, "spec", "conversion", "webhook", "clientConfig", "url")
				g.Expect(url).To(Equal("https://127.0.0.1:9999/convert"))
				ca, _, _ := unstructured.NestedString(objs[0].Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
				g.Expect(ca).To(Equal("Q0E="))
				group, _, _ := unstructured.NestedString(objs[0].Object, "spec", "group")
				g.Expect(group).To(Equal("example.io"), "fields outside the patch are kept")
				_, found, _ := unstructured.NestedMap(objs[1].Object, "spec", "conversion")
				g.Expect(found).To(BeFalse(), "only the named CRD is patched")
			},
		},
		{
			name:    "patch of an unknown object",
			kust:    "resources:\n- bases/b.yaml\npatches:\n- path: patches/a.yaml\n",
			wantErr: "not among the resources",
		},
		{
			name:    "unsupported kustomization field",
			kust:    "resources:\n- bases/a.yaml\nnamePrefix: x-\n",
			wantErr: "more than resources and patches",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			write(dir, "kustomization.yaml", tc.kust)
			write(dir, "bases/a.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: as.example.io\nspec:\n  group: example.io\n")
			write(dir, "bases/b.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: bs.example.io\nspec:\n  group: example.io\n")
			write(dir, "patches/a.yaml", `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: as.example.io
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        url: "https://{{name}}.{{namespace}}.svc:443/convert"
        caBundle: "{{caBundle}}"
      conversionReviewVersions: ["v1"]
`)
			objs, err := kustomizeCRDs(dir, render)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tc.check(g, objs)
		})
	}
}

func TestMergeMaps(t *testing.T) {
	g := NewWithT(t)
	base := map[string]any{"a": map[string]any{"x": 1, "y": 2}, "l": []any{1, 2}, "gone": "v"}
	patch := map[string]any{"a": map[string]any{"y": 3, "z": 4}, "l": []any{9}, "gone": nil}
	g.Expect(mergeMaps(base, patch)).To(Equal(map[string]any{
		"a": map[string]any{"x": 1, "y": 3, "z": 4},
		"l": []any{9},
	}))
}

func TestDecodeManifests(t *testing.T) {
	g := NewWithT(t)
	objs, err := DecodeManifests([]byte("---\n# comment only\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(2))
	g.Expect(objs[1].GetName()).To(Equal("b"))
	_, err = DecodeManifests([]byte("kind: [unclosed\n"))
	g.Expect(err).To(HaveOccurred())
}
