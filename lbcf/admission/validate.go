// Package admission is LBCF's admission control (AdmissionReview v1): mutating webhooks that
// migrate deprecated fields and fill defaults, and validating webhooks with the original's rules
// (plus the checks it missed), served at the original's paths.
package admission

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// MaxWebhookTimeout bounds a driver webhook's configured timeout.
const MaxWebhookTimeout = time.Minute

// ValidateDriver checks a LoadBalancerDriver on its own (no API lookups). On update, old is the
// previous object: driverType and url are immutable.
func ValidateDriver(d, old *lbcfv1beta1.LoadBalancerDriver) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	system := strings.HasPrefix(d.Name, lbcfv1beta1.SystemDriverPrefix)
	if d.Namespace == lbcfv1beta1.SystemNamespace && !system {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), d.Name, "drivers in kube-system must be named lbcf-*"))
	}
	if d.Namespace != lbcfv1beta1.SystemNamespace && system {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), d.Name, "lbcf-* names are reserved for drivers in kube-system"))
	}
	if d.Spec.DriverType != string(lbcfv1beta1.WebhookDriver) {
		errs = append(errs, field.NotSupported(spec.Child("driverType"), d.Spec.DriverType, []string{string(lbcfv1beta1.WebhookDriver)}))
	}
	if u, err := url.Parse(d.Spec.URL); err != nil || u.Scheme == "" || u.Host == "" {
		errs = append(errs, field.Invalid(spec.Child("url"), d.Spec.URL, "must be an absolute URL such as http://driver.kube-system.svc:80"))
	} else if u.Scheme != "http" && u.Scheme != "https" {
		errs = append(errs, field.NotSupported(spec.Child("url"), u.Scheme, []string{"http", "https"}))
	}
	seen := map[string]bool{}
	for i, w := range d.Spec.Webhooks {
		p := spec.Child("webhooks").Index(i)
		switch {
		case !driver.IsKnownWebhook(w.Name):
			errs = append(errs, field.NotSupported(p.Child("name"), w.Name, driver.KnownWebhooks))
		case seen[w.Name]:
			errs = append(errs, field.Duplicate(p.Child("name"), w.Name))
		}
		seen[w.Name] = true
		if w.Timeout.Duration <= 0 || w.Timeout.Duration > MaxWebhookTimeout {
			errs = append(errs, field.Invalid(p.Child("timeout"), w.Timeout.Duration.String(), "must be > 0 and ≤ 1m"))
		}
	}
	// healthz is optional: drivers written before it existed stay valid.
	for _, w := range driver.KnownWebhooks {
		if w != driver.Healthz && !seen[w] {
			errs = append(errs, field.Required(spec.Child("webhooks"), "webhook "+w+" must be listed"))
		}
	}
	if old != nil {
		if d.Spec.DriverType != old.Spec.DriverType {
			errs = append(errs, field.Forbidden(spec.Child("driverType"), "immutable"))
		}
		if d.Spec.URL != old.Spec.URL {
			errs = append(errs, field.Forbidden(spec.Child("url"), "immutable"))
		}
	}
	return errs
}

// ValidateEnsurePolicy checks an ensurePolicy. Unlike the original, unknown policies are refused.
func ValidateEnsurePolicy(p *lbcfv1beta1.EnsurePolicyConfig, path *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	switch p.Policy {
	case lbcfv1beta1.PolicyIfNotSucc, "":
		if p.MinPeriod != nil {
			errs = append(errs, field.Forbidden(path.Child("minPeriod"), "only allowed with policy Always"))
		}
	case lbcfv1beta1.PolicyAlways:
		if p.MinPeriod != nil && p.MinPeriod.Duration < lbcfv1beta1.MinEnsurePeriod {
			errs = append(errs, field.Invalid(path.Child("minPeriod"), p.MinPeriod.Duration.String(), "must be at least 30s"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("policy"), p.Policy, []string{string(lbcfv1beta1.PolicyIfNotSucc), string(lbcfv1beta1.PolicyAlways)}))
	}
	return errs
}

// ValidateLoadBalancer checks a LoadBalancer on its own (no API lookups, no driver call).
func ValidateLoadBalancer(lb, old *lbcfv1beta1.LoadBalancer) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	system := strings.HasPrefix(lb.Name, lbcfv1beta1.SystemDriverPrefix)
	if system && lb.Namespace != lbcfv1beta1.SystemNamespace && old == nil {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), lb.Name, "lbcf-* LoadBalancers must be in kube-system"))
	}
	if lb.Spec.LBDriver == "" {
		errs = append(errs, field.Required(spec.Child("lbDriver"), ""))
	}
	if len(lb.Spec.Scope) > 0 && !(system && lb.Namespace == lbcfv1beta1.SystemNamespace) {
		errs = append(errs, field.Forbidden(spec.Child("scope"), "only lbcf-* LoadBalancers in kube-system may be shared with other namespaces"))
	}
	errs = append(errs, ValidateEnsurePolicy(lb.Spec.EnsurePolicy, spec.Child("ensurePolicy"))...)
	if old != nil {
		if lb.Spec.LBDriver != old.Spec.LBDriver {
			errs = append(errs, field.Forbidden(spec.Child("lbDriver"), "immutable"))
		}
		if !mapsEqual(lb.Spec.LBSpec, old.Spec.LBSpec) {
			errs = append(errs, field.Forbidden(spec.Child("lbSpec"), "immutable: it identifies the load balancer"))
		}
	}
	return errs
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func validatePort(p lbcfv1beta1.PortSelector, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port := p.GetPort(); port < 1 || port > 65535 {
		errs = append(errs, field.Invalid(path.Child("port"), port, "must be 1..65535"))
	}
	if p.Protocol != "" && p.Protocol != "TCP" && p.Protocol != "UDP" {
		errs = append(errs, field.NotSupported(path.Child("protocol"), p.Protocol, []string{"TCP", "UDP"}))
	}
	return errs
}

// ValidateBackendGroup checks a BackendGroup on its own (no API lookups, no driver call).
func ValidateBackendGroup(bg, old *lbcfv1beta1.BackendGroup) field.ErrorList {
	var errs field.ErrorList
	// lbfed's annotations that change what happens to backends: a typo must not silently fall
	// back to the controller's default.
	ann := field.NewPath("metadata", "annotations")
	if v, ok := bg.Annotations[lbcfv1beta1.AnnotationMemberLossPolicy]; ok {
		if _, ok := lbcfv1beta1.ParseMemberLossPolicy(v); !ok {
			errs = append(errs, field.NotSupported(ann.Key(lbcfv1beta1.AnnotationMemberLossPolicy), v,
				[]string{string(lbcfv1beta1.MemberLossFailStatic), string(lbcfv1beta1.MemberLossWithdraw), string(lbcfv1beta1.MemberLossKeep)}))
		}
	}
	if v, ok := bg.Annotations[lbcfv1beta1.AnnotationReadinessPanicThreshold]; ok {
		if _, err := lbcfv1beta1.ParseReadinessPanicThreshold(v); err != nil {
			errs = append(errs, field.Invalid(ann.Key(lbcfv1beta1.AnnotationReadinessPanicThreshold), v, "a share from 0 to 1 (e.g. 0.5) or a percentage (e.g. 50%); 0 turns the panic threshold off"))
		}
	}
	spec := field.NewPath("spec")
	if len(bg.Spec.GetLoadBalancers()) == 0 {
		errs = append(errs, field.Required(spec.Child("loadBalancers"), "at least one LoadBalancer"))
	}
	for i, n := range bg.Spec.LoadBalancers {
		if n == "" {
			errs = append(errs, field.Required(spec.Child("loadBalancers").Index(i), ""))
		}
	}
	switch p := bg.Spec.GetDeregisterPolicy(); p {
	case lbcfv1beta1.DeregisterIfNotReady, lbcfv1beta1.DeregisterIfNotRunning:
	case lbcfv1beta1.DeregisterWebhook:
		if bg.Spec.DeregisterWebhook == nil || bg.Spec.DeregisterWebhook.DriverName == "" {
			errs = append(errs, field.Required(spec.Child("deregisterWebhook", "driverName"), "required with deregisterPolicy Webhook"))
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("deregisterPolicy"), p,
			[]string{string(lbcfv1beta1.DeregisterIfNotReady), string(lbcfv1beta1.DeregisterIfNotRunning), string(lbcfv1beta1.DeregisterWebhook)}))
	}
	if w := bg.Spec.DeregisterWebhook; w != nil {
		switch fp := w.GetFailurePolicy(); fp {
		case lbcfv1beta1.FailurePolicyDoNothing, lbcfv1beta1.FailurePolicyIfNotReady, lbcfv1beta1.FailurePolicyIfNotRunning:
		default:
			errs = append(errs, field.NotSupported(spec.Child("deregisterWebhook", "failurePolicy"), fp,
				[]string{string(lbcfv1beta1.FailurePolicyDoNothing), string(lbcfv1beta1.FailurePolicyIfNotReady), string(lbcfv1beta1.FailurePolicyIfNotRunning)}))
		}
	}
	n := 0
	if bg.Spec.Service != nil {
		n++
		s := bg.Spec.Service
		p := spec.Child("service")
		if s.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		errs = append(errs, validatePort(s.Port, p.Child("port"))...)
		errs = append(errs, metav1validation.ValidateLabels(s.NodeSelector, p.Child("nodeSelector"))...)
	}
	if bg.Spec.Pods != nil {
		n++
		pb := bg.Spec.Pods
		p := spec.Child("pods")
		ports := pb.GetPortSelectors()
		if len(ports) == 0 {
			errs = append(errs, field.Required(p.Child("ports"), "at least one port"))
		}
		for i, port := range ports {
			errs = append(errs, validatePort(port, p.Child("ports").Index(i))...)
		}
		switch {
		case pb.ByLabel != nil && len(pb.ByName) > 0:
			errs = append(errs, field.Forbidden(p, "exactly one of byLabel and byName"))
		case pb.ByLabel != nil:
			if len(pb.ByLabel.Selector) == 0 {
				errs = append(errs, field.Required(p.Child("byLabel", "selector"), "an empty selector would select nothing"))
			}
			errs = append(errs, metav1validation.ValidateLabels(pb.ByLabel.Selector, p.Child("byLabel", "selector"))...)
		case len(pb.ByName) == 0:
			errs = append(errs, field.Required(p, "one of byLabel and byName"))
		}
	}
	if len(bg.Spec.Static) > 0 {
		n++
	}
	if n != 1 {
		errs = append(errs, field.Invalid(spec, fmt.Sprintf("%d backend kinds", n), "exactly one of service, pods and static must be set"))
	}
	errs = append(errs, ValidateEnsurePolicy(bg.Spec.EnsurePolicy, spec.Child("ensurePolicy"))...)
	if old != nil && old.Spec.BackendType() != "" && bg.Spec.BackendType() != old.Spec.BackendType() {
		errs = append(errs, field.Forbidden(spec, fmt.Sprintf("the backend type is immutable (was %s)", old.Spec.BackendType())))
	}
	return errs
}

// hasDoNotDelete reports whether deletion is blocked by the do-not-delete label.
func hasDoNotDelete(labels map[string]string) bool {
	_, ok := labels[lbcfv1beta1.LabelDoNotDelete]
	return ok
}
