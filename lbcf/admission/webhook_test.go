package admission_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lbcfadmission "github.com/lbfed/lbfed/lbcf/admission"
	"github.com/lbfed/lbfed/lbcf/api/crd"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
	"github.com/lbfed/lbfed/servingcert"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

func TestMain(m *testing.M) {
	crds, err := crd.CRDs()
	if err != nil {
		panic(err)
	}
	testenv.Main(m, localup.ClusterOptions{Name: "admission", CRDs: crds})
}

// The webhooks behind a real kube-apiserver, with the original's rules and a memdriver for the
// drivers' validate webhooks.
func TestAdmissionThroughTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := testenv.Config(t)
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = lbcfv1beta1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	drv := memdriver.New()
	drvSrv := httptest.NewServer(drv.Handler(driver.HandlerOptions{}))
	defer drvSrv.Close()

	certDir := t.TempDir()
	ca, err := servingcert.Ensure(certDir, []string{"127.0.0.1"}, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	port := testenv.FreePort(t)
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir})
	hooks := &lbcfadmission.Webhooks{Client: c, Invoker: driver.NewClient(driver.ClientOptions{}), Decoder: admission.NewDecoder(scheme)}
	hooks.Register(srv)
	go func() { _ = srv.Start(ctx) }()
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	g.Expect(lbcfadmission.Apply(ctx, c, "lbcf-test", lbcfadmission.URLClientConfig(base, ca))).To(Succeed())
	defer func() {
		m, v := lbcfadmission.Configurations("lbcf-test", lbcfadmission.URLClientConfig(base, ca))
		_ = c.Delete(context.Background(), m)
		_ = c.Delete(context.Background(), v)
	}()

	ns := "adm"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	newDriver := func(ns, name string) *lbcfv1beta1.LoadBalancerDriver {
		return &lbcfv1beta1.LoadBalancerDriver{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: lbcfv1beta1.LoadBalancerDriverSpec{DriverType: "Webhook", URL: drvSrv.URL}}
	}
	// The webhooks may take a moment to be served: retry the first create.
	d := newDriver(ns, "mem")
	g.Eventually(func() error { return c.Create(ctx, d) }, 20*time.Second).Should(Succeed())

	t.Run("driver defaults and rules", func(t *testing.T) {
		g := NewWithT(t)
		got := &lbcfv1beta1.LoadBalancerDriver{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(d), got)).To(Succeed())
		g.Expect(got.Spec.Webhooks).To(HaveLen(len(driver.KnownWebhooks)-1), "every webhook but the opt-in healthz is filled in")
		err := c.Create(ctx, newDriver("kube-system", "no-prefix"))
		g.Expect(err).To(MatchError(ContainSubstring("must be named lbcf-*")))
		got.Spec.URL = "http://elsewhere:80"
		g.Expect(c.Update(ctx, got)).To(MatchError(ContainSubstring("immutable")))
	})

	var lb *lbcfv1beta1.LoadBalancer
	t.Run("load balancer", func(t *testing.T) {
		g := NewWithT(t)
		lb = &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lb1", Labels: map[string]string{lbcfv1beta1.LabelDoNotDelete: ""}},
			Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: "mem", LBSpec: map[string]string{"vip": "1.1.1.1"}}}
		g.Expect(c.Create(ctx, lb)).To(Succeed())
		g.Expect(lb.Finalizers).To(ContainElement(lbcfv1beta1.FinalizerDeleteLB))
		g.Expect(drv.CountCalls(driver.ValidateLoadBalancer)).To(Equal(1))

		denied := &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lb2"},
			Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: "mem", LBSpec: map[string]string{memdriver.DenyKey: "vip 1.1.1.1 is taken"}}}
		g.Expect(c.Create(ctx, denied)).To(MatchError(ContainSubstring("vip 1.1.1.1 is taken")), "the driver's message reaches the user")
		g.Expect(c.Create(ctx, &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lb3"},
			Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: "missing"}})).To(MatchError(ContainSubstring("not found")))

		lb.Spec.LBSpec = map[string]string{"vip": "2.2.2.2"}
		g.Expect(c.Update(ctx, lb)).To(MatchError(ContainSubstring("immutable")))
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(lb), lb)).To(Succeed())
		lb.Spec.Attributes = map[string]string{"k": "v"}
		g.Expect(c.Update(ctx, lb)).To(Succeed())
		last := drv.Calls(driver.ValidateLoadBalancer)
		req := last[len(last)-1].Request.(*driver.ValidateLoadBalancerRequest)
		g.Expect(req.Operation).To(Equal(driver.OperationUpdate))
		g.Expect(req.Attributes).To(Equal(map[string]string{"k": "v"}))
		g.Expect(c.Delete(ctx, lb)).To(MatchError(ContainSubstring(lbcfv1beta1.LabelDoNotDelete)))
	})

	t.Run("backend group", func(t *testing.T) {
		g := NewWithT(t)
		lbName := "lb1"
		pn := int32(8080)
		legacy := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy"},
			Spec: lbcfv1beta1.BackendGroupSpec{LBName: &lbName, Pods: &lbcfv1beta1.PodBackend{Port: &lbcfv1beta1.PortSelector{PortNumber: &pn}, ByName: []string{"p"}},
				Parameters: map[string]string{"weight": "1"}}}
		g.Expect(c.Create(ctx, legacy)).To(Succeed())
		g.Expect(legacy.Spec.LoadBalancers).To(Equal([]string{"lb1"}))
		g.Expect(legacy.Spec.Pods.Ports).To(Equal([]lbcfv1beta1.PortSelector{{Port: 8080, Protocol: "TCP"}}))
		g.Expect(legacy.Labels).To(HaveKeyWithValue(lbcfv1beta1.LabelLBNamePrefix+"lb1", "True"))
		g.Expect(*legacy.Spec.DeregisterPolicy).To(Equal(lbcfv1beta1.DeregisterIfNotReady))
		vb := drv.Calls(driver.ValidateBackend)
		g.Expect(vb).To(HaveLen(1))
		g.Expect(vb[0].Request.(*driver.ValidateBackendRequest).BackendType).To(Equal("Pod"))

		legacy.Spec.Parameters = map[string]string{"weight": "2"}
		g.Expect(c.Update(ctx, legacy)).To(Succeed())
		vb = drv.Calls(driver.ValidateBackend)
		g.Expect(vb[len(vb)-1].Request.(*driver.ValidateBackendRequest).OldParameters).To(Equal(map[string]string{"weight": "1"}))

		missing := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "missing"},
			Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"nope"}, Static: []string{"1.1.1.1:80"}}}
		g.Expect(c.Create(ctx, missing.DeepCopy())).To(MatchError(ContainSubstring("validation-policy")))
		missing.Annotations = map[string]string{lbcfv1beta1.AnnotationValidationPolicy: lbcfv1beta1.ValidationPolicyOptional}
		g.Expect(c.Create(ctx, missing)).To(Succeed())

		refused := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused"},
			Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb1"}, Static: []string{"x"}, Parameters: map[string]string{memdriver.DenyKey: "weight must be a number"}}}
		g.Expect(c.Create(ctx, refused)).To(MatchError(ContainSubstring("weight must be a number")))
		g.Expect(c.Create(ctx, &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
			Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb1"}}})).To(MatchError(ContainSubstring("exactly one of service, pods and static")))
	})

	t.Run("dry-run denies what is valid", func(t *testing.T) {
		g := NewWithT(t)
		hooks.DryRun = true
		defer func() { hooks.DryRun = false }()
		err := c.Create(ctx, &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dry"},
			Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb1"}, Static: []string{"x"}}})
		g.Expect(err).To(MatchError(ContainSubstring(lbcfadmission.DryRunDenial)))
		err = c.Create(ctx, &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dry"},
			Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb1"}}})
		g.Expect(err).To(MatchError(ContainSubstring("exactly one")), "invalid objects still get the real reason")
	})
	t.Run("the original's misspelled path is served", func(t *testing.T) {
		g := NewWithT(t)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		obj, _ := json.Marshal(&lbcfv1beta1.BackendGroup{TypeMeta: metav1.TypeMeta{APIVersion: lbcfv1beta1.APIVersion, Kind: "BackendGroup"},
			ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}, Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb1"}, Static: []string{"a"}}})
		review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "1", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: obj},
				Kind: metav1.GroupVersionKind{Group: lbcfv1beta1.GroupName, Version: "v1beta1", Kind: "BackendGroup"}}}
		body, _ := json.Marshal(review)
		for _, path := range []string{lbcfadmission.PathMutateBackendBroup, lbcfadmission.PathMutateBackendGroup} {
			rsp, err := hc.Post(base+path, "application/json", bytes.NewReader(body))
			g.Expect(err).NotTo(HaveOccurred())
			out := admissionv1.AdmissionReview{}
			g.Expect(json.NewDecoder(rsp.Body).Decode(&out)).To(Succeed())
			rsp.Body.Close()
			g.Expect(out.Response.Allowed).To(BeTrue(), path)
			g.Expect(string(out.Response.Patch)).To(ContainSubstring("deregisterPolicy"), path)
		}
	})

	t.Run("federated: updates that leave the spec alone pass without validation", func(t *testing.T) {
		g := NewWithT(t)
		hooks.Federated = true
		defer func() { hooks.Federated = false }()
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(lb), lb)).To(Succeed())
		before := drv.CountCalls(driver.ValidateLoadBalancer)
		// Karmada's detector labels and annotates its templates; the driver is not asked.
		lb.Labels["propagationpolicy.karmada.io/permanent-id"] = "5f0e"
		lb.Annotations = map[string]string{"propagationpolicy.karmada.io/name": "lbcf"}
		g.Expect(c.Update(ctx, lb)).To(Succeed())
		g.Expect(drv.CountCalls(driver.ValidateLoadBalancer)).To(Equal(before))
		// A spec change is still validated with the driver, which refuses it.
		lb.Spec.Attributes = map[string]string{memdriver.DenyKey: "attribute refused"}
		g.Expect(c.Update(ctx, lb)).To(MatchError(ContainSubstring("attribute refused")))
		g.Expect(drv.CountCalls(driver.ValidateLoadBalancer)).To(Equal(before + 1))
	})

	t.Run("member: no driver call, and Karmada may withdraw its copies", func(t *testing.T) {
		g := NewWithT(t)
		hooks.Member = true
		defer func() { hooks.Member = false }()
		mns := "adm-member"
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mns}})).To(Succeed())
		vlb, vbg := drv.CountCalls(driver.ValidateLoadBalancer), drv.CountCalls(driver.ValidateBackend)
		// Karmada validated the templates with the driver already; a member never asks again.
		g.Expect(c.Create(ctx, &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: mns, Name: "lb1"},
			Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: "mem", LBSpec: map[string]string{memdriver.DenyKey: "would be refused"}}})).To(Succeed())
		copied := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: mns, Name: "copied",
			Labels: map[string]string{lbcfv1beta1.LabelDoNotDelete: "", lbcfadmission.LabelManagedByKarmada: "true"}},
			Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb1"}, Static: []string{"1.1.1.1:80"}, Parameters: map[string]string{memdriver.DenyKey: "would be refused"}}}
		g.Expect(c.Create(ctx, copied)).To(Succeed())
		g.Expect(drv.CountCalls(driver.ValidateLoadBalancer)).To(Equal(vlb))
		g.Expect(drv.CountCalls(driver.ValidateBackend)).To(Equal(vbg))
		// The member's own checks still apply.
		g.Expect(c.Create(ctx, &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: mns, Name: "bad"},
			Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb1"}}})).To(MatchError(ContainSubstring("exactly one of service, pods and static")))
		// do-not-delete is enforced on the template in Karmada; the member's copy must not hold
		// Karmada up when the group leaves this cluster. A group of the member's own keeps it.
		own := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: mns, Name: "own", Labels: map[string]string{lbcfv1beta1.LabelDoNotDelete: ""}},
			Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb1"}, Static: []string{"1.1.1.1:80"}}}
		g.Expect(c.Create(ctx, own)).To(Succeed())
		g.Expect(c.Delete(ctx, own)).To(MatchError(ContainSubstring(lbcfv1beta1.LabelDoNotDelete)))
		g.Expect(c.Delete(ctx, copied)).To(Succeed())
	})

	t.Run("driver deletion", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(c.Delete(ctx, d)).To(MatchError(ContainSubstring(lbcfv1beta1.DriverDrainingLabel)))
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		d.Labels = map[string]string{lbcfv1beta1.DriverDrainingLabel: "true"}
		g.Expect(c.Update(ctx, d)).To(Succeed())
		g.Expect(c.Delete(ctx, d)).To(MatchError(ContainSubstring("used by LoadBalancer adm/lb1")))
		// A draining driver takes no new load balancer.
		g.Expect(c.Create(ctx, &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
			Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: "mem"}})).To(MatchError(ContainSubstring("draining")))
	})

}
