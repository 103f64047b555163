//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/podresponder"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// Propagation normally takes 1-2 s; the margin is for a loaded 2-core CI machine.
const (
	timeout = 2 * time.Minute
	poll    = 200 * time.Millisecond
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, policyv1alpha1.Install, workv1alpha2.Install} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clients returns a client for Karmada and one per member, by name.
func clients(t *testing.T) (client.Client, map[string]client.Client) {
	topo := testenv.Topology(t)
	members := map[string]client.Client{}
	for _, m := range topo.Members() {
		members[m.Name()] = newClient(t, m.RESTConfig())
	}
	return newClient(t, topo.KarmadaConfig()), members
}

// namespace creates a namespace on Karmada, which Karmada propagates to every member.
func namespace(t *testing.T, karmada client.Client, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := karmada.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = karmada.Delete(context.Background(), ns) })
	return name
}

// memberNames are the names of every member of the topology, Push and Pull.
func memberNames(t *testing.T) []string {
	var out []string
	for _, m := range testenv.Topology(t).Members() {
		out = append(out, m.Name())
	}
	return out
}

// propagationPolicy places the selected objects on every member (divided: replicas 1:1:…).
func propagationPolicy(t *testing.T, ns, name string, selectors []policyv1alpha1.ResourceSelector, divided bool) *policyv1alpha1.PropagationPolicy {
	members := memberNames(t)
	pp := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: selectors,
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: members},
			},
		},
	}
	if divided {
		var weights []policyv1alpha1.StaticClusterWeight
		for _, m := range members {
			weights = append(weights, policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{m}}, Weight: 1})
		}
		pp.Spec.Placement.ReplicaScheduling = &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference:          &policyv1alpha1.ClusterPreferences{StaticWeightList: weights},
		}
	}
	return pp
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "example.invalid/web:1",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}}},
			},
		},
	}
}

// TestDeploymentPropagatesAndAggregates: a Deployment divided 1:1 over every member (Push and
// Pull) by a PropagationPolicy gets Ready pods in each — pods that answer on their IPs — and its
// status, aggregated by Karmada, counts all of them.
func TestDeploymentPropagatesAndAggregates(t *testing.T) {
	g := NewWithT(t)
	karmada, members := clients(t)
	ns := namespace(t, karmada, "e2e-deploy")
	total := int32(2 * len(members))

	g.Expect(karmada.Create(t.Context(), propagationPolicy(t, ns, "web", []policyv1alpha1.ResourceSelector{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
	}, true))).To(Succeed())
	g.Expect(karmada.Create(t.Context(), deployment(ns, "web", total))).To(Succeed())

	for name, m := range members {
		g.Eventually(func() (int32, error) {
			var d appsv1.Deployment
			err := m.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, &d)
			return d.Status.ReadyReplicas, err
		}).WithTimeout(timeout).WithPolling(poll).Should(Equal(int32(2)), "ready replicas in %s", name)
	}
	g.Eventually(func() (int32, error) {
		var d appsv1.Deployment
		err := karmada.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, &d)
		return d.Status.ReadyReplicas, err
	}).WithTimeout(timeout).WithPolling(poll).Should(Equal(total), "aggregated ready replicas on Karmada")

	// The binding's aggregated status has one healthy, applied item per member.
	g.Eventually(func(g Gomega) {
		var rb workv1alpha2.ResourceBinding
		g.Expect(karmada.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web-deployment"}, &rb)).To(Succeed())
		g.Expect(rb.Status.AggregatedStatus).To(HaveLen(len(members)))
		for _, item := range rb.Status.AggregatedStatus {
			g.Expect(members).To(HaveKey(item.ClusterName))
			g.Expect(item.Applied).To(BeTrue(), item.ClusterName)
			g.Expect(item.Health).To(Equal(workv1alpha2.ResourceHealthy), item.ClusterName)
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	// Every pod answers on its own IP with its own cluster and name.
	topo := testenv.Topology(t)
	hc := &http.Client{Timeout: 2 * time.Second}
	for name, m := range members {
		var pods corev1.PodList
		g.Expect(m.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(2))
		for _, pod := range pods.Items {
			ip := netip.MustParseAddr(pod.Status.PodIP)
			g.Expect(topo.Member(name).PodNetwork().Contains(ip)).To(BeTrue())
			g.Eventually(func() (podresponder.Answer, error) {
				var a podresponder.Answer
				resp, err := hc.Get(fmt.Sprintf("http://%s/", netip.AddrPortFrom(ip, 8080)))
				if err != nil {
					return a, err
				}
				defer resp.Body.Close()
				err = json.NewDecoder(resp.Body).Decode(&a)
				return a, err
			}).WithTimeout(30 * time.Second).WithPolling(poll).Should(And(
				HaveField("Cluster", name), HaveField("Pod", pod.Name), HaveField("Namespace", ns)))
		}
	}
}

// TestLbfedCRDsInstalled: lbfed's kinds are served by Karmada and by every member.
func TestLbfedCRDsInstalled(t *testing.T) {
	g := NewWithT(t)
	topo := testenv.Topology(t)
	for _, c := range append([]*localup.Cluster{topo.Karmada()}, topo.Members()...) {
		dc := newClient(t, c.RESTConfig())
		for _, kind := range []string{"LoadBalancerDriver", "LoadBalancer", "BackendGroup", "BackendRecord"} {
			_, err := dc.RESTMapper().RESTMapping(schema.GroupKind{Group: "lbcf.tkestack.io", Kind: kind}, "v1beta1")
			g.Expect(err).NotTo(HaveOccurred(), "%s on %s", kind, c.Name())
		}
	}
}

const backendGroupYAML = `
apiVersion: lbcf.tkestack.io/v1beta1
kind: BackendGroup
metadata:
  name: web
spec:
  loadBalancers: [web-vip]
  pods:
    byLabel:
      selector: {app: web}
    ports:
    - port: 8080
      protocol: TCP
`

// TestBackendGroupPropagates: a BackendGroup template on Karmada is duplicated to every member
// by a PropagationPolicy, spec intact.
func TestBackendGroupPropagates(t *testing.T) {
	g := NewWithT(t)
	karmada, members := clients(t)
	ns := namespace(t, karmada, "e2e-bg")

	bg := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal([]byte(backendGroupYAML), &bg.Object)).To(Succeed())
	bg.SetNamespace(ns)
	g.Expect(karmada.Create(t.Context(), propagationPolicy(t, ns, "web-bg", []policyv1alpha1.ResourceSelector{
		{APIVersion: "lbcf.tkestack.io/v1beta1", Kind: "BackendGroup", Name: "web"},
	}, false))).To(Succeed())
	g.Expect(karmada.Create(t.Context(), bg)).To(Succeed())
	wantSpec := bg.Object["spec"]

	for name, m := range members {
		g.Eventually(func(g Gomega) {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(bg.GroupVersionKind())
			g.Expect(m.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, got)).To(Succeed())
			selector, _, _ := unstructured.NestedStringMap(got.Object, "spec", "pods", "byLabel", "selector")
			g.Expect(selector).To(Equal(map[string]string{"app": "web"}))
			lbs, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "loadBalancers")
			g.Expect(lbs).To(Equal([]string{"web-vip"}))
			ports, _, _ := unstructured.NestedSlice(got.Object, "spec", "pods", "ports")
			g.Expect(ports).To(Equal(wantSpec.(map[string]any)["pods"].(map[string]any)["ports"]))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "BackendGroup in %s", name)
	}

	// Deleting the template removes it from the members.
	g.Expect(karmada.Delete(t.Context(), bg)).To(Succeed())
	for name, m := range members {
		g.Eventually(func() error {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(bg.GroupVersionKind())
			err := m.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, got)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return errors.Join(err, fmt.Errorf("still present in %s", name))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	}
}

// TestInterpreterWebhookByURL: a process started by an AfterReady hook and registered by URL
// with the run's CA is called by Karmada — the path lbfed's interpreter webhook takes.
func TestInterpreterWebhookByURL(t *testing.T) {
	g := NewWithT(t)
	karmada, _ := clients(t)
	topo := testenv.Topology(t)
	ns := namespace(t, karmada, "e2e-interp")

	riwc := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal([]byte(fmt.Sprintf(`
apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterWebhookConfiguration
metadata: {name: e2e-interpreter}
webhooks:
- name: deployments.e2e-interpreter.lbfed.io
  rules:
  - {operations: ["InterpretHealth"], apiGroups: ["apps"], apiVersions: ["v1"], kinds: ["Deployment"]}
  clientConfig:
    url: https://%s/interpreter
    caBundle: %s
  interpreterContextVersions: ["v1alpha1"]
  timeoutSeconds: 10
`, interpreterAddr, base64.StdEncoding.EncodeToString(topo.PKI().CAPEM()))), &riwc.Object)).To(Succeed())
	g.Expect(karmada.Create(t.Context(), riwc)).To(Succeed())
	t.Cleanup(func() { _ = karmada.Delete(context.Background(), riwc) })

	hc, err := caClient(topo.PKI().CAPEM())
	g.Expect(err).NotTo(HaveOccurred())
	calls := func() (int64, error) {
		resp, err := hc.Get("https://" + interpreterAddr + "/count")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var n int64
		err = json.NewDecoder(resp.Body).Decode(&n)
		return n, err
	}
	before, err := calls()
	g.Expect(err).NotTo(HaveOccurred())

	// The configuration is picked up asynchronously: keep creating work until Karmada asks.
	g.Expect(karmada.Create(t.Context(), propagationPolicy(t, ns, "web", []policyv1alpha1.ResourceSelector{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
	}, true))).To(Succeed())
	g.Expect(karmada.Create(t.Context(), deployment(ns, "web", 2))).To(Succeed())
	replicas := int32(2)
	g.Eventually(func() (int64, error) {
		replicas++
		var d appsv1.Deployment
		if err := karmada.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, &d); err != nil {
			return 0, err
		}
		d.Spec.Replicas = ptr.To(replicas % 5)
		if err := karmada.Update(t.Context(), &d); err != nil && !apierrors.IsConflict(err) {
			return 0, err
		}
		return calls()
	}).WithTimeout(timeout).WithPolling(time.Second).Should(BeNumerically(">", before))

	// Who calls: karmada-controller-manager for the Push members' objects, each Pull member's
	// karmada-agent for that member's (its work status controller): the webhook URL must be
	// reachable from where the agents run.
	callers := func(g Gomega) map[string]map[string]bool {
		resp, err := hc.Get("https://" + interpreterAddr + "/callers")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		var list []interpreterCall
		g.Expect(json.NewDecoder(resp.Body).Decode(&list)).To(Succeed())
		out := map[string]map[string]bool{} // member -> callers of InterpretHealth
		for _, c := range list {
			// "": the helper could not tell who called (the caller's socket was gone before its
			// scan of /proc found it, on a loaded machine); the next calls tell.
			if c.Operation == "InterpretHealth" && c.Cluster != "" && c.Caller != "" {
				if out[c.Cluster] == nil {
					out[c.Cluster] = map[string]bool{}
				}
				out[c.Cluster][c.Caller] = true
			}
		}
		return out
	}
	// A replica in every member, so that each has the Deployment to report on.
	g.Eventually(func() error {
		var d appsv1.Deployment
		if err := karmada.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, &d); err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To(int32(len(topo.Members())))
		return karmada.Update(t.Context(), &d)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	more := false
	g.Eventually(func(g Gomega) {
		// Each poll changes the replicas (as many as the members, or one more: one in every
		// member either way), so that the members' statuses change and Karmada interprets their
		// health again: one call whose caller could not be told must not decide the test.
		more = !more
		n := int32(len(topo.Members()))
		if more {
			n++
		}
		var d appsv1.Deployment
		if err := karmada.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, &d); err == nil {
			d.Spec.Replicas = ptr.To(n)
			_ = karmada.Update(t.Context(), &d)
		}
		byMember := callers(g)
		for _, m := range topo.Members() {
			want := "karmada-controller-manager"
			if m.SyncMode() == localup.SyncModePull {
				want = "karmada-agent"
			}
			g.Expect(byMember).To(HaveKeyWithValue(m.Name(), Equal(map[string]bool{want: true})), "InterpretHealth of %s's objects (%s)", m.Name(), m.SyncMode())
		}
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
}

func caClient(caPEM []byte) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("bad CA")
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
}

func freePort() (int, error) {
	p, err := localup.FreePorts(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}
