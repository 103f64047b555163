//go:build e2e

package federation_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
)

// bfeExample is a Deployment on m1 and m2 whose pods are registered, through one BackendGroup, on
// one BFE route; an OverridePolicy gives m2 three times m1's sub-cluster weight.
const bfeExample = `
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
%[4]s---
apiVersion: lbcf.tkestack.io/v1beta1
kind: LoadBalancer
metadata: {name: web-route, namespace: %[1]s}
spec:
  lbDriver: bfe
  lbSpec: {host: %[3]s, name: e2e_web}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.example/web:1
        ports: [{containerPort: 8080}]
---
apiVersion: lbcf.tkestack.io/v1beta1
kind: BackendGroup
metadata: {name: web, namespace: %[1]s}
spec:
  loadBalancers: [web-route]
  pods:
    byLabel: {selector: {app: web}}
    ports: [{port: 8080, protocol: TCP}]
  parameters: {weight: "1", lbfed.io/cluster-weight: "1"}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web, namespace: %[1]s}
spec:
  resourceSelectors:
  - {apiVersion: apps/v1, kind: Deployment, name: web}
  - {apiVersion: lbcf.tkestack.io/v1beta1, kind: BackendGroup, name: web}
  placement:
    clusterAffinity: {clusterNames: [m1, m2]}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        - {targetCluster: {clusterNames: [m1]}, weight: 1}
        - {targetCluster: {clusterNames: [m2]}, weight: 1}
---
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata: {name: web-weight, namespace: %[1]s}
spec:
  resourceSelectors:
  - {apiVersion: lbcf.tkestack.io/v1beta1, kind: BackendGroup, name: web}
  overrideRules:
  - targetCluster: {clusterNames: [m2]}
    overriders:
      plaintext:
      - {path: /spec/parameters/lbfed.io~1cluster-weight, operator: replace, value: "3"}
`

// TestFederatedBFE runs a real BFE (BFE_BIN, v1.8.4+) on loopback with elb-driver --backend=bfe:
// one BackendGroup propagated to both members behind one BFE route, the members' sub-cluster
// weights from an OverridePolicy, and traffic through BFE reaching pods of both members in that
// proportion.
func TestFederatedBFE(t *testing.T) {
	bin := os.Getenv("BFE_BIN")
	if bin == "" {
		t.Skip("BFE_BIN is not set: the federated BFE case needs a BFE binary")
	}
	w := newWorld(t)
	g := w.g
	w.ex = deploy.Example{Namespace: "e2e-bfe"}
	const host = "web.bfe.test"
	b := w.startBFE(bin, "bfe-e2e")
	httpAddr := b.HTTPAddr

	objs, err := localup.DecodeManifests([]byte(fmt.Sprintf(bfeExample, w.ex.Namespace, b.DriverURL, host, deploy.DriverYAML(w.ex.Namespace, "bfe", b.DriverURL, ""))))
	g.Expect(err).NotTo(HaveOccurred())
	for _, obj := range objs {
		g.Expect(deploy.Apply(w.ctx, w.karmada, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
	}

	// Every Ready pod of both members is registered.
	for _, m := range []string{"m1", "m2"} {
		g.Eventually(func(g Gomega) {
			pods := w.readyPods(m)
			g.Expect(pods).NotTo(BeEmpty())
			g.Expect(w.registered(m)).To(Equal(pods))
		}, wait, time.Second).Should(Succeed(), m)
	}
	g.Expect(len(w.readyPods("m1")) + len(w.readyPods("m2"))).To(Equal(4))

	// Traffic through BFE reaches both members, split 1:3 per request by the override.
	hc := &http.Client{Timeout: 2 * time.Second}
	split := func(n int) map[string]int {
		seen := map[string]int{}
		for i := 0; i < n; i++ {
			req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/", nil)
			req.Host = host
			rsp, err := hc.Do(req)
			if err != nil {
				seen["error"]++
				continue
			}
			var body struct {
				Cluster string `json:"cluster"`
			}
			if rsp.StatusCode != http.StatusOK || json.NewDecoder(rsp.Body).Decode(&body) != nil {
				body.Cluster = fmt.Sprintf("status %d", rsp.StatusCode)
			}
			rsp.Body.Close()
			seen[body.Cluster]++
		}
		return seen
	}
	g.Eventually(func(g Gomega) {
		seen := split(400)
		t.Logf("400 requests through BFE: %v", seen)
		g.Expect(seen).To(HaveLen(2))
		g.Expect(seen["m1"]).To(BeNumerically("~", 100, 45), "m1 has sub-cluster weight 1")
		g.Expect(seen["m2"]).To(BeNumerically("~", 300, 45), "m2 has sub-cluster weight 3 from the OverridePolicy")
	}, wait, 2*time.Second).Should(Succeed())
	g.Expect(metric(lbfed.FederationMetrics, "webhook_calls", `webhook_name="createLoadBalancer"`, w.ex.Namespace+"/bfe")).To(Equal(1.0),
		"the BFE route is created once for both members")
}

// startBFE runs BFE (the binary bin) and its driver as processes of the topology, named after
// name; BFE listens on 127.0.0.1, which is bfeAddress.
func (w *world) startBFE(bin, name string) *deploy.BFE {
	b, err := lbfed.StartBFE(w.ctx, w.topo, bin, name)
	w.g.Expect(err).NotTo(HaveOccurred())
	return b
}
