package charts

import (
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/lbfed/lbfed/lbcf/admission"
)

const lbcfChart = "lbcf"

func TestLBCFLint(t *testing.T) {
	for _, f := range valuesFiles(t, lbcfChart) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := helm(t, "lint", "--strict", lbcfChart, "--namespace", "kube-system", "--values", f)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
		})
	}
}

// lbcfRendering is what the lbcf checks need to know about one rendering.
type lbcfRendering struct {
	*rendering
	fullname string
}

func (r lbcfRendering) controller(t testing.TB) *appsv1.Deployment {
	return mustTyped[appsv1.Deployment](t, find(r.objects, "Deployment", r.fullname+"-controller"))
}

func TestLBCFRender(t *testing.T) {
	cases := map[string]struct {
		// Secrets the values name and the user creates.
		external []string
		// certManager: certificates from cert-manager (else self-signed by the chart).
		certManager bool
		// noController: controller.enabled=false.
		noController bool
		check        func(g Gomega, r lbcfRendering)
	}{
		"default-values.yaml": {
			check: func(g Gomega, r lbcfRendering) {
				g.Expect(find(r.objects, "Deployment", r.fullname+"-elb-driver")).To(BeNil())
				g.Expect(find(r.objects, "Deployment", r.fullname+"-elb-controller")).To(BeNil())
				d := r.controller(t)
				g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(2))
				args := d.Spec.Template.Spec.Containers[0].Args
				g.Expect(args).To(ContainElements("--mode=standalone", "--leader-elect=true", "--leader-elect-namespace="+r.namespace))
				_, hasDriverCA := argValue(args, "driver-ca-file")
				g.Expect(hasDriverCA).To(BeFalse(), "without a driver of the chart, drivers are verified with the system roots")
				g.Expect(find(r.objects, "PodDisruptionBudget", r.fullname+"-controller")).NotTo(BeNil())
				g.Expect(find(r.objects, "Service", r.fullname+"-controller-metrics")).NotTo(BeNil())
				// The controller presents the chart's client certificate to drivers (mutual TLS),
				// issued with the webhook CA for client use under its own name.
				g.Expect(args).To(ContainElements("--driver-client-cert=/etc/lbcf/driver-client/tls.crt", "--driver-client-key=/etc/lbcf/driver-client/tls.key"))
				client := mustTyped[corev1.Secret](t, find(r.objects, "Secret", r.fullname+"-driver-client-tls"))
				webhook := mustTyped[corev1.Secret](t, find(r.objects, "Secret", r.fullname+"-webhook-tls"))
				g.Expect(verifyClient(webhook.Data["ca.crt"], client.Data["tls.crt"])).To(Equal(r.fullname + "-controller"))
				g.Expect(ofKind(r.objects, "NetworkPolicy")).To(HaveLen(1), "on by default, for each workload")
				// helm test: admission, as a ServiceAccount that may create BackendGroups here only.
				checkLBCFHelmTests(t, g, r, "admission")
				role := mustTyped[rbacv1.Role](t, find(r.objects, "Role", r.fullname+"-test"))
				g.Expect(role.Rules).To(ConsistOf(rbacv1.PolicyRule{APIGroups: []string{"lbcf.tkestack.io"}, Resources: []string{"backendgroups"}, Verbs: []string{"create"}}))
			},
		},
		"radware-values.yaml": {
			external: []string{"lbcf-driver-client", "alteon-admin", "alteon-ca", "lbfed-driver-client-ca"},
			check: func(g Gomega, r lbcfRendering) {
				d := r.controller(t)
				c := d.Spec.Template.Spec.Containers[0]
				g.Expect(c.Image).To(Equal("registry.example.com/lbfed/lbcf-controller:0.1.0"))
				g.Expect(d.Spec.Template.Spec.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: "regcred"}))
				g.Expect(c.Args).To(ContainElements("--driver-ca-file=/etc/lbcf/tls/ca.crt", "--driver-client-cert=/etc/lbcf/driver-client/tls.crt", "--backendrecord-workers=128", "--v=2"))

				drv := mustTyped[appsv1.Deployment](t, find(r.objects, "Deployment", r.fullname+"-elb-driver"))
				g.Expect(*drv.Spec.Replicas).To(BeEquivalentTo(1))
				g.Expect(drv.Spec.Strategy.Type).To(Equal(appsv1.RecreateDeploymentStrategyType))
				g.Expect(*drv.Spec.Template.Spec.AutomountServiceAccountToken).To(BeFalse())
				g.Expect(drv.Spec.Template.Spec.Containers[0].Args).To(ContainElements(
					"--backend=radware", "--path-prefix=/radware", "--alteon-urls=https://alteon-a.example.com,https://alteon-b.example.com",
					"--alteon-password-file=/etc/alteon/password/password", "--alteon-ca-file=/etc/alteon/ca/ca.crt",
					"--radware-owner=lbfed-prod", "--tls-cert-file=/etc/elb-driver/tls/tls.crt",
					"--radware-drain-period=30s", "--radware-health-check-interval=2", "--radware-health-check-retries=4", "--radware-health-check-restore=2"))
				// lbcf-controller trusts the CA that signed the driver's certificate.
				tls := mustTyped[corev1.Secret](t, find(r.objects, "Secret", r.fullname+"-webhook-tls"))
				dtls := mustTyped[corev1.Secret](t, find(r.objects, "Secret", r.fullname+"-elb-driver-tls"))
				g.Expect(verifyServing(tls.Data["ca.crt"], dtls.Data["tls.crt"], r.fullname+"-elb-driver."+r.namespace+".svc")).To(Succeed())
				svc := mustTyped[corev1.Service](t, find(r.objects, "Service", r.fullname+"-elb-driver"))
				g.Expect(svc.Spec.Ports[0].Port).To(BeEquivalentTo(443))
				// The driver authenticates its callers: the given controller certificate's CA and
				// the federation's, under the given names.
				g.Expect(drv.Spec.Template.Spec.Containers[0].Args).To(ContainElements(
					"--client-ca-file=/etc/elb-driver/controller-client/ca.crt,/etc/elb-driver/client-ca-0/ca.crt",
					"--client-allowed-names=lbfed-controller"))
				g.Expect(drv.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement("--insecure-no-client-auth"))
				// Only the controller's pods and the configured callers reach the driver's port.
				np := mustTyped[networkingv1.NetworkPolicy](t, find(r.objects, "NetworkPolicy", r.fullname+"-elb-driver"))
				g.Expect(np.Spec.Ingress[0].Ports[0].Port.String()).To(Equal("webhook"))
				from := np.Spec.Ingress[0].From
				g.Expect(from).To(HaveLen(2))
				ctrl := r.controller(t)
				sel, err := metav1.LabelSelectorAsSelector(from[0].PodSelector)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(sel.Matches(labels.Set(ctrl.Spec.Template.Labels))).To(BeTrue(), "the controller's pods reach the driver")
				g.Expect(sel.Matches(labels.Set(drv.Spec.Template.Labels))).To(BeFalse())
				ec0 := mustTyped[appsv1.Deployment](t, find(r.objects, "Deployment", r.fullname+"-elb-controller"))
				g.Expect(sel.Matches(labels.Set(ec0.Spec.Template.Labels))).To(BeFalse(), "the elb-controller does not")
				g.Expect(from[1].IPBlock.CIDR).To(Equal("192.0.2.10/32"))
				cnp := mustTyped[networkingv1.NetworkPolicy](t, find(r.objects, "NetworkPolicy", r.fullname+"-controller"))
				g.Expect(cnp.Spec.Ingress[0].From).To(ConsistOf(HaveField("IPBlock.CIDR", "10.0.0.10/32")), "admission from the API server only")
				g.Expect(cnp.Spec.Ingress[1].From[0].NamespaceSelector.MatchLabels).To(HaveKeyWithValue("kubernetes.io/metadata.name", "monitoring"))
				g.Expect(find(r.objects, "Secret", r.fullname+"-driver-client-tls")).To(BeNil(), "the given client certificate is used")

				ec := mustTyped[appsv1.Deployment](t, find(r.objects, "Deployment", r.fullname+"-elb-controller"))
				g.Expect(ec.Spec.Template.Spec.Containers[0].Args).To(ContainElements(
					"--leader-elect=true", "--leader-election-namespace="+r.namespace, "--cluster-name=prod-1",
					"--load-balancer-class=lb.zdns.cn/alteon", "--alteon-password-file=/etc/alteon/password/elb",
					"--alteon-insecure-skip-verify", "--alteon-sync=auto"))
				g.Expect(find(r.objects, "ClusterRole", r.fullname+"-elb-controller")).NotTo(BeNil())
			},
		},
		"bfe-values.yaml": {
			check: func(g Gomega, r lbcfRendering) {
				d := r.controller(t)
				g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--leader-elect=false", "--dry-run"))
				g.Expect(d.Spec.Template.Spec.Affinity).To(BeNil(), "one replica needs no anti-affinity")
				g.Expect(find(r.objects, "Role", r.fullname+"-controller-leader-election")).To(BeNil())
				g.Expect(find(r.objects, "PodDisruptionBudget", r.fullname+"-controller")).To(BeNil())
				drv := mustTyped[appsv1.Deployment](t, find(r.objects, "Deployment", r.fullname+"-elb-driver"))
				spec := drv.Spec.Template.Spec
				g.Expect(spec.Containers).To(HaveLen(2))
				g.Expect(spec.Containers[0].Args).To(ContainElements("--backend=bfe", "--bfe-data-dir=/var/lib/bfe-lbfed"))
				g.Expect(spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--tls-")))
				g.Expect(spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", "bfe-config")))
				g.Expect(find(r.objects, "Secret", r.fullname+"-elb-driver-tls")).To(BeNil())
				svc := mustTyped[corev1.Service](t, find(r.objects, "Service", r.fullname+"-elb-driver"))
				g.Expect(svc.Spec.Ports[0].Port).To(BeEquivalentTo(80))
				_, hasDriverCA := argValue(d.Spec.Template.Spec.Containers[0].Args, "driver-ca-file")
				g.Expect(hasDriverCA).To(BeFalse(), "a plain-HTTP driver needs no CA")
				// Plain HTTP cannot authenticate callers: said explicitly, and the NetworkPolicy
				// keeps the port to the controller.
				g.Expect(spec.Containers[0].Args).To(ContainElement("--insecure-no-client-auth"))
				g.Expect(find(r.objects, "NetworkPolicy", r.fullname+"-elb-driver")).NotTo(BeNil())
			},
		},
		"certmanager-values.yaml": {
			external:    []string{"alteon-admin"},
			certManager: true,
			check: func(g Gomega, r lbcfRendering) {
				issuer := find(r.objects, "Issuer", r.fullname+"-ca")
				g.Expect(issuer).NotTo(BeNil())
				ca := find(r.objects, "Certificate", r.fullname+"-ca")
				g.Expect(ca).NotTo(BeNil())
				g.Expect(ca.Object["spec"]).To(HaveKeyWithValue("isCA", true))
				for _, name := range []string{r.fullname + "-webhook", r.fullname + "-elb-driver"} {
					crt := find(r.objects, "Certificate", name)
					g.Expect(crt).NotTo(BeNil())
					g.Expect(nestedString(crt, "spec", "issuerRef", "name")).To(Equal(r.fullname + "-ca"))
				}
				g.Expect(find(r.objects, "Secret", r.fullname+"-webhook-tls")).To(BeNil(), "cert-manager writes the Secret")
				client := find(r.objects, "Certificate", r.fullname+"-driver-client")
				g.Expect(nestedStrings(client, "spec", "usages")).To(ContainElement("client auth"))
				g.Expect(nestedString(client, "spec", "commonName")).To(Equal(r.fullname + "-controller"))
				drv := mustTyped[appsv1.Deployment](t, find(r.objects, "Deployment", r.fullname+"-elb-driver"))
				g.Expect(drv.Spec.Template.Spec.Containers[0].Args).To(ContainElements(
					"--client-ca-file=/etc/elb-driver/tls/ca.crt", "--client-allowed-names="+r.fullname+"-controller"))
			},
		},
		"driver-only-values.yaml": {
			external: []string{"alteon-admin", "lbfed-driver-client-ca"}, noController: true,
			check: func(g Gomega, r lbcfRendering) {
				for _, kind := range []string{"ClusterRole", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ServiceAccount", "Role"} {
					g.Expect(ofKind(r.objects, kind)).To(BeEmpty(), kind)
				}
				g.Expect(ofKind(r.objects, "Deployment")).To(ConsistOf(HaveField("Object", HaveKeyWithValue("metadata", HaveKeyWithValue("name", r.fullname+"-elb-driver")))))
				g.Expect(find(r.objects, "Secret", r.fullname+"-webhook-tls")).To(BeNil())
				g.Expect(find(r.objects, "Secret", r.fullname+"-driver-client-tls")).To(BeNil())
				// Reached from another cluster: a node port, its certificate valid for the names
				// and addresses callers use, besides the Service's.
				svc := mustTyped[corev1.Service](t, find(r.objects, "Service", r.fullname+"-elb-driver"))
				g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeNodePort))
				g.Expect(svc.Spec.ExternalTrafficPolicy).To(Equal(corev1.ServiceExternalTrafficPolicyLocal))
				g.Expect(svc.Annotations).To(HaveKeyWithValue("example.com/exposed", "true"))
				g.Expect(svc.Spec.Ports).To(ConsistOf(And(HaveField("Port", BeEquivalentTo(443)), HaveField("NodePort", BeEquivalentTo(30443)))),
					"the webhook port only: metrics stay inside the cluster")
				metrics := mustTyped[corev1.Service](t, find(r.objects, "Service", r.fullname+"-elb-driver-metrics"))
				g.Expect(metrics.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
				dtls := mustTyped[corev1.Secret](t, find(r.objects, "Secret", r.fullname+"-elb-driver-tls"))
				g.Expect(verifyServing(dtls.Data["ca.crt"], dtls.Data["tls.crt"], "radware-driver.example.com", "192.0.2.20", r.fullname+"-elb-driver."+r.namespace+".svc")).To(Succeed())
				g.Expect(dtls.Annotations).To(HaveKeyWithValue("lbfed.io/certificate-names", ContainSubstring("radware-driver.example.com,192.0.2.20")))
				// Only lbfed's client CA and name are accepted: there is no chart controller.
				drv := mustTyped[appsv1.Deployment](t, find(r.objects, "Deployment", r.fullname+"-elb-driver"))
				g.Expect(drv.Spec.Template.Spec.Containers[0].Args).To(ContainElements(
					"--client-ca-file=/etc/elb-driver/client-ca-0/ca.crt", "--client-allowed-names=lbfed-controller"))
				np := mustTyped[networkingv1.NetworkPolicy](t, find(r.objects, "NetworkPolicy", r.fullname+"-elb-driver"))
				g.Expect(np.Spec.Ingress[0].From).To(ConsistOf(HaveField("IPBlock.CIDR", "198.51.100.0/24")))
				g.Expect(ofKind(r.objects, "NetworkPolicy")).To(HaveLen(1))
				// helm test: the driver's /healthz, through its metrics Service (the policy lets it in).
				checkLBCFHelmTests(t, g, r, "driver-healthz")
				g.Expect(find(r.objects, "ServiceAccount", r.fullname+"-test")).To(BeNil())
				g.Expect(np.Spec.Ingress[1].From).To(ContainElement(HaveField("PodSelector.MatchLabels", HaveKeyWithValue("app.kubernetes.io/component", "test"))))
			},
		},
		"certmanager-issuer-values.yaml": {
			external:    []string{"corp-driver-ca"},
			certManager: true,
			check: func(g Gomega, r lbcfRendering) {
				g.Expect(ofKind(r.objects, "Issuer")).To(BeEmpty())
				crt := find(r.objects, "Certificate", r.fullname+"-webhook")
				ref, _, _ := unstructured.NestedStringMap(crt.Object, "spec", "issuerRef")
				g.Expect(ref).To(Equal(map[string]string{"kind": "ClusterIssuer", "name": "corp-ca", "group": "cert-manager.io"}))
				g.Expect(r.controller(t).Spec.Template.Spec.Containers[0].Args).To(ContainElement("--driver-ca-file=/etc/lbcf/driver-ca/ca.crt"))
				g.Expect(ofKind(r.objects, "NetworkPolicy")).To(BeEmpty(), "networkPolicy.enabled=false")
			},
		},
	}
	for _, f := range valuesFiles(t, lbcfChart) {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			tc, ok := cases[name]
			if !ok {
				t.Fatalf("no test case for %s: add one", f)
			}
			g := NewWithT(t)
			rr, err := render(t, lbcfChart, "lbcf", "kube-system", f)
			g.Expect(err).NotTo(HaveOccurred())
			r := lbcfRendering{rendering: rr, fullname: "lbcf"}
			g.Expect(checkObjects(r.objects, externalRefs{secrets: tc.external})).To(BeEmpty())
			if !tc.noController {
				checkLBCFWebhooks(t, g, r, tc.certManager)
			}
			tc.check(g, r)
		})
	}
}

// checkLBCFHelmTests: helm test's pods are the named checks, kubectl calls that succeed only when
// the release answers.
func checkLBCFHelmTests(t *testing.T, g Gomega, r lbcfRendering, checks ...string) {
	var got []string
	for _, o := range ofKind(r.objects, "Pod") {
		p := mustTyped[corev1.Pod](t, o)
		g.Expect(p.Annotations).To(HaveKeyWithValue("helm.sh/hook", "test"))
		check := strings.TrimPrefix(p.Name, r.fullname+"-test-")
		got = append(got, check)
		c := p.Spec.Containers[0]
		g.Expect(c.Image).To(Equal("registry.k8s.io/kubectl:v1.35.3"))
		switch check {
		case "admission":
			g.Expect(p.Spec.ServiceAccountName).To(Equal(r.fullname + "-test"))
			g.Expect(c.Args).To(ContainElements("--dry-run=server", "--output=jsonpath={.spec.deregisterPolicy}", "--allow-missing-template-keys=false"))
		case "driver-healthz":
			g.Expect(*p.Spec.AutomountServiceAccountToken).To(BeFalse())
			g.Expect(c.Args).To(Equal([]string{"get", "--raw", "/healthz", "--server=http://" + r.fullname + "-elb-driver-metrics." + r.namespace + ".svc:9090", "--request-timeout=30s"}))
		}
	}
	g.Expect(got).To(ConsistOf(checks))
}

// checkLBCFWebhooks compares the rendered webhook configurations with the ones lbcf-controller's
// code registers, and the certificate wiring behind them.
func checkLBCFWebhooks(t *testing.T, g Gomega, r lbcfRendering, certManager bool) {
	d := r.controller(t)
	var tlsSecret string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "webhook-tls" {
			tlsSecret = v.Secret.SecretName
		}
	}
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--cert-dir=/etc/lbcf/tls"))
	var caPEM []byte
	if !certManager {
		s := mustTyped[corev1.Secret](t, find(r.objects, "Secret", tlsSecret))
		caPEM = s.Data["ca.crt"]
		g.Expect(verifyServing(caPEM, s.Data["tls.crt"], r.fullname+"-controller."+r.namespace+".svc")).To(Succeed())
	}
	wantM, wantV := admission.Configurations(r.fullname, admission.ServiceClientConfig(r.namespace, r.fullname+"-controller", 443, caPEM))
	m := mustTyped[admissionregistrationv1.MutatingWebhookConfiguration](t, find(r.objects, "MutatingWebhookConfiguration", r.fullname))
	v := mustTyped[admissionregistrationv1.ValidatingWebhookConfiguration](t, find(r.objects, "ValidatingWebhookConfiguration", r.fullname))
	g.Expect(m.Webhooks).To(Equal(wantM.Webhooks))
	g.Expect(v.Webhooks).To(Equal(wantV.Webhooks))
	wantGate := admission.ReadinessGateConfiguration(r.fullname+"-readiness-gate", admission.ServiceClientConfig(r.namespace, r.fullname+"-controller", 443, caPEM), false)
	gate := mustTyped[admissionregistrationv1.MutatingWebhookConfiguration](t, find(r.objects, "MutatingWebhookConfiguration", r.fullname+"-readiness-gate"))
	g.Expect(gate.Webhooks).To(Equal(wantGate.Webhooks))
	for _, annotations := range []map[string]string{m.Annotations, v.Annotations, gate.Annotations} {
		if !certManager {
			g.Expect(annotations).NotTo(HaveKey("cert-manager.io/inject-ca-from"))
			continue
		}
		g.Expect(annotations).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", r.namespace+"/"+r.fullname+"-webhook"))
		crt := find(r.objects, "Certificate", r.fullname+"-webhook")
		g.Expect(crt).NotTo(BeNil())
		g.Expect(nestedString(crt, "spec", "secretName")).To(Equal(tlsSecret))
		g.Expect(nestedStrings(crt, "spec", "dnsNames")).To(ContainElement(r.fullname + "-controller." + r.namespace + ".svc"))
	}
}

// TestLBCFRejectsBadValues: values that cannot work fail the rendering with a message saying why.
func TestLBCFRejectsBadValues(t *testing.T) {
	cases := map[string]struct {
		set  []string
		want string
	}{
		"unknown certificate mode":      {[]string{"webhook.certificates.mode=vault"}, "at '/webhook/certificates/mode': value must be one of 'selfSigned', 'certManager'"},
		"two leaders":                   {[]string{"controller.leaderElection.enabled=false"}, "two leaders would call every driver twice"},
		"driver without Alteon":         {[]string{"elbDriver.enabled=true"}, "elbDriver.radware.urls"},
		"three Alteon units":            {[]string{"elbDriver.enabled=true", "elbDriver.radware.urls={a,b,c}", "elbDriver.radware.passwordSecret.name=p"}, "at most two"},
		"driver without password":       {[]string{"elbDriver.enabled=true", "elbDriver.radware.urls={a}"}, "passwordSecret.name is required"},
		"unknown backend":               {[]string{"elbDriver.enabled=true", "elbDriver.backend=f5"}, "at '/elbDriver/backend': value must be one of 'radware', 'bfe'"},
		"relative BFE directory":        {[]string{"elbDriver.enabled=true", "elbDriver.backend=bfe", "elbDriver.bfe.dataDir=bfe"}, "absolute path"},
		"elb-controller without Alteon": {[]string{"elbController.enabled=true"}, "elbController.alteon.urls"},
		"nothing enabled":               {[]string{"controller.enabled=false"}, "nothing would be installed"},
		"driver alone, nobody may call it": {[]string{"controller.enabled=false", "elbDriver.enabled=true", "elbDriver.radware.urls={a}", "elbDriver.radware.passwordSecret.name=p"},
			"elbDriver.clientAuth.extraCASecrets"},
		"node port of a ClusterIP": {[]string{"elbDriver.enabled=true", "elbDriver.radware.urls={a}", "elbDriver.radware.passwordSecret.name=p", "elbDriver.service.nodePort=30443"},
			"needs elbDriver.service.type NodePort or LoadBalancer"},
		"load balancer address of a NodePort": {[]string{"elbDriver.enabled=true", "elbDriver.radware.urls={a}", "elbDriver.radware.passwordSecret.name=p",
			"elbDriver.service.type=NodePort", "elbDriver.service.loadBalancerIP=192.0.2.1"}, "need elbDriver.service.type LoadBalancer"},
		"two writers on one Alteon pair": {[]string{"elbDriver.enabled=true", "elbDriver.radware.urls={https://alteon-a/,https://alteon-b}", "elbDriver.radware.passwordSecret.name=p",
			"elbController.enabled=true", "elbController.alteon.urls={https://alteon-c,https://ALTEON-A}", "elbController.alteon.passwordSecret.name=p"}, "one writer per Alteon pair"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, lbcfChart, "lbcf", "kube-system", "", tc.set...)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}
