package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// LabelExcludeFromLB keeps a node out of Service backends, as for cloud load balancers.
const LabelExcludeFromLB = "node.kubernetes.io/exclude-from-external-load-balancers"

// LocalSource selects backends from the cluster the controller runs in: pods of the group's
// namespace by label or name × ports, nodes × the nodePort of a NodePort or LoadBalancer Service,
// or static addresses. It reads from the manager's cache.
type LocalSource struct {
	client.Reader
}

var (
	_ BackendSource      = LocalSource{}
	_ AddrRequestBuilder = LocalSource{}
)

// Backends implements BackendSource. Local selection is always complete.
func (s LocalSource) Backends(ctx context.Context, bg *lbcfv1beta1.BackendGroup) ([]Backend, func(*lbcfv1beta1.BackendRecord) bool, error) {
	switch {
	case bg.Spec.Pods != nil:
		b, err := s.podBackends(ctx, bg)
		return b, nil, err
	case bg.Spec.Service != nil:
		b, err := s.serviceBackends(ctx, bg)
		return b, nil, err
	}
	return StaticBackends(bg), nil, nil
}

// StaticBackends are a group's static addresses.
func StaticBackends(bg *lbcfv1beta1.BackendGroup) []Backend {
	out := make([]Backend, 0, len(bg.Spec.Static))
	for _, addr := range bg.Spec.Static {
		out = append(out, Backend{Kind: lbcfv1beta1.CandidateStatic, Name: addr})
	}
	return out
}

// SelectedPods returns the pods bg selects, sorted by name.
func (s LocalSource) SelectedPods(ctx context.Context, bg *lbcfv1beta1.BackendGroup) ([]*corev1.Pod, error) {
	pb := bg.Spec.Pods
	var pods []*corev1.Pod
	switch {
	case pb.ByLabel != nil:
		if len(pb.ByLabel.Selector) == 0 {
			return nil, nil // an empty selector selects nothing, not everything
		}
		list := &corev1.PodList{}
		if err := s.List(ctx, list, client.InNamespace(bg.Namespace), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(pb.ByLabel.Selector)}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list pods: %w", err)
		}
		// Pointers into the list: a pod is a kilobyte, and copying each into the result and
		// again in every swap of the sort was most of a 5,000-pod group's reconcile.
		pods = make([]*corev1.Pod, 0, len(list.Items))
		for i := range list.Items {
			if !slices.Contains(pb.ByLabel.Except, list.Items[i].Name) {
				pods = append(pods, &list.Items[i])
			}
		}
	default:
		for _, name := range pb.ByName {
			p := &corev1.Pod{}
			if err := s.Get(ctx, client.ObjectKey{Namespace: bg.Namespace, Name: name}, p); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("get pod %s: %w", name, err)
			}
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, nil
}

func (s LocalSource) podBackends(ctx context.Context, bg *lbcfv1beta1.BackendGroup) ([]Backend, error) {
	pods, err := s.SelectedPods(ctx, bg)
	if err != nil {
		return nil, err
	}
	type nodeInfo struct {
		addrs    []corev1.NodeAddress
		observed bool
	}
	nodes := map[string]nodeInfo{}
	ports := bg.Spec.Pods.GetPortSelectors()
	out := make([]Backend, 0, len(pods)*len(ports))
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue // finished pods never serve again
		}
		info, ok := nodes[p.Spec.NodeName]
		if !ok && p.Spec.NodeName != "" {
			info.observed = true // a node the cache does not have says nothing against the pod
			n := corev1.Node{}
			if err := s.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &n); err == nil {
				info = nodeInfo{addrs: n.Status.Addresses, observed: nodeObserved(&n)}
			}
			nodes[p.Spec.NodeName] = info
		}
		for _, port := range ports {
			b := podBackend(p, port, info.addrs)
			b.ReadinessUnobserved = readinessUnobserved(p, info.observed || p.Spec.NodeName == "")
			out = append(out, b)
		}
	}
	return out, nil
}

// readinessUnobserved reports whether a pod is not Ready on control-plane evidence alone, which
// says nothing of the pod itself: its containers were ready when the kubelet last reported, and
// either its node's kubelet is not observed (nodeObserved false) or its Ready condition is False
// while the containers and every readiness gate are ready — the kubelet computes Ready from
// exactly those, so someone else cleared it (the node lifecycle controller's MarkPodsNotReady)
// and the kubelet has not asserted it again yet.
func readinessUnobserved(p *corev1.Pod, nodeObserved bool) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || podReady(p) {
		return false
	}
	if c := podCondition(p, corev1.ContainersReady); c == nil || c.Status != corev1.ConditionTrue {
		return false // the kubelet itself said the containers are not ready
	}
	if !nodeObserved {
		return true
	}
	for _, g := range p.Spec.ReadinessGates {
		if c := podCondition(p, g.ConditionType); c == nil || c.Status != corev1.ConditionTrue {
			return false // a gate holds it: the kubelet's own answer
		}
	}
	return true
}

// Taints the node lifecycle controller puts on a node whose kubelet it does not hear from, or
// that reports NotReady.
const (
	taintNodeUnreachable = "node.kubernetes.io/unreachable"
	taintNodeNotReady    = "node.kubernetes.io/not-ready"
)

// nodeObserved reports whether a node's kubelet is heard from: Ready True and neither of the
// node lifecycle controller's taints for a lost or NotReady node.
func nodeObserved(n *corev1.Node) bool {
	if !nodeReady(n) {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == taintNodeUnreachable || t.Key == taintNodeNotReady {
			return false
		}
	}
	return true
}

func podBackend(p *corev1.Pod, port lbcfv1beta1.PortSelector, nodeAddrs []corev1.NodeAddress) Backend {
	b := Backend{
		Kind: lbcfv1beta1.CandidatePod, Name: p.Name, UID: string(p.UID),
		Port:     lbcfv1beta1.PortSelector{Port: port.GetPort(), Protocol: port.GetProtocol()},
		NodeName: p.Spec.NodeName, NodeAddresses: nodeAddrs,
		Phase: p.Status.Phase, Ready: podReady(p), Deleting: p.DeletionTimestamp != nil, Pod: p,
	}
	for _, ip := range p.Status.PodIPs {
		b.IPs = append(b.IPs, ip.IP)
	}
	if len(b.IPs) == 0 && p.Status.PodIP != "" {
		b.IPs = []string{p.Status.PodIP}
	}
	b.HasIP = len(b.IPs) > 0
	return b
}

// serviceBackends: one backend per selected node. Unlike the original, LoadBalancer-type
// Services (which have nodePorts too) are accepted, and nodes being deleted or labelled
// node.kubernetes.io/exclude-from-external-load-balancers are left out. Node readiness is
// reported but, as for cloud load balancers, does not remove a node: the front end's health
// check does, and readiness flaps do not churn the device.
func (s LocalSource) serviceBackends(ctx context.Context, bg *lbcfv1beta1.BackendGroup) ([]Backend, error) {
	sb := bg.Spec.Service
	svc := &corev1.Service{}
	if err := s.Get(ctx, client.ObjectKey{Namespace: bg.Namespace, Name: sb.Name}, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get service %s: %w", sb.Name, err)
	}
	nodePort := serviceNodePort(svc, sb.Port)
	if svc.DeletionTimestamp != nil || nodePort == 0 {
		return nil, nil
	}
	list := &corev1.NodeList{}
	if err := s.List(ctx, list, client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(sb.NodeSelector)}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	nodes := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i] // sorted as pointers: a node is kilobytes
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	out := make([]Backend, 0, len(nodes))
	for _, n := range nodes {
		if _, excluded := n.Labels[LabelExcludeFromLB]; excluded {
			continue
		}
		out = append(out, Backend{
			Kind: lbcfv1beta1.CandidateNode, Name: svc.Name, Port: lbcfv1beta1.PortSelector{Port: sb.Port.GetPort(), Protocol: sb.Port.GetProtocol()},
			NodeName: n.Name, NodeAddresses: n.Status.Addresses, NodePort: nodePort,
			Ready: nodeReady(n), Deleting: n.DeletionTimestamp != nil,
		})
	}
	return out, nil
}

// serviceNodePort returns the nodePort of the Service port matching sel, or 0.
func serviceNodePort(svc *corev1.Service, sel lbcfv1beta1.PortSelector) int32 {
	if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return 0
	}
	for _, p := range svc.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(corev1.ProtocolTCP)
		}
		if p.Port == sel.GetPort() && proto == sel.GetProtocol() {
			return p.NodePort
		}
	}
	return 0
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// GenerateRequest implements AddrRequestBuilder. Pod readiness is checked again right before
// the call (the original's PR #43: a pod that lost its IP must not get an address).
func (s LocalSource) GenerateRequest(ctx context.Context, br *lbcfv1beta1.BackendRecord) (*driver.PodBackendInRequest, *driver.ServiceBackendInRequest, bool, error) {
	switch {
	case br.Spec.PodBackendInfo != nil:
		pod := &corev1.Pod{}
		if err := s.Get(ctx, client.ObjectKey{Namespace: br.Namespace, Name: br.Spec.PodBackendInfo.Name}, pod); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil, false, nil
			}
			return nil, nil, false, fmt.Errorf("get pod: %w", err)
		}
		b := podBackend(pod, br.Spec.PodBackendInfo.Port, nil)
		if !b.Eligible() || br.Name != b.RecordName(br.Spec.LBName, groupName(br)) {
			return nil, nil, false, nil // not Ready, or a new pod with the same name
		}
		pod.TypeMeta.APIVersion, pod.TypeMeta.Kind = "v1", "Pod"
		return &driver.PodBackendInRequest{Pod: *pod, Port: br.Spec.PodBackendInfo.Port}, nil, true, nil
	case br.Spec.ServiceBackendInfo != nil:
		sb := br.Spec.ServiceBackendInfo
		svc := &corev1.Service{}
		if err := s.Get(ctx, client.ObjectKey{Namespace: br.Namespace, Name: sb.Name}, svc); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil, false, nil
			}
			return nil, nil, false, fmt.Errorf("get service: %w", err)
		}
		node := &corev1.Node{}
		if err := s.Get(ctx, client.ObjectKey{Name: sb.NodeName}, node); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil, false, nil
			}
			return nil, nil, false, fmt.Errorf("get node: %w", err)
		}
		svc.TypeMeta.APIVersion, svc.TypeMeta.Kind = "v1", "Service"
		return nil, &driver.ServiceBackendInRequest{Service: *svc, Port: sb.Port, NodeName: sb.NodeName, NodeAddresses: node.Status.Addresses}, true, nil
	}
	return nil, nil, false, nil
}

// groupName is the name of the record's BackendGroup: its controller's, as the record name was
// built from it. The group label holds a hash when the name is longer than a label value.
func groupName(br *lbcfv1beta1.BackendRecord) string {
	if ref := metav1.GetControllerOf(br); ref != nil && ref.Kind == lbcfv1beta1.KindBackendGroup {
		return ref.Name
	}
	return br.Labels[lbcfv1beta1.LabelGroupName]
}
