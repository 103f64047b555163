//go:build e2e

package federation_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"text/template"
	"time"

	networkingv1alpha1 "github.com/karmada-io/karmada/pkg/apis/networking/v1alpha1"
	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lbfed/lbfed/testinfra/deploy"
)

// mciApp is two Deployments, web and api, with their Services, propagated to every member; the
// shared BFE driver the MultiClusterIngress front door's LoadBalancers use (deploy.MCIDriver in
// kube-system); and three MultiClusterIngresses of lbfed's class. router.cookie and router.header
// hold for every route of a MultiClusterIngress, so the cookie and header rules are
// MultiClusterIngresses of their own, on routes of shop: requests with the cookie or header go to
// the other Service, the others fall through to shop's route.
var mciApp = template.Must(template.New("mci").Funcs(deploy.TemplateFuncs).Parse(`
apiVersion: v1
kind: Namespace
metadata: {name: {{.Namespace}}}
{{driver "kube-system" .Driver .DriverURL ""}}{{- range .Services}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: {{.}}, namespace: {{$.Namespace}}}
spec:
  replicas: {{len $.Members}}
  selector: {matchLabels: {app: {{.}}}}
  template:
    metadata: {labels: {app: {{.}}}}
    spec:
      containers:
      - name: {{.}}
        image: registry.example/{{.}}:1
        ports: [{containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: {{.}}, namespace: {{$.Namespace}}}
spec:
  selector: {app: {{.}}}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: {{.}}, namespace: {{$.Namespace}}}
spec:
  resourceSelectors:
  - {apiVersion: apps/v1, kind: Deployment, name: {{.}}}
  - {apiVersion: v1, kind: Service, name: {{.}}}
  placement:
    clusterAffinity: {clusterNames: [{{range $i, $m := $.Members}}{{if $i}}, {{end}}{{$m}}{{end}}]}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        {{- range $.Members}}
        - {targetCluster: {clusterNames: [{{.}}]}, weight: 1}
        {{- end}}
{{- end}}
---
apiVersion: networking.karmada.io/v1alpha1
kind: MultiClusterIngress
metadata:
  name: shop
  namespace: {{.Namespace}}
  annotations:
    # "split" is no Service: its path goes 1:3 to web and api.
    bfe.ingress.kubernetes.io/balance.weight: '{"split": {"web": 1, "api": 3}}'
spec:
  ingressClassName: {{.Class}}
  rules:
  - host: web.mci.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
  - host: api.mci.test
    http:
      paths:
      - {path: /v1, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}
  - host: split.mci.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: split, port: {number: 80}}}}
---
apiVersion: networking.karmada.io/v1alpha1
kind: MultiClusterIngress
metadata:
  name: shop-beta
  namespace: {{.Namespace}}
  annotations: {bfe.ingress.kubernetes.io/router.cookie: "tier:beta"}
spec:
  ingressClassName: {{.Class}}
  rules:
  - host: web.mci.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}
---
apiVersion: networking.karmada.io/v1alpha1
kind: MultiClusterIngress
metadata:
  name: shop-canary
  namespace: {{.Namespace}}
  annotations: {bfe.ingress.kubernetes.io/router.header: "X-Canary:1"}
spec:
  ingressClassName: {{.Class}}
  rules:
  - host: api.mci.test
    http:
      paths:
      - {path: /v1, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
`))

// mciRequest is a request through BFE; cookie is "name=value", header "Key:value".
type mciRequest struct {
	host, path, cookie, header string
}

// answer is who answered a request through BFE: the Service (the pod's Deployment) and member,
// or "status N" / "error" in service when no pod did.
type answer struct{ service, cluster string }

// sendThroughBFE sends n requests through BFE at addr and counts who answered.
func sendThroughBFE(addr string, r mciRequest, n int) map[answer]int {
	hc := &http.Client{Timeout: 2 * time.Second}
	seen := map[answer]int{}
	for i := 0; i < n; i++ {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+r.path, nil)
		req.Host = r.host
		if r.cookie != "" {
			req.Header.Set("Cookie", r.cookie)
		}
		if k, v, ok := strings.Cut(r.header, ":"); ok {
			req.Header.Set(k, v)
		}
		rsp, err := hc.Do(req)
		if err != nil {
			seen[answer{service: "error"}]++
			continue
		}
		var body struct {
			Cluster string `json:"cluster"`
			Pod     string `json:"pod"`
		}
		a := answer{service: fmt.Sprintf("status %d", rsp.StatusCode)}
		if rsp.StatusCode == http.StatusOK && json.NewDecoder(rsp.Body).Decode(&body) == nil && body.Pod != "" {
			svc, _, _ := strings.Cut(body.Pod, "-") // pods of Deployment web are web-<hash>-<id>
			a = answer{service: svc, cluster: body.Cluster}
		}
		rsp.Body.Close()
		seen[a]++
	}
	return seen
}

// byService sums counts per Service (or failure).
func byService(seen map[answer]int) map[string]int {
	out := map[string]int{}
	for a, n := range seen {
		out[a.service] += n
	}
	return out
}

// byCluster sums counts per member.
func byCluster(seen map[answer]int) map[string]int {
	out := map[string]int{}
	for a, n := range seen {
		if a.cluster != "" {
			out[a.cluster] += n
		}
	}
	return out
}

// TestMultiClusterIngress runs the MultiClusterIngress front door (lbfed-controller --mci-*)
// over a real BFE (BFE_BIN) and its driver: MultiClusterIngresses of lbfed's class with
// host/path rules, a router.cookie rule, a router.header rule and a balance.weight split across
// two Services, over Deployments in every member (the Pull member too). Their status shows BFE's
// address; requests through BFE with each rule's host, path, cookie and header reach the pods of
// the rule's Service in every member, the split follows the weights; deleting them takes their
// routes off BFE and deletes what lbfed generated.
func TestMultiClusterIngress(t *testing.T) {
	bin := os.Getenv("BFE_BIN")
	if bin == "" {
		t.Skip("BFE_BIN is not set: the MultiClusterIngress case needs a BFE binary")
	}
	w := newWorld(t)
	g := w.g
	karmada, err := client.New(w.topo.KarmadaConfig(), client.Options{Scheme: frontDoorScheme})
	g.Expect(err).NotTo(HaveOccurred())
	members := w.memberNames()
	w.ex = deploy.Example{Namespace: "e2e-mci", Members: members}
	b := w.startBFE(bin, "bfe-mci")
	services := []string{"web", "api"}
	mcis := []string{"shop", "shop-beta", "shop-canary"}
	driver := "kube-system/" + deploy.MCIDriver

	var manifest strings.Builder
	g.Expect(mciApp.Execute(&manifest, map[string]any{"Namespace": w.ex.Namespace, "Members": members, "Services": services,
		"Driver": deploy.MCIDriver, "DriverURL": b.DriverURL, "Class": deploy.MCIIngressClass})).To(Succeed())
	for _, doc := range strings.Split(manifest.String(), "\n---\n") {
		obj := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(doc), &obj.Object)).To(Succeed())
		if len(obj.Object) > 0 {
			g.Expect(deploy.Apply(w.ctx, w.karmada, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
		}
	}

	// generated lists what lbfed generated for the MultiClusterIngresses: the objects they own.
	generated := func(g Gomega) []string {
		var out []string
		for _, kind := range []string{"lbcf.tkestack.io/v1beta1/LoadBalancerList", "lbcf.tkestack.io/v1beta1/BackendGroupList", "policy.karmada.io/v1alpha1/PropagationPolicyList"} {
			i := strings.LastIndex(kind, "/")
			list := &unstructured.UnstructuredList{}
			list.SetAPIVersion(kind[:i])
			list.SetKind(kind[i+1:])
			g.Expect(w.karmada.List(w.ctx, list, client.InNamespace(w.ex.Namespace))).To(Succeed())
			for _, o := range list.Items {
				for _, ref := range o.GetOwnerReferences() {
					if ref.Kind == "MultiClusterIngress" {
						out = append(out, fmt.Sprintf("%s %s (of %s)", o.GetKind(), o.GetName(), ref.Name))
					}
				}
			}
		}
		sort.Strings(out)
		return out
	}
	countKind := func(objs []string, kind string) int {
		n := 0
		for _, o := range objs {
			if strings.HasPrefix(o, kind+" ") {
				n++
			}
		}
		return n
	}

	t.Run("status shows BFE's address and every member's pods are registered", func(t *testing.T) {
		g := NewWithT(t)
		for _, name := range mcis {
			g.Eventually(func(g Gomega) {
				m := &networkingv1alpha1.MultiClusterIngress{}
				g.Expect(karmada.Get(w.ctx, client.ObjectKey{Namespace: w.ex.Namespace, Name: name}, m)).To(Succeed())
				g.Expect(m.Status.LoadBalancer.Ingress).To(Equal([]networkingv1.IngressLoadBalancerIngress{{IP: bfeAddress}}),
					"conditions: %s", m.Annotations["lbfed.io/conditions"])
			}, 3*time.Minute, time.Second).Should(Succeed(), name)
		}
		objs := generated(g)
		t.Logf("generated: %v", objs)
		// shop: 3 routes, 4 groups (split has web and api); shop-beta and shop-canary: 1 route, 1 group each.
		g.Expect(countKind(objs, "LoadBalancer")).To(Equal(5))
		g.Expect(countKind(objs, "BackendGroup")).To(Equal(6))
		// Each Service has one pod per member, so each group registers one backend per member.
		for _, m := range members {
			g.Eventually(func() []string { return w.registered(m) }, wait, time.Second).Should(HaveLen(6), m)
		}
	})

	// Each rule's requests reach its Service's pods, in every member.
	probes := []struct {
		name string
		req  mciRequest
		want string
	}{
		{"host web.mci.test, path /", mciRequest{host: "web.mci.test", path: "/"}, "web"},
		{"host web.mci.test, a path under /", mciRequest{host: "web.mci.test", path: "/cart/1"}, "web"},
		{"host api.mci.test, path /v1", mciRequest{host: "api.mci.test", path: "/v1"}, "api"},
		{"host api.mci.test, a path under /v1", mciRequest{host: "api.mci.test", path: "/v1/items"}, "api"},
		{"router.cookie tier=beta on web.mci.test", mciRequest{host: "web.mci.test", path: "/", cookie: "tier=beta"}, "api"},
		{"another cookie falls through", mciRequest{host: "web.mci.test", path: "/", cookie: "tier=stable"}, "web"},
		{"router.header X-Canary:1 on api.mci.test/v1", mciRequest{host: "api.mci.test", path: "/v1/items", header: "X-Canary:1"}, "web"},
		{"another header value falls through", mciRequest{host: "api.mci.test", path: "/v1/items", header: "X-Canary:0"}, "api"},
	}
	t.Run("each rule's requests reach its Service's pods", func(t *testing.T) {
		for _, p := range probes {
			t.Run(p.name, func(t *testing.T) {
				g := NewWithT(t)
				g.Eventually(func(g Gomega) {
					seen := sendThroughBFE(b.HTTPAddr, p.req, 60)
					g.Expect(byService(seen)).To(Equal(map[string]int{p.want: 60}), "%v", seen)
					g.Expect(byCluster(seen)).To(HaveLen(len(members)), "pods of every member answer: %v", seen)
					t.Logf("%+v: %v", p.req, byCluster(seen))
				}, wait, 2*time.Second).Should(Succeed())
			})
		}
		g := NewWithT(t)
		// No rule matches: BFE has no route (the evidence that the routes above are the MultiClusterIngresses').
		for _, r := range []mciRequest{{host: "api.mci.test", path: "/v2"}, {host: "other.mci.test", path: "/"}} {
			seen := byService(sendThroughBFE(b.HTTPAddr, r, 5))
			t.Logf("%+v (no rule): %v", r, seen)
			g.Expect(seen).To(SatisfyAny(Equal(map[string]int{"status 500": 5}), Equal(map[string]int{"status 404": 5})), "%+v", r)
		}
	})

	t.Run("balance.weight splits the path 1:3 across web and api", func(t *testing.T) {
		g := NewWithT(t)
		const n = 400
		g.Eventually(func(g Gomega) {
			seen := sendThroughBFE(b.HTTPAddr, mciRequest{host: "split.mci.test", path: "/"}, n)
			t.Logf("%d requests to split.mci.test: per Service %v, per member %v", n, byService(seen), byCluster(seen))
			svc := byService(seen)
			g.Expect(svc).To(HaveLen(2), "only web and api answer")
			// Binomial(400, 1/4): σ ≈ 8.7; ±50 is almost 6σ.
			g.Expect(svc["web"]).To(BeNumerically("~", n/4, 50), "web has weight 1")
			g.Expect(svc["api"]).To(BeNumerically("~", 3*n/4, 50), "api has weight 3")
		}, wait, 2*time.Second).Should(Succeed())
	})

	t.Run("deleting the MultiClusterIngresses takes their routes off BFE and deletes what lbfed generated", func(t *testing.T) {
		g := NewWithT(t)
		lbs := countKind(generated(g), "LoadBalancer")
		created := metric(lbfed.FederationMetrics, "webhook_calls", `webhook_name="createLoadBalancer"`, driver)
		g.Expect(created).To(BeNumerically(">=", lbs), "the routes were created through the driver")
		before := metric(lbfed.FederationMetrics, "webhook_calls", `webhook_name="deleteLoadBalancer"`, driver)
		for _, name := range mcis {
			g.Expect(karmada.Delete(w.ctx, &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Namespace: w.ex.Namespace, Name: name}})).To(Succeed())
		}
		g.Eventually(generated, wait, time.Second).Should(BeEmpty())
		for _, p := range probes {
			g.Eventually(func() map[string]int { return byService(sendThroughBFE(b.HTTPAddr, p.req, 3)) }, wait, time.Second).
				Should(SatisfyAny(Equal(map[string]int{"status 500": 3}), Equal(map[string]int{"status 404": 3})), p.name)
		}
		g.Eventually(w.allRegistered, wait, time.Second).Should(BeEmpty())
		deleted := metric(lbfed.FederationMetrics, "webhook_calls", `webhook_name="deleteLoadBalancer"`, driver) - before
		t.Logf("LoadBalancers %d, deleteLoadBalancer calls %v", lbs, deleted)
		g.Expect(deleted).To(Equal(float64(lbs)), "each route is removed from BFE once")
	})
}
