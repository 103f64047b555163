//go:build kind

package kind_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/traffic"
)

// vipAnswers: the demo's VIP answers from the containers of both members.
func (e *env) vipAnswers() {
	g := NewWithT(e.t)
	g.Eventually(func(g Gomega) {
		bg := &lbcfv1beta1.BackendGroup{}
		g.Expect(e.karmada.Get(e.ctx, client.ObjectKey{Namespace: demoNS, Name: "web"}, bg)).To(Succeed())
		g.Expect(bg.Status.RegisteredBackends).To(Equal(int32(4)))
	}, 3*time.Minute, 2*time.Second).Should(Succeed())
	l := traffic.Start("http://"+demoVIP+"/", traffic.Interval, time.Minute)
	time.Sleep(4 * time.Second)
	res := l.Stop()
	e.t.Logf("%s", res)
	g.Expect(res.Failed).To(BeZero())
	g.Expect(res.ByMember).To(And(HaveKey("m1"), HaveKey("m2")))
}

// controllerPods returns the names of lbfed-controller's pods that are Ready and not deleting.
func (e *env) controllerPods(g Gomega) []string {
	list := &corev1.PodList{}
	g.Expect(e.host.List(e.ctx, list, client.InNamespace(lbfedNS), client.MatchingLabels{"app.kubernetes.io/instance": lbfedRelease,
		"app.kubernetes.io/component": "controller"})).To(Succeed())
	var out []string
	for _, p := range list.Items {
		if podReady(&p) && p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// upgrade: helm upgrade of lbfed with a changed value replaces both replicas while no request
// through the VIP fails.
func (e *env) upgrade(figures map[string]string) {
	g := NewWithT(e.t)
	before := e.controllerPods(g)
	g.Expect(before).To(HaveLen(2))
	l := traffic.Start("http://"+demoVIP+"/", traffic.Interval, 10*time.Minute)
	defer l.Stop()
	start := time.Now()
	out, err := e.helmCmd("upgrade", lbfedRelease, "../../charts/lbfed", "--namespace", lbfedNS, "--reuse-values",
		"--set", "controller.logVerbosity=1", "--wait", "--timeout", "8m")
	g.Expect(err).NotTo(HaveOccurred(), out)
	took := time.Since(start)
	// Some traffic after the rollout too: the new leader programs the device.
	time.Sleep(5 * time.Second)
	res := l.Stop()
	after := e.controllerPods(g)
	figures["helm upgrade of lbfed"] = fmt.Sprintf("%s; replicas %v → %v; %s", took.Round(time.Second), before, after, res)
	g.Expect(after).To(HaveLen(2))
	for _, p := range before {
		g.Expect(after).NotTo(ContainElement(p), "both replicas rolled")
	}
	d := &appsv1.Deployment{}
	g.Expect(e.host.Get(e.ctx, client.ObjectKey{Namespace: lbfedNS, Name: "lbfed-controller"}, d)).To(Succeed())
	g.Expect(strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")).To(ContainSubstring("--v=1"))
	g.Expect(res.Failed).To(BeZero(), "no request fails while lbfed-controller rolls")
	g.Expect(res.ByMember).To(And(HaveKey("m1"), HaveKey("m2")))
}

// helmTest: helm test of both releases.
func (e *env) helmTest() {
	g := NewWithT(e.t)
	for _, r := range []struct{ release, ns string }{{lbfedRelease, lbfedNS}, {driverRelease, driverNS}} {
		out, err := e.helmCmd("test", r.release, "--namespace", r.ns, "--timeout", "5m")
		e.t.Logf("helm test %s:\n%s", r.release, out)
		g.Expect(err).NotTo(HaveOccurred(), out)
	}
}

// uninstall: after the LB objects are deleted as the chart README says, helm uninstall of both
// releases leaves nothing of lbfed in any API server.
func (e *env) uninstall() {
	g := NewWithT(e.t)
	// The LB objects go first, while lbfed deregisters them; a driver is deleted once labelled
	// draining (LBCF).
	var nss corev1.NamespaceList
	g.Expect(e.karmada.List(e.ctx, &nss)).To(Succeed())
	for _, ns := range nss.Items {
		for _, o := range []client.Object{&lbcfv1beta1.BackendGroup{}, &lbcfv1beta1.LoadBalancer{}} {
			g.Expect(e.karmada.DeleteAllOf(e.ctx, o, client.InNamespace(ns.Name))).To(Succeed())
		}
	}
	g.Eventually(func(g Gomega) {
		l := &lbcfv1beta1.LoadBalancerList{}
		g.Expect(e.karmada.List(e.ctx, l)).To(Succeed())
		g.Expect(l.Items).To(BeEmpty())
	}, 3*time.Minute, 2*time.Second).Should(Succeed(), "the LoadBalancers are deleted from the device and go")
	drivers := &lbcfv1beta1.LoadBalancerDriverList{}
	g.Expect(e.karmada.List(e.ctx, drivers)).To(Succeed())
	for i := range drivers.Items {
		d := &drivers.Items[i]
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+lbcfv1beta1.DriverDrainingLabel+`":"true"}}}`))
		g.Expect(e.karmada.Patch(e.ctx, d, patch)).To(Succeed())
		g.Expect(e.karmada.Delete(e.ctx, d)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, l := range []client.ObjectList{&lbcfv1beta1.BackendRecordList{}, &lbcfv1beta1.BackendGroupList{}, &lbcfv1beta1.LoadBalancerList{}, &lbcfv1beta1.LoadBalancerDriverList{}} {
			g.Expect(e.karmada.List(e.ctx, l)).To(Succeed())
			g.Expect(names(l)).To(BeEmpty(), "%T on karmada-apiserver", l)
		}
	}, 3*time.Minute, 2*time.Second).Should(Succeed(), "lbfed removed its finalizers and deregistered every backend")
	// The check sees the installation before it is gone.
	installed := e.leftovers(g)
	for _, want := range []string{"host: Deployment karmada-system/lbfed-controller", "host: Deployment lbfed-driver/lbcf-elb-driver",
		"m1: Deployment lbfed-system/lbcf-controller", "m2: Deployment lbfed-system/lbcf-controller",
		"karmada-apiserver: ResourceInterpreterWebhookConfiguration /lbfed-interpreter", "m1: ValidatingWebhookConfiguration /lbfed-lbcf-controller"} {
		g.Expect(installed).To(ContainElement(want))
	}
	for _, r := range []struct{ release, ns string }{{driverRelease, driverNS}, {lbfedRelease, lbfedNS}} {
		out, err := e.helmCmd("uninstall", r.release, "--namespace", r.ns, "--wait", "--timeout", "5m")
		g.Expect(err).NotTo(HaveOccurred(), out)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(e.leftovers(g)).To(BeEmpty())
	}, 3*time.Minute, 2*time.Second).Should(Succeed())
}

// names lists the namespace/name of a list's items.
func names(l client.ObjectList) []string {
	u := &unstructured.UnstructuredList{}
	raw, _ := json.Marshal(l)
	_ = json.Unmarshal(raw, u)
	var out []string
	for _, i := range u.Items {
		out = append(out, i.GetNamespace()+"/"+i.GetName())
	}
	return out
}

// leftovers lists what of lbfed is still in karmada-apiserver, the host cluster or a member:
// objects labelled as the charts', webhook and interpreter registrations, lbfed-controller's and
// lbcf-controller's Deployments, any LBCF object, and the members' lbfed-system namespace. The
// CRDs stay by design (deleting them would delete every LoadBalancer); they are not counted.
func (e *env) leftovers(g Gomega) []string {
	var out []string
	byLabel := func(where string, c client.Client, gvk schema.GroupVersionKind, sel client.ListOption) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(e.ctx, l, sel); err != nil {
			return // a kind this cluster does not serve
		}
		for _, i := range l.Items {
			if i.GetDeletionTimestamp() == nil || len(i.GetFinalizers()) > 0 {
				out = append(out, fmt.Sprintf("%s: %s %s/%s", where, gvk.Kind, i.GetNamespace(), i.GetName()))
			}
		}
	}
	charts, err := labels.Parse("app.kubernetes.io/part-of in (lbfed, lbcf)")
	g.Expect(err).NotTo(HaveOccurred())
	lbfedObjects := client.MatchingLabelsSelector{Selector: charts}
	kinds := []schema.GroupVersionKind{
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Version: "v1", Kind: "Service"},
		{Version: "v1", Kind: "Secret"},
		{Version: "v1", Kind: "ServiceAccount"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"},
		{Group: "config.karmada.io", Version: "v1alpha1", Kind: "ResourceInterpreterWebhookConfiguration"},
		{Group: "config.karmada.io", Version: "v1alpha1", Kind: "ResourceInterpreterCustomization"},
		{Group: "policy.karmada.io", Version: "v1alpha1", Kind: "ClusterPropagationPolicy"},
		{Group: "policy.karmada.io", Version: "v1alpha1", Kind: "ClusterOverridePolicy"},
	}
	clusters := map[string]client.Client{"karmada-apiserver": e.karmada, "host": e.host}
	for m, c := range e.members {
		clusters[m] = c
	}
	for where, c := range clusters {
		for _, k := range kinds {
			byLabel(where, c, k, lbfedObjects)
		}
		for _, k := range []string{"BackendRecord", "BackendGroup", "LoadBalancer", "LoadBalancerDriver"} {
			byLabel(where, c, lbcfv1beta1.SchemeGroupVersion.WithKind(k), client.InNamespace(""))
		}
	}
	// The namespace the chart made in the members (member.namespace): gone, not even
	// Terminating on a stuck finalizer.
	for m, c := range e.members {
		ns := &corev1.Namespace{}
		if err := c.Get(e.ctx, client.ObjectKey{Name: "lbfed-system"}, ns); err == nil {
			out = append(out, fmt.Sprintf("%s: Namespace lbfed-system (%s)", m, ns.Status.Phase))
		}
	}
	sort.Strings(out)
	return out
}
