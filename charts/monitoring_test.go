package charts

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lbfed/lbfed/charts/manifests"
	"github.com/lbfed/lbfed/federation"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// exportedMetrics are the names of the metrics lbfed-controller's federation registers.
func exportedMetrics() map[string]bool {
	descs := make(chan *prometheus.Desc, 1024)
	rec := &describer{descs: descs}
	federation.NewMetrics(rec)
	controller.NewMetrics(rec)
	driver.NewMetrics(rec)
	close(descs)
	names := map[string]bool{}
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	return names
}

// describer is a Registerer that records the descriptors of what is registered with it.
type describer struct{ descs chan *prometheus.Desc }

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		d.descs <- desc
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return true }

// checkMonitoring checks the Prometheus Operator objects: a ServiceMonitor's ports exist on a
// rendered Service it selects, and a PrometheusRule's alerts use metrics lbfed exports.
func checkMonitoring(o *unstructured.Unstructured, objs []*unstructured.Unstructured) error {
	switch o.GetKind() {
	case "ServiceMonitor":
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		eps, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
		if len(sel) == 0 || len(eps) == 0 {
			return fmt.Errorf("%s: no selector or no endpoints", key(o))
		}
		ports := map[string]bool{}
		for _, svc := range objs {
			if svc.GetKind() != "Service" || svc.GetNamespace() != o.GetNamespace() {
				continue
			}
			match := true
			for k, v := range sel {
				match = match && svc.GetLabels()[k] == v
			}
			if !match {
				continue
			}
			sp, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
			for _, p := range sp {
				ports[fmt.Sprint(p.(map[string]any)["name"])] = true
			}
		}
		for _, ep := range eps {
			if p := fmt.Sprint(ep.(map[string]any)["port"]); !ports[p] {
				return fmt.Errorf("%s: endpoint port %s is on no selected Service", key(o), p)
			}
		}
	case "PrometheusRule":
		known := exportedMetrics()
		groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
		ident := regexp.MustCompile(`[a-z_][a-z0-9_]*`)
		for _, gr := range groups {
			rules, _ := gr.(map[string]any)["rules"].([]any)
			for _, r := range rules {
				rule := r.(map[string]any)
				expr := fmt.Sprint(rule["expr"])
				used := 0
				// Metric names are the identifiers with an underscore outside label matchers.
				plain := regexp.MustCompile(`\{[^}]*\}|\([^()]*\bby\b[^()]*\)|by \([^)]*\)`).ReplaceAllString(expr, " ")
				for _, id := range ident.FindAllString(plain, -1) {
					if !strings.Contains(id, "_") {
						continue
					}
					if !known[id] {
						return fmt.Errorf("%s: alert %v uses %s, which lbfed does not export", key(o), rule["alert"], id)
					}
					used++
				}
				if used == 0 || rule["for"] == nil {
					return fmt.Errorf("%s: alert %v: no metric or no for", key(o), rule["alert"])
				}
			}
		}
	default:
		return fmt.Errorf("%s: unexpected monitoring kind", key(o))
	}
	return nil
}

// Issue 12: the chart ships an optional ServiceMonitor and a PrometheusRule with an alert for
// each failure the federation reports.
func TestLBFedMonitoring(t *testing.T) {
	g := NewWithT(t)
	objs, err := manifests.Render(context.Background(), manifests.Options{
		Helm: helmBinary(t), Chart: lbfedChart, Release: "lbfed", Namespace: lbfedNamespace,
		ValuesFiles: []string{lbfedChart + "/ci/monitoring-values.yaml"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	rule := find(objs, "PrometheusRule", "lbfed-controller")
	g.Expect(rule).NotTo(BeNil())
	g.Expect(find(objs, "ServiceMonitor", "lbfed-controller")).NotTo(BeNil())
	g.Expect(checkMonitoring(rule, objs)).To(Succeed())
	var alerts []string
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	for _, gr := range groups {
		for _, r := range gr.(map[string]any)["rules"].([]any) {
			alerts = append(alerts, fmt.Sprint(r.(map[string]any)["alert"]))
		}
	}
	g.Expect(alerts).To(ContainElements("LBFedMemberWithdrawn", "LBFedMemberHeldByFloor", "LBFedCandidatesTruncated",
		"LBFedBackendsNotRegistered", "LBFedDriverUnhealthy"))
	// A rule naming a metric that does not exist is caught.
	bad := rule.DeepCopy()
	grs, _, _ := unstructured.NestedSlice(bad.Object, "spec", "groups")
	grs[0].(map[string]any)["rules"].([]any)[0].(map[string]any)["expr"] = `lbfed_no_such_metric > 0`
	g.Expect(unstructured.SetNestedSlice(bad.Object, grs, "spec", "groups")).To(Succeed())
	g.Expect(checkMonitoring(bad, objs)).To(MatchError(ContainSubstring("lbfed_no_such_metric")))

	// Off by default.
	def, err := manifests.Render(context.Background(), manifests.Options{Helm: helmBinary(t), Chart: lbfedChart, Release: "lbfed", Namespace: lbfedNamespace})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(find(def, "PrometheusRule", "lbfed-controller")).To(BeNil())
	g.Expect(find(def, "ServiceMonitor", "lbfed-controller")).To(BeNil())
}
