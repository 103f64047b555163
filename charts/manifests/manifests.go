// Package manifests renders this repository's Helm charts (charts/lbcf, charts/lbfed) into
// Kubernetes objects with the pinned helm, for installers that do not use Helm releases — `make
// up`, where no kubelet runs pods and the binaries run as local processes — and for the chart
// tests. It also takes apart what such an installer needs: the lbfed chart's objects per API
// server, a Deployment's container arguments, and a certificate Secret as files.
//
// Rendering lbfed for local processes (the values in charts/lbfed/ci/manifests-values.yaml):
//
//	objs, err := manifests.Render(ctx, manifests.Options{
//		Chart: "charts/lbfed", Release: "lbfed", Namespace: "karmada-system",
//		Set: []string{"karmada.apply=manifests",
//			"controller.interpreter.url=https://127.0.0.1:9443/interpret",
//			"controller.interpreter.extraIPs={127.0.0.1}",
//			"member.webhook.clusterURLs.m1=https://127.0.0.1:9444", "member.webhook.extraIPs={127.0.0.1}"},
//	})
//	split, err := manifests.SplitLBFed(objs)
//	// apply split.Karmada (in order) to karmada-apiserver; Karmada propagates the member objects;
//	// run lbfed-controller with ContainerArgs of split.Host's Deployment and WriteSecretFiles of
//	// its certificate Secret; run one lbcf-controller per member likewise.
package manifests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Labels of the lbfed chart saying which API server an object belongs to.
const (
	TargetLabel   = "lbfed.io/target"
	TargetHost    = "host-cluster"
	TargetKarmada = "karmada-apiserver"
)

// EnvHelm overrides the helm binary.
const EnvHelm = "HELM"

// HelmPath returns the helm binary: $HELM, else the one `make helm-lint` builds,
// $LBFED_CACHE/tools/helm-<version pinned in <repoRoot>/hack/helm/go.mod> ($LBFED_CACHE defaults to
// ~/.cache/lbfed). It does not check that the file exists.
func HelmPath(repoRoot string) (string, error) {
	if h := os.Getenv(EnvHelm); h != "" {
		return h, nil
	}
	mod, err := os.ReadFile(filepath.Join(repoRoot, "hack", "helm", "go.mod"))
	if err != nil {
		return "", fmt.Errorf("helm version: %w", err)
	}
	m := regexp.MustCompile(`(?m)^\s*helm\.sh/helm/v\d+ (v\S+)`).FindSubmatch(mod)
	if m == nil {
		return "", errors.New("helm version: no helm.sh/helm requirement in hack/helm/go.mod")
	}
	cache := os.Getenv("LBFED_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("helm path: %w (set %s)", err, EnvHelm)
		}
		cache = filepath.Join(home, ".cache", "lbfed")
	}
	return filepath.Join(cache, "tools", "helm-"+string(m[1])), nil
}

// Options of one `helm template`.
type Options struct {
	// Helm is the helm binary (required).
	Helm string
	// Chart is the chart folder, e.g. <repo>/charts/lbfed.
	Chart string
	// Release and Namespace name the release (Namespace is where namespaced objects go).
	Release, Namespace string
	// ValuesFiles are passed with --values, in order.
	ValuesFiles []string
	// Values, when set, are written to a temporary values file passed after ValuesFiles.
	Values map[string]any
	// Set are --set expressions, applied last.
	Set []string
	// IncludeCRDs renders the chart's crds/ folder too (the lbcf chart's CRDs).
	IncludeCRDs bool
	// Kubeconfig, when set, renders against that cluster (helm --dry-run=server): the charts'
	// lookups see the certificate Secrets already there and reuse them, as `helm upgrade` does.
	Kubeconfig string
}

// Render runs helm template and decodes the documents.
func Render(ctx context.Context, o Options) ([]*unstructured.Unstructured, error) {
	if o.Helm == "" || o.Chart == "" || o.Release == "" || o.Namespace == "" {
		return nil, errors.New("render: Helm, Chart, Release and Namespace are required")
	}
	args := []string{"template", o.Release, o.Chart, "--namespace", o.Namespace}
	if o.IncludeCRDs {
		args = append(args, "--include-crds")
	}
	if o.Kubeconfig != "" {
		args = append(args, "--dry-run=server", "--kubeconfig", o.Kubeconfig)
	}
	for _, f := range o.ValuesFiles {
		args = append(args, "--values", f)
	}
	if o.Values != nil {
		data, err := yaml.Marshal(o.Values)
		if err != nil {
			return nil, fmt.Errorf("render: encode values: %w", err)
		}
		f, err := os.CreateTemp("", "lbfed-values-*.yaml")
		if err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
		defer os.Remove(f.Name())
		if _, err := f.Write(data); err != nil {
			f.Close()
			return nil, fmt.Errorf("render: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("render: %w", err)
		}
		args = append(args, "--values", f.Name())
	}
	for _, s := range o.Set {
		args = append(args, "--set", s)
	}
	cmd := exec.CommandContext(ctx, o.Helm, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return Decode(stdout.Bytes())
}

// Decode splits multi-document YAML into objects, skipping empty documents.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decode: %w", err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("decode: document is not YAML: %w", err)
		}
		if string(js) == "null" {
			continue // comments only
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("decode: document is not a Kubernetes object: %w", err)
		}
		out = append(out, u)
	}
}

// Split is a rendering of the lbfed chart by API server.
type Split struct {
	// Host goes to Karmada's host cluster (without what Helm alone uses, in Helm).
	Host []*unstructured.Unstructured
	// Helm is what only a Helm release uses (job mode): the hooks — the apply Jobs, helm
	// test's pods — and the apply Jobs' Secret and RBAC.
	Helm []*unstructured.Unstructured
	// Unregister is what the apply Job deletes from karmada-apiserver (job mode): the
	// registrations of other values (kind and name only).
	Unregister []*unstructured.Unstructured
	// Karmada goes to karmada-apiserver, in apply order: CRDs first (wait until they are
	// Established), then by kind as Helm installs, the ResourceInterpreterWebhookConfiguration
	// last. Delete in reverse order, leaving the CRDs.
	Karmada []*unstructured.Unstructured
	// Job reports that the karmada-apiserver objects came out of the apply Jobs' Secret
	// (karmada.apply=job) rather than plain documents (karmada.apply=manifests).
	Job bool
}

// SplitLBFed separates the lbfed chart's objects by their TargetLabel. In job mode the objects
// for karmada-apiserver are unpacked from the Secret of the apply Jobs, and what Helm alone uses
// (hooks, the Jobs' Secret and RBAC) goes to Helm instead of Host.
func SplitLBFed(objs []*unstructured.Unstructured) (*Split, error) {
	s := &Split{}
	var secret *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetLabels()[TargetLabel] {
		case TargetHost:
			_, hook := o.GetAnnotations()["helm.sh/hook"]
			if hook || o.GetLabels()["app.kubernetes.io/component"] == "karmada-apply" {
				if o.GetKind() == "Secret" && !hook {
					secret = o
				}
				s.Helm = append(s.Helm, o)
				continue
			}
			s.Host = append(s.Host, o)
		case TargetKarmada:
			s.Karmada = append(s.Karmada, o)
		default:
			return nil, fmt.Errorf("split: %s %s has no %s label", o.GetKind(), o.GetName(), TargetLabel)
		}
	}
	if secret != nil {
		if len(s.Karmada) > 0 {
			return nil, errors.New("split: both an apply Secret and karmada-apiserver documents")
		}
		s.Job = true
		data, err := secretData(secret)
		if err != nil {
			return nil, err
		}
		for _, k := range []string{"crds.yaml", "objects.yaml", "interpreter.yaml", "unregister.yaml"} {
			part, err := Decode(data[k])
			if err != nil {
				return nil, fmt.Errorf("split: %s: %w", k, err)
			}
			if k == "unregister.yaml" {
				s.Unregister = part
				continue
			}
			s.Karmada = append(s.Karmada, part...)
		}
	}
	rank := func(o *unstructured.Unstructured) int {
		for i, k := range applyOrder {
			if k == o.GetKind() {
				return i
			}
		}
		return len(applyOrder) - 1 // before the interpreter registration, which is last
	}
	sort.SliceStable(s.Karmada, func(i, j int) bool { return rank(s.Karmada[i]) < rank(s.Karmada[j]) })
	return s, nil
}

// applyOrder orders the objects for karmada-apiserver: CRDs first, dependencies before their
// users, the policies after what they select, the interpreter registration last.
var applyOrder = []string{
	"CustomResourceDefinition", "Namespace", "ServiceAccount", "Secret", "ClusterRole", "ClusterRoleBinding",
	"Role", "RoleBinding", "Service", "Deployment", "PodDisruptionBudget", "MutatingWebhookConfiguration",
	"ValidatingWebhookConfiguration", "ClusterOverridePolicy", "ClusterPropagationPolicy",
	"ResourceInterpreterWebhookConfiguration",
}

// Find returns the object of that kind, namespace ("" for any) and name, or nil.
func Find(objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name && (namespace == "" || o.GetNamespace() == namespace) {
			return o
		}
	}
	return nil
}

// ContainerArgs returns the arguments of a container of a workload's pod template (Deployment,
// Job…).
func ContainerArgs(workload *unstructured.Unstructured, container string) ([]string, error) {
	containers, _, err := unstructured.NestedSlice(workload.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", workload.GetKind(), workload.GetName(), err)
	}
	for _, c := range containers {
		cm, _ := c.(map[string]any)
		if cm["name"] != container {
			continue
		}
		args, _, err := unstructured.NestedStringSlice(cm, "args")
		if err != nil {
			return nil, fmt.Errorf("%s %s: container %s: %w", workload.GetKind(), workload.GetName(), container, err)
		}
		return args, nil
	}
	return nil, fmt.Errorf("%s %s has no container %s", workload.GetKind(), workload.GetName(), container)
}

// SetFlags returns args with each --name=value of flags replacing the argument of that name,
// or appended (in sorted order) when args has none. An empty value drops the flag.
func SetFlags(args []string, flags map[string]string) []string {
	done := map[string]bool{}
	var out []string
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		v, ok := flags[name]
		switch {
		case !strings.HasPrefix(a, "--") || !ok:
			out = append(out, a)
		case !done[name]:
			done[name] = true
			if v != "" {
				out = append(out, "--"+name+"="+v)
			}
		}
	}
	names := make([]string, 0, len(flags))
	for n := range flags {
		if !done[n] && flags[n] != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, "--"+n+"="+flags[n])
	}
	return out
}

// WriteSecretFiles writes every key of a Secret as a file in dir (created 0700, files 0600), as
// a Secret volume would show it: e.g. ca.crt, tls.crt and tls.key for --cert-dir.
func WriteSecretFiles(secret *unstructured.Unstructured, dir string) error {
	data, err := secretData(secret)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write secret %s: %w", secret.GetName(), err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			return fmt.Errorf("write secret %s: %w", secret.GetName(), err)
		}
	}
	return nil
}

// secretData decodes a Secret's data and stringData.
func secretData(u *unstructured.Unstructured) (map[string][]byte, error) {
	if u.GetKind() != "Secret" {
		return nil, fmt.Errorf("%s %s is not a Secret", u.GetKind(), u.GetName())
	}
	s := &corev1.Secret{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err != nil {
		return nil, fmt.Errorf("secret %s: %w", u.GetName(), err)
	}
	data := map[string][]byte{}
	for k, v := range s.Data {
		data[k] = v
	}
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	return data, nil
}
