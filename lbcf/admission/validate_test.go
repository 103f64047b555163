package admission

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

func validDriver(ns, name string) *lbcfv1beta1.LoadBalancerDriver {
	d := &lbcfv1beta1.LoadBalancerDriver{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: lbcfv1beta1.LoadBalancerDriverSpec{DriverType: "Webhook", URL: "http://driver.kube-system.svc:80/prefix"}}
	MutateDriver(d)
	return d
}

func TestValidateDriver(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(d *lbcfv1beta1.LoadBalancerDriver)
		ns     string
		dname  string
		old    func(d *lbcfv1beta1.LoadBalancerDriver)
		want   string // substring of the error; "" = valid
	}{
		{"valid", nil, "default", "mine", nil, ""},
		{"valid system driver", nil, "kube-system", "lbcf-clb", nil, ""},
		{"system prefix outside kube-system", nil, "default", "lbcf-clb", nil, "reserved for drivers in kube-system"},
		{"kube-system without prefix", nil, "kube-system", "clb", nil, "must be named lbcf-*"},
		{"driver type", func(d *lbcfv1beta1.LoadBalancerDriver) { d.Spec.DriverType = "Plugin" }, "default", "d", nil, "driverType"},
		{"relative url", func(d *lbcfv1beta1.LoadBalancerDriver) { d.Spec.URL = "/x" }, "default", "d", nil, "absolute URL"},
		{"ftp url", func(d *lbcfv1beta1.LoadBalancerDriver) { d.Spec.URL = "ftp://x" }, "default", "d", nil, "Unsupported value"},
		{"unknown webhook", func(d *lbcfv1beta1.LoadBalancerDriver) {
			d.Spec.Webhooks = append(d.Spec.Webhooks, lbcfv1beta1.WebhookConfig{Name: driver.JudgePodDeregister, Timeout: metav1.Duration{Duration: time.Second}})
		}, "default", "d", nil, "judgePodDeregister"},
		{"duplicate webhook", func(d *lbcfv1beta1.LoadBalancerDriver) {
			d.Spec.Webhooks = append(d.Spec.Webhooks, d.Spec.Webhooks[0])
		}, "default", "d", nil, "Duplicate"},
		{"timeout over a minute", func(d *lbcfv1beta1.LoadBalancerDriver) { d.Spec.Webhooks[0].Timeout.Duration = 2 * time.Minute }, "default", "d", nil, "≤ 1m"},
		{"missing webhook", func(d *lbcfv1beta1.LoadBalancerDriver) { d.Spec.Webhooks = d.Spec.Webhooks[1:] }, "default", "d", nil, "must be listed"},
		{"healthz is optional", func(d *lbcfv1beta1.LoadBalancerDriver) {
			for i, w := range d.Spec.Webhooks {
				if w.Name == driver.Healthz {
					d.Spec.Webhooks = append(d.Spec.Webhooks[:i], d.Spec.Webhooks[i+1:]...)
				}
			}
		}, "default", "d", func(o *lbcfv1beta1.LoadBalancerDriver) {}, ""},
		{"url immutable", func(d *lbcfv1beta1.LoadBalancerDriver) { d.Spec.URL = "http://other:80" }, "default", "d", func(o *lbcfv1beta1.LoadBalancerDriver) {}, "immutable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := validDriver(tc.ns, tc.dname)
			var old *lbcfv1beta1.LoadBalancerDriver
			if tc.old != nil {
				old = d.DeepCopy()
			}
			if tc.mutate != nil {
				tc.mutate(d)
			}
			check(t, ValidateDriver(d, old).ToAggregate(), tc.want)
		})
	}
}

func check(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("want valid, got %v", err)
	case want != "" && err == nil:
		t.Errorf("want an error containing %q, got none", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("want an error containing %q, got %v", want, err)
	}
}

func TestValidateLoadBalancerAndEnsurePolicy(t *testing.T) {
	lb := func(ns, name string, mutate func(*lbcfv1beta1.LoadBalancer)) *lbcfv1beta1.LoadBalancer {
		l := &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: "d", LBSpec: map[string]string{"vip": "1.1.1.1"}}}
		if mutate != nil {
			mutate(l)
		}
		return l
	}
	always := func(p time.Duration) *lbcfv1beta1.EnsurePolicyConfig {
		return &lbcfv1beta1.EnsurePolicyConfig{Policy: lbcfv1beta1.PolicyAlways, MinPeriod: &metav1.Duration{Duration: p}}
	}
	cases := []struct {
		name string
		lb   *lbcfv1beta1.LoadBalancer
		old  *lbcfv1beta1.LoadBalancer
		want string
	}{
		{"valid", lb("default", "a", nil), nil, ""},
		{"no driver", lb("default", "a", func(l *lbcfv1beta1.LoadBalancer) { l.Spec.LBDriver = "" }), nil, "lbDriver"},
		{"lbcf- outside kube-system", lb("default", "lbcf-a", nil), nil, "must be in kube-system"},
		{"scope on a private LB", lb("default", "a", func(l *lbcfv1beta1.LoadBalancer) { l.Spec.Scope = []string{"*"} }), nil, "scope"},
		{"scope on a system LB", lb("kube-system", "lbcf-a", func(l *lbcfv1beta1.LoadBalancer) { l.Spec.Scope = []string{"*"} }), nil, ""},
		{"always 30s", lb("default", "a", func(l *lbcfv1beta1.LoadBalancer) { l.Spec.EnsurePolicy = always(30 * time.Second) }), nil, ""},
		{"always 10s", lb("default", "a", func(l *lbcfv1beta1.LoadBalancer) { l.Spec.EnsurePolicy = always(10 * time.Second) }), nil, "at least 30s"},
		{"minPeriod with IfNotSucc", lb("default", "a", func(l *lbcfv1beta1.LoadBalancer) {
			l.Spec.EnsurePolicy = always(time.Minute)
			l.Spec.EnsurePolicy.Policy = lbcfv1beta1.PolicyIfNotSucc
		}), nil, "only allowed with policy Always"},
		{"unknown policy", lb("default", "a", func(l *lbcfv1beta1.LoadBalancer) {
			l.Spec.EnsurePolicy = &lbcfv1beta1.EnsurePolicyConfig{Policy: "Sometimes"}
		}), nil, "Sometimes"},
		{"lbSpec immutable", lb("default", "a", func(l *lbcfv1beta1.LoadBalancer) { l.Spec.LBSpec = map[string]string{"vip": "2.2.2.2"} }), lb("default", "a", nil), "lbSpec"},
		{"attributes mutable", lb("default", "a", func(l *lbcfv1beta1.LoadBalancer) { l.Spec.Attributes = map[string]string{"k": "v"} }), lb("default", "a", nil), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { check(t, ValidateLoadBalancer(tc.lb, tc.old).ToAggregate(), tc.want) })
	}
}

func TestValidateAndMutateBackendGroup(t *testing.T) {
	base := func(mutate func(*lbcfv1beta1.BackendGroup)) *lbcfv1beta1.BackendGroup {
		bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "g"},
			Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"a"}, Pods: &lbcfv1beta1.PodBackend{
				Ports: []lbcfv1beta1.PortSelector{{Port: 80}}, ByLabel: &lbcfv1beta1.SelectPodByLabel{Selector: map[string]string{"app": "x"}}}}}
		if mutate != nil {
			mutate(bg)
		}
		return bg
	}
	webhookPolicy := lbcfv1beta1.DeregisterWebhook
	badPolicy := lbcfv1beta1.DeregPolicy("Never")
	badFailure := lbcfv1beta1.DeregFailurePolicy("Panic")
	cases := []struct {
		name string
		bg   *lbcfv1beta1.BackendGroup
		old  *lbcfv1beta1.BackendGroup
		want string
	}{
		{"valid", base(nil), nil, ""},
		{"no load balancer", base(func(b *lbcfv1beta1.BackendGroup) { b.Spec.LoadBalancers = nil }), nil, "loadBalancers"},
		{"two backend kinds", base(func(b *lbcfv1beta1.BackendGroup) { b.Spec.Static = []string{"x"} }), nil, "exactly one of service, pods and static"},
		{"no backend kind", base(func(b *lbcfv1beta1.BackendGroup) { b.Spec.Pods = nil }), nil, "exactly one"},
		{"no ports", base(func(b *lbcfv1beta1.BackendGroup) { b.Spec.Pods.Ports = nil }), nil, "at least one port"},
		{"port out of range", base(func(b *lbcfv1beta1.BackendGroup) { b.Spec.Pods.Ports[0].Port = 70000 }), nil, "1..65535"},
		{"lower-case protocol", base(func(b *lbcfv1beta1.BackendGroup) { b.Spec.Pods.Ports[0].Protocol = "tcp" }), nil, "tcp"},
		{"byLabel and byName", base(func(b *lbcfv1beta1.BackendGroup) { b.Spec.Pods.ByName = []string{"p"} }), nil, "exactly one of byLabel and byName"},
		{"empty selector", base(func(b *lbcfv1beta1.BackendGroup) { b.Spec.Pods.ByLabel.Selector = nil }), nil, "select nothing"},
		{"bad label", base(func(b *lbcfv1beta1.BackendGroup) { b.Spec.Pods.ByLabel.Selector = map[string]string{"a b": "c"} }), nil, "selector"},
		{"webhook policy without driver", base(func(b *lbcfv1beta1.BackendGroup) { b.Spec.DeregisterPolicy = &webhookPolicy }), nil, "driverName"},
		{"unknown policy", base(func(b *lbcfv1beta1.BackendGroup) { b.Spec.DeregisterPolicy = &badPolicy }), nil, "Never"},
		{"unknown failure policy", base(func(b *lbcfv1beta1.BackendGroup) {
			b.Spec.DeregisterPolicy = &webhookPolicy
			b.Spec.DeregisterWebhook = &lbcfv1beta1.DeregisterWebhookSpec{DriverName: "d", FailurePolicy: &badFailure}
		}), nil, "Panic"},
		{"backend type immutable", base(func(b *lbcfv1beta1.BackendGroup) { b.Spec.Pods = nil; b.Spec.Static = []string{"x"} }), base(nil), "immutable"},
		{"service backend", base(func(b *lbcfv1beta1.BackendGroup) {
			b.Spec.Pods = nil
			b.Spec.Service = &lbcfv1beta1.ServiceBackend{Name: "s", Port: lbcfv1beta1.PortSelector{Port: 80, Protocol: "UDP"}, NodeSelector: map[string]string{"a": "b"}}
		}), nil, ""},
		{"member-loss policy", base(func(b *lbcfv1beta1.BackendGroup) {
			b.Annotations = map[string]string{lbcfv1beta1.AnnotationMemberLossPolicy: "keep"}
		}), nil, ""},
		{"unknown member-loss policy", base(func(b *lbcfv1beta1.BackendGroup) {
			b.Annotations = map[string]string{lbcfv1beta1.AnnotationMemberLossPolicy: "Hold"}
		}), nil, "Hold"},
		{"panic threshold share and percentage", base(func(b *lbcfv1beta1.BackendGroup) {
			b.Annotations = map[string]string{lbcfv1beta1.AnnotationReadinessPanicThreshold: "75%"}
		}), nil, ""},
		{"panic threshold off", base(func(b *lbcfv1beta1.BackendGroup) {
			b.Annotations = map[string]string{lbcfv1beta1.AnnotationReadinessPanicThreshold: "0"}
		}), nil, ""},
		{"panic threshold above one", base(func(b *lbcfv1beta1.BackendGroup) {
			b.Annotations = map[string]string{lbcfv1beta1.AnnotationReadinessPanicThreshold: "1.5"}
		}), nil, "readiness-panic-threshold"},
		{"panic threshold not a number", base(func(b *lbcfv1beta1.BackendGroup) {
			b.Annotations = map[string]string{lbcfv1beta1.AnnotationReadinessPanicThreshold: "half"}
		}), nil, "a share from 0 to 1"},
		{"service without name", base(func(b *lbcfv1beta1.BackendGroup) {
			b.Spec.Pods = nil
			b.Spec.Service = &lbcfv1beta1.ServiceBackend{Port: lbcfv1beta1.PortSelector{Port: 80}}
		}), nil, "name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { check(t, ValidateBackendGroup(tc.bg, tc.old).ToAggregate(), tc.want) })
	}

	// The deprecated LBCF ≤ 1.1 shape is migrated by the mutator and then valid.
	lbName := "old-lb"
	pn := int32(8080)
	legacy := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "legacy", Labels: map[string]string{lbcfv1beta1.LabelLBNamePrefix + "gone": "True"}},
		Spec: lbcfv1beta1.BackendGroupSpec{LBName: &lbName, Pods: &lbcfv1beta1.PodBackend{Port: &lbcfv1beta1.PortSelector{PortNumber: &pn}, ByName: []string{"p"}}}}
	MutateBackendGroup(legacy)
	if err := ValidateBackendGroup(legacy, nil).ToAggregate(); err != nil {
		t.Fatalf("migrated legacy group invalid: %v", err)
	}
	if legacy.Spec.LBName != nil || legacy.Spec.LoadBalancers[0] != "old-lb" || legacy.Spec.Pods.Port != nil ||
		legacy.Spec.Pods.Ports[0].Port != 8080 || legacy.Spec.Pods.Ports[0].PortNumber != nil || legacy.Spec.Pods.Ports[0].Protocol != "TCP" ||
		*legacy.Spec.DeregisterPolicy != lbcfv1beta1.DeregisterIfNotReady {
		t.Errorf("migration incomplete: %+v", legacy.Spec)
	}
	if legacy.Labels[lbcfv1beta1.LabelLBName] != "old-lb" || legacy.Labels[lbcfv1beta1.LabelLBNamePrefix+"old-lb"] != "True" {
		t.Errorf("lb-name labels missing: %v", legacy.Labels)
	}
	if _, ok := legacy.Labels[lbcfv1beta1.LabelLBNamePrefix+"gone"]; ok {
		t.Errorf("label of a removed LoadBalancer kept: %v", legacy.Labels)
	}
}
