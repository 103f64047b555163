package charts

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/charts/manifests"
	"github.com/lbfed/lbfed/lbcf/api/crd"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// The integration tests share one kube-apiserver (started by the first of them) with the LBCF
// CRDs installed, plus the Karmada CRDs the lbfed chart's policies need.
func TestMain(m *testing.M) {
	crds, err := crd.CRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lbfed CRDs:", err)
		os.Exit(1)
	}
	testenv.Main(m, localup.ClusterOptions{Name: "charts", CRDs: crds})
}

const (
	poll    = 200 * time.Millisecond
	timeout = 90 * time.Second // generous for a loaded 2-core CI machine
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, lbcfv1beta1.AddToScheme, policyv1alpha1.Install} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// cluster returns the shared cluster and an admin client, with Karmada's policy and interpreter
// CRDs installed.
func cluster(t *testing.T) (*localup.Cluster, client.Client) {
	t.Helper()
	cl := testenv.Cluster(t)
	testenv.SkipUnlessBuilt(t)
	installKarmadaCRDs.Do(func() {
		crds, err := testenv.KarmadaCRDs(
			"policy/policy.karmada.io_clusterpropagationpolicies.yaml",
			"policy/policy.karmada.io_clusteroverridepolicies.yaml",
			"config/config.karmada.io_resourceinterpreterwebhookconfigurations.yaml",
			"config/config.karmada.io_resourceinterpretercustomizations.yaml",
		)
		if err != nil {
			installKarmadaCRDsErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		installKarmadaCRDsErr = localup.InstallCRDs(ctx, cl.RESTConfig(), crds)
	})
	if installKarmadaCRDsErr != nil {
		t.Fatalf("install Karmada CRDs: %v", installKarmadaCRDsErr)
	}
	c, err := client.New(cl.RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl, c
}

var (
	installKarmadaCRDs    sync.Once
	installKarmadaCRDsErr error
)

func ensureNamespace(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// applyObject server-side applies o, with strict field validation, for real or as a dry run.
func applyObject(ctx context.Context, c client.Client, o *unstructured.Unstructured, dryRun bool) error {
	u := o.DeepCopy()
	js, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	opts := []client.PatchOption{client.ForceOwnership, client.FieldOwner("lbfed-chart-test"), client.FieldValidation("Strict")}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := c.Patch(ctx, u, client.RawPatch(types.ApplyPatchType, js), opts...); err != nil {
		return fmt.Errorf("%s: %w", key(o), err)
	}
	return nil
}

// TestAPIServerAcceptsRenderings sends every object of every values file to kube-apiserver as a
// strict server-side dry run: unknown or misplaced fields, invalid values and schema violations
// (including the Karmada policies and the LBCF CRDs themselves) are rejected there.
// cert-manager's kinds are left out (no cert-manager CRDs here).
func TestAPIServerAcceptsRenderings(t *testing.T) {
	_, c := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, chart := range []string{lbcfChart, lbfedChart} {
		for _, f := range valuesFiles(t, chart) {
			t.Run(chart+"/"+filepath.Base(f), func(t *testing.T) {
				g := NewWithT(t)
				namespace := map[string]string{lbcfChart: "kube-system", lbfedChart: lbfedNamespace}[chart]
				objs, err := manifests.Render(ctx, manifests.Options{
					Helm: helmBinary(t), Chart: chart, Release: chart, Namespace: namespace,
					ValuesFiles: []string{f}, IncludeCRDs: true,
				})
				g.Expect(err).NotTo(HaveOccurred())
				if chart == lbfedChart {
					split, err := manifests.SplitLBFed(objs)
					g.Expect(err).NotTo(HaveOccurred())
					objs = append(append(split.Host, split.Helm...), split.Karmada...)
				}
				sent := 0
				for _, o := range objs {
					if g := o.GroupVersionKind().Group; g == certManagerGroup || g == monitoringGroup {
						continue // no cert-manager or Prometheus Operator CRDs here
					}
					if ns := o.GetNamespace(); ns != "" {
						ensureNamespace(ctx, t, c, ns)
					}
					if o.GetKind() == "Pod" {
						// A pod is admitted once its ServiceAccount exists (here no controller
						// manager makes "default"; helm creates a test's own before its pod).
						sa, _, _ := unstructured.NestedString(o.Object, "spec", "serviceAccountName")
						if sa == "" {
							sa = "default"
						}
						err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: sa}})
						if !apierrors.IsAlreadyExists(err) {
							g.Expect(err).NotTo(HaveOccurred())
						}
					}
					g.Expect(applyObject(ctx, c, o, true)).To(Succeed())
					sent++
				}
				g.Expect(sent).To(BeNumerically(">=", 5))
			})
		}
	}
}

// lbfedBinaries builds the binaries the process tests run once: lbcf-controller,
// lbfed-controller, elb-driver and lbfed-probe.
var lbfedBinaries = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "lbfed-chart-bin-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/lbcf-controller", "./cmd/lbfed-controller",
		"./cmd/elb-driver", "./cmd/lbfed-probe")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return dir, nil
})

func binaryPath(t *testing.T, name string) string {
	t.Helper()
	dir, err := lbfedBinaries()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// impersonatingKubeconfig writes a kubeconfig for cl that acts as the ServiceAccount, so a
// process run with it has exactly the chart's RBAC, once the API server authorizes everything
// the chart's bindings grant it (a process started earlier logs "forbidden" for a while).
func impersonatingKubeconfig(ctx context.Context, t *testing.T, cl *localup.Cluster, c client.Client, objs []*unstructured.Unstructured, namespace, serviceAccount string) string {
	t.Helper()
	if err := deploy.WaitRBAC(ctx, c, objs, namespace, serviceAccount); err != nil {
		t.Fatal(err)
	}
	path, err := deploy.ImpersonatingKubeconfig(cl, namespace, serviceAccount, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// runProcess starts a binary in the cluster's run and stops it when the test ends.
func runProcess(t *testing.T, cl *localup.Cluster, name, bin string, args []string) *localup.Process {
	t.Helper()
	p, err := cl.StartProcess(localup.ProcessSpec{Name: name, Path: bin, Args: args, Tier: localup.TierClient})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log (last 40 lines):\n%s", name, p.LogTail(40))
		}
		// Stop it now: a controller left running would act on the next test's objects.
		_ = syscall.Kill(p.PID(), syscall.SIGTERM)
		select {
		case <-p.Done():
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(p.PID(), syscall.SIGKILL)
			<-p.Done()
		}
	})
	return p
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := localup.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// waitWorkers waits until the process log shows every controller's workers started (their
// caches synced, so the RBAC allows every list and watch) and no request was forbidden.
func waitWorkers(g Gomega, p *localup.Process, controllers int) {
	g.Eventually(func(g Gomega) {
		data, err := os.ReadFile(p.LogPath)
		g.Expect(err).NotTo(HaveOccurred())
		log := string(data)
		g.Expect(log).NotTo(ContainSubstring("forbidden"))
		g.Expect(strings.Count(log, "Starting workers")).To(Equal(controllers))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

func waitReady(g Gomega, probeURL string, hc *http.Client) {
	if hc == nil {
		hc = http.DefaultClient
	}
	g.Eventually(func() (int, error) {
		rsp, err := hc.Get(probeURL)
		if err != nil {
			return 0, err
		}
		rsp.Body.Close()
		return rsp.StatusCode, nil
	}).WithTimeout(timeout).WithPolling(poll).Should(Equal(http.StatusOK))
}

// TestStandaloneControllerRunsWithChartRBAC runs lbcf-controller with the arguments of the lbcf
// chart's Deployment, its certificate and only its RBAC (impersonating its ServiceAccount): the
// caches of every controller sync, it wins the lease, and it writes a driver's status.
func TestStandaloneControllerRunsWithChartRBAC(t *testing.T) {
	cl, c := cluster(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns, release = "lbcf-standalone", "lbcf"
	ensureNamespace(ctx, t, c, ns)
	objs, err := manifests.Render(ctx, manifests.Options{Helm: helmBinary(t), Chart: lbcfChart, Release: release, Namespace: ns})
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			g.Expect(applyObject(ctx, c, o, false)).To(Succeed())
		}
	}
	certDir := filepath.Join(t.TempDir(), "tls")
	g.Expect(manifests.WriteSecretFiles(manifests.Find(objs, "Secret", ns, "lbcf-webhook-tls"), certDir)).To(Succeed())
	clientDir := filepath.Join(t.TempDir(), "driver-client")
	g.Expect(manifests.WriteSecretFiles(manifests.Find(objs, "Secret", ns, "lbcf-driver-client-tls"), clientDir)).To(Succeed())
	args, err := manifests.ContainerArgs(manifests.Find(objs, "Deployment", ns, "lbcf-controller"), "lbcf-controller")
	g.Expect(err).NotTo(HaveOccurred())
	ports := freePorts(t, 3)
	args = manifests.SetFlags(args, map[string]string{
		"driver-client-cert":        filepath.Join(clientDir, "tls.crt"),
		"driver-client-key":         filepath.Join(clientDir, "tls.key"),
		"kubeconfig":                impersonatingKubeconfig(ctx, t, cl, c, objs, ns, "lbcf-controller"),
		"cert-dir":                  certDir,
		"webhook-host":              "127.0.0.1",
		"webhook-port":              strconv.Itoa(ports[0]),
		"metrics-bind-address":      "127.0.0.1:" + strconv.Itoa(ports[1]),
		"health-probe-bind-address": "127.0.0.1:" + strconv.Itoa(ports[2]),
	})
	p := runProcess(t, cl, "lbcf-controller-standalone", binaryPath(t, "lbcf-controller"), args)

	waitReady(g, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[2]), nil)
	// The driver, LoadBalancer, BackendGroup and BackendRecord controllers.
	waitWorkers(g, p, 5) // drivers, LoadBalancers, BackendGroups, records, readiness gates
	lease := &coordinationv1.Lease{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lbcf-controller-standalone"}, lease)).To(Succeed())
	g.Expect(*lease.Spec.HolderIdentity).NotTo(BeEmpty())

	drv := &lbcfv1beta1.LoadBalancerDriver{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chart-test"},
		Spec:       lbcfv1beta1.LoadBalancerDriverSpec{DriverType: "Webhook", URL: "http://127.0.0.1:1"},
	}
	g.Expect(c.Create(ctx, drv)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(drv), drv)).To(Succeed())
		g.Expect(drv.Status.DriverCondition(lbcfv1beta1.DriverAccepted)).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// A backend registered and deregistered: the record's status and finalizer writes (updates
	// at the cached resourceVersion) are within the chart's RBAC.
	md := memdriver.New()
	srv := httptest.NewServer(md.Handler(driver.HandlerOptions{}))
	defer srv.Close()
	var hooks []lbcfv1beta1.WebhookConfig
	for _, name := range []string{"validateLoadBalancer", "createLoadBalancer", "ensureLoadBalancer", "deleteLoadBalancer",
		"validateBackend", "generateBackendAddr", "ensureBackend", "deregisterBackend"} {
		hooks = append(hooks, lbcfv1beta1.WebhookConfig{Name: name, Timeout: metav1.Duration{Duration: 10 * time.Second}})
	}
	g.Expect(c.Create(ctx, &lbcfv1beta1.LoadBalancerDriver{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mem"},
		Spec: lbcfv1beta1.LoadBalancerDriverSpec{DriverType: "Webhook", URL: srv.URL, Webhooks: hooks}})).To(Succeed())
	g.Expect(c.Create(ctx, &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vip"},
		Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: "mem", LBSpec: map[string]string{"vip": "192.0.2.1"}}})).To(Succeed())
	bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "static"},
		Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"vip"}, Static: []string{"192.0.2.7:80"}}}
	g.Expect(c.Create(ctx, bg)).To(Succeed())
	records := func(g Gomega) []lbcfv1beta1.BackendRecord {
		list := &lbcfv1beta1.BackendRecordList{}
		g.Expect(c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{lbcfv1beta1.LabelGroupName: "static"})).To(Succeed())
		return list.Items
	}
	g.Eventually(func(g Gomega) {
		list := records(g)
		g.Expect(list).To(HaveLen(1))
		g.Expect(list[0].IsRegistered()).To(BeTrue(), "record status: %+v", list[0].Status)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Expect(c.Delete(ctx, bg)).To(Succeed())
	g.Eventually(records).WithTimeout(timeout).WithPolling(poll).Should(BeEmpty())
	g.Expect(md.CountCalls("deregisterBackend")).To(BeNumerically(">=", 1))
	g.Expect(p.LogTail(200)).NotTo(ContainSubstring("forbidden"))

	// Stopped (SIGTERM, as the kubelet stops a pod) it hands the lease back: the replacement or
	// the standby leads at once, not a lease duration later with nothing deregistering meanwhile.
	g.Expect(syscall.Kill(p.PID(), syscall.SIGTERM)).To(Succeed())
	g.Eventually(p.Done()).WithTimeout(timeout).Should(BeClosed())
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lbcf-controller-standalone"}, lease)).To(Succeed())
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	g.Expect(holder).To(BeEmpty(), "the lease is released on shutdown")
	g.Expect(p.LogTail(200)).NotTo(ContainSubstring("forbidden"))
}

// TestMemberControllerFromLBFedChart installs, in a plain cluster standing for member m1, what
// Karmada would propagate there from the lbfed chart (RBAC, and the webhook configurations as the
// ClusterOverridePolicy rule for m1 makes them), runs lbcf-controller --mode=member with the
// member Deployment's arguments and certificate, and creates a BackendGroup: it passes through
// the member webhooks (defaulted, validated) and gets its candidates reported.
func TestMemberControllerFromLBFedChart(t *testing.T) {
	cl, c := cluster(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ports := freePorts(t, 3)
	objs, err := manifests.Render(ctx, manifests.Options{
		Helm: helmBinary(t), Chart: lbfedChart, Release: lbfedRelease, Namespace: lbfedNamespace,
		Set: []string{
			"karmada.apply=manifests",
			fmt.Sprintf("member.webhook.clusterURLs.m1=https://127.0.0.1:%d", ports[0]),
			"member.webhook.extraIPs={127.0.0.1}",
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	split, err := manifests.SplitLBFed(objs)
	g.Expect(err).NotTo(HaveOccurred())
	const ns, cluster = "lbfed-system", "lbfed-lbcf-controller"
	for _, o := range split.Karmada {
		if o.GetLabels()["app.kubernetes.io/component"] != "member" {
			continue
		}
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Secret":
			g.Expect(applyObject(ctx, c, o, false)).To(Succeed())
		}
	}
	// The member's webhook configurations: the templates with the m1 rule's webhooks added, as
	// Karmada's override does.
	for _, kind := range []string{"Mutating", "Validating"} {
		tpl := manifests.Find(split.Karmada, kind+"WebhookConfiguration", "", cluster).DeepCopy()
		cop := mustTyped[policyv1alpha1.ClusterOverridePolicy](t, manifests.Find(split.Karmada, "ClusterOverridePolicy", "", cluster+"-"+strings.ToLower(kind)))
		var hooks []any
		for _, rule := range cop.Spec.OverrideRules {
			if rule.TargetCluster != nil && len(rule.TargetCluster.ClusterNames) == 1 && rule.TargetCluster.ClusterNames[0] == "m1" {
				g.Expect(json.Unmarshal(rule.Overriders.Plaintext[0].Value.Raw, &hooks)).To(Succeed())
			}
		}
		g.Expect(hooks).To(HaveLen(map[string]int{"Mutating": 4, "Validating": 3}[kind])) // the LBCF kinds' and, mutating, the readiness gate's
		g.Expect(unstructured.SetNestedSlice(tpl.Object, hooks, "webhooks")).To(Succeed())
		g.Expect(applyObject(ctx, c, tpl, false)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(context.Background(), tpl) }) // failurePolicy Fail: never leave them behind
	}

	certDir := filepath.Join(t.TempDir(), "tls")
	g.Expect(manifests.WriteSecretFiles(manifests.Find(split.Karmada, "Secret", ns, "lbcf-controller-webhook-tls"), certDir)).To(Succeed())
	args, err := manifests.ContainerArgs(manifests.Find(split.Karmada, "Deployment", ns, "lbcf-controller"), "lbcf-controller")
	g.Expect(err).NotTo(HaveOccurred())
	args = manifests.SetFlags(args, map[string]string{
		"kubeconfig":                impersonatingKubeconfig(ctx, t, cl, c, split.Karmada, ns, "lbcf-controller"),
		"cert-dir":                  certDir,
		"webhook-host":              "127.0.0.1",
		"webhook-port":              strconv.Itoa(ports[0]),
		"metrics-bind-address":      "127.0.0.1:" + strconv.Itoa(ports[1]),
		"health-probe-bind-address": "127.0.0.1:" + strconv.Itoa(ports[2]),
	})
	g.Expect(args).To(ContainElement("--mode=member"))
	p := runProcess(t, cl, "lbcf-controller-member", binaryPath(t, "lbcf-controller"), args)
	waitReady(g, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[2]), nil)
	waitWorkers(g, p, 3) // BackendGroups, readiness gates, Service status

	bg := &lbcfv1beta1.BackendGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chart-test"},
		Spec:       lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb"}, Static: []string{"10.0.0.1:80", "10.0.0.2:80"}},
	}
	g.Expect(c.Create(ctx, bg)).To(Succeed())
	g.Expect(bg.Spec.DeregisterPolicy).NotTo(BeNil(), "the mutating webhook defaults the group")
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(bg), bg)).To(Succeed())
		g.Expect(bg.Status.ObservedGeneration).To(Equal(bg.Generation))
		g.Expect(meta.IsStatusConditionTrue(bg.Status.Conditions, lbcfv1beta1.BackendGroupReady)).To(BeTrue())
		g.Expect(bg.Status.Backends).To(BeEquivalentTo(2))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// The validating webhook is in the path too: an invalid group is refused by lbcf-controller.
	bad := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-backends"}, Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb"}}}
	err = c.Create(ctx, bad)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("lbcf.tkestack.io"), "denied by an LBCF webhook")
	g.Expect(p.LogTail(200)).NotTo(ContainSubstring("forbidden"))
}

// TestInterpreterServesWithChartCertificate runs lbfed-controller with the lbfed chart's
// arguments and interpreter certificate and calls it as Karmada would: over HTTPS to the URL of
// the ResourceInterpreterWebhookConfiguration, trusting only its caBundle.
func TestInterpreterServesWithChartCertificate(t *testing.T) {
	cl, _ := cluster(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	port := freePorts(t, 1)[0]
	objs, err := manifests.Render(ctx, manifests.Options{
		Helm: helmBinary(t), Chart: lbfedChart, Release: lbfedRelease, Namespace: lbfedNamespace,
		Set: []string{
			"karmada.apply=manifests",
			fmt.Sprintf("controller.interpreter.url=https://127.0.0.1:%d/interpret", port),
			"controller.interpreter.extraIPs={127.0.0.1}",
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	split, err := manifests.SplitLBFed(objs)
	g.Expect(err).NotTo(HaveOccurred())
	riwc := manifests.Find(split.Karmada, "ResourceInterpreterWebhookConfiguration", "", "lbfed-interpreter")
	hooks, _, _ := unstructured.NestedSlice(riwc.Object, "webhooks")
	g.Expect(hooks).To(HaveLen(1))
	cc := hooks[0].(map[string]any)["clientConfig"].(map[string]any)
	target, err := url.Parse(cc["url"].(string))
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	caPEM, err := base64.StdEncoding.DecodeString(cc["caBundle"].(string))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pool.AppendCertsFromPEM(caPEM)).To(BeTrue())

	certDir := filepath.Join(t.TempDir(), "tls")
	g.Expect(manifests.WriteSecretFiles(manifests.Find(split.Host, "Secret", lbfedNamespace, "lbfed-interpreter-tls"), certDir)).To(Succeed())
	args, err := manifests.ContainerArgs(manifests.Find(split.Host, "Deployment", lbfedNamespace, "lbfed-controller"), "lbfed-controller")
	g.Expect(err).NotTo(HaveOccurred())
	// The federation and admission need a Karmada API server (the federation its own APIs too); only the interpreter is tested here.
	args = manifests.SetFlags(args, map[string]string{"interpreter-cert-dir": certDir, "interpreter-bind-address": target.Host, "federation-enabled": "false", "admission-enabled": "false"})
	runProcess(t, cl, "lbfed-controller", binaryPath(t, "lbfed-controller"), args)

	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	waitReady(g, "https://"+target.Host+"/readyz", hc)
	// One InterpretHealth call, as Karmada makes it.
	body := []byte(`{"apiVersion":"config.karmada.io/v1alpha1","kind":"ResourceInterpreterContext","request":{` +
		`"uid":"u1","kind":{"group":"lbcf.tkestack.io","version":"v1beta1","kind":"LoadBalancer"},"name":"lb","namespace":"default",` +
		`"operation":"InterpretHealth","replicas":0,"object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"LoadBalancer",` +
		`"metadata":{"name":"lb","namespace":"default","generation":1},"spec":{"lbDriver":"d"}}}}`)
	rsp, err := hc.Post(target.String(), "application/json", bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	defer rsp.Body.Close()
	g.Expect(rsp.StatusCode).To(Equal(http.StatusOK))
	var answer struct {
		Response struct {
			UID        string `json:"uid"`
			Successful bool   `json:"successful"`
			Healthy    *bool  `json:"healthy"`
		} `json:"response"`
	}
	g.Expect(json.NewDecoder(rsp.Body).Decode(&answer)).To(Succeed())
	g.Expect(answer.Response.UID).To(Equal("u1"))
	g.Expect(answer.Response.Successful).To(BeTrue())
	g.Expect(answer.Response.Healthy).NotTo(BeNil())
}

// TestCertificatesKeptAcrossUpgrades renders against a cluster that already has the certificate
// Secrets, as `helm upgrade` does: the charts reuse them (no rotation, the caBundles stay), and
// an incomplete set is replaced as a whole.
func TestCertificatesKeptAcrossUpgrades(t *testing.T) {
	cl, c := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	secretData := func(g Gomega, objs []*unstructured.Unstructured, ns, name string) map[string][]byte {
		return mustTyped[corev1.Secret](t, manifests.Find(objs, "Secret", ns, name)).Data
	}
	// installed writes a Secret as a previous `helm install` of release left it.
	installed := func(g Gomega, o *unstructured.Unstructured, release string) {
		o = o.DeepCopy()
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a["meta.helm.sh/release-name"], a["meta.helm.sh/release-namespace"] = release, o.GetNamespace()
		o.SetAnnotations(a)
		g.Expect(applyObject(ctx, c, o, false)).To(Succeed())
	}

	t.Run("lbcf", func(t *testing.T) {
		g := NewWithT(t)
		// A release of its own: cluster-scoped names must not meet the other tests' objects.
		const ns, release = "lbcf-upgrade", "lbcf-upgrade"
		ensureNamespace(ctx, t, c, ns)
		o := manifests.Options{Helm: helmBinary(t), Chart: lbcfChart, Release: release, Namespace: ns,
			Set: []string{"elbDriver.enabled=true", "elbDriver.radware.urls={https://alteon}", "elbDriver.radware.passwordSecret.name=p"}}
		first, err := manifests.Render(ctx, o)
		g.Expect(err).NotTo(HaveOccurred())
		for _, name := range []string{release + "-webhook-tls", release + "-elb-driver-tls", release + "-driver-client-tls"} {
			installed(g, manifests.Find(first, "Secret", ns, name), release)
		}
		o.Kubeconfig = cl.KubeconfigPath()
		again, err := manifests.Render(ctx, o)
		g.Expect(err).NotTo(HaveOccurred())
		for _, name := range []string{release + "-webhook-tls", release + "-elb-driver-tls", release + "-driver-client-tls"} {
			g.Expect(secretData(g, again, ns, name)).To(Equal(secretData(g, first, ns, name)), name)
		}
		caBundle := func(objs []*unstructured.Unstructured) string {
			hooks, _, _ := unstructured.NestedSlice(manifests.Find(objs, "ValidatingWebhookConfiguration", "", release).Object, "webhooks")
			return hooks[0].(map[string]any)["clientConfig"].(map[string]any)["caBundle"].(string)
		}
		g.Expect(caBundle(again)).To(Equal(caBundle(first)))

		// Without the driver's certificate the set is incomplete: everything is made anew.
		g.Expect(c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: release + "-elb-driver-tls"}})).To(Succeed())
		renewed, err := manifests.Render(ctx, o)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(caBundle(renewed)).NotTo(Equal(caBundle(first)))
		tls, drv := secretData(g, renewed, ns, release+"-webhook-tls"), secretData(g, renewed, ns, release+"-elb-driver-tls")
		g.Expect(verifyServing(tls["ca.crt"], drv["tls.crt"], release+"-elb-driver."+ns+".svc")).To(Succeed())

		// The driver's certificate asked for with another address (a NodePort's, say): made anew,
		// with it, since the CA key was never kept.
		for _, name := range []string{release + "-webhook-tls", release + "-elb-driver-tls", release + "-driver-client-tls"} {
			installed(g, manifests.Find(renewed, "Secret", ns, name), release)
		}
		o.Set = append(o.Set, "elbDriver.tls.extraIPs={192.0.2.9}")
		moved, err := manifests.Render(ctx, o)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(caBundle(moved)).NotTo(Equal(caBundle(renewed)))
		drv = secretData(g, moved, ns, release+"-elb-driver-tls")
		g.Expect(verifyServing(drv["ca.crt"], drv["tls.crt"], "192.0.2.9", release+"-elb-driver."+ns+".svc")).To(Succeed())
		for _, name := range []string{release + "-webhook-tls", release + "-elb-driver-tls", release + "-driver-client-tls"} {
			installed(g, manifests.Find(moved, "Secret", ns, name), release)
		}
		again, err = manifests.Render(ctx, o)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(caBundle(again)).To(Equal(caBundle(moved)), "kept once it has the names")
	})

	t.Run("lbfed", func(t *testing.T) {
		g := NewWithT(t)
		const ns, release = "lbfed-upgrade", "lbfed-upgrade"
		ensureNamespace(ctx, t, c, ns)
		// As `karmadactl init` leaves it: rendering against a cluster looks for it.
		g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: karmadactlKubeconfig},
			Data: map[string][]byte{"karmada.config": []byte("apiVersion: v1\nkind: Config\n")}})).To(Succeed())
		o := manifests.Options{Helm: helmBinary(t), Chart: lbfedChart, Release: release, Namespace: ns}
		first, err := manifests.Render(ctx, o)
		g.Expect(err).NotTo(HaveOccurred())
		for _, name := range []string{release + "-interpreter-tls", release + "-member-webhook-tls", release + "-driver-client-tls"} {
			installed(g, manifests.Find(first, "Secret", ns, name), release)
		}
		o.Kubeconfig = cl.KubeconfigPath()
		again, err := manifests.Render(ctx, o)
		g.Expect(err).NotTo(HaveOccurred())
		before, err := manifests.SplitLBFed(first)
		g.Expect(err).NotTo(HaveOccurred())
		after, err := manifests.SplitLBFed(again)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(secretData(g, after.Host, ns, release+"-interpreter-tls")).To(Equal(secretData(g, before.Host, ns, release+"-interpreter-tls")))
		g.Expect(secretData(g, after.Host, ns, release+"-driver-client-tls")).To(Equal(secretData(g, before.Host, ns, release+"-driver-client-tls")), "drivers keep accepting the client certificate")
		g.Expect(secretData(g, after.Karmada, "lbfed-system", "lbcf-controller-webhook-tls")).To(Equal(secretData(g, before.Karmada, "lbfed-system", "lbcf-controller-webhook-tls")))
		riwc := func(s *manifests.Split) any {
			return manifests.Find(s.Karmada, "ResourceInterpreterWebhookConfiguration", "", release+"-interpreter").Object["webhooks"]
		}
		g.Expect(riwc(after)).To(Equal(riwc(before)))
	})
}
