package charts

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/lbfed/lbfed/charts/manifests"
	"github.com/lbfed/lbfed/interpreter"
	"github.com/lbfed/lbfed/lbcf/admission"
	"github.com/lbfed/lbfed/lbcf/api/crd"
)

const (
	lbfedChart     = "lbfed"
	lbfedRelease   = "lbfed"
	lbfedNamespace = "karmada-system"
	// targetLabel says which API server an object of the lbfed chart belongs to.
	targetLabel = "lbfed.io/target"
)

func TestLBFedLint(t *testing.T) {
	for _, f := range valuesFiles(t, lbfedChart) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := helm(t, "lint", "--strict", lbfedChart, "--namespace", lbfedNamespace, "--values", f)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
		})
	}
}

// lbfedRendering splits a rendering of the lbfed chart by API server.
type lbfedRendering struct {
	*rendering
	host, karmada []*unstructured.Unstructured
	// jobMode: the karmada-apiserver objects came out of the apply Jobs' Secret.
	jobMode bool
	// unregister: what the apply Job deletes from karmada-apiserver (job mode).
	unregister []*unstructured.Unstructured
}

// splitLBFed separates host-cluster objects from karmada-apiserver ones, unpacking the apply
// Jobs' Secret when there is one.
func splitLBFed(t testing.TB, r *rendering) lbfedRendering {
	t.Helper()
	g := NewWithT(t)
	out := lbfedRendering{rendering: r}
	for _, o := range r.objects {
		switch target := o.GetLabels()[targetLabel]; target {
		case "host-cluster":
			out.host = append(out.host, o)
		case "karmada-apiserver":
			out.karmada = append(out.karmada, o)
		default:
			t.Fatalf("%s: label %s is %q", key(o), targetLabel, target)
		}
	}
	if s := find(out.host, "Secret", lbfedRelease+"-karmada-manifests"); s != nil {
		g.Expect(out.karmada).To(BeEmpty(), "job mode renders no karmada-apiserver documents")
		out.jobMode = true
		secret := mustTyped[corev1.Secret](t, s)
		g.Expect(secret.Data).To(HaveLen(4))
		for _, k := range []string{"crds.yaml", "objects.yaml", "interpreter.yaml", "unregister.yaml"} {
			objs, err := manifests.Decode(secret.Data[k])
			g.Expect(err).NotTo(HaveOccurred(), k)
			for _, o := range objs {
				g.Expect(o.GetLabels()).To(HaveKeyWithValue(targetLabel, "karmada-apiserver"), key(o))
			}
			if k == "unregister.yaml" {
				out.unregister = objs
				continue
			}
			out.karmada = append(out.karmada, objs...)
		}
		// What the Job unregisters is exactly what another rendering would register.
		for _, o := range out.unregister {
			g.Expect(find(out.karmada, o.GetKind(), o.GetName())).To(BeNil(), "%s is registered and unregistered", key(o))
			g.Expect(o.Object).To(HaveLen(3), "%s: apiVersion, kind and metadata only", key(o))
		}
	}
	return out
}

// lbfedExpect describes one values file.
type lbfedExpect struct {
	controller  bool
	member      bool
	memberNS    string
	url         string // interpreter URL
	urlHosts    []string
	clusterURLs map[string]string
	caFromValue bool // the interpreter CA comes from certificates.caBundle
	// noInterpreter: the interpreter is neither served nor registered.
	noInterpreter bool
	// admissionURL: the base URL of lbfed's admission registered in karmada-apiserver ("": none).
	admissionURL string
	external     []string
	check        func(g Gomega, r lbfedRendering)
}

func TestLBFedRender(t *testing.T) {
	svcURL := "https://lbfed-controller.karmada-system.svc:443/interpret"
	cases := map[string]lbfedExpect{
		"default-values.yaml": {
			controller: true, member: true, memberNS: "lbfed-system", url: svcURL,
			urlHosts: []string{"lbfed-controller.karmada-system.svc"},
			external: []string{karmadactlKubeconfig}, admissionURL: admissionSvcURL,
			check: func(g Gomega, r lbfedRendering) {
				g.Expect(r.jobMode).To(BeTrue())
				checkApplyJobs(t, g, r)
				d := mustTyped[appsv1.Deployment](t, find(r.host, "Deployment", "lbfed-controller"))
				g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(2))
				g.Expect(*d.Spec.Template.Spec.AutomountServiceAccountToken).To(BeFalse())
				g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements(
					"--federation-leader-elect=true", "--federation-leader-elect-namespace=karmada-system",
					"--federation-metrics-bind-address=:8080", "--federation-health-probe-bind-address=:8081"))
				metrics := mustTyped[corev1.Service](t, find(r.host, "Service", "lbfed-controller-metrics"))
				g.Expect(metrics.Spec.Ports).To(HaveLen(2))
				// The federation's lease lives in karmada-apiserver, where its RBAC is.
				g.Expect(find(r.karmada, "Role", "lbfed-controller-leader-election").GetNamespace()).To(Equal("karmada-system"))
				// Karmada's namespace sync brings the namespace to the members.
				g.Expect(find(r.karmada, "Namespace", "lbfed-system")).NotTo(BeNil())
				g.Expect(find(r.karmada, "ServiceAccount", "lbfed-controller")).NotTo(BeNil())
				cpp := mustTyped[policyv1alpha1.ClusterPropagationPolicy](t, find(r.karmada, "ClusterPropagationPolicy", "lbfed-lbcf-controller"))
				g.Expect(cpp.Spec.Placement.ClusterAffinity).To(BeNil(), "every member cluster")
				g.Expect(cpp.Spec.ConflictResolution).To(Equal(policyv1alpha1.ConflictAbort))
				// The host keeps a copy of the member certificate so that upgrades reuse it.
				host := mustTyped[corev1.Secret](t, find(r.host, "Secret", "lbfed-member-webhook-tls"))
				member := mustTyped[corev1.Secret](t, find(r.karmada, "Secret", "lbcf-controller-webhook-tls"))
				g.Expect(host.Data).To(Equal(member.Data))
				// Mutual TLS towards drivers: the federation and admission present the chart's client
				// certificate, from a CA of its own (a driver given it accepts lbfed-controller only).
				g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements(
					"--federation-driver-client-cert=/etc/lbfed/driver-client/tls.crt", "--federation-driver-client-key=/etc/lbfed/driver-client/tls.key",
					"--admission-driver-client-cert=/etc/lbfed/driver-client/tls.crt", "--admission-driver-client-key=/etc/lbfed/driver-client/tls.key"))
				client := mustTyped[corev1.Secret](t, find(r.host, "Secret", "lbfed-driver-client-tls"))
				g.Expect(verifyClient(client.Data["ca.crt"], client.Data["tls.crt"])).To(Equal("lbfed-controller"))
				interp := mustTyped[corev1.Secret](t, find(r.host, "Secret", "lbfed-interpreter-tls"))
				g.Expect(client.Data["ca.crt"]).NotTo(Equal(interp.Data["ca.crt"]), "its own CA")
				// NetworkPolicies: lbfed-controller's webhooks from Karmada's pods; the member's
				// policy travels with the member components.
				np := mustTyped[networkingv1.NetworkPolicy](t, find(r.host, "NetworkPolicy", "lbfed-controller"))
				g.Expect(np.Spec.Ingress[1].Ports[0].Port.String()).To(Equal("admission"))
				g.Expect(np.Spec.Ingress[1].From).To(ConsistOf(networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}))
				g.Expect(find(r.karmada, "NetworkPolicy", "lbcf-controller").GetNamespace()).To(Equal("lbfed-system"))
				g.Expect(cpp.Spec.ResourceSelectors).To(ContainElement(HaveField("Kind", "NetworkPolicy")))
				checkHelmTests(t, g, r, "interpreter", "admission")
				// helm test's interpreter check reaches the interpreter's port.
				g.Expect(np.Spec.Ingress[0].From).To(ContainElement(HaveField("PodSelector.MatchLabels", HaveKeyWithValue("app.kubernetes.io/component", "test"))))
			},
		},
		"manifests-values.yaml": {
			controller: true, member: true, memberNS: "lbfed-system", url: "https://127.0.0.1:19443/interpret", admissionURL: "https://127.0.0.1:19446",
			urlHosts:    []string{"127.0.0.1", "localhost", "lbfed-controller.karmada-system.svc"},
			clusterURLs: map[string]string{"m1": "https://127.0.0.1:19444", "m2": "https://127.0.0.1:19445"},
			external:    []string{karmadactlKubeconfig},
			check: func(g Gomega, r lbfedRendering) {
				g.Expect(r.jobMode).To(BeFalse())
				g.Expect(ofKind(r.host, "Job")).To(BeEmpty())
				checkHelmTests(t, g, r) // not a Helm release of the host cluster
				g.Expect(find(r.host, "Secret", "lbfed-member-webhook-tls")).To(BeNil())
				member := mustTyped[corev1.Secret](t, find(r.karmada, "Secret", "lbcf-controller-webhook-tls"))
				g.Expect(verifyServing(member.Data["ca.crt"], member.Data["tls.crt"], "127.0.0.1", "lbcf-controller.lbfed-system.svc")).To(Succeed())
			},
		},
		"certmanager-values.yaml": {
			controller: true, member: true, memberNS: "lbcf-member", url: svcURL, caFromValue: true, admissionURL: admissionSvcURL,
			external: []string{"karmada-kubeconfig", "corp-driver-ca"},
			check: func(g Gomega, r lbfedRendering) {
				crt := find(r.host, "Certificate", "lbfed-interpreter")
				g.Expect(crt).NotTo(BeNil())
				g.Expect(nestedString(crt, "spec", "secretName")).To(Equal("lbfed-interpreter-tls"))
				g.Expect(nestedStrings(crt, "spec", "dnsNames")).To(ContainElement("lbfed-controller.karmada-system.svc"))
				g.Expect(find(r.host, "Secret", "lbfed-interpreter-tls")).To(BeNil(), "cert-manager writes it")
				client := find(r.host, "Certificate", "lbfed-driver-client")
				g.Expect(nestedString(client, "spec", "commonName")).To(Equal("lbfed-controller"))
				g.Expect(nestedStrings(client, "spec", "usages")).To(ContainElement("client auth"))
				g.Expect(nestedString(client, "spec", "issuerRef", "name")).To(Equal(nestedString(crt, "spec", "issuerRef", "name")))
				d := mustTyped[appsv1.Deployment](t, find(r.host, "Deployment", "lbfed-controller"))
				g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--interpreter-max-request-bytes=67108864",
					"--federation-grace-period=30s", "--federation-driver-ca-file=/etc/lbfed/driver-ca/ca.crt", "--federation-dry-run"))
				// The MultiClusterIngress front door, with the RBAC it needs on karmada-apiserver.
				g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--mci-enabled=true", "--mci-ingress-class=lbfed-bfe",
					"--mci-driver=lbcf-bfe", "--mci-bfe-address=bfe.example.test", "--mci-leader-elect-namespace=karmada-system"))
				role := mustTyped[rbacv1.ClusterRole](t, find(r.karmada, "ClusterRole", "lbfed-controller"))
				g.Expect(role.Rules).To(ContainElements(
					rbacv1.PolicyRule{APIGroups: []string{"networking.karmada.io"}, Resources: []string{"multiclusteringresses"}, Verbs: []string{"get", "list", "watch", "patch"}},
					rbacv1.PolicyRule{APIGroups: []string{"networking.karmada.io"}, Resources: []string{"multiclusteringresses/status"}, Verbs: []string{"patch"}},
					rbacv1.PolicyRule{APIGroups: []string{"policy.karmada.io"}, Resources: []string{"propagationpolicies"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}}))
				// The Karmada Helm chart's kubeconfig Secret, named in the values.
				g.Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret", HaveValue(And(
					HaveField("SecretName", "karmada-kubeconfig"), HaveField("Items", ConsistOf(corev1.KeyToPath{Key: "kubeconfig", Path: "kubeconfig"})))))))
				g.Expect(find(r.karmada, "Namespace", "lbcf-member")).To(BeNil())
				crb := find(r.karmada, "ClusterRoleBinding", "lbfed-controller")
				g.Expect(crb.Object["subjects"]).To(ContainElement(HaveKeyWithValue("kind", "User")))
				cpp := mustTyped[policyv1alpha1.ClusterPropagationPolicy](t, find(r.karmada, "ClusterPropagationPolicy", "lbfed-lbcf-controller"))
				g.Expect(cpp.Spec.ConflictResolution).To(Equal(policyv1alpha1.ConflictOverwrite))
				g.Expect(cpp.Spec.Placement.ClusterAffinity.LabelSelector.MatchLabels).To(Equal(map[string]string{"lbfed.io/member": "true"}))
				g.Expect(cpp.Spec.Placement.ClusterTolerations).To(HaveLen(1))
				md := mustTyped[appsv1.Deployment](t, find(r.karmada, "Deployment", "lbcf-controller"))
				g.Expect(md.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--candidates-budget-bytes=819200", "--leader-elect=false"))
			},
		},
		"federation-only-values.yaml": {
			controller: true, member: true, memberNS: "lbfed-system", noInterpreter: true,
			external: []string{karmadactlKubeconfig, "lbfed-driver-client"},
			check: func(g Gomega, r lbfedRendering) {
				g.Expect(ofKind(r.karmada, "ResourceInterpreterWebhookConfiguration")).To(BeEmpty())
				g.Expect(find(r.host, "Service", "lbfed-controller")).To(BeNil())
				g.Expect(find(r.host, "Secret", "lbfed-interpreter-tls")).To(BeNil())
				d := mustTyped[appsv1.Deployment](t, find(r.host, "Deployment", "lbfed-controller"))
				c := d.Spec.Template.Spec.Containers[0]
				g.Expect(c.Args).To(ContainElements("--interpreter-enabled=false", "--federation-driver-client-cert=/etc/lbfed/driver-client/tls.crt"))
				g.Expect(c.Args).NotTo(ContainElement(HavePrefix("--admission-")))
				g.Expect(find(r.host, "Secret", "lbfed-driver-client-tls")).To(BeNil(), "the given client certificate is used")
				g.Expect(c.ReadinessProbe.HTTPGet.Port.String()).To(Equal("probes"))
				g.Expect(ofKind(r.karmada, "ResourceInterpreterCustomization")).To(HaveLen(2), "the Lua customizations instead")
				// They replace lbfed-controller's interpreter: applied last, deleted first, as its
				// registration; then the webhook's and admission's registrations go, should an
				// earlier revision have made them.
				apply := mustTyped[batchv1.Job](t, find(r.host, "Job", "lbfed-karmada-apply"))
				names, _ := jobSteps(apply)
				g.Expect(names).To(Equal([]string{"crds", "crds-established", "objects", "wait-controller", "interpreter", "unregister"}))
				var unregistered []string
				for _, o := range r.unregister {
					unregistered = append(unregistered, o.GetKind()+"/"+o.GetName())
				}
				g.Expect(unregistered).To(ConsistOf("ResourceInterpreterWebhookConfiguration/lbfed-interpreter",
					"MutatingWebhookConfiguration/lbfed-admission", "ValidatingWebhookConfiguration/lbfed-admission"))
				del := mustTyped[batchv1.Job](t, find(r.host, "Job", "lbfed-karmada-delete"))
				g.Expect(del.Spec.Template.Spec.InitContainers[0].Name).To(Equal("interpreter"))
				g.Expect(del.Spec.Template.Spec.Containers[0].Name).To(Equal("objects"))
				checkHelmTests(t, g, r) // nothing that answers here to check: no interpreter webhook, no admission
			},
		},
		"monitoring-values.yaml": {
			controller: true, member: true, memberNS: "lbfed-system", url: svcURL, admissionURL: admissionSvcURL,
			urlHosts: []string{"lbfed-controller.karmada-system.svc"},
			external: []string{karmadactlKubeconfig},
			check: func(g Gomega, r lbfedRendering) {
				sm := find(r.host, "ServiceMonitor", "lbfed-controller")
				g.Expect(sm).NotTo(BeNil())
				g.Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "prometheus"))
				g.Expect(find(r.host, "PrometheusRule", "lbfed-controller")).NotTo(BeNil())
				d := mustTyped[appsv1.Deployment](t, find(r.host, "Deployment", "lbfed-controller"))
				g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements(
					"--federation-member-loss-policy=FailStatic", "--federation-candidates-budget-bytes=1228800"))
			},
		},
		"karmada-only-values.yaml": {
			url: "https://lbfed.example.com:9443/interpret", caFromValue: true, admissionURL: "https://lbfed.example.com:9444",
			check: func(g Gomega, r lbfedRendering) {
				g.Expect(r.host).To(BeEmpty(), "nothing for a host cluster")
				g.Expect(ofKind(r.karmada, "CustomResourceDefinition")).To(HaveLen(4))
				g.Expect(ofKind(r.karmada, "ResourceInterpreterWebhookConfiguration")).To(HaveLen(1))
				g.Expect(r.karmada).To(HaveLen(7), "CRDs, the interpreter and admission registrations only")
			},
		},
	}
	for _, f := range valuesFiles(t, lbfedChart) {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			tc, ok := cases[name]
			if !ok {
				t.Fatalf("no test case for %s: add one", f)
			}
			g := NewWithT(t)
			rr, err := render(t, lbfedChart, lbfedRelease, lbfedNamespace, f)
			g.Expect(err).NotTo(HaveOccurred())
			r := splitLBFed(t, rr)
			g.Expect(checkObjects(r.host, externalRefs{secrets: tc.external})).To(BeEmpty())
			g.Expect(checkObjects(r.karmada, externalRefs{})).To(BeEmpty())
			checkKarmadaCRDs(t, g, r)
			if !tc.noInterpreter {
				checkInterpreter(t, g, r, tc)
			}
			if tc.admissionURL != "" {
				checkAdmission(t, g, r, tc)
			} else {
				g.Expect(find(r.karmada, "ValidatingWebhookConfiguration", "lbfed-admission")).To(BeNil())
			}
			if tc.member {
				checkMember(t, g, r, tc)
			} else {
				g.Expect(withLabel(r.karmada, "app.kubernetes.io/component", "member")).To(BeEmpty())
			}
			tc.check(g, r)
		})
	}
}

// checkKarmadaCRDs: the CRDs for karmada-apiserver are the generated ones, labelled.
func checkKarmadaCRDs(t *testing.T, g Gomega, r lbfedRendering) {
	want, err := crd.CRDs()
	g.Expect(err).NotTo(HaveOccurred())
	got := ofKind(r.karmada, "CustomResourceDefinition")
	g.Expect(got).To(HaveLen(len(want)))
	for _, w := range want {
		c := mustTyped[apiextensionsv1.CustomResourceDefinition](t, find(got, "CustomResourceDefinition", w.Name))
		g.Expect(c.Labels).To(HaveKeyWithValue(targetLabel, "karmada-apiserver"))
		c.Labels = nil
		g.Expect(c.Spec).To(Equal(w.Spec), w.Name)
		g.Expect(c.ObjectMeta).To(Equal(w.ObjectMeta), w.Name)
	}
}

// checkInterpreter compares the ResourceInterpreterWebhookConfiguration with the interpreter's
// own generator and checks that the serving certificate fits it.
func checkInterpreter(t *testing.T, g Gomega, r lbfedRendering, tc lbfedExpect) {
	riwc := mustTyped[configv1alpha1.ResourceInterpreterWebhookConfiguration](t, find(r.karmada, "ResourceInterpreterWebhookConfiguration", "lbfed-interpreter"))
	g.Expect(riwc.Webhooks).To(HaveLen(1))
	caPEM := riwc.Webhooks[0].ClientConfig.CABundle
	want, err := interpreter.WebhookConfiguration(interpreter.WebhookConfigOptions{URL: tc.url, CABundle: caPEM, TimeoutSeconds: *riwc.Webhooks[0].TimeoutSeconds})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(riwc.Webhooks).To(Equal(want.Webhooks))
	if tc.caFromValue {
		g.Expect(string(caPEM)).To(ContainSubstring("MIIBkDCCATWgAwIBAgIUKBJnxjlqinjPjGGyAp2CAT"))
	}
	if !tc.controller {
		return
	}
	d := mustTyped[appsv1.Deployment](t, find(r.host, "Deployment", "lbfed-controller"))
	c := d.Spec.Template.Spec.Containers[0]
	g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "KUBECONFIG", Value: "/etc/lbfed/karmada/kubeconfig"}))
	g.Expect(c.Args).To(ContainElements("--interpreter-bind-address=:9443", "--interpreter-cert-dir=/etc/lbfed/interpreter-tls"))
	g.Expect(c.ReadinessProbe.HTTPGet.Scheme).To(Equal(corev1.URISchemeHTTPS))
	var secretName string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "interpreter-tls" {
			secretName = v.Secret.SecretName
		}
	}
	g.Expect(secretName).To(Equal("lbfed-interpreter-tls"))
	svc := mustTyped[corev1.Service](t, find(r.host, "Service", "lbfed-controller"))
	g.Expect(svc.Spec.Ports).To(ContainElement(HaveField("Port", BeEquivalentTo(443))))
	if !tc.caFromValue {
		s := mustTyped[corev1.Secret](t, find(r.host, "Secret", secretName))
		g.Expect(s.Data["ca.crt"]).To(Equal(caPEM), "the Secret's CA is the one Karmada trusts")
		u, err := url.Parse(tc.url)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(verifyServing(caPEM, s.Data["tls.crt"], append([]string{u.Hostname()}, tc.urlHosts...)...)).To(Succeed())
	}
}

const admissionSvcURL = "https://lbfed-controller.karmada-system.svc:9444"

// checkAdmission compares the admission webhook configurations for karmada-apiserver with
// lbcf/admission's own generator and checks that lbfed-controller serves them with a certificate
// that fits.
func checkAdmission(t *testing.T, g Gomega, r lbfedRendering, tc lbfedExpect) {
	m := mustTyped[admissionregistrationv1.MutatingWebhookConfiguration](t, find(r.karmada, "MutatingWebhookConfiguration", "lbfed-admission"))
	v := mustTyped[admissionregistrationv1.ValidatingWebhookConfiguration](t, find(r.karmada, "ValidatingWebhookConfiguration", "lbfed-admission"))
	g.Expect(v.Webhooks).NotTo(BeEmpty())
	caPEM := v.Webhooks[0].ClientConfig.CABundle
	wantM, wantV := admission.ConfigurationsWith("lbfed-admission", admission.URLClientConfig(tc.admissionURL, caPEM), admission.ConfigOptions{SpecUpdatesOnly: true})
	g.Expect(m.Webhooks).To(Equal(wantM.Webhooks))
	g.Expect(v.Webhooks).To(Equal(wantV.Webhooks))
	for _, w := range v.Webhooks {
		for _, rule := range w.Rules {
			for _, res := range rule.Resources {
				g.Expect(res).NotTo(ContainSubstring("/"), "subresources (Karmada's status writes) are never matched")
			}
		}
	}
	if tc.caFromValue {
		g.Expect(string(caPEM)).To(ContainSubstring("MIIBkDCCATWgAwIBAgIUKBJnxjlqinjPjGGyAp2CAT"))
	}
	if !tc.controller {
		return
	}
	d := mustTyped[appsv1.Deployment](t, find(r.host, "Deployment", "lbfed-controller"))
	c := d.Spec.Template.Spec.Containers[0]
	g.Expect(c.Args).To(ContainElements("--admission-enabled=true", "--admission-bind-address=:9444", "--admission-cert-dir=/etc/lbfed/interpreter-tls"))
	g.Expect(c.Ports).To(ContainElement(HaveField("Name", "admission")))
	svc := mustTyped[corev1.Service](t, find(r.host, "Service", "lbfed-controller"))
	g.Expect(svc.Spec.Ports).To(ContainElement(HaveField("Port", BeEquivalentTo(9444))))
	if !tc.caFromValue {
		s := mustTyped[corev1.Secret](t, find(r.host, "Secret", "lbfed-interpreter-tls"))
		g.Expect(s.Data["ca.crt"]).To(Equal(caPEM), "the Secret's CA is the one karmada-apiserver trusts")
		u, err := url.Parse(tc.admissionURL)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(verifyServing(caPEM, s.Data["tls.crt"], u.Hostname())).To(Succeed())
	}
}

// checkMember checks the member components: the webhooks each member gets (compared with
// lbcf/admission.Configurations), their absence in karmada-apiserver, and a propagation policy
// that selects exactly the member objects.
func checkMember(t *testing.T, g Gomega, r lbfedRendering, tc lbfedExpect) {
	const cluster = "lbfed-lbcf-controller"
	secret := mustTyped[corev1.Secret](t, find(r.karmada, "Secret", "lbcf-controller-webhook-tls"))
	g.Expect(secret.Namespace).To(Equal(tc.memberNS))
	caPEM := secret.Data["ca.crt"]
	g.Expect(verifyServing(caPEM, secret.Data["tls.crt"], "lbcf-controller."+tc.memberNS+".svc")).To(Succeed())

	d := mustTyped[appsv1.Deployment](t, find(r.karmada, "Deployment", "lbcf-controller"))
	g.Expect(d.Namespace).To(Equal(tc.memberNS))
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--mode=member", "--leader-elect-namespace="+tc.memberNS, "--cert-dir=/etc/lbcf/tls"))

	m := mustTyped[admissionregistrationv1.MutatingWebhookConfiguration](t, find(r.karmada, "MutatingWebhookConfiguration", cluster))
	v := mustTyped[admissionregistrationv1.ValidatingWebhookConfiguration](t, find(r.karmada, "ValidatingWebhookConfiguration", cluster))
	g.Expect(m.Webhooks).To(BeEmpty(), "karmada-apiserver must not enforce the member webhooks")
	g.Expect(v.Webhooks).To(BeEmpty(), "karmada-apiserver must not enforce the member webhooks")

	// What each member cluster gets, through the ClusterOverridePolicies.
	var listed []string
	for c := range tc.clusterURLs {
		listed = append(listed, c)
	}
	sort.Strings(listed)
	for _, kind := range []string{"Mutating", "Validating"} {
		cop := mustTyped[policyv1alpha1.ClusterOverridePolicy](t, find(r.karmada, "ClusterOverridePolicy", cluster+"-"+map[string]string{"Mutating": "mutating", "Validating": "validating"}[kind]))
		g.Expect(cop.Spec.ResourceSelectors).To(ConsistOf(policyv1alpha1.ResourceSelector{APIVersion: "admissionregistration.k8s.io/v1", Kind: kind + "WebhookConfiguration", Name: cluster}))
		g.Expect(cop.Spec.OverrideRules).To(HaveLen(len(listed) + 1))
		for _, rule := range cop.Spec.OverrideRules {
			g.Expect(rule.Overriders.Plaintext).To(HaveLen(1))
			p := rule.Overriders.Plaintext[0]
			g.Expect(p.Path).To(Equal("/webhooks"))
			g.Expect(p.Operator).To(Equal(policyv1alpha1.OverriderOpAdd))
			var cc admission.ClientConfig
			switch {
			case rule.TargetCluster != nil && len(rule.TargetCluster.ClusterNames) == 1:
				cc = admission.URLClientConfig(tc.clusterURLs[rule.TargetCluster.ClusterNames[0]], caPEM)
			case len(listed) == 0:
				g.Expect(rule.TargetCluster).To(BeNil())
				cc = admission.ServiceClientConfig(tc.memberNS, "lbcf-controller", 443, caPEM)
			default:
				g.Expect(rule.TargetCluster.ExcludeClusters).To(Equal(listed))
				cc = admission.ServiceClientConfig(tc.memberNS, "lbcf-controller", 443, caPEM)
			}
			wantM, wantV := admission.Configurations(cluster, cc)
			wantM.Webhooks = append(wantM.Webhooks, admission.ReadinessGateConfiguration(cluster, cc, false).Webhooks...)
			if kind == "Mutating" {
				var got []admissionregistrationv1.MutatingWebhook
				g.Expect(json.Unmarshal(p.Value.Raw, &got)).To(Succeed())
				g.Expect(got).To(Equal(wantM.Webhooks))
			} else {
				var got []admissionregistrationv1.ValidatingWebhook
				g.Expect(json.Unmarshal(p.Value.Raw, &got)).To(Succeed())
				g.Expect(got).To(Equal(wantV.Webhooks))
			}
		}
	}

	// The propagation policy selects the CRDs and every member object, nothing else.
	cpp := mustTyped[policyv1alpha1.ClusterPropagationPolicy](t, find(r.karmada, "ClusterPropagationPolicy", cluster))
	var want []policyv1alpha1.ResourceSelector
	for _, o := range r.karmada {
		member := o.GetLabels()["app.kubernetes.io/component"] == "member"
		switch {
		case o.GetKind() == "CustomResourceDefinition",
			member && o.GetKind() != "Namespace" && o.GroupVersionKind().Group != policyv1alpha1.GroupName:
			want = append(want, policyv1alpha1.ResourceSelector{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()})
		}
	}
	g.Expect(cpp.Spec.ResourceSelectors).To(ConsistOf(want))
	g.Expect(cpp.Spec.Placement.ReplicaScheduling.ReplicaSchedulingType).To(Equal(policyv1alpha1.ReplicaSchedulingTypeDuplicated))
}

// checkHelmTests: helm test's pods are the named checks, each one container running lbfed-probe
// (the interpreter) or kubectl against karmada-apiserver with the kubeconfig Secret, printing a
// field only admission sets.
func checkHelmTests(t *testing.T, g Gomega, r lbfedRendering, checks ...string) {
	var got []string
	for _, o := range ofKind(r.host, "Pod") {
		p := mustTyped[corev1.Pod](t, o)
		g.Expect(p.Annotations).To(HaveKeyWithValue("helm.sh/hook", "test"))
		g.Expect(p.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
		g.Expect(*p.Spec.AutomountServiceAccountToken).To(BeFalse(), "the checks need nothing of this cluster")
		check := strings.TrimPrefix(p.Name, "lbfed-test-")
		got = append(got, check)
		c := p.Spec.Containers[0]
		switch check {
		case "interpreter":
			g.Expect(c.Image).To(Equal("ghcr.io/lbfed/lbfed-probe:0.1.0"))
			g.Expect(c.Args).To(Equal([]string{"--interpreter-url=https://lbfed-controller.karmada-system.svc:443/interpret", "--ca-file=/tests/ca.crt", "--timeout=30s"}))
			cm := mustTyped[corev1.ConfigMap](t, find(r.host, "ConfigMap", "lbfed-test"))
			riwc := mustTyped[configv1alpha1.ResourceInterpreterWebhookConfiguration](t, find(r.karmada, "ResourceInterpreterWebhookConfiguration", "lbfed-interpreter"))
			g.Expect(cm.Data["ca.crt"]).To(Equal(strings.TrimSpace(string(riwc.Webhooks[0].ClientConfig.CABundle))+"\n"), "the registered caBundle")
		case "admission":
			g.Expect(c.Image).To(Equal("registry.k8s.io/kubectl:v1.35.3"))
			g.Expect(c.Args).To(ContainElements("--dry-run=server", "--output=jsonpath={.spec.deregisterPolicy}", "--allow-missing-template-keys=false"))
			g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "KUBECONFIG", Value: "/etc/karmada/kubeconfig"}))
		}
	}
	g.Expect(got).To(ConsistOf(checks))
}

// karmadactlKubeconfig is the kubeconfig Secret `karmadactl init` (Karmada v1.18) makes for
// karmada-controller-manager, key karmada.config: the chart's default without a cluster to look in.
const karmadactlKubeconfig = "karmada-controller-manager-config"

// jobSteps lists a Job's containers in the order they run (init containers first).
func jobSteps(j *batchv1.Job) (names []string, containers []corev1.Container) {
	for _, c := range append(append([]corev1.Container(nil), j.Spec.Template.Spec.InitContainers...), j.Spec.Template.Spec.Containers...) {
		names = append(names, c.Name)
		containers = append(containers, c)
	}
	return names, containers
}

// checkApplyJobs: the hook Jobs apply CRDs, wait for them, apply the objects, wait for
// lbfed-controller's rollout and only then register the interpreter and admission; on a rollback
// too. On delete they unregister the interpreter first and keep the CRDs.
func checkApplyJobs(t *testing.T, g Gomega, r lbfedRendering) {
	apply := mustTyped[batchv1.Job](t, find(r.host, "Job", "lbfed-karmada-apply"))
	g.Expect(apply.Annotations).To(HaveKeyWithValue("helm.sh/hook", "post-install,post-upgrade,post-rollback"))
	names, steps := jobSteps(apply)
	g.Expect(names).To(Equal([]string{"crds", "crds-established", "objects", "wait-controller", "interpreter", "unregister"}))
	g.Expect(steps[0].Args).To(ContainElements("apply", "--server-side", "/manifests/crds.yaml"))
	g.Expect(steps[1].Args).To(ContainElements("wait", "--for=condition=Established"))
	g.Expect(steps[3].Args).To(Equal([]string{"rollout", "status", "deployment/lbfed-controller", "--namespace", lbfedNamespace, "--timeout=4m"}))
	g.Expect(steps[4].Args).To(ContainElement("/manifests/interpreter.yaml"))
	g.Expect(steps[5].Args).To(Equal([]string{"delete", "--ignore-not-found", "-f", "/manifests/unregister.yaml"}))
	// The wait talks to this cluster (kubectl's in-cluster configuration from a token mounted
	// into it alone), every other step to karmada-apiserver.
	spec := apply.Spec.Template.Spec
	g.Expect(*spec.AutomountServiceAccountToken).To(BeFalse())
	g.Expect(spec.ServiceAccountName).To(Equal("lbfed-karmada-apply"))
	for _, c := range steps {
		mountsToken := ContainElement(HaveField("MountPath", "/var/run/secrets/kubernetes.io/serviceaccount"))
		if c.Name == "wait-controller" {
			g.Expect(c.VolumeMounts).To(mountsToken)
			g.Expect(c.Env).NotTo(ContainElement(HaveField("Name", "KUBECONFIG")))
			continue
		}
		g.Expect(c.VolumeMounts).NotTo(mountsToken, c.Name)
		g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "KUBECONFIG", Value: "/etc/karmada/kubeconfig"}), c.Name)
	}
	g.Expect(spec.Volumes).To(ContainElement(HaveField("Projected.Sources", ContainElement(HaveField("ServiceAccountToken.Path", "token")))))
	// A failed wait fails the Job at once: retrying would wait for the same pods.
	g.Expect(apply.Spec.PodFailurePolicy).NotTo(BeNil())
	g.Expect(apply.Spec.PodFailurePolicy.Rules).To(ConsistOf(batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{ContainerName: ptr.To("wait-controller"), Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0}}}))
	// Its access to this cluster: watching that one Deployment.
	role := mustTyped[rbacv1.Role](t, find(r.host, "Role", "lbfed-karmada-apply"))
	g.Expect(role.Rules).To(ConsistOf(rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"},
		ResourceNames: []string{"lbfed-controller"}, Verbs: []string{"get", "list", "watch"}}))
	sa := mustTyped[corev1.ServiceAccount](t, find(r.host, "ServiceAccount", "lbfed-karmada-apply"))
	g.Expect(*sa.AutomountServiceAccountToken).To(BeFalse())

	del := mustTyped[batchv1.Job](t, find(r.host, "Job", "lbfed-karmada-delete"))
	g.Expect(del.Annotations).To(HaveKeyWithValue("helm.sh/hook", "pre-delete"))
	names, steps = jobSteps(del)
	g.Expect(names).To(Equal([]string{"interpreter", "objects"}))
	g.Expect(steps[0].Args).To(Equal([]string{"delete", "--ignore-not-found", "-f", "/manifests/interpreter.yaml"}))
	g.Expect(del.Spec.PodFailurePolicy).To(BeNil())
	g.Expect(del.Spec.Template.Spec.ServiceAccountName).To(BeEmpty(), "no access to this cluster")
	for _, j := range []*batchv1.Job{apply, del} {
		if j == del {
			_, steps := jobSteps(j)
			for _, c := range steps {
				g.Expect(c.Args).NotTo(ContainElement("/manifests/crds.yaml"), "uninstalling must not delete the CRDs and every LoadBalancer with them")
			}
		}
		g.Expect(j.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "lbfed-karmada-manifests")))
		g.Expect(j.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret", HaveValue(And(
			HaveField("SecretName", karmadactlKubeconfig), HaveField("Items", ConsistOf(corev1.KeyToPath{Key: "karmada.config", Path: "kubeconfig"})))))))
	}
}

// TestLBFedRejectsBadValues: values that cannot work fail the rendering with a message saying why.
func TestLBFedRejectsBadValues(t *testing.T) {
	cases := map[string]struct {
		set  []string
		want string
	}{
		"unknown apply mode":          {[]string{"karmada.apply=kubectl"}, "at '/karmada/apply': value must be one of 'job', 'manifests'"},
		"cert-manager without CA":     {[]string{"certificates.mode=certManager", "certificates.certManager.issuerRef.name=ca"}, "certificates.caBundle (PEM) is required"},
		"cert-manager without issuer": {[]string{"certificates.mode=certManager", "certificates.caBundle=-----BEGIN CERTIFICATE-----x"}, "issuerRef is required"},
		"existing Secret unnamed":     {[]string{"certificates.mode=existingSecret", "certificates.caBundle=-----BEGIN CERTIFICATE-----x"}, "existingSecret is required"},
		"self-signed, no controller":  {[]string{"controller.enabled=false", "karmada.apply=manifests"}, "selfSigned needs controller.enabled"},
		"job without controller": {[]string{"controller.enabled=false", "certificates.mode=existingSecret", "certificates.existingSecret=s",
			"certificates.caBundle=-----BEGIN CERTIFICATE-----x"}, "karmada.apply=job installs into the host cluster"},
		"timeout above Karmada's limit":   {[]string{"controller.interpreter.timeoutSeconds=31"}, "at '/controller/interpreter/timeoutSeconds': maximum: got 31, want 30"},
		"plain HTTP interpreter":          {[]string{"controller.interpreter.url=http://x/interpret"}, "must be https"},
		"kube- member namespace":          {[]string{"member.namespace=kube-lbfed"}, "does not propagate kube-* and karmada-*"},
		"two member leaders":              {[]string{"member.leaderElection.enabled=false"}, "needs member.replicas=1"},
		"unknown conflict resolution":     {[]string{"member.conflictResolution=Merge"}, "at '/member/conflictResolution': value must be one of 'Abort', 'Overwrite'"},
		"plain HTTP member webhook":       {[]string{"member.webhook.clusterURLs.m1=http://127.0.0.1:1"}, "clusterURLs.m1 must be https"},
		"controller doing nothing":        {[]string{"controller.interpreter.enabled=false", "controller.federation.enabled=false"}, "needs controller.interpreter.enabled or controller.federation.enabled"},
		"two federation leaders":          {[]string{"controller.federation.leaderElection.enabled=false"}, "two federation controllers would call every driver twice"},
		"Lua and the interpreter webhook": {[]string{"luaInterpreter.enabled=true"}, "luaInterpreter.enabled needs controller.interpreter.enabled=false"},
		"plain HTTP admission":            {[]string{"controller.admission.url=http://x:1"}, "controller.admission.url must be https"},
		"admission elsewhere, no URL": {[]string{"controller.enabled=false", "karmada.apply=manifests", "certificates.mode=existingSecret", "certificates.existingSecret=s",
			"certificates.caBundle=-----BEGIN CERTIFICATE-----x"}, "needs controller.admission.url"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, lbfedChart, lbfedRelease, lbfedNamespace, "", tc.set...)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

// TestLBFedJobKubeconfig: the apply Jobs may use another kubeconfig than lbfed-controller and the
// tests (an administrator's, beside lbfed-controller's least-privilege one).
func TestLBFedJobKubeconfig(t *testing.T) {
	g := NewWithT(t)
	rr, err := render(t, lbfedChart, lbfedRelease, lbfedNamespace, "", "karmada.kubeconfigSecret.name=lbfed-karmada",
		"karmada.kubectl.kubeconfigSecret.name=karmada-admin", "karmada.kubectl.kubeconfigSecret.key=config")
	g.Expect(err).NotTo(HaveOccurred())
	r := splitLBFed(t, rr)
	mounts := func(spec corev1.PodSpec) corev1.SecretVolumeSource {
		for _, v := range spec.Volumes {
			if v.Name == "karmada-kubeconfig" {
				return *v.Secret
			}
		}
		return corev1.SecretVolumeSource{}
	}
	controller := corev1.SecretVolumeSource{SecretName: "lbfed-karmada", Items: []corev1.KeyToPath{{Key: "kubeconfig", Path: "kubeconfig"}}}
	admin := corev1.SecretVolumeSource{SecretName: "karmada-admin", Items: []corev1.KeyToPath{{Key: "config", Path: "kubeconfig"}}}
	g.Expect(mounts(mustTyped[appsv1.Deployment](t, find(r.host, "Deployment", "lbfed-controller")).Spec.Template.Spec)).To(Equal(controller))
	g.Expect(mounts(mustTyped[corev1.Pod](t, find(r.host, "Pod", "lbfed-test-admission")).Spec)).To(Equal(controller))
	for _, j := range []string{"lbfed-karmada-apply", "lbfed-karmada-delete"} {
		g.Expect(mounts(mustTyped[batchv1.Job](t, find(r.host, "Job", j)).Spec.Template.Spec)).To(Equal(admin), j)
	}
}

// TestLBFedMemberPullSecrets: the member pods name global.imagePullSecrets, and the propagation
// policy brings those Secrets from karmada-apiserver to the members with the member components;
// the apply Job checks they are there before it goes on.
func TestLBFedMemberPullSecrets(t *testing.T) {
	for _, propagate := range []bool{true, false} {
		t.Run(fmt.Sprintf("propagate=%t", propagate), func(t *testing.T) {
			g := NewWithT(t)
			rr, err := render(t, lbfedChart, lbfedRelease, lbfedNamespace, "", "global.imagePullSecrets[0].name=regcred",
				"global.imagePullSecrets[1].name=mirror", fmt.Sprintf("member.imagePullSecrets.propagate=%t", propagate))
			g.Expect(err).NotTo(HaveOccurred())
			r := splitLBFed(t, rr)
			want := []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}}
			d := mustTyped[appsv1.Deployment](t, find(r.karmada, "Deployment", "lbcf-controller"))
			g.Expect(d.Spec.Template.Spec.ImagePullSecrets).To(Equal(want))
			for _, kind := range []string{"Deployment", "Job"} {
				var spec corev1.PodSpec
				if kind == "Job" {
					spec = mustTyped[batchv1.Job](t, find(r.host, "Job", "lbfed-karmada-apply")).Spec.Template.Spec
				} else {
					spec = mustTyped[appsv1.Deployment](t, find(r.host, "Deployment", "lbfed-controller")).Spec.Template.Spec
				}
				g.Expect(spec.ImagePullSecrets).To(Equal(want), kind)
			}
			cpp := mustTyped[policyv1alpha1.ClusterPropagationPolicy](t, find(r.karmada, "ClusterPropagationPolicy", "lbfed-lbcf-controller"))
			secrets := []policyv1alpha1.ResourceSelector{
				{APIVersion: "v1", Kind: "Secret", Namespace: "lbfed-system", Name: "regcred"},
				{APIVersion: "v1", Kind: "Secret", Namespace: "lbfed-system", Name: "mirror"},
			}
			names, steps := jobSteps(mustTyped[batchv1.Job](t, find(r.host, "Job", "lbfed-karmada-apply")))
			if !propagate {
				g.Expect(cpp.Spec.ResourceSelectors).NotTo(ContainElements(secrets))
				g.Expect(names).NotTo(ContainElement("member-pull-secrets"))
				return
			}
			g.Expect(cpp.Spec.ResourceSelectors).To(ContainElements(secrets))
			g.Expect(names).To(Equal([]string{"crds", "crds-established", "objects", "member-pull-secrets", "wait-controller", "interpreter", "unregister"}))
			g.Expect(steps[3].Args).To(Equal([]string{"get", "secret", "--namespace", "lbfed-system", "--output=name", "regcred", "mirror"}))
		})
	}
}

// TestLBFedLuaInterpreter: with luaInterpreter.enabled the chart registers the Lua
// customizations of package interpreter (byte for byte its embedded file) instead of the webhook.
func TestLBFedLuaInterpreter(t *testing.T) {
	g := NewWithT(t)
	rr, err := render(t, lbfedChart, lbfedRelease, lbfedNamespace, "", "luaInterpreter.enabled=true", "controller.interpreter.enabled=false", "karmada.apply=manifests")
	g.Expect(err).NotTo(HaveOccurred())
	r := splitLBFed(t, rr)
	g.Expect(ofKind(r.karmada, "ResourceInterpreterWebhookConfiguration")).To(BeEmpty(), "one or the other: Lua silently wins")
	want, err := interpreter.Customizations()
	g.Expect(err).NotTo(HaveOccurred())
	got := ofKind(r.karmada, "ResourceInterpreterCustomization")
	g.Expect(got).To(HaveLen(len(want)))
	for _, w := range want {
		ric := mustTyped[configv1alpha1.ResourceInterpreterCustomization](t, find(got, "ResourceInterpreterCustomization", w.Name))
		g.Expect(ric.Labels).To(HaveKeyWithValue(targetLabel, "karmada-apiserver"))
		g.Expect(ric.Spec).To(Equal(w.Spec), w.Name)
	}
	// Admission does not depend on the interpreter: lbfed-controller still serves it.
	d := mustTyped[appsv1.Deployment](t, find(r.host, "Deployment", "lbfed-controller"))
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--interpreter-enabled=false", "--admission-enabled=true"))
	g.Expect(find(r.host, "Secret", "lbfed-interpreter-tls")).NotTo(BeNil())
	g.Expect(find(r.karmada, "ValidatingWebhookConfiguration", "lbfed-admission")).NotTo(BeNil())
}
