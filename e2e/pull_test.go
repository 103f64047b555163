//go:build e2e

package e2e

import (
	"context"
	"syscall"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// TestPullMember: the Pull member joined through its karmada-agent: its Cluster shows syncMode
// Pull and Ready, with the API endpoint and the secrets the agent reported (what Karmada's
// cluster proxy needs), the Push members' show Push. Its Works are applied by that agent and by
// nothing else: while the agent is stopped, a new Deployment reaches the Push members and its
// Work for the Pull member is written, yet the Pull member does not get it; once the agent runs
// again it does, and Karmada aggregates its status.
func TestPullMember(t *testing.T) {
	g := NewWithT(t)
	topo := testenv.Topology(t)
	karmada, members := clients(t)

	var pull *localup.Cluster
	for _, m := range topo.Members() {
		if m.SyncMode() == localup.SyncModePull {
			pull = m
		}
	}
	g.Expect(pull).NotTo(BeNil(), "a Pull member in the topology")
	g.Expect(pull.NetNS()).To(BeEmpty(), "the Pull member stays in the host network namespace")
	g.Expect(pull.Link()).To(BeNil())

	clusterGVK := schema.GroupVersionKind{Group: "cluster.karmada.io", Version: "v1alpha1", Kind: "Cluster"}
	for _, m := range topo.Members() {
		c := &unstructured.Unstructured{}
		c.SetGroupVersionKind(clusterGVK)
		g.Expect(karmada.Get(t.Context(), client.ObjectKey{Name: m.Name()}, c)).To(Succeed())
		mode, _, _ := unstructured.NestedString(c.Object, "spec", "syncMode")
		g.Expect(mode).To(Equal(m.SyncMode()), "syncMode of %s", m.Name())
		g.Expect(clusterCondition(c, "Ready")).To(Equal("True"), "%s Ready", m.Name())
		if m == pull {
			endpoint, _, _ := unstructured.NestedString(c.Object, "spec", "apiEndpoint")
			g.Expect(endpoint).To(Equal(pull.Host()), "the agent's --cluster-api-endpoint, as karmadactl register sets it")
			for _, ref := range []string{"secretRef", "impersonatorSecretRef"} {
				name, _, _ := unstructured.NestedString(c.Object, "spec", ref, "name")
				g.Expect(name).NotTo(BeEmpty(), "the agent reported the member's %s", ref)
			}
		}
	}

	var agent *localup.Process
	for _, p := range topo.Processes() {
		if p.Name == "karmada-agent-"+pull.Name() {
			agent = p
		}
	}
	g.Expect(agent).NotTo(BeNil())

	ns := namespace(t, karmada, "e2e-pull")
	// The namespace reaches every member first (through the agent for the Pull member).
	for name, m := range members {
		g.Eventually(func() error {
			return m.Get(t.Context(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "namespace in %s", name)
	}
	g.Expect(karmada.Create(t.Context(), propagationPolicy(t, ns, "web", []policyv1alpha1.ResourceSelector{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
	}, false))).To(Succeed())

	g.Expect(syscall.Kill(agent.PID(), syscall.SIGSTOP)).To(Succeed())
	stopped := true
	defer func() {
		if stopped {
			_ = syscall.Kill(agent.PID(), syscall.SIGCONT)
		}
	}()
	g.Expect(karmada.Create(t.Context(), deployment(ns, "web", 1))).To(Succeed())
	ready := func(m client.Client) func() (int32, error) {
		return func() (int32, error) {
			var d appsv1.Deployment
			err := m.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, &d)
			return d.Status.ReadyReplicas, err
		}
	}
	for _, m := range topo.Members() {
		if m != pull {
			g.Eventually(ready(members[m.Name()])).WithTimeout(timeout).WithPolling(poll).Should(Equal(int32(1)), "Push member %s applied by karmada-controller-manager", m.Name())
		}
	}
	g.Eventually(func(g Gomega) {
		works := &unstructured.UnstructuredList{}
		works.SetGroupVersionKind(schema.GroupVersionKind{Group: "work.karmada.io", Version: "v1alpha1", Kind: "WorkList"})
		g.Expect(karmada.List(t.Context(), works, client.InNamespace("karmada-es-"+pull.Name()))).To(Succeed())
		found := false
		for _, w := range works.Items {
			manifests, _, _ := unstructured.NestedSlice(w.Object, "spec", "workload", "manifests")
			for _, mf := range manifests {
				o := unstructured.Unstructured{Object: mf.(map[string]any)}
				found = found || (o.GetKind() == "Deployment" && o.GetNamespace() == ns && o.GetName() == "web")
			}
		}
		g.Expect(found).To(BeTrue(), "the Pull member's Work holds the Deployment")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	err := members[pull.Name()].Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing but the stopped agent applies the Pull member's Work (got %v)", err)

	g.Expect(syscall.Kill(agent.PID(), syscall.SIGCONT)).To(Succeed())
	stopped = false
	g.Eventually(ready(members[pull.Name()])).WithTimeout(timeout).WithPolling(poll).Should(Equal(int32(1)), "applied by the agent once it runs")
	g.Eventually(func() (int32, error) {
		var d appsv1.Deployment
		err := karmada.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &d)
		return d.Status.ReadyReplicas, err
	}).WithTimeout(timeout).WithPolling(poll).Should(Equal(int32(len(members))), "the agent reports the Pull member's status")
}

// clusterCondition returns the status of a Karmada Cluster's condition.
func clusterCondition(c *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	for _, x := range conds {
		if m, ok := x.(map[string]any); ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return "Unknown"
}
