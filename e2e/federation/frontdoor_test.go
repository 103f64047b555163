//go:build e2e

package federation_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"text/template"
	"time"

	networkingv1alpha1 "github.com/karmada-io/karmada/pkg/apis/networking/v1alpha1"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lbfed/lbfed/elb/radware/alteon"
	"github.com/lbfed/lbfed/frontdoor"
	"github.com/lbfed/lbfed/frontdoor/mcs"
	"github.com/lbfed/lbfed/frontdoor/service"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/deploy"
)

// frontDoorScheme adds the Karmada kinds of the front doors to the suite's.
var frontDoorScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = lbcfv1beta1.AddToScheme(s)
	_ = frontdoor.AddToScheme(s)
	return s
}()

// frontDoorApp is a Deployment over the members with its Service and a PropagationPolicy for
// both, plus the shared Radware driver the front doors' LoadBalancers use (lbcf-radware in
// kube-system, the default of --federation-frontdoor-driver).
var frontDoorApp = template.Must(template.New("app").Funcs(deploy.TemplateFuncs).Parse(`
apiVersion: v1
kind: Namespace
metadata: {name: {{.Namespace}}}
{{driver "kube-system" "lbcf-radware" .DriverURL ""}}---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: {{.Namespace}}}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.example/web:1
        ports: [{name: http, containerPort: 8080}, {name: alt, containerPort: 8081}]
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: {{.Namespace}}
  {{- if .ServiceLB}}
  annotations: {lb.zdns.cn/vip: "{{.VIP}}"}
  {{- end}}
spec:
  {{- if .ServiceLB}}
  type: LoadBalancer
  loadBalancerClass: {{.Class}}
  {{- end}}
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web, namespace: {{.Namespace}}}
spec:
  resourceSelectors:
  - {apiVersion: apps/v1, kind: Deployment, name: web}
  - {apiVersion: v1, kind: Service, name: web}
  placement:
    clusterAffinity: {clusterNames: [m1, m2]}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        - {targetCluster: {clusterNames: [m1]}, weight: 1}
        - {targetCluster: {clusterNames: [m2]}, weight: 1}
{{- if not .ServiceLB}}
---
apiVersion: networking.karmada.io/v1alpha1
kind: MultiClusterService
metadata:
  name: web
  namespace: {{.Namespace}}
  annotations: {lb.zdns.cn/vip: "{{.VIP}}"}
spec:
  types: [LoadBalancer]
{{- end}}
`))

func (w *world) applyFrontDoorApp(serviceLB bool) {
	var b strings.Builder
	w.g.Expect(frontDoorApp.Execute(&b, map[string]any{"Namespace": w.ex.Namespace, "VIP": w.ex.VIP, "DriverURL": lbfed.DriverURL,
		"ServiceLB": serviceLB, "Class": service.DefaultLoadBalancerClass})).To(Succeed())
	for _, doc := range strings.Split(b.String(), "\n---\n") {
		obj := &unstructured.Unstructured{}
		w.g.Expect(yaml.Unmarshal([]byte(doc), &obj.Object)).To(Succeed())
		if len(obj.Object) == 0 {
			continue
		}
		w.g.Expect(deploy.Apply(w.ctx, w.karmada, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
	}
}

// virtualServers lists the VIPs of the virtual servers on the simulated pair's master.
func (w *world) virtualServers(g Gomega) []string {
	var out []string
	for _, url := range lbfed.AlteonURLs {
		c, err := alteon.NewClient(alteon.Config{URL: url, User: "admin", Password: lbfed.AlteonPassword, Attempts: 1})
		g.Expect(err).NotTo(HaveOccurred())
		rows, err := c.List(w.ctx, alteon.TableVirtServer)
		if err != nil {
			continue // the backup unit may refuse reads while syncing
		}
		for _, r := range rows {
			out = append(out, r.Str("VirtServerIpAddress"))
		}
		return out
	}
	return out
}

// TestMultiClusterServiceLoadBalancer: a MultiClusterService of type LoadBalancer over a
// Deployment and Service propagated to both members puts one VIP on the Alteon whose traffic
// reaches pods of both; scaling follows; deleting the MultiClusterService removes the virtual
// server from the device once.
func TestMultiClusterServiceLoadBalancer(t *testing.T) {
	w := newWorld(t)
	g := w.g
	karmada, err := client.New(w.topo.KarmadaConfig(), client.Options{Scheme: frontDoorScheme})
	g.Expect(err).NotTo(HaveOccurred())
	w.ex = deploy.Example{Namespace: "e2e-mcs", VIP: fmt.Sprintf("127.4.%d.%d", rand.IntN(250), rand.IntN(250)+1), Port: 80}
	w.applyFrontDoorApp(false)
	m := &networkingv1alpha1.MultiClusterService{}
	key := client.ObjectKey{Namespace: w.ex.Namespace, Name: "web"}

	matches := func(member string) func(g Gomega) {
		return func(g Gomega) {
			pods := w.readyPods(member)
			g.Expect(pods).NotTo(BeEmpty())
			g.Expect(w.registered(member)).To(Equal(pods))
		}
	}
	t.Run("the VIP reaches pods of both members and shows in status", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			g.Expect(karmada.Get(w.ctx, key, m)).To(Succeed())
			g.Expect(m.Status.LoadBalancer.Ingress).To(Equal([]corev1.LoadBalancerIngress{{IP: w.ex.VIP}}))
			c := meta.FindStatusCondition(m.Status.Conditions, frontdoor.ConditionLoadBalancer)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		}, wait, time.Second).Should(Succeed())
		g.Eventually(matches("m1"), wait, time.Second).Should(Succeed())
		g.Eventually(matches("m2"), wait, time.Second).Should(Succeed())
		g.Eventually(func() map[string]int { return w.clustersBehindVIP(40) }, wait, time.Second).Should(And(HaveKey("m1"), HaveKey("m2")),
			"traffic through the VIP reaches pods of both members")
		lbs := &lbcfv1beta1.LoadBalancerList{}
		g.Expect(karmada.List(w.ctx, lbs, client.InNamespace(w.ex.Namespace), client.MatchingLabels{frontdoor.LabelFrontDoor: mcs.Kind})).To(Succeed())
		g.Expect(lbs.Items).To(HaveLen(1))
		g.Expect(metric(lbfed.FederationMetrics, "webhook_calls", `webhook_name="createLoadBalancer"`, "kube-system/lbcf-radware")).To(BeNumerically(">=", 1.0))
	})

	t.Run("scaling follows on the device", func(t *testing.T) {
		g := NewWithT(t)
		dep := &appsv1.Deployment{}
		g.Expect(w.karmada.Get(w.ctx, key, dep)).To(Succeed())
		five := int32(5)
		dep.Spec.Replicas = &five
		g.Expect(w.karmada.Update(w.ctx, dep)).To(Succeed())
		g.Eventually(func() int { return len(w.readyPods("m1")) + len(w.readyPods("m2")) }, wait, time.Second).Should(Equal(5))
		g.Eventually(matches("m1"), wait, time.Second).Should(Succeed())
		g.Eventually(matches("m2"), wait, time.Second).Should(Succeed())
		g.Eventually(func(g Gomega) {
			weights := w.deviceWeights(g)
			for _, addr := range append(w.registered("m1"), w.registered("m2")...) {
				g.Expect(weights).To(HaveKey(strings.Split(addr, ":")[0]))
			}
		}, wait, time.Second).Should(Succeed())
	})

	t.Run("a per-cluster weight set by an OverridePolicy on the generated groups reaches the device", func(t *testing.T) {
		g := NewWithT(t)
		op := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(fmt.Sprintf(`
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata: {name: web-weight, namespace: %s}
spec:
  resourceSelectors:
  - apiVersion: lbcf.tkestack.io/v1beta1
    kind: BackendGroup
    labelSelector: {matchLabels: {%s: %s, %s: web}}
  overrideRules:
  - targetCluster: {clusterNames: [m2]}
    overriders:
      plaintext:
      - {path: /spec/parameters/weight, operator: replace, value: "3"}
`, w.ex.Namespace, frontdoor.LabelFrontDoor, mcs.Kind, frontdoor.LabelFrontDoorName)), &op.Object)).To(Succeed())
		g.Expect(deploy.Apply(w.ctx, w.karmada, op)).To(Succeed())
		g.Eventually(func(g Gomega) {
			weights := w.deviceWeights(g)
			m1, m2 := w.readyPods("m1"), w.readyPods("m2")
			g.Expect(m1).NotTo(BeEmpty())
			g.Expect(m2).NotTo(BeEmpty())
			for _, addr := range m1 {
				g.Expect(weights).To(HaveKeyWithValue(strings.Split(addr, ":")[0], 1))
			}
			for _, addr := range m2 {
				g.Expect(weights).To(HaveKeyWithValue(strings.Split(addr, ":")[0], 3))
			}
		}, wait, time.Second).Should(Succeed())
	})

	t.Run("a member whose API server stops is withdrawn after the grace period, as for BackendGroups", func(t *testing.T) {
		g := NewWithT(t)
		resume := w.pause("m2-apiserver")
		defer resume()
		g.Eventually(w.registered, 3*time.Minute, time.Second).WithArguments("m2").Should(BeEmpty())
		g.Eventually(func() map[string]int { return w.clustersBehindVIP(20) }, wait, time.Second).Should(And(HaveKey("m1"), Not(HaveKey("m2"))))
		resume()
		// As in TestFederatedLoadBalancing: kwok does not re-report pods the node lifecycle
		// controller marked NotReady meanwhile; do it in its place.
		g.Eventually(func(g Gomega) {
			list := &corev1.PodList{}
			g.Expect(w.members["m2"].List(w.ctx, list, client.InNamespace(w.ex.Namespace), client.MatchingLabels{"app": "web"})).To(Succeed())
			for i := range list.Items {
				p := &list.Items[i]
				for j, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
						p.Status.Conditions[j].Status = corev1.ConditionTrue
						_ = w.members["m2"].Status().Update(w.ctx, p)
					}
				}
			}
			matches("m2")(g)
		}, 4*time.Minute, 2*time.Second).Should(Succeed())
	})

	t.Run("deleting the MultiClusterService removes the virtual server once", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(w.virtualServers, wait, time.Second).Should(ContainElement(w.ex.VIP))
		before := metric(lbfed.FederationMetrics, "webhook_calls", `webhook_name="deleteLoadBalancer"`, "kube-system/lbcf-radware")
		g.Expect(karmada.Get(w.ctx, key, m)).To(Succeed())
		g.Expect(karmada.Delete(w.ctx, m)).To(Succeed())
		g.Eventually(w.virtualServers, wait, time.Second).ShouldNot(ContainElement(w.ex.VIP))
		g.Eventually(func() int { return len(w.registered("m1")) + len(w.registered("m2")) }, wait, time.Second).Should(BeZero())
		g.Expect(metric(lbfed.FederationMetrics, "webhook_calls", `webhook_name="deleteLoadBalancer"`, "kube-system/lbcf-radware") - before).To(Equal(1.0))
		g.Expect(w.clustersBehindVIP(3)).To(BeEmpty(), "the VIP is gone from the device")
	})
}

// TestServiceTypeLoadBalancerOnKarmada: a Service type=LoadBalancer of lbfed's class created on
// Karmada and propagated to both members gets one VIP: it shows in the template's status and in
// both members', traffic through it reaches pods of both, and the status stays while the front
// door acts (a port added: a second virtual server); deleting the Service removes the VIPs.
func TestServiceTypeLoadBalancerOnKarmada(t *testing.T) {
	w := newWorld(t)
	w.ex = deploy.Example{Namespace: "e2e-svclb", VIP: fmt.Sprintf("127.5.%d.%d", rand.IntN(250), rand.IntN(250)+1), Port: 80}
	w.applyFrontDoorApp(true)
	key := client.ObjectKey{Namespace: w.ex.Namespace, Name: "web"}
	vip := []corev1.LoadBalancerIngress{{IP: w.ex.VIP}}
	// statuses is the status.loadBalancer.ingress of the template and of each member's copy.
	statuses := func(g Gomega) map[string][]corev1.LoadBalancerIngress {
		out := map[string][]corev1.LoadBalancerIngress{}
		clients := map[string]client.Client{"karmada": w.karmada, "m1": w.members["m1"], "m2": w.members["m2"]}
		for name, c := range clients {
			svc := &corev1.Service{}
			g.Expect(c.Get(w.ctx, key, svc)).To(Succeed(), name)
			var ips []corev1.LoadBalancerIngress
			for _, in := range svc.Status.LoadBalancer.Ingress {
				ips = append(ips, corev1.LoadBalancerIngress{IP: in.IP, Hostname: in.Hostname})
			}
			out[name] = ips
		}
		return out
	}
	everywhere := map[string][]corev1.LoadBalancerIngress{"karmada": vip, "m1": vip, "m2": vip}

	t.Run("the VIP shows on Karmada and in both members, and traffic flows", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(statuses, wait, time.Second).Should(Equal(everywhere))
		g.Eventually(func() map[string]int { return w.clustersBehindVIP(40) }, wait, time.Second).Should(And(HaveKey("m1"), HaveKey("m2")))
	})

	t.Run("the status stays while the front door acts", func(t *testing.T) {
		g := NewWithT(t)
		svc := &corev1.Service{}
		g.Expect(w.karmada.Get(w.ctx, key, svc)).To(Succeed())
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "alt", Port: 81, TargetPort: svc.Spec.Ports[0].TargetPort})
		svc.Spec.Ports[1].TargetPort.StrVal = "alt"
		g.Expect(w.karmada.Update(w.ctx, svc)).To(Succeed())
		acted := time.Now()
		g.Consistently(statuses, 10*time.Second, 200*time.Millisecond).Should(Equal(everywhere))
		// Evidence the front door acted during that window: the second port's LoadBalancer.
		lb := &lbcfv1beta1.LoadBalancer{}
		g.Eventually(func(g Gomega) {
			g.Expect(w.karmada.Get(w.ctx, client.ObjectKey{Namespace: w.ex.Namespace, Name: frontdoor.Name(service.Kind, "web", frontdoor.Port{Port: 81, Protocol: corev1.ProtocolTCP})}, lb)).To(Succeed())
			g.Expect(lb.IsCreated()).To(BeTrue())
		}, wait, time.Second).Should(Succeed())
		g.Expect(lb.CreationTimestamp.Time).To(BeTemporally(">=", acted.Add(-time.Second)))
		g.Expect(lb.CreationTimestamp.Time).To(BeTemporally("<=", acted.Add(10*time.Second)))
		g.Expect(statuses(g)).To(Equal(everywhere))
		hc := &http.Client{Timeout: 2 * time.Second}
		g.Eventually(func() error {
			rsp, err := hc.Get(fmt.Sprintf("http://%s:81/", w.ex.VIP))
			if err == nil {
				rsp.Body.Close()
			}
			return err
		}, wait, time.Second).Should(Succeed(), "the added port serves")
	})

	t.Run("deleting the Service removes its virtual servers", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(w.karmada.Delete(w.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.ex.Namespace, Name: "web"}})).To(Succeed())
		g.Eventually(w.virtualServers, wait, time.Second).ShouldNot(ContainElement(w.ex.VIP))
		g.Expect(w.clustersBehindVIP(3)).To(BeEmpty())
	})
}
