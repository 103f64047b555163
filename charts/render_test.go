// Package charts tests the Helm charts in this folder: helm lint, helm template with every values
// file under <chart>/ci, and checks of what they render against the code they deploy (webhook
// rules, flags, CRDs, certificates). The integration test in this package also sends every
// rendered object to a real kube-apiserver (server-side dry run, strict field validation).
//
// helm is built by `make helm-lint` from the version pinned in hack/helm/go.mod. Without it the
// tests are skipped, or fail under LBFED_REQUIRE_INTEGRATION=1 (as `make test` runs them).
package charts

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/lbfed/lbfed/charts/manifests"
)

// helmBinary returns the helm to run, skipping (or failing under LBFED_REQUIRE_INTEGRATION=1)
// when it has not been built.
func helmBinary(t testing.TB) string {
	t.Helper()
	path, err := manifests.HelmPath("..")
	if err == nil {
		if _, err = os.Stat(path); err == nil {
			return path
		}
	}
	msg := fmt.Sprintf("helm not built (%v): run `make helm-lint` or set %s", err, manifests.EnvHelm)
	if os.Getenv("LBFED_REQUIRE_INTEGRATION") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// readChartFiles reads every file of both charts once per test process: helm reads them in a
// child process, which go test's result cache does not see, so without this a changed template
// would be answered with a cached result.
var readChartFiles = sync.OnceValue(func() error {
	for _, chart := range []string{lbcfChart, lbfedChart} {
		err := filepath.WalkDir(chart, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			_, err = os.ReadFile(path)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
})

// helm runs helm with args from this folder and returns its standard output.
func helm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	if err := readChartFiles(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helmBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// rendering is one `helm template` of a chart.
type rendering struct {
	chart, release, namespace string
	objects                   []*unstructured.Unstructured
}

// render runs helm template and decodes every document.
func render(t testing.TB, chart, release, namespace string, valuesFile string, set ...string) (*rendering, error) {
	t.Helper()
	if err := readChartFiles(); err != nil {
		t.Fatal(err)
	}
	o := manifests.Options{Helm: helmBinary(t), Chart: chart, Release: release, Namespace: namespace, Set: set}
	if valuesFile != "" {
		o.ValuesFiles = []string{valuesFile}
	}
	objs, err := manifests.Render(context.Background(), o)
	if err != nil {
		return nil, err
	}
	return &rendering{chart: chart, release: release, namespace: namespace, objects: objs}, nil
}

// typed maps every kind the charts render to its Go type, for strict decoding (unknown fields
// are errors). cert-manager's kinds are not in this module and are checked by hand.
var typed = map[schema.GroupVersionKind]func() any{
	corev1.SchemeGroupVersion.WithKind("Namespace"):                                                func() any { return &corev1.Namespace{} },
	corev1.SchemeGroupVersion.WithKind("ServiceAccount"):                                           func() any { return &corev1.ServiceAccount{} },
	corev1.SchemeGroupVersion.WithKind("Secret"):                                                   func() any { return &corev1.Secret{} },
	corev1.SchemeGroupVersion.WithKind("Service"):                                                  func() any { return &corev1.Service{} },
	corev1.SchemeGroupVersion.WithKind("ConfigMap"):                                                func() any { return &corev1.ConfigMap{} },
	corev1.SchemeGroupVersion.WithKind("Pod"):                                                      func() any { return &corev1.Pod{} },
	appsv1.SchemeGroupVersion.WithKind("Deployment"):                                               func() any { return &appsv1.Deployment{} },
	batchv1.SchemeGroupVersion.WithKind("Job"):                                                     func() any { return &batchv1.Job{} },
	policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"):                                    func() any { return &policyv1.PodDisruptionBudget{} },
	networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"):                                      func() any { return &networkingv1.NetworkPolicy{} },
	rbacv1.SchemeGroupVersion.WithKind("ClusterRole"):                                              func() any { return &rbacv1.ClusterRole{} },
	rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"):                                       func() any { return &rbacv1.ClusterRoleBinding{} },
	rbacv1.SchemeGroupVersion.WithKind("Role"):                                                     func() any { return &rbacv1.Role{} },
	rbacv1.SchemeGroupVersion.WithKind("RoleBinding"):                                              func() any { return &rbacv1.RoleBinding{} },
	admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration"):            func() any { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
	admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration"):          func() any { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
	apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"):                        func() any { return &apiextensionsv1.CustomResourceDefinition{} },
	schema.FromAPIVersionAndKind(policyv1alpha1.GroupVersion.String(), "ClusterPropagationPolicy"): func() any { return &policyv1alpha1.ClusterPropagationPolicy{} },
	schema.FromAPIVersionAndKind(policyv1alpha1.GroupVersion.String(), "ClusterOverridePolicy"):    func() any { return &policyv1alpha1.ClusterOverridePolicy{} },
	schema.FromAPIVersionAndKind(configv1alpha1.GroupVersion.String(), "ResourceInterpreterWebhookConfiguration"): func() any {
		return &configv1alpha1.ResourceInterpreterWebhookConfiguration{}
	},
	schema.FromAPIVersionAndKind(configv1alpha1.GroupVersion.String(), "ResourceInterpreterCustomization"): func() any {
		return &configv1alpha1.ResourceInterpreterCustomization{}
	},
}

const certManagerGroup = "cert-manager.io"

// monitoringGroup is the Prometheus Operator's API group (ServiceMonitor, PrometheusRule).
const monitoringGroup = "monitoring.coreos.com"

// as decodes u strictly into a new T.
func as[T any](u *unstructured.Unstructured) (*T, error) {
	js, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := yaml.UnmarshalStrict(js, out); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return out, nil
}

// strictDecode decodes u into its Go type, rejecting unknown fields.
func strictDecode(u *unstructured.Unstructured) (any, error) {
	newObj, ok := typed[u.GroupVersionKind()]
	if !ok {
		return nil, fmt.Errorf("%s %s: kind not known to the chart tests", u.GroupVersionKind(), u.GetName())
	}
	js, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	obj := newObj()
	if err := yaml.UnmarshalStrict(js, obj); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return obj, nil
}

func key(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s/%s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}

// find returns the object of that kind and name (any namespace), or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// withLabel returns the objects whose label k is v.
func withLabel(objs []*unstructured.Unstructured, k, v string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetLabels()[k] == v {
			out = append(out, o)
		}
	}
	return out
}

// namespacedKinds are the kinds the charts render that live in a namespace.
var namespacedKinds = map[string]bool{
	"ServiceAccount": true, "Secret": true, "Service": true, "Deployment": true, "Job": true,
	"PodDisruptionBudget": true, "Role": true, "RoleBinding": true, "Certificate": true, "Issuer": true,
	"ServiceMonitor": true, "PrometheusRule": true, "NetworkPolicy": true, "Pod": true, "ConfigMap": true,
}

// externalRefs lists what a rendering may reference without rendering it: Secrets the user
// provides.
type externalRefs struct {
	secrets []string
}

// checkObjects runs the checks every rendering must pass; it returns every problem found.
func checkObjects(objs []*unstructured.Unstructured, ext externalRefs) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seen := map[string]bool{}
	secrets := map[string]bool{}
	for _, s := range ext.secrets {
		secrets[s] = true
	}
	for _, o := range objs {
		if o.GetAPIVersion() == "" || o.GetKind() == "" || o.GetName() == "" {
			fail("object without apiVersion, kind or name: %v", o.Object)
			continue
		}
		if seen[key(o)] {
			fail("%s rendered twice", key(o))
		}
		seen[key(o)] = true
		if namespacedKinds[o.GetKind()] != (o.GetNamespace() != "") {
			fail("%s: namespace %q does not fit the kind's scope", key(o), o.GetNamespace())
		}
		for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/part-of"} {
			if o.GetLabels()[l] == "" {
				fail("%s: no label %s", key(o), l)
			}
		}
		if o.GroupVersionKind().Group == monitoringGroup {
			if err := checkMonitoring(o, objs); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if o.GroupVersionKind().Group == certManagerGroup {
			if err := checkCertManager(o); err != nil {
				errs = append(errs, err)
			}
			if s, _, _ := unstructured.NestedString(o.Object, "spec", "secretName"); s != "" {
				secrets[s] = true
			}
			continue
		}
		if _, err := strictDecode(o); err != nil {
			errs = append(errs, err)
		}
		if o.GetKind() == "Secret" {
			secrets[o.GetName()] = true
		}
	}

	pods := map[string]corev1.PodTemplateSpec{} // workload key -> pod template
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			d, err := as[appsv1.Deployment](o)
			if err != nil {
				continue
			}
			sel, err := metaSelector(d.Spec.Selector.MatchLabels)
			if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				fail("%s: selector does not select its own pods", key(o))
			}
			pods[key(o)] = d.Spec.Template
		case "Job":
			j, err := as[batchv1.Job](o)
			if err != nil {
				continue
			}
			pods[key(o)] = j.Spec.Template
		case "Pod": // helm test's
			p, err := as[corev1.Pod](o)
			if err != nil {
				continue
			}
			pods[key(o)] = corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec}
		}
	}
	for k, tpl := range pods {
		errs = append(errs, checkPod(k, tpl, secrets)...)
	}
	errs = append(errs, checkSelectors(objs, pods)...)
	errs = append(errs, checkNetworkPolicies(objs, pods)...)
	errs = append(errs, checkRBAC(objs)...)
	return errs
}

func metaSelector(m map[string]string) (labels.Selector, error) {
	if len(m) == 0 {
		return nil, errors.New("empty selector")
	}
	return labels.SelectorFromSet(m), nil
}

// checkPod checks the production defaults and the internal references of a pod template.
func checkPod(owner string, tpl corev1.PodTemplateSpec, secrets map[string]bool) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(owner+": "+format, args...)) }
	spec := tpl.Spec
	if psc := spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		fail("pod does not run as non-root")
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
		if v.Secret != nil && !secrets[v.Secret.SecretName] {
			fail("volume %s: Secret %s is neither rendered nor a documented input", v.Name, v.Secret.SecretName)
		}
	}
	all := append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...)
	for _, c := range all {
		if _, ours := binaries[c.Name]; !ours && c.Name != "" && !isKubectl(c) {
			continue // a user's extra container
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			fail("container %s: needs readOnlyRootFilesystem, no privilege escalation, all capabilities dropped", c.Name)
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			fail("container %s: no memory request and limit", c.Name)
		}
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				fail("container %s: mount of unknown volume %s", c.Name, m.Name)
			}
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
			if p == nil {
				if _, ours := binaries[c.Name]; ours && !oneShot[c.Name] {
					fail("container %s: needs liveness and readiness probes", c.Name)
				}
				continue
			}
			var port string
			switch {
			case p.HTTPGet != nil:
				port = p.HTTPGet.Port.String()
			case p.TCPSocket != nil:
				port = p.TCPSocket.Port.String()
			}
			if !ports[port] {
				fail("container %s: probe on port %q that the container does not name", c.Name, port)
			}
		}
		if bin, ok := binaries[c.Name]; ok {
			for _, err := range checkArgs(bin, c.Args) {
				fail("container %s: %v", c.Name, err)
			}
		}
	}
	return errs
}

func isKubectl(c corev1.Container) bool { return strings.Contains(c.Image, "kubectl") }

// checkSelectors: every Service and PodDisruptionBudget selects the pods of a workload, and a
// Service's target ports are ports those pods name.
func checkSelectors(objs []*unstructured.Unstructured, pods map[string]corev1.PodTemplateSpec) []error {
	var errs []error
	selected := func(ns string, sel map[string]string) []corev1.PodTemplateSpec {
		var out []corev1.PodTemplateSpec
		s, err := metaSelector(sel)
		if err != nil {
			return nil
		}
		for k, tpl := range pods {
			if strings.Split(k, "/")[1] == ns && s.Matches(labels.Set(tpl.Labels)) {
				out = append(out, tpl)
			}
		}
		return out
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Service":
			svc, err := as[corev1.Service](o)
			if err != nil {
				continue
			}
			tpls := selected(svc.Namespace, svc.Spec.Selector)
			if len(tpls) != 1 {
				errs = append(errs, fmt.Errorf("%s selects %d workloads, want 1", key(o), len(tpls)))
				continue
			}
			named := map[string]bool{}
			for _, c := range tpls[0].Spec.Containers {
				for _, p := range c.Ports {
					named[p.Name] = true
				}
			}
			for _, p := range svc.Spec.Ports {
				if !named[p.TargetPort.String()] {
					errs = append(errs, fmt.Errorf("%s: port %s targets %q, not a named port of its pods", key(o), p.Name, p.TargetPort.String()))
				}
			}
		case "PodDisruptionBudget":
			pdb, err := as[policyv1.PodDisruptionBudget](o)
			if err != nil {
				continue
			}
			if n := len(selected(pdb.Namespace, pdb.Spec.Selector.MatchLabels)); n != 1 {
				errs = append(errs, fmt.Errorf("%s selects %d workloads, want 1", key(o), n))
			}
		}
	}
	return errs
}

// selectedWorkloads returns the keys of the workloads in ns whose pods sel selects.
func selectedWorkloads(pods map[string]corev1.PodTemplateSpec, ns string, sel *metav1.LabelSelector) ([]string, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	var out []string
	for k, tpl := range pods {
		if strings.Split(k, "/")[1] == ns && s.Matches(labels.Set(tpl.Labels)) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

// checkNetworkPolicies: a NetworkPolicy selects the pods of exactly one Deployment, with
// non-empty labels, and names only ports those pods name; its peers that select pods of the
// same namespace select workloads that exist. When policies are rendered, every Deployment has
// one (a pod without a policy would be open to all).
func checkNetworkPolicies(objs []*unstructured.Unstructured, pods map[string]corev1.PodTemplateSpec) []error {
	var errs []error
	covered := map[string]bool{}
	policies := ofKind(objs, "NetworkPolicy")
	for _, o := range policies {
		np, err := as[networkingv1.NetworkPolicy](o)
		if err != nil {
			continue
		}
		if len(np.Spec.PodSelector.MatchLabels) == 0 && len(np.Spec.PodSelector.MatchExpressions) == 0 {
			errs = append(errs, fmt.Errorf("%s selects every pod of its namespace", key(o)))
			continue
		}
		sel, err := selectedWorkloads(pods, np.Namespace, &np.Spec.PodSelector)
		if err != nil || len(sel) != 1 {
			errs = append(errs, fmt.Errorf("%s selects workloads %v, want exactly one (%v)", key(o), sel, err))
			continue
		}
		if strings.HasPrefix(sel[0], "Deployment/") {
			covered[sel[0]] = true
		}
		named := map[string]bool{}
		for _, c := range pods[sel[0]].Spec.Containers {
			for _, p := range c.Ports {
				named[p.Name] = true
			}
		}
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				if p.Port == nil || !named[p.Port.String()] {
					errs = append(errs, fmt.Errorf("%s: port %v is not a named port of %s", key(o), p.Port, sel[0]))
				}
			}
			for _, peer := range rule.From {
				if peer.PodSelector == nil || peer.NamespaceSelector != nil || len(peer.PodSelector.MatchLabels) == 0 {
					continue // a namespace-wide, cross-namespace or address peer
				}
				if from, _ := selectedWorkloads(pods, np.Namespace, peer.PodSelector); len(from) == 0 {
					errs = append(errs, fmt.Errorf("%s: peer %v selects no workload", key(o), peer.PodSelector.MatchLabels))
				}
			}
		}
	}
	if len(policies) > 0 {
		for k := range pods {
			if strings.HasPrefix(k, "Deployment/") && !covered[k] {
				errs = append(errs, fmt.Errorf("%s: no NetworkPolicy selects its pods", k))
			}
		}
	}
	return errs
}

// karmadaServiceAccounts exist in every member Karmada joins (karmadactl join creates them): the
// charts may bind them without rendering them.
var karmadaServiceAccounts = map[string]bool{"karmada-cluster/karmada-impersonator": true}

// checkRBAC: bindings refer to rendered roles and ServiceAccounts, Roles sit in the binding's
// namespace.
func checkRBAC(objs []*unstructured.Unstructured) []error {
	var errs []error
	for _, o := range objs {
		var ref rbacv1.RoleRef
		var subjects []rbacv1.Subject
		switch o.GetKind() {
		case "ClusterRoleBinding":
			b, err := as[rbacv1.ClusterRoleBinding](o)
			if err != nil {
				continue
			}
			ref, subjects = b.RoleRef, b.Subjects
		case "RoleBinding":
			b, err := as[rbacv1.RoleBinding](o)
			if err != nil {
				continue
			}
			ref, subjects = b.RoleRef, b.Subjects
		default:
			continue
		}
		role := find(objs, ref.Kind, ref.Name)
		if role == nil || (ref.Kind == "Role" && role.GetNamespace() != o.GetNamespace()) {
			errs = append(errs, fmt.Errorf("%s: role %s %s is not rendered next to it", key(o), ref.Kind, ref.Name))
		}
		for _, s := range subjects {
			if s.Kind != "ServiceAccount" {
				continue
			}
			found := karmadaServiceAccounts[s.Namespace+"/"+s.Name]
			for _, sa := range ofKind(objs, "ServiceAccount") {
				found = found || (sa.GetName() == s.Name && sa.GetNamespace() == s.Namespace)
			}
			if !found {
				errs = append(errs, fmt.Errorf("%s: ServiceAccount %s/%s is not rendered", key(o), s.Namespace, s.Name))
			}
		}
	}
	return errs
}

// checkCertManager checks the few fields of cert-manager objects the charts use.
func checkCertManager(o *unstructured.Unstructured) error {
	switch o.GetKind() {
	case "Certificate":
		for _, f := range [][]string{{"spec", "secretName"}, {"spec", "issuerRef", "name"}, {"spec", "issuerRef", "kind"}} {
			if s, _, _ := unstructured.NestedString(o.Object, f...); s == "" {
				return fmt.Errorf("%s: no %s", key(o), strings.Join(f, "."))
			}
		}
		isCA, _, _ := unstructured.NestedBool(o.Object, "spec", "isCA")
		usages, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "usages")
		clientOnly := len(usages) > 0 && !slices.Contains(usages, "server auth")
		if clientOnly && (!slices.Contains(usages, "client auth") || nestedString(o, "spec", "commonName") == "") {
			return fmt.Errorf("%s: a client certificate needs usage client auth and a commonName (drivers check it)", key(o))
		}
		if dns, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "dnsNames"); len(dns) == 0 && !isCA && !clientOnly {
			return fmt.Errorf("%s: no dnsNames", key(o))
		}
	case "Issuer":
		spec, _, _ := unstructured.NestedMap(o.Object, "spec")
		if len(spec) != 1 {
			return fmt.Errorf("%s: want exactly one issuer type, got %v", key(o), spec)
		}
	default:
		return fmt.Errorf("%s: unexpected cert-manager kind", key(o))
	}
	return nil
}

// nestedString is the string at fields of o ("" when absent).
func nestedString(o *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(o.Object, fields...)
	return s
}

// nestedStrings is the string list at fields of o.
func nestedStrings(o *unstructured.Unstructured, fields ...string) []string {
	s, _, _ := unstructured.NestedStringSlice(o.Object, fields...)
	return s
}

// Certificates --------------------------------------------------------------------------------

// verifyServing checks that crtPEM is signed by caPEM and valid for every host.
func verifyServing(caPEM, crtPEM []byte, hosts ...string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("no CA certificate in PEM")
	}
	block, _ := pem.Decode(crtPEM)
	if block == nil {
		return errors.New("no serving certificate in PEM")
	}
	crt, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if _, err := crt.Verify(x509.VerifyOptions{Roots: pool, DNSName: h, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return fmt.Errorf("certificate for %s: %w", h, err)
		}
	}
	return nil
}

// verifyClient checks that crtPEM is a client certificate signed by caPEM and returns its
// subject common name.
func verifyClient(caPEM, crtPEM []byte) (string, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return "", errors.New("no CA certificate in PEM")
	}
	block, _ := pem.Decode(crtPEM)
	if block == nil {
		return "", errors.New("no client certificate in PEM")
	}
	crt, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", err
	}
	if _, err := crt.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return "", err
	}
	return crt.Subject.CommonName, nil
}

// Flags ----------------------------------------------------------------------------------------

// binaries maps container names to the binary they run (the sections of docs/flags.md).
var binaries = map[string]string{
	"lbcf-controller":  "lbcf-controller",
	"lbfed-controller": "lbfed-controller",
	"elb-driver":       "elb-driver",
	"elb-controller":   "elb-controller",
	"lbfed-probe":      "lbfed-probe",
}

// oneShot are the binaries that run to completion (helm test's): no probes.
var oneShot = map[string]bool{"lbfed-probe": true}

// flagInfo is a flag's type by binary, from docs/flags.md (itself checked against the binaries'
// -help by hack/flagsdoc's test).
var flagInfo = func() map[string]map[string]string {
	data, err := os.ReadFile(filepath.Join("..", "docs", "flags.md"))
	if err != nil {
		panic(err)
	}
	out := map[string]map[string]string{}
	row := regexp.MustCompile("^\\| `--([^`]+)` \\| (\\S+) \\|")
	var section string
	var logging map[string]string
	for _, line := range strings.Split(string(data), "\n") {
		if s, ok := strings.CutPrefix(line, "## "); ok {
			section = s
			out[section] = map[string]string{}
			continue
		}
		if m := row.FindStringSubmatch(line); m != nil && section != "" {
			out[section][m[1]] = m[2]
		}
	}
	logging = out["Logging flags"]
	for bin, flags := range out {
		for f, typ := range logging {
			flags[f] = typ
		}
		out[bin] = flags
	}
	return out
}()

// checkArgs checks that every argument is a flag of bin, in --flag=value form (or --flag for a
// boolean).
func checkArgs(bin string, args []string) []error {
	known := flagInfo[bin]
	if len(known) == 0 {
		return []error{fmt.Errorf("no flags of %s in docs/flags.md", bin)}
	}
	var errs []error
	for _, a := range args {
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		typ, ok := known[name]
		switch {
		case !strings.HasPrefix(a, "--"):
			errs = append(errs, fmt.Errorf("argument %q is not a --flag", a))
		case !ok:
			errs = append(errs, fmt.Errorf("%s has no flag --%s", bin, name))
		case typ != "bool" && !hasValue:
			errs = append(errs, fmt.Errorf("--%s needs =value", name))
		}
	}
	return errs
}

// argValue returns the value of --name in args.
func argValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name {
			return "true", true
		}
	}
	return "", false
}

// valuesFiles lists a chart's ci/*.yaml.
func valuesFiles(t testing.TB, chart string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chart, "ci", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no values files under %s/ci: %v", chart, err)
	}
	sort.Strings(files)
	return files
}

// mustTyped decodes u or fails the test.
func mustTyped[T any](t testing.TB, u *unstructured.Unstructured) *T {
	t.Helper()
	if u == nil {
		t.Fatalf("missing %T", new(T))
	}
	out, err := as[T](u)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
