package lbspec

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Service annotations (zdnscloud/elb-controller compatible).
const (
	// AnnotationVIP is the load balancer's virtual IPv4 address (required unless
	// spec.loadBalancerIP is set).
	AnnotationVIP = "lb.zdns.cn/vip"
	// AnnotationMethod is the balancing method: rr (default), lc or hash.
	AnnotationMethod = "lb.zdns.cn/method"
)

// InvalidError is an annotation that cannot be served as written; retrying cannot help.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

// Invalidf is an *InvalidError.
func Invalidf(format string, args ...any) error { return &InvalidError{fmt.Sprintf(format, args...)} }

// Claims decides whether a load-balancer controller of the given class serves a Service: type
// LoadBalancer and either that loadBalancerClass, or no class and the VIP annotation when
// unclassed Services are claimed. elb-controller and lbfed's Karmada front door claim Services
// by this one rule.
func Claims(svc *corev1.Service, class string, claimUnclassed bool) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	if svc.Spec.LoadBalancerClass != nil {
		return *svc.Spec.LoadBalancerClass == class
	}
	_, ok := svc.Annotations[AnnotationVIP]
	return claimUnclassed && ok
}

// ParseVIP reads a virtual IPv4 address from the lb.zdns.cn/vip annotation, else from fallback
// (a Service's spec.loadBalancerIP; empty for none). The error (an *InvalidError) says what is
// wrong in words for an event.
func ParseVIP(annotations map[string]string, fallback string) (netip.Addr, error) {
	raw, ok := annotations[AnnotationVIP]
	if !ok || strings.TrimSpace(raw) == "" {
		raw = fallback
	}
	if strings.TrimSpace(raw) == "" {
		return netip.Addr{}, Invalidf("annotation %s is required (an IPv4 address)", AnnotationVIP)
	}
	a, err := netip.ParseAddr(strings.TrimSpace(raw))
	if err != nil || !a.Is4() || a.IsUnspecified() {
		return netip.Addr{}, Invalidf("annotation %s %q: must be an IPv4 address", AnnotationVIP, raw)
	}
	return a, nil
}

// ParseMethod reads the balancing method from the lb.zdns.cn/method annotation: rr (default),
// lc or hash.
func ParseMethod(annotations map[string]string) (string, error) {
	method := strings.ToLower(strings.TrimSpace(annotations[AnnotationMethod]))
	if method == "" {
		method = "rr"
	}
	if !Methods[method] {
		return "", Invalidf("annotation %s %q: must be rr, lc or hash", AnnotationMethod, annotations[AnnotationMethod])
	}
	return method, nil
}
