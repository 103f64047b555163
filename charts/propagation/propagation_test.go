//go:build e2e

// Package propagation_test installs the lbfed chart's output on a real Karmada with two member
// clusters (testinfra/localup) the way `helm install` would through its apply Job, and runs the
// binaries as the Deployments describe them: what Karmada propagates from the chart must be a
// working member installation (with the pull Secret its pods name), the member webhooks must
// reach the members and never
// karmada-apiserver, and lbfed-controller must work with only the chart's RBAC in
// karmada-apiserver.
//
// Run with `go test -tags e2e ./charts/propagation/` (`make test-e2e`); helm comes from `make
// helm-lint`, the topology binaries from `make tools`.
package propagation_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

func TestMain(m *testing.M) {
	// No LBCF CRDs up front: the chart brings them to Karmada and, through its propagation
	// policy, to the members: m1 and m2 in Push mode, m3 in Pull mode (its karmada-agent applies
	// them and calls the interpreter for its reports).
	testenv.MainTopology(m, localup.TopologyOptions{PullMembers: 1})
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

func TestChartOnKarmada(t *testing.T) {
	topo := testenv.Topology(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	root := filepath.Join("..", "..")
	bin := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+"/", "./cmd/lbfed-controller", "./cmd/lbcf-controller")
	build.Dir = root
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	// A private registry's pull Secret, created in karmada-apiserver where the chart README says:
	// the member pods name it, and Karmada brings it to every member with them.
	kc := newClient(t, topo.Karmada())
	g.Expect(kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	pull := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regcred"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"dTpw"}}}`)}}
	g.Expect(kc.Create(ctx, pull.DeepCopy())).To(Succeed())

	// The chart's output applied to karmada-apiserver as its apply Job does, and its workloads
	// run as processes with their Deployments' arguments, certificates and service accounts.
	lbfed, err := deploy.InstallLbfed(ctx, topo, deploy.Options{RepoRoot: root, Bin: bin, Set: []string{"global.imagePullSecrets[0].name=regcred"}})
	g.Expect(err).NotTo(HaveOccurred())
	members := topo.Members()

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
		g.Eventually(func(g Gomega) {
			for _, crd := range []string{"backendgroups", "backendrecords", "loadbalancerdrivers", "loadbalancers"} {
				g.Expect(mc.Get(ctx, client.ObjectKey{Name: crd + ".lbcf.tkestack.io"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())
			}
			d := &appsv1.Deployment{}
			g.Expect(mc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lbcf-controller"}, d)).To(Succeed())
			g.Expect(d.Spec.Template.Spec.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: "regcred"}))
			g.Expect(mc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lbcf-controller-webhook-tls"}, &corev1.Secret{})).To(Succeed())
			got := &corev1.Secret{}
			g.Expect(mc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "regcred"}, got)).To(Succeed(), "the pull Secret, propagated")
			g.Expect(got.Data).To(Equal(pull.Data))
			mw := &admissionregistrationv1.MutatingWebhookConfiguration{}
			g.Expect(mc.Get(ctx, client.ObjectKey{Name: "lbfed-lbcf-controller"}, mw)).To(Succeed())
			g.Expect(mw.Webhooks).To(HaveLen(4), "the LBCF kinds' three and the readiness gate's injection")
			vw := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			g.Expect(mc.Get(ctx, client.ObjectKey{Name: "lbfed-lbcf-controller"}, vw)).To(Succeed())
			g.Expect(vw.Webhooks).To(HaveLen(3))
			for _, w := range vw.Webhooks {
				g.Expect(*w.ClientConfig.URL).To(HavePrefix("https://127.0.0.1:"), "the override's per-member URL")
			}
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "member %s", m.Name())
	}

	// A BackendGroup federated to both members: admitted by each member's webhooks, reported by
	// each member controller, summarised on the template through the interpreter.
	g.Expect(kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "chart-e2e"}})).To(Succeed())
	bg := &lbcfv1beta1.BackendGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "chart-e2e", Name: "web"},
		Spec:       lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb"}, Static: []string{"10.0.0.1:80", "10.0.0.2:80"}},
	}
	// lbfed's admission in karmada-apiserver refuses a group whose LoadBalancer does not exist,
	// as LBCF does, unless the group says it may come later.
	g.Expect(kc.Create(ctx, bg.DeepCopy())).To(MatchError(ContainSubstring("LoadBalancer chart-e2e/lb not found")))
	bg.Annotations = map[string]string{lbcfv1beta1.AnnotationValidationPolicy: lbcfv1beta1.ValidationPolicyOptional}
	g.Expect(kc.Create(ctx, bg)).To(Succeed())
	g.Expect(bg.Spec.DeregisterPolicy).NotTo(BeNil(), "the template is defaulted by lbfed's admission before Karmada propagates it")
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
			g.Expect(got.Spec.DeregisterPolicy).NotTo(BeNil(), "defaulted by admission")
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
	var lbfedLog string
	for _, p := range lbfed.Processes {
		if p.Name == "lbfed-controller" {
			lbfedLog = p.LogPath
		}
	}
	g.Eventually(func(g Gomega) {
		data, err := os.ReadFile(lbfedLog)
		g.Expect(err).NotTo(HaveOccurred())
		// drivers, LoadBalancers, BackendGroups, records, the registration reporter and the two
		// front doors (MultiClusterService, Service): their RBAC is the chart's too
		g.Expect(strings.Count(string(data), "Starting workers")).To(Equal(7))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	for _, proc := range topo.Processes() {
		if strings.HasPrefix(proc.Name, "lbfed-controller") || strings.HasPrefix(proc.Name, "lbcf-controller") {
			data, err := os.ReadFile(proc.LogPath)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(data)).NotTo(ContainSubstring("forbidden"), proc.Name)
		}
	}
}
