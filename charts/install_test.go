package charts

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/charts/manifests"
	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/servingcert"
	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
	upstream "github.com/lbfed/lbfed/testinfra/localup/binaries"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// TestLBFedKubeconfigSecretLookup renders the lbfed chart against a cluster, as helm install
// does: with no karmada.kubeconfigSecret.name it takes the kubeconfig Secret `karmadactl init`
// made, else the one Karmada's Helm chart made; a missing Secret or key fails the install with
// the value to set instead of a Job waiting for its volume until helm times out.
func TestLBFedKubeconfigSecretLookup(t *testing.T) {
	cl, c := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	secret := func(ns, name, key string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{key: []byte("apiVersion: v1\nkind: Config\n")}}
	}
	cases := map[string]struct {
		secrets []*corev1.Secret
		set     []string
		// name and key of the Secret the chart mounts, or the error.
		name, key, err string
	}{
		"karmadactl init": {
			secrets: []*corev1.Secret{secret("", "karmada-controller-manager-config", "karmada.config")},
			name:    "karmada-controller-manager-config", key: "karmada.config",
		},
		"Karmada's Helm chart": {
			secrets: []*corev1.Secret{secret("", "karmada-kubeconfig", "kubeconfig")},
			name:    "karmada-kubeconfig", key: "kubeconfig",
		},
		"both: karmadactl init's first": {
			secrets: []*corev1.Secret{secret("", "karmada-kubeconfig", "kubeconfig"), secret("", "karmada-controller-manager-config", "karmada.config")},
			name:    "karmada-controller-manager-config", key: "karmada.config",
		},
		"neither": {
			secrets: []*corev1.Secret{secret("", "karmada-kubeconfig", "config")},
			err:     "no kubeconfig for karmada-apiserver in namespace",
		},
		"named": {
			secrets: []*corev1.Secret{secret("", "lbfed-karmada", "kubeconfig"), secret("", "karmada-kubeconfig", "kubeconfig")},
			set:     []string{"karmada.kubeconfigSecret.name=lbfed-karmada"},
			name:    "lbfed-karmada", key: "kubeconfig",
		},
		"named, missing": {
			secrets: []*corev1.Secret{secret("", "karmada-controller-manager-config", "karmada.config")},
			set:     []string{"karmada.kubeconfigSecret.name=lbfed-karmada"},
			err:     `karmada.kubeconfigSecret.name: no Secret "lbfed-karmada" in namespace`,
		},
		"the Jobs' own, missing": {
			secrets: []*corev1.Secret{secret("", "karmada-controller-manager-config", "karmada.config")},
			set:     []string{"karmada.kubectl.kubeconfigSecret.name=karmada-admin"},
			err:     `karmada.kubectl.kubeconfigSecret.name: no Secret "karmada-admin" in namespace`,
		},
		"named, another key": {
			secrets: []*corev1.Secret{secret("", "karmada-controller-manager-config", "karmada.config")},
			set:     []string{"karmada.kubeconfigSecret.name=karmada-controller-manager-config"},
			err:     `karmada.kubeconfigSecret.key: Secret kc-named-another-key/karmada-controller-manager-config has no key "kubeconfig" (its keys: karmada.config)`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ns := "kc-" + strings.NewReplacer(" ", "-", ",", "", "'", "", ":", "").Replace(strings.ToLower(name))
			ensureNamespace(ctx, t, c, ns)
			for _, s := range tc.secrets {
				s = s.DeepCopy()
				s.Namespace = ns
				g.Expect(c.Create(ctx, s)).To(Succeed())
			}
			objs, err := manifests.Render(ctx, manifests.Options{Helm: helmBinary(t), Chart: lbfedChart, Release: lbfedRelease, Namespace: ns,
				Set: tc.set, Kubeconfig: cl.KubeconfigPath()})
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				g.Expect(err.Error()).To(ContainSubstring("kubeconfigSecret.name"), "the error names the value to set")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			want := corev1.SecretVolumeSource{SecretName: tc.name, Items: []corev1.KeyToPath{{Key: tc.key, Path: "kubeconfig"}}}
			split, err := manifests.SplitLBFed(objs)
			g.Expect(err).NotTo(HaveOccurred())
			for _, w := range []struct{ kind, name string }{{"Deployment", "lbfed-controller"}, {"Job", "lbfed-karmada-apply"}, {"Pod", "lbfed-test-admission"}} {
				var vols []corev1.Volume
				switch o := manifests.Find(append(split.Host, split.Helm...), w.kind, ns, w.name); w.kind {
				case "Deployment":
					vols = mustTyped[appsv1.Deployment](t, o).Spec.Template.Spec.Volumes
				case "Job":
					vols = mustTyped[batchv1.Job](t, o).Spec.Template.Spec.Volumes
				case "Pod":
					vols = mustTyped[corev1.Pod](t, o).Spec.Volumes
				}
				g.Expect(vols).To(ContainElement(HaveField("Secret", HaveValue(Equal(want)))), w.kind)
			}
		})
	}
}

// jobRelease is the lbfed release TestApplyJob installs: its own names, so that its
// registrations and member objects meet no other test's.
const (
	jobRelease   = "lbfed-job"
	jobHostNS    = "lbfed-job-host"
	jobMemberNS  = "lbfed-job-member"
	jobKarmadaNS = "karmada-system"
)

// renderJobRelease renders the lbfed chart as helm install would for the job test, with values
// set on top of its own, and returns the host objects, the apply Job and what it writes.
func renderJobRelease(ctx context.Context, t *testing.T, set ...string) (host []*unstructured.Unstructured, job *batchv1.Job, manifestsData map[string][]byte) {
	t.Helper()
	objs, err := manifests.Render(ctx, manifests.Options{Helm: helmBinary(t), Chart: lbfedChart, Release: jobRelease, Namespace: jobHostNS,
		Set: append([]string{"member.namespace=" + jobMemberNS, "karmada.kubectl.rolloutTimeout=3s"}, set...)})
	if err != nil {
		t.Fatal(err)
	}
	split, err := manifests.SplitLBFed(objs)
	if err != nil {
		t.Fatal(err)
	}
	job = mustTyped[batchv1.Job](t, manifests.Find(split.Helm, "Job", jobHostNS, jobRelease+"-karmada-apply"))
	manifestsData = mustTyped[corev1.Secret](t, manifests.Find(split.Helm, "Secret", jobHostNS, jobRelease+"-karmada-manifests")).Data
	return append(split.Host, split.Helm...), job, manifestsData
}

// setRolledOut writes the status the Deployment controller writes once every replica of the
// current generation is ready (no kubelet or controller manager runs here).
func setRolledOut(ctx context.Context, c client.Client, ns, name string) error {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return err
	}
	n := *d.Spec.Replicas
	now := metav1.Now()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
		}}
	return c.Status().Update(ctx, d)
}

// kubectlRunner is a pod runner with kubectl, and with the cluster's admin kubeconfig as every
// Secret a pod of the lbfed chart mounts for karmada-apiserver.
func kubectlRunner(t *testing.T, cl *localup.Cluster) *podRunner {
	t.Helper()
	set := testenv.SkipUnlessBuilt(t)
	admin, err := os.ReadFile(cl.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &podRunner{
		bins: map[string]string{"kubectl": set.Path(upstream.Kubectl), "lbfed-probe": binaryPath(t, "lbfed-probe")},
		secrets: map[string]map[string][]byte{
			karmadactlKubeconfig: {"karmada.config": admin},
		},
		configMaps: map[string]map[string][]byte{},
		inCluster: func(ns, sa string) (string, error) {
			return deploy.ImpersonatingKubeconfig(cl, ns, sa, filepath.Join(dir, ns))
		},
	}
}

// TestApplyJobNeedsMemberPullSecrets: with global.imagePullSecrets, the apply Job fails the
// install, before anything is registered, while a named Secret is missing where Karmada takes it
// from (member.namespace of karmada-apiserver), and goes on once it is there.
func TestApplyJobNeedsMemberPullSecrets(t *testing.T) {
	cl, c := cluster(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const memberNS = "lbfed-job-pull"
	ensureNamespace(ctx, t, c, jobHostNS)
	ensureNamespace(ctx, t, c, jobKarmadaNS)
	run := kubectlRunner(t, cl)
	host, job, data := renderJobRelease(ctx, t, "member.namespace="+memberNS, "global.imagePullSecrets[0].name=regcred")
	for _, o := range host {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "Deployment":
			g.Expect(applyObject(ctx, c, o, false)).To(Succeed())
		}
	}
	g.Expect(deploy.WaitRBAC(ctx, c, host, jobHostNS, jobRelease+"-karmada-apply")).To(Succeed())
	g.Expect(setRolledOut(ctx, c, jobHostNS, jobRelease+"-controller")).To(Succeed())
	run.secrets[jobRelease+"-karmada-manifests"] = data
	t.Cleanup(func() {
		for _, kind := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
			for _, name := range []string{jobRelease + "-admission", jobRelease + "-lbcf-controller"} {
				o := kind.DeepCopyObject().(client.Object)
				o.SetName(name)
				_ = c.Delete(context.Background(), o)
			}
		}
		// The next test starts from nothing registered.
		riwc := &unstructured.Unstructured{}
		riwc.SetAPIVersion("config.karmada.io/v1alpha1")
		riwc.SetKind("ResourceInterpreterWebhookConfiguration")
		riwc.SetName(jobRelease + "-interpreter")
		_ = c.Delete(context.Background(), riwc)
	})

	runs, err := run.run(ctx, t, jobHostNS, job.Spec.Template.Spec)
	g.Expect(err).NotTo(HaveOccurred())
	last := runs[len(runs)-1]
	g.Expect(last.name).To(Equal("member-pull-secrets"), describeRuns(runs))
	g.Expect(last.exit).NotTo(BeZero())
	g.Expect(last.output).To(ContainSubstring(`secrets "regcred" not found`))
	g.Expect(c.Get(ctx, client.ObjectKey{Name: jobRelease + "-admission"}, &admissionregistrationv1.ValidatingWebhookConfiguration{})).
		To(MatchError(ContainSubstring("not found")), "nothing registered")

	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: memberNS, Name: "regcred"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"dTpw"}}}`)}})).To(Succeed())
	runs, err = run.run(ctx, t, jobHostNS, job.Spec.Template.Spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(succeeded(job.Spec.Template.Spec, runs)).To(BeTrue(), describeRuns(runs))
}

// TestApplyJob runs the lbfed chart's apply Job (as a kubelet would, with kubectl and the
// chart's RBAC) against a kube-apiserver standing for both the host cluster and
// karmada-apiserver:
//   - while lbfed-controller's rollout is not complete the Job fails at its wait, having
//     registered nothing that calls lbfed-controller: karmada-apiserver stays writable;
//   - once it is, the Job registers the interpreter and admission;
//   - an upgrade to the Lua customizations without admission unregisters both, and the first
//     revision's Job, which helm runs again on a rollback (post-rollback), brings them and the
//     first revision's member components back.
func TestApplyJob(t *testing.T) {
	cl, c := cluster(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ensureNamespace(ctx, t, c, jobHostNS)
	ensureNamespace(ctx, t, c, jobKarmadaNS)
	run := kubectlRunner(t, cl)
	// Registrations in this shared API server call nobody: never leave them behind.
	registrations := []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: jobRelease + "-admission"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: jobRelease + "-admission"}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: jobRelease + "-lbcf-controller"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: jobRelease + "-lbcf-controller"}},
	}
	t.Cleanup(func() {
		for _, o := range registrations {
			_ = c.Delete(context.Background(), o)
		}
	})
	exists := func(kind, name string) bool {
		u := &unstructured.Unstructured{}
		switch kind {
		case "ResourceInterpreterWebhookConfiguration", "ResourceInterpreterCustomization":
			u.SetAPIVersion("config.karmada.io/v1alpha1")
		default:
			u.SetAPIVersion("admissionregistration.k8s.io/v1")
		}
		u.SetKind(kind)
		err := c.Get(ctx, client.ObjectKey{Name: name}, u)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	registered := func() []string {
		var out []string
		for _, r := range []struct{ kind, name string }{
			{"ResourceInterpreterWebhookConfiguration", jobRelease + "-interpreter"},
			{"ResourceInterpreterCustomization", "lbfed-lbcf-backendgroup"},
			{"MutatingWebhookConfiguration", jobRelease + "-admission"},
			{"ValidatingWebhookConfiguration", jobRelease + "-admission"},
		} {
			if exists(r.kind, r.name) {
				out = append(out, r.kind)
			}
		}
		return out
	}
	memberReplicas := func() int32 {
		d := &appsv1.Deployment{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: jobMemberNS, Name: "lbcf-controller"}, d)).To(Succeed())
		return *d.Spec.Replicas
	}
	// install applies a revision's host objects as helm does before its post-* hooks, and
	// returns its apply Job.
	install := func(set ...string) *batchv1.Job {
		host, job, data := renderJobRelease(ctx, t, set...)
		for _, o := range host {
			switch o.GetKind() {
			case "ServiceAccount", "Role", "RoleBinding", "Deployment":
				g.Expect(applyObject(ctx, c, o, false)).To(Succeed())
			}
		}
		g.Expect(deploy.WaitRBAC(ctx, c, host, jobHostNS, jobRelease+"-karmada-apply")).To(Succeed())
		run.secrets[jobRelease+"-karmada-manifests"] = data
		return job
	}

	rev1 := install()
	t.Run("lbfed-controller not ready: nothing registered, the Job fails at once", func(t *testing.T) {
		g := NewWithT(t)
		start := time.Now()
		runs, err := run.run(ctx, t, jobHostNS, rev1.Spec.Template.Spec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(runs).To(HaveLen(4), describeRuns(runs))
		last := runs[len(runs)-1]
		g.Expect(last.name).To(Equal("wait-controller"))
		g.Expect(last.exit).NotTo(BeZero())
		g.Expect(last.output).To(ContainSubstring("timed out waiting for the condition"))
		g.Expect(time.Since(start)).To(BeNumerically("<", time.Minute))
		// The objects are there (the member components are being propagated), nothing
		// calls lbfed-controller: the LBCF kinds stay writable in karmada-apiserver.
		g.Expect(memberReplicas()).To(BeEquivalentTo(2))
		g.Expect(registered()).To(BeEmpty())
		// The Job's pod failure policy fails the Job on this exit: no retry waits again.
		g.Expect(rev1.Spec.PodFailurePolicy.Rules[0].OnExitCodes.ContainerName).To(HaveValue(Equal(last.name)))
	})

	t.Run("the Job watches lbfed-controller's Deployment and nothing else", func(t *testing.T) {
		g := NewWithT(t)
		other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: jobHostNS, Name: "other"}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}
		g.Expect(c.Create(ctx, other)).To(Succeed())
		defer func() { _ = c.Delete(ctx, other) }()
		g.Expect(setRolledOut(ctx, c, jobHostNS, "other")).To(Succeed())
		spec := rev1.Spec.Template.Spec.DeepCopy()
		for i, ic := range spec.InitContainers {
			if ic.Name == "wait-controller" {
				spec.InitContainers = spec.InitContainers[i : i+1]
				spec.InitContainers[0].Args[2] = "deployment/other"
			}
		}
		spec.Containers = nil
		runs, err := run.run(ctx, t, jobHostNS, *spec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(runs).To(HaveLen(1))
		g.Expect(runs[0].output).To(ContainSubstring("forbidden"))
	})

	t.Run("lbfed-controller ready: the interpreter and admission are registered", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(setRolledOut(ctx, c, jobHostNS, jobRelease+"-controller")).To(Succeed())
		runs, err := run.run(ctx, t, jobHostNS, rev1.Spec.Template.Spec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(succeeded(rev1.Spec.Template.Spec, runs)).To(BeTrue(), describeRuns(runs))
		g.Expect(registered()).To(ConsistOf("ResourceInterpreterWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"))
	})

	t.Run("an upgrade to the Lua customizations without admission unregisters them", func(t *testing.T) {
		g := NewWithT(t)
		rev2 := install("luaInterpreter.enabled=true", "controller.interpreter.enabled=false", "controller.admission.enabled=false", "member.replicas=1", "member.leaderElection.enabled=false")
		g.Expect(setRolledOut(ctx, c, jobHostNS, jobRelease+"-controller")).To(Succeed())
		runs, err := run.run(ctx, t, jobHostNS, rev2.Spec.Template.Spec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(succeeded(rev2.Spec.Template.Spec, runs)).To(BeTrue(), describeRuns(runs))
		g.Expect(registered()).To(ConsistOf("ResourceInterpreterCustomization"))
		g.Expect(memberReplicas()).To(BeEquivalentTo(1))
	})

	t.Run("a rollback re-applies the first revision", func(t *testing.T) {
		g := NewWithT(t)
		// What helm rollback does: the first revision's objects, then its post-rollback Job.
		g.Expect(rev1.Annotations["helm.sh/hook"]).To(ContainSubstring("post-rollback"))
		again := install()
		g.Expect(again.Spec).To(Equal(rev1.Spec), "renderings of the same values agree")
		g.Expect(setRolledOut(ctx, c, jobHostNS, jobRelease+"-controller")).To(Succeed())
		runs, err := run.run(ctx, t, jobHostNS, rev1.Spec.Template.Spec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(succeeded(rev1.Spec.Template.Spec, runs)).To(BeTrue(), describeRuns(runs))
		g.Expect(registered()).To(ConsistOf("ResourceInterpreterWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"))
		g.Expect(memberReplicas()).To(BeEquivalentTo(2), "the members get the first revision's components back")
	})

	t.Run("the delete Job unregisters first and keeps the CRDs", func(t *testing.T) {
		g := NewWithT(t)
		host, _, _ := renderJobRelease(ctx, t)
		del := mustTyped[batchv1.Job](t, manifests.Find(host, "Job", jobHostNS, jobRelease+"-karmada-delete"))
		runs, err := run.run(ctx, t, jobHostNS, del.Spec.Template.Spec)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(succeeded(del.Spec.Template.Spec, runs)).To(BeTrue(), describeRuns(runs))
		g.Expect(registered()).To(BeEmpty())
		g.Expect(exists("MutatingWebhookConfiguration", jobRelease+"-lbcf-controller")).To(BeFalse())
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "backendgroups.lbcf.tkestack.io"}, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}})).To(Succeed())
	})
}

// TestLBFedHelmTests runs the lbfed chart's helm test pods (as a kubelet would: lbfed-probe and
// kubectl, the chart's volumes) against lbfed-controller run with the chart's arguments,
// certificate and RBAC, registered in a kube-apiserver standing for karmada-apiserver: every
// check passes, and fails when what it checks does not answer.
func TestLBFedHelmTests(t *testing.T) {
	cl, c := cluster(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const release, ns = "lbfed-ht", "lbfed-ht"
	ensureNamespace(ctx, t, c, ns)
	ensureNamespace(ctx, t, c, jobKarmadaNS)
	ports := freePorts(t, 2)
	interp, adm := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	objs, err := manifests.Render(ctx, manifests.Options{Helm: helmBinary(t), Chart: lbfedChart, Release: release, Namespace: ns, Set: []string{
		"member.enabled=false",
		"controller.interpreter.url=https://" + interp + "/interpret", "controller.interpreter.extraIPs={127.0.0.1}",
		"controller.admission.url=https://" + adm,
		"tests.loadBalancer.driver=" + release + "-radware", "tests.loadBalancer.lbSpec.vip=10.1.0.10", "tests.loadBalancer.lbSpec.port=80",
	}})
	g.Expect(err).NotTo(HaveOccurred())
	split, err := manifests.SplitLBFed(objs)
	g.Expect(err).NotTo(HaveOccurred())
	var registrations []*unstructured.Unstructured
	for _, o := range split.Karmada {
		switch o.GetKind() {
		case "CustomResourceDefinition":
		case "ResourceInterpreterWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			registrations = append(registrations, o)
		default:
			g.Expect(applyObject(ctx, c, o, false)).To(Succeed())
		}
	}
	g.Expect(registrations).To(HaveLen(3))

	// lbfed-controller with the chart's arguments, certificate and RBAC; a Radware driver that
	// accepts only its client certificate, for the LoadBalancer check.
	certDir := filepath.Join(t.TempDir(), "tls")
	g.Expect(manifests.WriteSecretFiles(manifests.Find(split.Host, "Secret", ns, release+"-interpreter-tls"), certDir)).To(Succeed())
	clientDir := filepath.Join(t.TempDir(), "driver-client")
	g.Expect(manifests.WriteSecretFiles(manifests.Find(split.Host, "Secret", ns, release+"-driver-client-tls"), clientDir)).To(Succeed())
	driverURL, driverCA, _ := radwareDriverServer(t, filepath.Join(clientDir, "ca.crt"), release+"-controller")
	args, err := manifests.ContainerArgs(manifests.Find(split.Host, "Deployment", ns, release+"-controller"), "lbfed-controller")
	g.Expect(err).NotTo(HaveOccurred())
	args = manifests.SetFlags(args, map[string]string{
		"kubeconfig":           impersonatingKubeconfig(ctx, t, cl, c, split.Karmada, jobKarmadaNS, "lbfed-controller"),
		"interpreter-cert-dir": certDir, "interpreter-bind-address": interp,
		"admission-cert-dir": certDir, "admission-bind-address": adm,
		"admission-driver-ca-file": driverCA, "admission-driver-client-cert": filepath.Join(clientDir, "tls.crt"),
		"admission-driver-client-key": filepath.Join(clientDir, "tls.key"),
		// The federation needs Karmada's own APIs, not served here; only what the tests check runs.
		"federation-enabled": "false",
	})
	controller := runProcess(t, cl, release+"-controller", binaryPath(t, "lbfed-controller"), args)
	for _, o := range registrations {
		g.Expect(applyObject(ctx, c, o, false)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) }) // failurePolicy Fail: never leave them behind
	}
	drv := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "lbcf.tkestack.io/v1beta1", "kind": "LoadBalancerDriver",
		"metadata": map[string]any{"namespace": jobKarmadaNS, "name": release + "-radware"},
		"spec":     map[string]any{"driverType": "Webhook", "url": driverURL}}}
	// Created once lbfed-controller's admission answers (it fills in the driver's webhooks).
	g.Eventually(func() error { return c.Create(ctx, drv.DeepCopy()) }).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), drv) })

	run := kubectlRunner(t, cl)
	cm := mustTyped[corev1.ConfigMap](t, manifests.Find(split.Helm, "ConfigMap", ns, release+"-test"))
	run.configMaps[cm.Name] = map[string][]byte{}
	for k, v := range cm.Data {
		run.configMaps[cm.Name][k] = []byte(v)
	}
	pods := map[string]corev1.PodSpec{}
	for _, o := range split.Helm {
		if o.GetKind() == "Pod" {
			p := mustTyped[corev1.Pod](t, o)
			g.Expect(p.Annotations).To(HaveKeyWithValue("helm.sh/hook", "test"))
			pods[strings.TrimPrefix(p.Name, release+"-test-")] = p.Spec
		}
	}
	g.Expect(pods).To(HaveLen(3))
	check := func(name string) []containerRun {
		runs, err := run.run(ctx, t, ns, pods[name])
		g.Expect(err).NotTo(HaveOccurred())
		return runs
	}

	t.Run("the release answers", func(t *testing.T) {
		g := NewWithT(t)
		for name, want := range map[string]string{
			"interpreter":  "answered InterpretHealth of a LoadBalancer: successful",
			"admission":    "IfNotReady",                                // defaulted by the mutating webhook
			"loadbalancer": "lbcf.tkestack.io/delete-load-loadbalancer", // its finalizer, after the driver validated it
		} {
			g.Eventually(func(g Gomega) {
				runs := check(name)
				g.Expect(succeeded(pods[name], runs)).To(BeTrue(), describeRuns(runs))
				g.Expect(runs[0].output).To(ContainSubstring(want))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), name)
		}
		// Nothing was created: the checks are dry runs.
		err := c.Get(ctx, client.ObjectKey{Namespace: jobKarmadaNS, Name: release + "-helm-test"}, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "lbcf.tkestack.io/v1beta1", "kind": "BackendGroup"}})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	})

	t.Run("admission without the mutating webhook fails its check", func(t *testing.T) {
		g := NewWithT(t)
		var mutating *unstructured.Unstructured
		for _, o := range registrations {
			if o.GetKind() == "MutatingWebhookConfiguration" {
				mutating = o
			}
		}
		g.Expect(c.Delete(ctx, mutating.DeepCopy())).To(Succeed())
		defer func() { g.Expect(applyObject(ctx, c, mutating, false)).To(Succeed()) }()
		g.Eventually(func(g Gomega) {
			runs := check("admission")
			g.Expect(succeeded(pods["admission"], runs)).To(BeFalse())
			g.Expect(runs[0].output).To(ContainSubstring("deregisterPolicy is not found"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	t.Run("lbfed-controller down fails every check", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(syscall.Kill(controller.PID(), syscall.SIGTERM)).To(Succeed())
		<-controller.Done()
		for name, want := range map[string]string{
			"interpreter":  "connection refused",
			"admission":    "failed calling webhook",
			"loadbalancer": "failed calling webhook",
		} {
			runs := check(name)
			g.Expect(succeeded(pods[name], runs)).To(BeFalse(), name)
			g.Expect(runs[0].output).To(ContainSubstring(want), name)
		}
	})
}

// TestLBCFHelmTests runs the lbcf chart's helm test pods (kubectl, as a kubelet would, the test
// ServiceAccount's RBAC only) against lbcf-controller and elb-driver run with the chart's
// arguments: both checks pass, and fail when what they check does not answer. The API server
// calls lbcf-controller's webhooks on 127.0.0.1 with a certificate of the test's (the chart's
// names a Service no kubelet serves here), and the driver check's Service address is replaced
// by the driver's local one.
func TestLBCFHelmTests(t *testing.T) {
	cl, c := cluster(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const release, ns = "lbcf-ht", "lbcf-ht"
	ensureNamespace(ctx, t, c, ns)
	o := alteonsim.Options{ApplyDuration: time.Millisecond, SaveDuration: time.Millisecond, SyncDuration: time.Millisecond}
	sim := alteonsim.NewPair(o, o)
	ua, ub, err := sim.Start()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = sim.Close() }()
	objs, err := manifests.Render(ctx, manifests.Options{Helm: helmBinary(t), Chart: lbcfChart, Release: release, Namespace: ns, Set: []string{
		"elbDriver.enabled=true", "elbDriver.radware.urls={" + ua + "," + ub + "}", "elbDriver.radware.passwordSecret.name=alteon-admin",
	}})
	g.Expect(err).NotTo(HaveOccurred())
	var hooks []*unstructured.Unstructured
	for _, o := range objs {
		if _, hook := o.GetAnnotations()["helm.sh/hook"]; hook {
			hooks = append(hooks, o)
		}
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			g.Expect(applyObject(ctx, c, o, false)).To(Succeed())
		}
	}

	// lbcf-controller with the chart's arguments and RBAC, its webhooks registered on loopback.
	ports := freePorts(t, 5)
	hookAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	ca, err := servingcert.NewCA("lbcf-ht-test-ca", 0)
	g.Expect(err).NotTo(HaveOccurred())
	certDir := filepath.Join(t.TempDir(), "tls")
	g.Expect(ca.WriteIssued(certDir, release+"-controller", []string{"127.0.0.1"}, x509.ExtKeyUsageServerAuth)).To(Succeed())
	clientDir := filepath.Join(t.TempDir(), "driver-client")
	g.Expect(manifests.WriteSecretFiles(manifests.Find(objs, "Secret", ns, release+"-driver-client-tls"), clientDir)).To(Succeed())
	args, err := manifests.ContainerArgs(manifests.Find(objs, "Deployment", ns, release+"-controller"), "lbcf-controller")
	g.Expect(err).NotTo(HaveOccurred())
	args = manifests.SetFlags(args, map[string]string{
		"kubeconfig": impersonatingKubeconfig(ctx, t, cl, c, objs, ns, release+"-controller"),
		"cert-dir":   certDir, "webhook-host": "127.0.0.1", "webhook-port": strconv.Itoa(ports[0]),
		"metrics-bind-address": "127.0.0.1:" + strconv.Itoa(ports[1]), "health-probe-bind-address": "127.0.0.1:" + strconv.Itoa(ports[2]),
		"driver-ca-file":     filepath.Join(clientDir, "ca.crt"),
		"driver-client-cert": filepath.Join(clientDir, "tls.crt"), "driver-client-key": filepath.Join(clientDir, "tls.key"),
	})
	controller := runProcess(t, cl, release+"-controller", binaryPath(t, "lbcf-controller"), args)
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		w := manifests.Find(objs, kind, "", release).DeepCopy()
		hooks, _, _ := unstructured.NestedSlice(w.Object, "webhooks")
		for i, h := range hooks {
			h := h.(map[string]any)
			path, _, _ := unstructured.NestedString(h, "clientConfig", "service", "path")
			h["clientConfig"] = map[string]any{"url": "https://" + hookAddr + path, "caBundle": base64.StdEncoding.EncodeToString(ca.PEM)}
			hooks[i] = h
		}
		g.Expect(unstructured.SetNestedSlice(w.Object, hooks, "webhooks")).To(Succeed())
		g.Expect(applyObject(ctx, c, w, false)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(context.Background(), w) }) // failurePolicy Fail: never leave them behind
	}

	// elb-driver with the chart's arguments, on the simulated pair.
	drvTLS := filepath.Join(t.TempDir(), "driver-tls")
	g.Expect(manifests.WriteSecretFiles(manifests.Find(objs, "Secret", ns, release+"-elb-driver-tls"), drvTLS)).To(Succeed())
	password := filepath.Join(t.TempDir(), "password")
	g.Expect(os.WriteFile(password, []byte("admin"), 0o600)).To(Succeed())
	metricsAddr := "127.0.0.1:" + strconv.Itoa(ports[4])
	dargs, err := manifests.ContainerArgs(manifests.Find(objs, "Deployment", ns, release+"-elb-driver"), "elb-driver")
	g.Expect(err).NotTo(HaveOccurred())
	dargs = manifests.SetFlags(dargs, map[string]string{
		"listen": "127.0.0.1:" + strconv.Itoa(ports[3]), "metrics-listen": metricsAddr,
		"tls-cert-file": filepath.Join(drvTLS, "tls.crt"), "tls-key-file": filepath.Join(drvTLS, "tls.key"),
		"client-ca-file": filepath.Join(drvTLS, "ca.crt"), "alteon-password-file": password,
	})
	runProcess(t, cl, release+"-elb-driver", binaryPath(t, "elb-driver"), dargs)

	run := kubectlRunner(t, cl)
	pods := map[string]corev1.PodSpec{}
	for _, o := range hooks {
		switch o.GetKind() {
		case "Pod":
			p := mustTyped[corev1.Pod](t, o)
			pods[strings.TrimPrefix(p.Name, release+"-test-")] = p.Spec
		case "ConfigMap":
			cm := mustTyped[corev1.ConfigMap](t, o)
			run.configMaps[cm.Name] = map[string][]byte{}
			for k, v := range cm.Data {
				run.configMaps[cm.Name][k] = []byte(v)
			}
		default: // the test ServiceAccount's RBAC
			g.Expect(applyObject(ctx, c, o, false)).To(Succeed())
		}
	}
	g.Expect(pods).To(HaveKey("admission"))
	g.Expect(pods).To(HaveKey("driver-healthz"))
	g.Expect(deploy.WaitRBAC(ctx, c, hooks, ns, release+"-test")).To(Succeed())
	healthz := pods["driver-healthz"]
	g.Expect(healthz.Containers[0].Args).To(ContainElement("--server=http://" + release + "-elb-driver-metrics." + ns + ".svc:9090"))
	healthz.Containers[0].Args = manifests.SetFlags(healthz.Containers[0].Args, map[string]string{"server": "http://" + metricsAddr})
	pods["driver-healthz"] = healthz
	check := func(name string) []containerRun {
		runs, err := run.run(ctx, t, ns, pods[name])
		g.Expect(err).NotTo(HaveOccurred())
		return runs
	}

	t.Run("the release answers", func(t *testing.T) {
		g := NewWithT(t)
		for name, want := range map[string]string{"admission": "IfNotReady", "driver-healthz": "ok"} {
			g.Eventually(func(g Gomega) {
				runs := check(name)
				g.Expect(succeeded(pods[name], runs)).To(BeTrue(), describeRuns(runs))
				g.Expect(runs[0].output).To(Equal(want))
			}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), name)
		}
	})

	t.Run("nothing answers: both checks fail", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(sim.Close()).To(Succeed())
		g.Expect(syscall.Kill(controller.PID(), syscall.SIGTERM)).To(Succeed())
		<-controller.Done()
		for name, want := range map[string]string{"admission": "failed calling webhook", "driver-healthz": "ServiceUnavailable"} {
			runs := check(name)
			g.Expect(succeeded(pods[name], runs)).To(BeFalse(), name)
			g.Expect(runs[0].output).To(ContainSubstring(want), name)
		}
	})
}
