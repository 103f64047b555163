package manifests

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSetFlags(t *testing.T) {
	cases := map[string]struct {
		args  []string
		flags map[string]string
		want  []string
	}{
		"replace in place": {
			args:  []string{"--mode=member", "--webhook-port=9443", "--v=0"},
			flags: map[string]string{"webhook-port": "19443"},
			want:  []string{"--mode=member", "--webhook-port=19443", "--v=0"},
		},
		"append missing, sorted": {
			args:  []string{"--mode=member"},
			flags: map[string]string{"kubeconfig": "/k", "cert-dir": "/c"},
			want:  []string{"--mode=member", "--cert-dir=/c", "--kubeconfig=/k"},
		},
		"drop with empty value": {
			args:  []string{"--dry-run", "--v=2"},
			flags: map[string]string{"dry-run": "", "absent": ""},
			want:  []string{"--v=2"},
		},
		"boolean form replaced": {
			args:  []string{"--leader-elect"},
			flags: map[string]string{"leader-elect": "false"},
			want:  []string{"--leader-elect=false"},
		},
		"repeated flag kept once": {
			args:  []string{"--v=1", "--v=2"},
			flags: map[string]string{"v": "4"},
			want:  []string{"--v=4"},
		},
		"positional arguments untouched": {
			args:  []string{"apply", "-f", "x.yaml"},
			flags: map[string]string{"server-side": "true"},
			want:  []string{"apply", "-f", "x.yaml", "--server-side=true"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(SetFlags(tc.args, tc.flags)).To(Equal(tc.want))
		})
	}
}

func TestWriteSecretFiles(t *testing.T) {
	g := NewWithT(t)
	objs, err := Decode([]byte(`
apiVersion: v1
kind: Secret
metadata: {name: tls, namespace: ns}
data:
  tls.crt: Y2VydA==
stringData:
  ca.crt: ca
`))
	g.Expect(err).NotTo(HaveOccurred())
	dir := filepath.Join(t.TempDir(), "certs")
	g.Expect(WriteSecretFiles(objs[0], dir)).To(Succeed())
	g.Expect(os.ReadFile(filepath.Join(dir, "tls.crt"))).To(BeEquivalentTo("cert"))
	g.Expect(os.ReadFile(filepath.Join(dir, "ca.crt"))).To(BeEquivalentTo("ca"))
	fi, err := os.Stat(filepath.Join(dir, "tls.crt"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Mode().Perm()).To(BeEquivalentTo(0o600))

	notSecret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}
	g.Expect(WriteSecretFiles(notSecret, dir)).To(MatchError(ContainSubstring("not a Secret")))
}

func TestDecodeSkipsEmptyDocuments(t *testing.T) {
	g := NewWithT(t)
	objs, err := Decode([]byte("---\n# only a comment\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(1))
	_, err = Decode([]byte("apiVersion: v1\nkind: [\n"))
	g.Expect(err).To(HaveOccurred())
}

// TestSplitLBFed renders the lbfed chart both ways: the apply Jobs' Secret holds exactly the
// documents that manifests mode renders, in apply order.
func TestSplitLBFed(t *testing.T) {
	g := NewWithT(t)
	helm, err := HelmPath(filepath.Join("..", ".."))
	g.Expect(err).NotTo(HaveOccurred())
	if _, err := os.Stat(helm); err != nil {
		if os.Getenv("LBFED_REQUIRE_INTEGRATION") == "1" {
			t.Fatalf("helm not built: %v", err)
		}
		t.Skipf("helm not built (%v): run `make helm-lint`", err)
	}
	// helm reads the chart in a child process, unseen by go test's result cache: read it here.
	g.Expect(filepath.WalkDir(filepath.Join("..", "lbfed"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			_, err = os.ReadFile(path)
		}
		return err
	})).To(Succeed())
	splits := map[string]*Split{}
	for _, mode := range []string{"job", "manifests"} {
		objs, err := Render(context.Background(), Options{
			Helm: helm, Chart: filepath.Join("..", "lbfed"), Release: "lbfed", Namespace: "karmada-system",
			Values: map[string]any{"karmada": map[string]any{"apply": mode}},
		})
		g.Expect(err).NotTo(HaveOccurred())
		s, err := SplitLBFed(objs)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Job).To(Equal(mode == "job"))
		splits[mode] = s
	}
	names := func(objs []*unstructured.Unstructured) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
		}
		return out
	}
	job, man := splits["job"], splits["manifests"]
	g.Expect(names(job.Karmada)).To(Equal(names(man.Karmada)))
	g.Expect(job.Karmada[0].GetKind()).To(Equal("CustomResourceDefinition"))
	g.Expect(job.Karmada[len(job.Karmada)-1].GetKind()).To(Equal("ResourceInterpreterWebhookConfiguration"))
	// The host keeps the member certificate only in job mode; the Jobs, their Secret and RBAC
	// and helm test's pods are Helm's.
	g.Expect(Find(job.Host, "Job", "", "lbfed-karmada-apply")).To(BeNil())
	for _, o := range []struct{ kind, name string }{{"Job", "lbfed-karmada-apply"}, {"Job", "lbfed-karmada-delete"}, {"Secret", "lbfed-karmada-manifests"},
		{"Role", "lbfed-karmada-apply"}, {"Pod", "lbfed-test-admission"}, {"ConfigMap", "lbfed-test"}} {
		g.Expect(Find(job.Helm, o.kind, "karmada-system", o.name)).NotTo(BeNil(), o.kind+" "+o.name)
		g.Expect(Find(job.Host, o.kind, "", o.name)).To(BeNil(), o.kind+" "+o.name)
	}
	g.Expect(man.Helm).To(BeEmpty())
	g.Expect(names(job.Unregister)).To(ConsistOf("ResourceInterpreterCustomization//lbfed-lbcf-backendgroup", "ResourceInterpreterCustomization//lbfed-lbcf-loadbalancer"))
	g.Expect(names(job.Host)).To(ContainElement("Secret/karmada-system/lbfed-member-webhook-tls"))
	g.Expect(names(man.Host)).NotTo(ContainElement("Secret/karmada-system/lbfed-member-webhook-tls"))

	d := Find(man.Host, "Deployment", "karmada-system", "lbfed-controller")
	g.Expect(d).NotTo(BeNil())
	args, err := ContainerArgs(d, "lbfed-controller")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(args).To(ContainElement("--interpreter-bind-address=:9443"))
	_, err = ContainerArgs(d, "nope")
	g.Expect(err).To(MatchError(ContainSubstring("no container nope")))
}
