package deploy

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/testinfra/localup"
)

// Example is the demo application: a Deployment spread over the members and a BackendGroup
// registering its pods on one VIP of the shared front end.
type Example struct {
	Namespace string
	// VIP and Port of the LoadBalancer on the simulated Alteon (a loopback address).
	VIP  string
	Port int
	// Replicas of the Deployment, divided between the members.
	Replicas int
	// Members the example is propagated to.
	Members []string
	// ReadinessGate labels the namespace lbfed.io/readiness-gate-inject=enabled: the members'
	// webhook gives the pods lbfed's readiness gate, so that a rollout waits for the front end.
	ReadinessGate bool
	// PreStopSeconds gives the pods a preStop sleep: a terminating pod keeps serving that long,
	// while lbfed drains it on the front end (0: none, the pod stops answering at once).
	PreStopSeconds int
	// SharedDriver also declares the Radware driver as lbcf-radware in kube-system, the driver of
	// the LoadBalancers the Karmada front doors generate (MultiClusterService, Service
	// type=LoadBalancer; README quick start, examples/).
	SharedDriver bool
	// DriverURL, when set, is the drivers' URL instead of the deployment's elb-driver (e.g. a
	// proxy in front of it that injects faults); DriverTimeout their webhooks' timeout ("": 1m).
	DriverURL     string
	DriverTimeout string
}

var exampleTemplate = template.Must(template.New("example").Funcs(TemplateFuncs).Parse(`
apiVersion: v1
kind: Namespace
metadata:
  name: {{.Namespace}}
  {{- if .ReadinessGate}}
  labels: {lbfed.io/readiness-gate-inject: enabled}
  {{- end}}
{{driver .Namespace "radware" .URL .DriverTimeout}}
{{- if .SharedDriver}}
{{driver "kube-system" "lbcf-radware" .URL .DriverTimeout}}
{{- end}}
---
apiVersion: lbcf.tkestack.io/v1beta1
kind: LoadBalancer
metadata: {name: web-vip, namespace: {{.Namespace}}}
spec:
  lbDriver: radware
  lbSpec: {vip: "{{.VIP}}", port: "{{.Port}}", protocol: TCP, method: rr}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: {{.Namespace}}}
spec:
  replicas: {{.Replicas}}
  selector: {matchLabels: {app: web}}
  # A new pod first, an old one only once the new one is available.
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  template:
    metadata: {labels: {app: web}}
    spec:
      {{- if .PreStopSeconds}}
      terminationGracePeriodSeconds: {{.TerminationGracePeriod}}
      {{- end}}
      containers:
      - name: web
        image: registry.example/web:1
        ports: [{containerPort: 8080}]
        {{- if .PreStopSeconds}}
        lifecycle: {preStop: {sleep: {seconds: {{.PreStopSeconds}}}}}
        {{- end}}
---
apiVersion: lbcf.tkestack.io/v1beta1
kind: BackendGroup
metadata: {name: web, namespace: {{.Namespace}}}
spec:
  loadBalancers: [web-vip]
  pods:
    byLabel: {selector: {app: web}}
    ports: [{port: 8080, protocol: TCP}]
  parameters: {weight: "1"}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web, namespace: {{.Namespace}}}
spec:
  resourceSelectors:
  - {apiVersion: apps/v1, kind: Deployment, name: web}
  - {apiVersion: lbcf.tkestack.io/v1beta1, kind: BackendGroup, name: web}
  placement:
    clusterAffinity:
      clusterNames: [{{range $i, $m := .Members}}{{if $i}}, {{end}}{{$m}}{{end}}]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
{{- range .Members}}
        - {targetCluster: {clusterNames: [{{.}}]}, weight: 1}
{{- end}}
`))

// Objects returns the example's objects for the Karmada API server.
func (e Example) Objects(d *Deployment) ([]*unstructured.Unstructured, error) {
	var b strings.Builder
	if err := exampleTemplate.Execute(&b, struct {
		Example
		URL                    string
		TerminationGracePeriod int
	}{e, cmp.Or(e.DriverURL, d.DriverURL), e.PreStopSeconds + 20}); err != nil {
		return nil, err
	}
	return localup.DecodeManifests([]byte(b.String()))
}

// Apply creates the example on the Karmada API server.
func (e Example) Apply(ctx context.Context, karmada client.Client, d *Deployment) error {
	objs, err := e.Objects(d)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := Apply(ctx, karmada, o); err != nil {
			return fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// ReadyBackends returns "ip:8080" of the example's Ready pods in namespace ns of one cluster
// (not terminating), sorted: the addresses lbfed must have registered for that cluster.
func ReadyBackends(ctx context.Context, c client.Reader, ns string) ([]string, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": "web"}); err != nil {
		return nil, err
	}
	out := []string{}
	for _, p := range list.Items {
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		if ready && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			out = append(out, p.Status.PodIP+":8080")
		}
	}
	sort.Strings(out)
	return out, nil
}
