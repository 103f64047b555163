package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// openObjects are the values objects the schemas leave open (any key): Kubernetes objects and
// maps the charts pass through, which the API server checks. Every other object is closed, so
// a mistyped key fails helm lint, template and install.
var openObjects = map[string][]string{
	lbfedChart: {
		"controller.affinity", "controller.livenessProbe", "controller.metricsService.annotations", "controller.nodeSelector",
		"controller.podAnnotations", "controller.podLabels", "controller.podSecurityContext", "controller.readinessProbe",
		"controller.securityContext", "controller.serviceAnnotations", "karmada.kubectl.resources.limits",
		"karmada.kubectl.resources.requests", "controller.resources.limits", "controller.resources.requests",
		"member.affinity", "member.clusterAffinity", "member.livenessProbe", "member.metricsService.annotations",
		"member.nodeSelector", "member.podAnnotations", "member.podLabels", "member.podSecurityContext",
		"member.readinessProbe", "member.resources.limits", "member.resources.requests", "member.securityContext",
		"member.webhook.clusterURLs", "monitoring.prometheusRule.labels", "monitoring.serviceMonitor.labels",
		"networkPolicy.metrics.namespaceSelector", "networkPolicy.metrics.podSelector", "tests.loadBalancer.lbSpec",
	},
	lbcfChart: {
		"controller.affinity", "controller.livenessProbe", "controller.metricsService.annotations", "controller.nodeSelector",
		"controller.podAnnotations", "controller.podLabels", "controller.podSecurityContext", "controller.readinessProbe",
		"controller.resources.limits", "controller.resources.requests", "controller.securityContext",
		"controller.serviceAccount.annotations", "elbController.affinity", "elbController.livenessProbe",
		"elbController.metricsService.annotations", "elbController.nodeSelector", "elbController.podAnnotations",
		"elbController.podLabels", "elbController.podSecurityContext", "elbController.readinessProbe",
		"elbController.resources.limits", "elbController.resources.requests", "elbController.securityContext",
		"elbController.serviceAccount.annotations", "elbDriver.affinity", "elbDriver.bfe.dataVolume",
		"elbDriver.livenessProbe", "elbDriver.metricsService.annotations", "elbDriver.nodeSelector",
		"elbDriver.podAnnotations", "elbDriver.podLabels", "elbDriver.podSecurityContext", "elbDriver.readinessProbe",
		"elbDriver.resources.limits", "elbDriver.resources.requests", "elbDriver.securityContext",
		"elbDriver.service.annotations", "networkPolicy.metrics.namespaceSelector", "networkPolicy.metrics.podSelector",
		"tests.kubectl.resources.limits", "tests.kubectl.resources.requests",
	},
}

// TestValuesSchemaMatchesValues: each schema has exactly the keys of values.yaml, every object
// closed but the listed open ones, and values.yaml itself valid (helm lint checks that too).
func TestValuesSchemaMatchesValues(t *testing.T) {
	for _, chart := range []string{lbfedChart, lbcfChart} {
		t.Run(chart, func(t *testing.T) {
			g := NewWithT(t)
			var values map[string]any
			data, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(yaml.Unmarshal(data, &values)).To(Succeed())
			var schema map[string]any
			data, err = os.ReadFile(filepath.Join(chart, "values.schema.json"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(json.Unmarshal(data, &schema)).To(Succeed())
			var open, problems []string
			walkSchema(schema, values, "", &open, &problems)
			g.Expect(problems).To(BeEmpty())
			sort.Strings(open)
			want := append([]string(nil), openObjects[chart]...)
			sort.Strings(want)
			g.Expect(open).To(Equal(want), "objects the schema leaves open")
		})
	}
}

// walkSchema compares a schema node with the value it describes: a closed object's properties
// are exactly the value's keys; open objects (a map value whose schema lists no properties) are
// collected.
func walkSchema(s map[string]any, v any, path string, open, problems *[]string) {
	m, isMap := v.(map[string]any)
	if !isMap {
		return
	}
	props, _ := s["properties"].(map[string]any)
	if s["additionalProperties"] != false {
		if props != nil {
			*problems = append(*problems, path+": properties, but open to others")
		}
		*open = append(*open, strings.TrimPrefix(path, "."))
		return
	}
	for k := range m {
		if _, ok := props[k]; !ok {
			*problems = append(*problems, path+"."+k+": in values.yaml, not in the schema")
		}
	}
	for k, ps := range props {
		sub, ok := m[k]
		if !ok {
			if !optionalKey(path + "." + k) {
				*problems = append(*problems, path+"."+k+": in the schema, not in values.yaml")
			}
			continue
		}
		walkSchema(ps.(map[string]any), sub, path+"."+k, open, problems)
	}
}

// optionalKey: keys the schema knows that values.yaml leaves out (empty by default): a
// Kubernetes resource claim, an issuer reference's fields.
func optionalKey(path string) bool {
	return strings.HasSuffix(path, ".resources.claims") || strings.Contains(path, ".issuerRef.")
}

// TestValuesSchemaRejects: mistyped keys (in --set or a values file), values of the wrong type
// and values outside their set fail the rendering, naming where; the READMEs' examples pass.
func TestValuesSchemaRejects(t *testing.T) {
	cases := map[string]struct {
		chart, file string // file: a values file's content
		set         []string
		want        string // "" : accepted
	}{
		"lbfed: a mistyped top-level key":  {chart: lbfedChart, set: []string{"contoller.enabled=false"}, want: "at '': additional properties 'contoller' not allowed"},
		"lbfed: a mistyped key":            {chart: lbfedChart, set: []string{"controller.replica=3"}, want: "at '/controller': additional properties 'replica' not allowed"},
		"lbfed: a mistyped kubeconfig key": {chart: lbfedChart, set: []string{"karmada.kubeconfigSecret.nmae=x"}, want: "at '/karmada/kubeconfigSecret': additional properties 'nmae' not allowed"},
		"lbfed: a mistyped resource":       {chart: lbfedChart, set: []string{"controller.resources.limit.memory=1Gi"}, want: "at '/controller/resources': additional properties 'limit' not allowed"},
		"lbfed: a mistyped pull Secret":    {chart: lbfedChart, set: []string{"global.imagePullSecrets[0].nam=regcred"}, want: "at '/global/imagePullSecrets/0'"},
		"lbfed: a values file's typo": {chart: lbfedChart, file: "controller:\n  interpreter:\n    extraIps: [127.0.0.1]\n",
			want: "at '/controller/interpreter': additional properties 'extraIps' not allowed"},
		"lbfed: a word for a number":  {chart: lbfedChart, set: []string{"controller.replicas=two"}, want: "at '/controller/replicas': got string, want integer"},
		"lbfed: a number for a time":  {chart: lbfedChart, set: []string{"controller.federation.gracePeriod=60"}, want: "at '/controller/federation/gracePeriod': got number, want string"},
		"lbfed: not a duration":       {chart: lbfedChart, set: []string{"karmada.kubectl.rolloutTimeout=4 minutes"}, want: "at '/karmada/kubectl/rolloutTimeout': '4 minutes' does not match pattern"},
		"lbfed: an unknown policy":    {chart: lbfedChart, set: []string{"controller.federation.memberLossPolicy=Drop"}, want: "value must be one of 'FailStatic', 'Withdraw', 'Keep'"},
		"lbfed: an unknown pull":      {chart: lbfedChart, set: []string{"controller.image.pullPolicy=Sometimes"}, want: "at '/controller/image/pullPolicy': value must be one of"},
		"lbfed: not a port":           {chart: lbfedChart, set: []string{"controller.admission.port=70000"}, want: "at '/controller/admission/port': maximum: got 70,000, want 65,535"},
		"lbcf: a mistyped driver key": {chart: lbcfChart, set: []string{"elbDriver.servce.type=NodePort"}, want: "at '/elbDriver': additional properties 'servce' not allowed"},
		"lbcf: an unknown Service type": {chart: lbcfChart, set: []string{"elbDriver.enabled=true", "elbDriver.service.type=External"},
			want: "at '/elbDriver/service/type': value must be one of 'ClusterIP', 'NodePort', 'LoadBalancer'"},
		"lbcf: one address for a list": {chart: lbcfChart, set: []string{"elbDriver.tls.extraIPs=192.0.2.1"}, want: "at '/elbDriver/tls/extraIPs': got string, want array"},
		"lbcf: an unknown sync":        {chart: lbcfChart, set: []string{"elbDriver.radware.sync=always"}, want: "value must be one of 'explicit', 'auto', 'none'"},

		// The READMEs' examples.
		"lbcf README: driver alone": {chart: lbcfChart, set: []string{"controller.enabled=false", "elbDriver.enabled=true",
			"elbDriver.radware.urls={https://alteon-a.example.com,https://alteon-b.example.com}", "elbDriver.radware.passwordSecret.name=alteon-admin",
			"elbDriver.service.type=NodePort", "elbDriver.service.nodePort=30443", "elbDriver.tls.extraIPs={192.0.2.20}",
			"elbDriver.clientAuth.extraCASecrets={lbfed-driver-client-ca}", "elbDriver.clientAuth.allowedNames={lbfed-controller}"}},
		"lbfed README: pull Secret":        {chart: lbfedChart, set: []string{"global.imagePullSecrets[0].name=regcred"}},
		"lbfed README: LoadBalancer check": {chart: lbfedChart, file: "tests:\n  loadBalancer:\n    driver: lbcf-radware\n    lbSpec: {vip: 192.0.2.10, port: \"80\"}\n"},
		"lbfed: --set port=80 (a number)":  {chart: lbfedChart, set: []string{"tests.loadBalancer.driver=lbcf-radware", "tests.loadBalancer.lbSpec.port=80"}},
		"lbfed: a zero grace period":       {chart: lbfedChart, file: "controller:\n  federation:\n    gracePeriod: \"0\"\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			file := ""
			if tc.file != "" {
				file = filepath.Join(t.TempDir(), "values.yaml")
				g.Expect(os.WriteFile(file, []byte(tc.file), 0o600)).To(Succeed())
			}
			_, err := render(t, tc.chart, tc.chart, "kube-system", file, tc.set...)
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring("values don't meet the specifications of the schema")))
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}
