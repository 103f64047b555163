//go:build e2e

// Package propagation_test installs the lbfed chart's output on a real Karmada with two member
// clusters (e2e/localup) the way `helm install` would through its apply Job, and runs the
// binaries as the Deployments describe them: what Karmada propagates from the chart must be a
// working member installation, the member webhooks must reach the members and never
// karmada-apiserver, and lbfed-controller must work with only the chart's RBAC in
// karmada-apiserver.
//
// Run with `go test -tags e2e ./charts/propagation/` (`make test-e2e`); helm comes from `make
// helm-lint`, the topology binaries from `make tools`.
package propagation_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/charts/manifests"
	"github.com/lbfed/lbfed/e2e/localup"
	"github.com/lbfed/lbfed/e2e/localup/testenv"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

func TestMain(m *testing.M) {
	// No LBCF CRDs up front: the chart brings them to Karmada and, through its propagation
	// policy, to the members.
	testenv.MainTopology(m, localup.TopologyOptions{})
}

const (
	poll = 500 * time.Millisecond
	// Karmada finds new CRDs within ~30 s and members report new APIs on their next status
	// update; the rest is a few seconds. The margin is for a loaded 2-core CI machine.
	timeout = 4 * time.Minute
	ns      = "lbfed-system"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		lbcfv1beta1.AddToScheme, policyv1alpha1.Install, configv1alpha1.Install} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

func newClient(t *testing.T, c *localup.Cluster) client.Client {
	t.Helper()
	cl, err := client.New(c.RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func apply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	u := o.DeepCopy()
	js, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	err = c.Patch(ctx, u, client.RawPatch(types.ApplyPatchType, js), client.ForceOwnership,
		client.FieldOwner("lbfed-chart"), client.FieldValidation("Strict"))
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

// impersonating writes a kubeconfig for c acting as a ServiceAccount.
func impersonating(t *testing.T, c *localup.Cluster, namespace, sa string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	user := cfg.Contexts[cfg.CurrentContext].AuthInfo
	cfg.AuthInfos[user].Impersonate = "system:serviceaccount:" + namespace + ":" + sa
	cfg.AuthInfos[user].ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	path := filepath.Join(t.TempDir(), c.Name()+"-"+sa+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func start(t *testing.T, topo *localup.Topology, name, bin string, args []string) *localup.Process {
	t.Helper()
	p, err := topo.StartProcess(localup.ProcessSpec{Name: name, Path: bin, Args: args, Tier: localup.TierClient})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(p.PID(), syscall.SIGTERM)
		select {
		case <-p.Done():
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(p.PID(), syscall.SIGKILL)
		}
	})
	return p
}

func ports(t *testing.T, n int) []int {
	t.Helper()
	p, err := localup.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestChartOnKarmada(t *testing.T) {
	topo := testenv.Topology(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	helm, err := manifests.HelmPath(filepath.Join("..", ".."))
	g.Expect(err).NotTo(HaveOccurred())
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("helm not built (%v): run `make helm-lint`", err)
	}
	bin := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+"/", "./cmd/lbfed-controller", "./cmd/lbcf-controller")
	build.Dir = filepath.Join("..", "..")
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	members := topo.Members()
	p := ports(t, 3+3*len(members))
	interpreterPort, fedMetrics, fedProbes := p[0], p[1], p[2]
	set := []string{
		"karmada.apply=manifests",
		fmt.Sprintf("controller.interpreter.url=https://127.0.0.1:%d/interpret", interpreterPort),
		"controller.interpreter.extraIPs={127.0.0.1}",
		"member.webhook.extraIPs={127.0.0.1}",
	}
	webhookPort := map[string]int{}
	for i, m := range members {
		webhookPort[m.Name()] = p[3+3*i]
		set = append(set, fmt.Sprintf("member.webhook.clusterURLs.%s=https://127.0.0.1:%d", m.Name(), webhookPort[m.Name()]))
	}
	objs, err := manifests.Render(ctx, manifests.Options{Helm: helm, Chart: filepath.Join("..", "lbfed"), Release: "lbfed", Namespace: "karmada-system", Set: set})
	g.Expect(err).NotTo(HaveOccurred())
	split, err := manifests.SplitLBFed(objs)
	g.Expect(err).NotTo(HaveOccurred())

	// karmada-apiserver, as the apply Job does it: CRDs, wait, objects, the interpreter last.
	kc := newClient(t, topo.Karmada())
	if err := kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "karmada-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var riwc *unstructured.Unstructured
	for _, o := range split.Karmada {
		switch o.GetKind() {
		case "ResourceInterpreterWebhookConfiguration":
			riwc = o
			continue
		case "CustomResourceDefinition":
			g.Expect(apply(ctx, kc, o)).To(Succeed())
			g.Eventually(func(g Gomega) {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				g.Expect(kc.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd)).To(Succeed())
				established := false
				for _, c := range crd.Status.Conditions {
					established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
				}
				g.Expect(established).To(BeTrue())
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			continue
		}
		g.Expect(apply(ctx, kc, o)).To(Succeed())
	}

	// lbfed-controller with the host Deployment's arguments, the interpreter certificate and only
	// the chart's RBAC in karmada-apiserver.
	certDir := filepath.Join(t.TempDir(), "interpreter-tls")
	g.Expect(manifests.WriteSecretFiles(manifests.Find(split.Host, "Secret", "karmada-system", "lbfed-interpreter-tls"), certDir)).To(Succeed())
	args, err := manifests.ContainerArgs(manifests.Find(split.Host, "Deployment", "karmada-system", "lbfed-controller"), "lbfed-controller")
	g.Expect(err).NotTo(HaveOccurred())
	args = manifests.SetFlags(args, map[string]string{
		"kubeconfig":                           impersonating(t, topo.Karmada(), "karmada-system", "lbfed-controller"),
		"interpreter-cert-dir":                 certDir,
		"interpreter-bind-address":             "127.0.0.1:" + strconv.Itoa(interpreterPort),
		"federation-metrics-bind-address":      "127.0.0.1:" + strconv.Itoa(fedMetrics),
		"federation-health-probe-bind-address": "127.0.0.1:" + strconv.Itoa(fedProbes),
	})
	lbfed := start(t, topo, "lbfed-controller", filepath.Join(bin, "lbfed-controller"), args)
	g.Expect(apply(ctx, kc, riwc)).To(Succeed())

	// What every member gets from the propagation policy: the CRDs, the member components and
	// the webhooks (with the override's URL), which karmada-apiserver itself never has.
	for _, kind := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
		g.Expect(kc.Get(ctx, client.ObjectKey{Name: "lbfed-lbcf-controller"}, kind)).To(Succeed())
		switch w := kind.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			g.Expect(w.Webhooks).To(BeEmpty())
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			g.Expect(w.Webhooks).To(BeEmpty())
		}
	}
	for _, m := range members {
		mc := newClient(t, m)
		base := fmt.Sprintf("https://127.0.0.1:%d/", webhookPort[m.Name()])
		g.Eventually(func(g Gomega) {
			for _, crd := range []string{"backendgroups", "backendrecords", "loadbalancerdrivers", "loadbalancers"} {
				g.Expect(mc.Get(ctx, client.ObjectKey{Name: crd + ".lbcf.tkestack.io"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())
			}
			g.Expect(mc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lbcf-controller"}, &appsv1.Deployment{})).To(Succeed())
			g.Expect(mc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lbcf-controller-webhook-tls"}, &corev1.Secret{})).To(Succeed())
			mw := &admissionregistrationv1.MutatingWebhookConfiguration{}
			g.Expect(mc.Get(ctx, client.ObjectKey{Name: "lbfed-lbcf-controller"}, mw)).To(Succeed())
			g.Expect(mw.Webhooks).To(HaveLen(3))
			vw := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			g.Expect(mc.Get(ctx, client.ObjectKey{Name: "lbfed-lbcf-controller"}, vw)).To(Succeed())
			g.Expect(vw.Webhooks).To(HaveLen(3))
			for _, w := range vw.Webhooks {
				g.Expect(*w.ClientConfig.URL).To(HavePrefix(base))
			}
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "member %s", m.Name())
	}

	// lbcf-controller --mode=member in every member, from what Karmada put there.
	for i, m := range members {
		mc := newClient(t, m)
		d := &unstructured.Unstructured{}
		d.SetAPIVersion("apps/v1")
		d.SetKind("Deployment")
		g.Expect(mc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lbcf-controller"}, d)).To(Succeed())
		secret := &unstructured.Unstructured{}
		secret.SetAPIVersion("v1")
		secret.SetKind("Secret")
		g.Expect(mc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lbcf-controller-webhook-tls"}, secret)).To(Succeed())
		dir := filepath.Join(t.TempDir(), m.Name()+"-tls")
		g.Expect(manifests.WriteSecretFiles(secret, dir)).To(Succeed())
		args, err := manifests.ContainerArgs(d, "lbcf-controller")
		g.Expect(err).NotTo(HaveOccurred())
		args = manifests.SetFlags(args, map[string]string{
			"kubeconfig":                impersonating(t, m, ns, "lbcf-controller"),
			"cert-dir":                  dir,
			"webhook-host":              "127.0.0.1",
			"webhook-port":              strconv.Itoa(webhookPort[m.Name()]),
			"metrics-bind-address":      "127.0.0.1:" + strconv.Itoa(p[4+3*i]),
			"health-probe-bind-address": "127.0.0.1:" + strconv.Itoa(p[5+3*i]),
		})
		start(t, topo, "lbcf-controller-"+m.Name(), filepath.Join(bin, "lbcf-controller"), args)
	}

	// A BackendGroup federated to both members: admitted by each member's webhooks, reported by
	// each member controller, summarised on the template through the interpreter.
	g.Expect(kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "chart-e2e"}})).To(Succeed())
	bg := &lbcfv1beta1.BackendGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "chart-e2e", Name: "web"},
		Spec:       lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb"}, Static: []string{"10.0.0.1:80", "10.0.0.2:80"}},
	}
	g.Expect(kc.Create(ctx, bg)).To(Succeed())
	var names []string
	for _, m := range members {
		names = append(names, m.Name())
	}
	pp := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "chart-e2e", Name: "web"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: lbcfv1beta1.APIVersion, Kind: lbcfv1beta1.KindBackendGroup, Name: "web"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: names}},
		},
	}
	g.Expect(kc.Create(ctx, pp)).To(Succeed())
	for _, m := range members {
		mc := newClient(t, m)
		g.Eventually(func(g Gomega) {
			got := &lbcfv1beta1.BackendGroup{}
			g.Expect(mc.Get(ctx, client.ObjectKeyFromObject(bg), got)).To(Succeed())
			g.Expect(got.Spec.DeregisterPolicy).NotTo(BeNil(), "defaulted by the member's mutating webhook")
			g.Expect(got.Status.Backends).To(BeEquivalentTo(2), "reported by the member controller")
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "member %s", m.Name())
	}
	g.Eventually(func(g Gomega) {
		got := &lbcfv1beta1.BackendGroup{}
		g.Expect(kc.Get(ctx, client.ObjectKeyFromObject(bg), got)).To(Succeed())
		g.Expect(got.Status.Clusters).To(HaveLen(len(members)), "AggregateStatus through the interpreter")
		for _, c := range got.Status.Clusters {
			g.Expect(c.Candidates).To(BeEquivalentTo(2), c.Name)
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// The federation controller ran with only the chart's RBAC in karmada-apiserver.
	g.Eventually(func(g Gomega) {
		data, err := os.ReadFile(lbfed.LogPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Count(string(data), "Starting workers")).To(Equal(4))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	for _, proc := range topo.Processes() {
		if strings.HasPrefix(proc.Name, "lbfed-controller") || strings.HasPrefix(proc.Name, "lbcf-controller") {
			data, err := os.ReadFile(proc.LogPath)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(data)).NotTo(ContainSubstring("forbidden"), proc.Name)
		}
	}
}
