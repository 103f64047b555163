package admission

import (
	"maps"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// MutateDriver fills in every webhook the driver does not configure, with the 10s timeout.
// healthz is not added: it is opt-in, and a driver that does not serve it would be reported
// unhealthy.
func MutateDriver(d *lbcfv1beta1.LoadBalancerDriver) {
	for _, w := range driver.KnownWebhooks {
		if w != driver.Healthz && !d.HasWebhook(w) {
			d.Spec.Webhooks = append(d.Spec.Webhooks, lbcfv1beta1.WebhookConfig{Name: w, Timeout: metav1.Duration{Duration: lbcfv1beta1.DefaultWebhookTimeout}})
		}
	}
	for i := range d.Spec.Webhooks {
		if d.Spec.Webhooks[i].Timeout.Duration == 0 {
			d.Spec.Webhooks[i].Timeout.Duration = lbcfv1beta1.DefaultWebhookTimeout
		}
	}
}

// MutateLoadBalancer adds the finalizer that holds the object until the driver deleted the load
// balancer.
func MutateLoadBalancer(lb *lbcfv1beta1.LoadBalancer) {
	controllerutil.AddFinalizer(lb, lbcfv1beta1.FinalizerDeleteLB)
}

// MutateBackendGroup migrates deprecated fields and sets defaults: lbName → loadBalancers,
// pods.port → pods.ports, portNumber → port, protocol TCP, deregisterPolicy IfNotReady, and
// the lb-name labels (lbcf.tkestack.io/lb-name = first LoadBalancer, and
// name.lb.lbcf.tkestack.io/<lb> = "True" for each).
func MutateBackendGroup(bg *lbcfv1beta1.BackendGroup) {
	s := &bg.Spec
	if len(s.LoadBalancers) == 0 && s.LBName != nil && *s.LBName != "" {
		s.LoadBalancers = []string{*s.LBName}
	}
	s.LBName = nil
	if s.DeregisterPolicy == nil || *s.DeregisterPolicy == "" {
		p := lbcfv1beta1.DeregisterIfNotReady
		s.DeregisterPolicy = &p
	}
	fix := func(p *lbcfv1beta1.PortSelector) {
		if p.Port == 0 && p.PortNumber != nil {
			p.Port = *p.PortNumber
		}
		p.PortNumber = nil
		if p.Protocol == "" {
			p.Protocol = "TCP"
		}
	}
	if pb := s.Pods; pb != nil {
		if pb.Port != nil {
			found := false
			for _, p := range pb.Ports {
				found = found || p.GetPort() == pb.Port.GetPort() && p.GetProtocol() == pb.Port.GetProtocol()
			}
			if !found {
				pb.Ports = append(pb.Ports, *pb.Port)
			}
			pb.Port = nil
		}
		for i := range pb.Ports {
			fix(&pb.Ports[i])
		}
	}
	if s.Service != nil {
		fix(&s.Service.Port)
	}
	lbs := s.GetLoadBalancers()
	labels := maps.Clone(bg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for k := range labels {
		if strings.HasPrefix(k, lbcfv1beta1.LabelLBNamePrefix) {
			delete(labels, k) // LoadBalancers removed from the group lose their label
		}
	}
	delete(labels, lbcfv1beta1.LabelLBName)
	for i, lb := range lbs {
		// Names too long for a label (over 63 characters) get no label rather than a broken patch.
		if i == 0 && len(validation.IsValidLabelValue(lb)) == 0 {
			labels[lbcfv1beta1.LabelLBName] = lb
		}
		if len(validation.IsQualifiedName(lbcfv1beta1.LabelLBNamePrefix+lb)) == 0 {
			labels[lbcfv1beta1.LabelLBNamePrefix+lb] = "True"
		}
	}
	bg.Labels = labels
}
