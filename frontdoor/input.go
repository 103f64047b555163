package frontdoor

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/lbspec"
)

// VIPAndMethod reads the lb.zdns.cn/vip and lb.zdns.cn/method annotations (elb-controller's, with
// its validation); fallback is a Service's spec.loadBalancerIP, empty for none.
func VIPAndMethod(annotations map[string]string, fallback string) (netip.Addr, string, error) {
	vip, err := lbspec.ParseVIP(annotations, fallback)
	if err != nil {
		return netip.Addr{}, "", Refusef(ReasonInvalid, "%v", err)
	}
	method, err := lbspec.ParseMethod(annotations)
	if err != nil {
		return netip.Addr{}, "", Refusef(ReasonInvalid, "%v", err)
	}
	return vip, method, nil
}

// PortFilter keeps a Service port (nil keeps all).
type PortFilter func(corev1.ServicePort) bool

// Ports lists the Service's ports a front door exposes: TCP and UDP ports kept by keep, with
// their target port resolved to a number (a named target port through the pod templates of the
// namespace's Deployments, StatefulSets and DaemonSets that the selector matches: LBCF
// BackendGroups select pod ports by number). Ports that cannot be exposed are returned in
// skipped with the reason; those whose target port cannot be resolved (now) are also in held: what
// was generated for them stays (Want.Held). A Service without a selector is refused (no pods to
// select).
func (k *Kit) Ports(ctx context.Context, svc *corev1.Service, keep PortFilter) (ports, held []Port, skipped []string, err error) {
	if len(svc.Spec.Selector) == 0 {
		return nil, nil, nil, Refusef(ReasonInvalid, "Service %s/%s has no selector: the front door selects its pods in every member", svc.Namespace, svc.Name)
	}
	for _, sp := range svc.Spec.Ports {
		if keep != nil && !keep(sp) {
			continue
		}
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		name := fmt.Sprintf("port %d/%s", sp.Port, proto)
		if proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP {
			skipped = append(skipped, name+": only TCP and UDP are supported")
			continue
		}
		target := sp.Port
		switch {
		case sp.TargetPort.Type == intstr.Int && sp.TargetPort.IntVal > 0:
			target = sp.TargetPort.IntVal
		case sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal != "":
			n, why := k.namedPort(ctx, svc, sp.TargetPort.StrVal, proto)
			if n == 0 {
				skipped = append(skipped, fmt.Sprintf("%s: target port %q: %s", name, sp.TargetPort.StrVal, why))
				held = append(held, Port{Port: sp.Port, Protocol: proto})
				continue
			}
			target = n
		}
		ports = append(ports, Port{Port: sp.Port, Protocol: proto, TargetPort: target})
	}
	return ports, held, skipped, nil
}

// namedPort resolves a named target port through the pod templates on the Karmada API server
// whose labels the Service selects; it must name one number in all of them.
func (k *Kit) namedPort(ctx context.Context, svc *corev1.Service, port string, proto corev1.Protocol) (int32, string) {
	if k.Reader == nil {
		return 0, "named target ports are not resolved (no reader of workloads)"
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	var templates []corev1.PodTemplateSpec
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &appsv1.DaemonSetList{}} {
		if err := k.Reader.List(ctx, list, client.InNamespace(svc.Namespace)); err != nil {
			return 0, fmt.Sprintf("list workloads: %v", err)
		}
		switch l := list.(type) {
		case *appsv1.DeploymentList:
			for i := range l.Items {
				templates = append(templates, l.Items[i].Spec.Template)
			}
		case *appsv1.StatefulSetList:
			for i := range l.Items {
				templates = append(templates, l.Items[i].Spec.Template)
			}
		case *appsv1.DaemonSetList:
			for i := range l.Items {
				templates = append(templates, l.Items[i].Spec.Template)
			}
		}
	}
	found := map[int32]bool{}
	for _, t := range templates {
		if !sel.Matches(labels.Set(t.Labels)) {
			continue
		}
		for _, c := range t.Spec.Containers {
			for _, cp := range c.Ports {
				p := cp.Protocol
				if p == "" {
					p = corev1.ProtocolTCP
				}
				if cp.Name == port && p == proto {
					found[cp.ContainerPort] = true
				}
			}
		}
	}
	switch len(found) {
	case 0:
		return 0, "no Deployment, StatefulSet or DaemonSet selected by the Service names it"
	case 1:
		for n := range found {
			return n, ""
		}
	}
	return 0, "the selected workloads give it different numbers"
}

// Clusters lists the member clusters a Service is propagated to (ServicePlacements). Empty when
// the Service has no binding yet.
func Clusters(ctx context.Context, c client.Reader, svc *corev1.Service) ([]string, error) {
	placements, err := ServicePlacements(ctx, c, svc.Namespace)
	if err != nil {
		return nil, err
	}
	return placements[svc.Name], nil
}

// ServicePlacements lists the member clusters each Service of the namespace is propagated to, by
// Service name: its ResourceBinding's spec.clusters and the clusters of spec.requiredBy
// (propagated as a dependency), sorted. A Service without a binding has no entry.
func ServicePlacements(ctx context.Context, c client.Reader, namespace string) (map[string][]string, error) {
	list := &workv1alpha2.ResourceBindingList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list ResourceBindings: %w", err)
	}
	sets := map[string]map[string]bool{}
	for i := range list.Items {
		key, ok := ServiceOfBinding(&list.Items[i])
		if !ok {
			continue
		}
		if sets[key.Name] == nil {
			sets[key.Name] = map[string]bool{}
		}
		for _, n := range bindingClusters(&list.Items[i]) {
			sets[key.Name][n] = true
		}
	}
	out := make(map[string][]string, len(sets))
	for svc, set := range sets {
		out[svc] = slices.Sorted(maps.Keys(set))
	}
	return out, nil
}

// bindingClusters are a binding's spec.clusters and spec.requiredBy clusters, sorted, with
// repetitions.
func bindingClusters(rb *workv1alpha2.ResourceBinding) []string {
	var out []string
	for _, t := range rb.Spec.Clusters {
		out = append(out, t.Name)
	}
	for _, s := range rb.Spec.RequiredBy {
		for _, t := range s.Clusters {
			out = append(out, t.Name)
		}
	}
	sort.Strings(out)
	return out
}

// CacheOptions are the cache settings of a manager running front doors by themselves: every
// resource on Karmada has a ResourceBinding, of which the front doors read only the resource and
// its placement (spec.clusters, spec.requiredBy). Managers running the federation use its
// settings, which keep the same.
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{&workv1alpha2.ResourceBinding{}: {Transform: func(o any) (any, error) {
			rb, ok := o.(*workv1alpha2.ResourceBinding)
			if !ok {
				return o, nil
			}
			rb.ManagedFields, rb.Annotations = nil, nil
			rb.Spec = workv1alpha2.ResourceBindingSpec{Resource: rb.Spec.Resource, Clusters: rb.Spec.Clusters, RequiredBy: rb.Spec.RequiredBy}
			rb.Status = workv1alpha2.ResourceBindingStatus{}
			return rb, nil
		}}},
	}
}

// ServiceOfBinding maps a Service's ResourceBinding to the Service's namespace/name (nothing for
// other bindings).
func ServiceOfBinding(o client.Object) (client.ObjectKey, bool) {
	rb, ok := o.(*workv1alpha2.ResourceBinding)
	if !ok || rb.Spec.Resource.APIVersion != "v1" || rb.Spec.Resource.Kind != "Service" {
		return client.ObjectKey{}, false
	}
	return client.ObjectKey{Namespace: rb.Namespace, Name: rb.Spec.Resource.Name}, true
}

// PlacementChanged tells whether a binding update changes the clusters Clusters reads.
func PlacementChanged(old, new client.Object) bool {
	o, ok1 := old.(*workv1alpha2.ResourceBinding)
	n, ok2 := new.(*workv1alpha2.ResourceBinding)
	if !ok1 || !ok2 {
		return true
	}
	return !slices.Equal(bindingClusters(o), bindingClusters(n))
}
