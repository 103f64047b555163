package charts

import (
	"context"
	"crypto/x509"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/charts/manifests"
	"github.com/lbfed/lbfed/elb/radware"
	"github.com/lbfed/lbfed/elb/radware/alteon"
	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/elb/radware/alteonsim/simpair"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/servingcert"
)

// radwareDriverServer serves the real Radware driver over a simulated HA pair with the driver
// server kit: HTTPS, accepting only client certificates of clientCAFile named allowed. It returns
// the driver's URL, the CA file that verifies it, and a function stopping it.
func radwareDriverServer(t *testing.T, clientCAFile, allowed string) (url, servingCAFile string, stop func()) {
	t.Helper()
	o := alteonsim.Options{ApplyDuration: time.Millisecond, SaveDuration: time.Millisecond, SyncDuration: time.Millisecond}
	_, pair := simpair.Start(t, o, o, 5*time.Millisecond, alteon.PairOptions{PollInterval: 5 * time.Millisecond})
	fe, err := radware.NewFrontend(radware.FrontendOptions{Pair: pair})
	if err != nil {
		t.Fatal(err)
	}
	drv, err := radware.NewDriver(radware.DriverOptions{Frontend: fe})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca, err := servingcert.NewCA("driver-ca", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteIssued(dir, "radware-driver", []string{"127.0.0.1"}, x509.ExtKeyUsageServerAuth); err != nil {
		t.Fatal(err)
	}
	srv, err := driver.NewServer(driver.NewHandler(drv, driver.HandlerOptions{}), driver.ServerOptions{
		CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
		ClientCAFiles: []string{clientCAFile}, AllowedClientNames: []string{allowed}, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln, time.Second); close(done) }()
	stop = func() { cancel(); <-done }
	stop = sync.OnceFunc(stop)
	t.Cleanup(stop)
	return "https://" + ln.Addr().String(), filepath.Join(dir, "ca.crt"), stop
}

// TestAdmissionOnKarmadaAPIServerFromLBFedChart installs what the lbfed chart puts into
// karmada-apiserver (a kube-apiserver here) and runs lbfed-controller with the chart's arguments,
// certificate and RBAC only: the templates are validated as a standalone LBCF validates them,
// with the real Radware driver's validate webhooks, and Karmada's own writes still pass.
func TestAdmissionOnKarmadaAPIServerFromLBFedChart(t *testing.T) {
	cl, c := cluster(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	port := freePorts(t, 1)[0]
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	objs, err := manifests.Render(ctx, manifests.Options{
		Helm: helmBinary(t), Chart: lbfedChart, Release: lbfedRelease, Namespace: lbfedNamespace,
		Set: []string{
			"karmada.apply=manifests",
			"member.enabled=false",
			"controller.admission.url=" + base,
			"controller.interpreter.extraIPs={127.0.0.1}",
			"controller.admission.exemptUsers={system:karmada:controller-manager}",
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	split, err := manifests.SplitLBFed(objs)
	g.Expect(err).NotTo(HaveOccurred())
	var registrations []*unstructured.Unstructured
	for _, o := range split.Karmada {
		switch o.GetKind() {
		case "CustomResourceDefinition", "ResourceInterpreterWebhookConfiguration":
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			registrations = append(registrations, o)
		default:
			if ns := o.GetNamespace(); ns != "" {
				ensureNamespace(ctx, t, c, ns)
			}
			g.Expect(applyObject(ctx, c, o, false)).To(Succeed())
		}
	}
	g.Expect(registrations).To(HaveLen(2), "the chart registers lbfed's admission in karmada-apiserver")

	certDir := filepath.Join(t.TempDir(), "tls")
	g.Expect(manifests.WriteSecretFiles(manifests.Find(split.Host, "Secret", lbfedNamespace, "lbfed-interpreter-tls"), certDir)).To(Succeed())
	// The driver accepts only the chart's driver client certificate (mutual TLS).
	clientDir := filepath.Join(t.TempDir(), "driver-client")
	g.Expect(manifests.WriteSecretFiles(manifests.Find(split.Host, "Secret", lbfedNamespace, "lbfed-driver-client-tls"), clientDir)).To(Succeed())
	driverURL, driverCA, stopDriver := radwareDriverServer(t, filepath.Join(clientDir, "ca.crt"), "lbfed-controller")
	args, err := manifests.ContainerArgs(manifests.Find(split.Host, "Deployment", lbfedNamespace, "lbfed-controller"), "lbfed-controller")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(args).To(ContainElement("--admission-enabled=true"))
	args = manifests.SetFlags(args, map[string]string{
		"kubeconfig":                   impersonatingKubeconfig(ctx, t, cl, c, split.Karmada, lbfedNamespace, "lbfed-controller"),
		"admission-cert-dir":           certDir,
		"admission-bind-address":       "127.0.0.1:" + strconv.Itoa(port),
		"interpreter-cert-dir":         certDir,
		"interpreter-bind-address":     "127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0]),
		"admission-driver-ca-file":     driverCA,
		"admission-driver-client-cert": filepath.Join(clientDir, "tls.crt"),
		"admission-driver-client-key":  filepath.Join(clientDir, "tls.key"),
		// The federation needs Karmada's own APIs (Clusters, ResourceBindings), not served here.
		"federation-enabled": "false",
	})
	p := runProcess(t, cl, "lbfed-controller", binaryPath(t, "lbfed-controller"), args)
	for _, o := range registrations {
		g.Expect(applyObject(ctx, c, o, false)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) }) // failurePolicy Fail: never leave them behind
	}

	ns := "adm-karmada"
	ensureNamespace(ctx, t, c, ns)
	d := &lbcfv1beta1.LoadBalancerDriver{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "radware"},
		Spec: lbcfv1beta1.LoadBalancerDriverSpec{DriverType: "Webhook", URL: driverURL}}
	// lbfed-controller may take a moment to serve: retry the first create until the mutating
	// webhook filled in the driver's webhooks (proof that lbfed's admission handled it).
	g.Eventually(func(g Gomega) {
		err := c.Create(ctx, d.DeepCopy())
		if err != nil && !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred())
		}
		got := &lbcfv1beta1.LoadBalancerDriver{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(d), got)).To(Succeed())
		g.Expect(got.Spec.Webhooks).NotTo(BeEmpty(), "the mutating webhook fills in the driver's webhooks")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	newLB := func(name string, spec map[string]string, labels map[string]string) *lbcfv1beta1.LoadBalancer {
		return &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: "radware", LBSpec: spec}}
	}
	newBG := func(name, weight string) *lbcfv1beta1.BackendGroup {
		return &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"vip"}, Static: []string{"10.0.0.1:80"}, Parameters: map[string]string{"weight": weight}}}
	}

	t.Run("the driver's validateLoadBalancer refuses with its message", func(t *testing.T) {
		g := NewWithT(t)
		err := c.Create(ctx, newLB("no-vip", map[string]string{"port": "80"}, nil))
		g.Expect(err).To(MatchError(ContainSubstring("driver radware refused")))
		g.Expect(err).To(MatchError(ContainSubstring("vip")))
	})

	lb := newLB("vip", map[string]string{"vip": "10.1.0.10", "port": "80"}, map[string]string{lbcfv1beta1.LabelDoNotDelete: "true"})
	t.Run("a valid LoadBalancer gets the finalizer", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(c.Create(ctx, lb)).To(Succeed())
		g.Expect(lb.Finalizers).To(ContainElement(lbcfv1beta1.FinalizerDeleteLB))
	})

	t.Run("the driver's validateBackend refuses weight 500", func(t *testing.T) {
		g := NewWithT(t)
		err := c.Create(ctx, newBG("heavy", "500"))
		g.Expect(err).To(MatchError(ContainSubstring(`parameter weight "500": must be an integer 1..48`)))
		ok := newBG("web", "10")
		g.Expect(c.Create(ctx, ok)).To(Succeed())
		g.Expect(ok.Spec.DeregisterPolicy).To(HaveValue(Equal(lbcfv1beta1.DeregisterIfNotReady)), "the template is defaulted before Karmada propagates it")
		ok.Spec.Parameters["weight"] = "500"
		g.Expect(c.Update(ctx, ok)).To(MatchError(ContainSubstring("must be an integer 1..48")))
	})

	t.Run("lbSpec of a created LoadBalancer is immutable", func(t *testing.T) {
		g := NewWithT(t)
		edit := lb.DeepCopy()
		edit.Spec.LBSpec["vip"] = "10.1.0.11"
		g.Expect(c.Update(ctx, edit)).To(MatchError(ContainSubstring("spec.lbSpec: Forbidden: immutable")))
	})

	t.Run("ensurePolicy rules", func(t *testing.T) {
		g := NewWithT(t)
		bg := newBG("fast", "10")
		bg.Spec.EnsurePolicy = &lbcfv1beta1.EnsurePolicyConfig{Policy: lbcfv1beta1.PolicyAlways, MinPeriod: &metav1.Duration{Duration: 5 * time.Second}}
		g.Expect(c.Create(ctx, bg)).To(MatchError(ContainSubstring("must be at least 30s")))
		bg.Spec.EnsurePolicy.Policy = "Sometimes"
		g.Expect(c.Create(ctx, bg)).To(MatchError(ContainSubstring(`Unsupported value: "Sometimes"`)))
	})

	t.Run("do-not-delete is honoured", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(c.Delete(ctx, lb)).To(MatchError(ContainSubstring(lbcfv1beta1.LabelDoNotDelete)))
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(lb), &lbcfv1beta1.LoadBalancer{})).To(Succeed())
	})

	t.Run("Karmada's writes pass while the driver is down", func(t *testing.T) {
		g := NewWithT(t)
		stopDriver()
		// Evidence that admission is alive and calls the driver: a spec change is refused.
		bg := &lbcfv1beta1.BackendGroup{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, bg)).To(Succeed())
		bg.Spec.Parameters["weight"] = "11"
		g.Expect(c.Update(ctx, bg)).To(MatchError(ContainSubstring("validateBackend")))

		// The detector's labels and annotations, a finalizer, the status subresource.
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bg), bg)).To(Succeed())
		bg.Labels["propagationpolicy.karmada.io/permanent-id"] = "5f0e"
		bg.Annotations = map[string]string{"propagationpolicy.karmada.io/name": "lbcf"}
		bg.Finalizers = append(bg.Finalizers, "karmada.io/test")
		g.Expect(c.Update(ctx, bg)).To(Succeed())
		bg.Status.Clusters = []lbcfv1beta1.ClusterSummary{{Name: "m1", Candidates: 3, Ready: 3, Health: "Healthy"}}
		g.Expect(c.Status().Update(ctx, bg)).To(Succeed())
		bg.Finalizers = nil
		g.Expect(c.Update(ctx, bg)).To(Succeed())

		// Karmada's controller-manager (an exempt user) may even change the spec, as Retain
		// does when it restores a member's form; everyone else is refused.
		karmada := impersonate(t, cl.RESTConfig(), "system:karmada:controller-manager")
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bg), bg)).To(Succeed())
		bg.Spec.Parameters["weight"] = "12"
		g.Expect(c.Update(ctx, bg)).To(MatchError(ContainSubstring("validateBackend")))
		g.Expect(karmada.Update(ctx, bg)).To(Succeed())
	})
	t.Run("a driver in use cannot be deleted (labelling it draining is metadata: it passes)", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(c.Delete(ctx, d)).To(MatchError(ContainSubstring(lbcfv1beta1.DriverDrainingLabel)))
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := &lbcfv1beta1.LoadBalancerDriver{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
				return err
			}
			got.Labels = map[string]string{lbcfv1beta1.DriverDrainingLabel: "true"}
			return c.Update(ctx, got)
		})).To(Succeed())
		g.Expect(c.Delete(ctx, d)).To(MatchError(ContainSubstring("driver is used by LoadBalancer " + ns + "/vip")))
	})

	g.Expect(p.LogTail(200)).NotTo(ContainSubstring("forbidden"))
}

// impersonate returns an admin client acting as user (in system:masters, as Karmada's components
// usually are).
func impersonate(t *testing.T, cfg *rest.Config, user string) client.Client {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
