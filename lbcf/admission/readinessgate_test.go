package admission_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lbcfadmission "github.com/lbfed/lbfed/lbcf/admission"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/servingcert"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// The readiness gate is injected through a real kube-apiserver into pods of opted-in namespaces
// that a group selects, and of groups that opt in; nowhere else.
func TestReadinessGateInjection(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := testenv.Config(t)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = lbcfv1beta1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	certDir := t.TempDir()
	ca, err := servingcert.Ensure(certDir, []string{"127.0.0.1"}, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	port := testenv.FreePort(t)
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir})
	(&lbcfadmission.ReadinessGateWebhooks{Client: c, Decoder: admission.NewDecoder(scheme)}).Register(srv)
	go func() { _ = srv.Start(ctx) }()
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	m := lbcfadmission.ReadinessGateConfiguration("gate-test", lbcfadmission.URLClientConfig(base, ca), true)
	g.Expect(c.Create(ctx, m)).To(Succeed())
	defer func() { _ = c.Delete(context.Background(), m) }()

	ns := func(name, inject string) {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if inject != "" {
			n.Labels = map[string]string{lbcfv1beta1.LabelReadinessGateInject: inject}
		}
		g.Expect(c.Create(ctx, n)).To(Succeed())
		// No controller-manager here: the ServiceAccount admission plugin wants the account.
		g.Expect(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "default"}})).To(Succeed())
	}
	ns("gate-on", "enabled")
	ns("gate-groups", "")
	ns("gate-off", "disabled")
	group := func(ns, name, app, optIn string) {
		bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: lbcfv1beta1.BackendGroupSpec{
			LoadBalancers: []string{"lb"},
			Pods: &lbcfv1beta1.PodBackend{Port: &lbcfv1beta1.PortSelector{Port: 80},
				ByLabel: &lbcfv1beta1.SelectPodByLabel{Selector: map[string]string{"app": app}}}}}
		if optIn != "" {
			bg.Annotations = map[string]string{lbcfv1beta1.AnnotationReadinessGate: optIn}
		}
		g.Expect(c.Create(ctx, bg)).To(Succeed())
	}
	group("gate-on", "web", "web", "")
	group("gate-on", "quiet", "quiet", "false")
	group("gate-groups", "web", "web", "true")
	group("gate-groups", "plain", "plain", "")
	group("gate-off", "web", "web", "true")

	gated := func(ns, app string, existing ...corev1.PodReadinessGate) []corev1.PodReadinessGate {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: app + "-", Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}, ReadinessGates: existing}}
		g.Expect(c.Create(ctx, p)).To(Succeed())
		return p.Spec.ReadinessGates
	}
	gate := corev1.PodReadinessGate{ConditionType: lbcfv1beta1.PodConditionBackendRegistered}
	other := corev1.PodReadinessGate{ConditionType: "example.com/other"}
	g.Expect(gated("gate-on", "web")).To(ConsistOf(gate), "opted-in namespace, selected pod")
	g.Expect(gated("gate-on", "web", other)).To(ConsistOf(other, gate), "other gates are kept")
	g.Expect(gated("gate-on", "web", gate)).To(ConsistOf(gate), "never twice")
	g.Expect(gated("gate-on", "none")).To(BeEmpty(), "no group selects it")
	g.Expect(gated("gate-on", "quiet")).To(BeEmpty(), "its group opts out")
	g.Expect(gated("gate-groups", "web")).To(ConsistOf(gate), "its group opts in")
	g.Expect(gated("gate-groups", "plain")).To(BeEmpty(), "namespace not opted in, group silent")
	g.Expect(gated("gate-off", "web")).To(BeEmpty(), "namespace opted out")
}
