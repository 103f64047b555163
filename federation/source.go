// Package federation is lbfed's control-plane controller: LBCF whose backends are the candidates
// every member cluster reports. It runs the LBCF engine (lbcf/controller) on the Karmada API
// server — LoadBalancers and BackendRecords live there, so each load balancer and each backend is
// programmed once whatever the number of members — with a BackendSource that reads each member's
// compact report from the BackendGroup's ResourceBinding and takes member liveness from Karmada's
// Cluster objects.
package federation

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// indexBindingResource indexes ResourceBindings by the object they bind: "<Kind>/<name>".
const indexBindingResource = "lbfed.bindingResource"

// Source is the federation's BackendSource and AddrRequestBuilder.
type Source struct {
	// Client reads the Karmada API server (cached): ResourceBindings, Clusters, Services.
	Client client.Reader
	// Grace is how long a member may be NotReady before its backends are deregistered.
	Grace time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Metrics receives per-cluster figures (optional).
	Metrics *Metrics

	mu sync.Mutex
	// last is each member's last current report per group: what is used while Karmada delivers
	// no status or a stale one for that member.
	last    map[types.UID]map[string]*clusterReport
	requeue map[types.UID]time.Duration
}

var (
	_ controller.BackendSource      = &Source{}
	_ controller.AddrRequestBuilder = &Source{}
	_ controller.Requeuer           = &Source{}
)

func (s *Source) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// binding returns the ResourceBinding of bg, or nil.
func (s *Source) binding(ctx context.Context, bg *lbcfv1beta1.BackendGroup) (*workv1alpha2.ResourceBinding, error) {
	list := &workv1alpha2.ResourceBindingList{}
	if err := s.Client.List(ctx, list, client.InNamespace(bg.Namespace), client.MatchingFields{indexBindingResource: lbcfv1beta1.KindBackendGroup + "/" + bg.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list resource bindings: %w", err)
	}
	for i := range list.Items {
		rb := &list.Items[i]
		if rb.Spec.Resource.APIVersion == lbcfv1beta1.APIVersion && (rb.Spec.Resource.UID == "" || rb.Spec.Resource.UID == bg.UID) {
			return rb, nil
		}
	}
	return nil, nil
}

// clusterDown reports whether a member is gone or NotReady for longer than the grace period;
// wait is the time left before a NotReady member is declared down.
func (s *Source) clusterDown(ctx context.Context, name string) (down bool, wait time.Duration, err error) {
	c := &clusterv1alpha1.Cluster{}
	if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return true, 0, nil
		}
		return false, 0, fmt.Errorf("get cluster %s: %w", name, err)
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	if cond == nil || cond.Status == metav1.ConditionTrue {
		return false, 0, nil
	}
	elapsed := s.now().Sub(cond.LastTransitionTime.Time)
	if elapsed >= s.Grace {
		return true, 0, nil
	}
	return false, s.Grace - elapsed, nil
}

// Backends implements controller.BackendSource: every member's candidates, from its current
// report or, while Karmada has none for it, its last one. A member that left the binding, was
// removed, or has been NotReady past the grace period contributes none, and its records go. A
// member whose report is unknown or truncated keeps its records.
func (s *Source) Backends(ctx context.Context, bg *lbcfv1beta1.BackendGroup) ([]controller.Backend, func(*lbcfv1beta1.BackendRecord) bool, error) {
	if len(bg.Spec.Static) > 0 {
		return controller.StaticBackends(bg), nil, nil // static addresses are the template's own
	}
	rb, err := s.binding(ctx, bg)
	if err != nil {
		return nil, nil, err
	}
	log := ctrl.LoggerFrom(ctx)
	authority := map[string]bool{}
	var out []controller.Backend
	var requeue time.Duration
	targets := map[string]bool{}
	if rb != nil {
		items := map[string]*workv1alpha2.AggregatedStatusItem{}
		for i := range rb.Status.AggregatedStatus {
			items[rb.Status.AggregatedStatus[i].ClusterName] = &rb.Status.AggregatedStatus[i]
		}
		for _, t := range rb.Spec.Clusters {
			targets[t.Name] = true
			down, wait, err := s.clusterDown(ctx, t.Name)
			if err != nil {
				return nil, nil, err
			}
			if down {
				authority[t.Name] = true
				s.Metrics.setCandidates(bg.UID, t.Name, 0)
				continue
			}
			if wait > 0 && (requeue == 0 || wait < requeue) {
				requeue = wait
			}
			cr := s.fresh(bg, t.Name, items[t.Name])
			if cr == nil {
				cr = s.lastReport(bg.UID, t.Name)
			}
			if cr == nil {
				authority[t.Name] = false
				log.V(1).Info("no report from member yet: keeping its records", "cluster", t.Name)
				continue
			}
			authority[t.Name] = !cr.partial
			out = append(out, cr.backends...)
			s.Metrics.setCandidates(bg.UID, t.Name, len(cr.backends))
		}
	}
	s.mu.Lock()
	for c := range s.last[bg.UID] {
		if !targets[c] {
			delete(s.last[bg.UID], c) // left the binding
			s.Metrics.setCandidates(bg.UID, c, 0)
		}
	}
	if s.requeue == nil {
		s.requeue = map[types.UID]time.Duration{}
	}
	s.requeue[bg.UID] = requeue
	s.mu.Unlock()
	return out, func(br *lbcfv1beta1.BackendRecord) bool {
		a, ok := authority[br.Labels[lbcfv1beta1.LabelCluster]]
		return !ok || a // records of members not in the binding are deregistered
	}, nil
}

// fresh decodes a member's item when it carries a current report, and remembers it. A report
// whose bytes did not change since the last call is not decoded again: groups are reconciled far
// more often than members report.
func (s *Source) fresh(bg *lbcfv1beta1.BackendGroup, cluster string, item *workv1alpha2.AggregatedStatusItem) *clusterReport {
	if item == nil || item.Status == nil || len(item.Status.Raw) == 0 {
		return nil
	}
	sum := fnv.New64a()
	_, _ = sum.Write(item.Status.Raw)
	digest := sum.Sum64()
	if last := s.lastReport(bg.UID, cluster); last != nil && last.digest == digest && last.generation == bg.Generation {
		return last
	}
	rep, err := parseReport(item.Status.Raw)
	if err != nil || !rep.current(bg.Generation) {
		return nil
	}
	cr, _ := rep.decode(cluster, bg) // entries that do not decode make the report partial
	cr.digest, cr.generation = digest, bg.Generation
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[types.UID]map[string]*clusterReport{}
	}
	if s.last[bg.UID] == nil {
		s.last[bg.UID] = map[string]*clusterReport{}
	}
	s.last[bg.UID][cluster] = cr
	return cr
}

func (s *Source) lastReport(uid types.UID, cluster string) *clusterReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[uid][cluster]
}

// Forget drops what is remembered of a deleted group.
func (s *Source) Forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.last[uid] {
		s.Metrics.setCandidates(uid, c, 0)
	}
	delete(s.last, uid)
	delete(s.requeue, uid)
}

// RequeueAfter implements controller.Requeuer: a group is looked at again when a NotReady member's
// grace period ends.
func (s *Source) RequeueAfter(bg *lbcfv1beta1.BackendGroup) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requeue[bg.UID]
}

// GenerateRequest implements controller.AddrRequestBuilder from the member's report.
func (s *Source) GenerateRequest(ctx context.Context, br *lbcfv1beta1.BackendRecord) (*driver.PodBackendInRequest, *driver.ServiceBackendInRequest, bool, error) {
	ref := metav1.GetControllerOf(br)
	if ref == nil {
		return nil, nil, false, nil
	}
	bg := &lbcfv1beta1.BackendGroup{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: br.Namespace, Name: ref.Name}, bg); err != nil {
		return nil, nil, false, client.IgnoreNotFound(err)
	}
	cluster := br.Labels[lbcfv1beta1.LabelCluster]
	cr := s.lastReport(bg.UID, cluster)
	if cr == nil {
		// After a restart the record may be reconciled before its group: read the reports now.
		if _, _, err := s.Backends(ctx, bg); err != nil {
			return nil, nil, false, err
		}
		if cr = s.lastReport(bg.UID, cluster); cr == nil {
			return nil, nil, false, nil
		}
	}
	switch {
	case br.Spec.PodBackendInfo != nil:
		b := cr.byKey[backendKey(lbcfv1beta1.CandidatePod, br.Spec.PodBackendInfo.Name, br.Spec.PodBackendInfo.Port, "")]
		if b == nil || !b.Eligible() || b.RecordName(br.Spec.LBName, bg.Name) != br.Name {
			return nil, nil, false, nil
		}
		return &driver.PodBackendInRequest{Pod: *b.PodObject(br.Namespace), Port: b.Port}, nil, true, nil
	case br.Spec.ServiceBackendInfo != nil:
		sb := br.Spec.ServiceBackendInfo
		b := cr.byKey[backendKey(lbcfv1beta1.CandidateNode, sb.Name, sb.Port, sb.NodeName)]
		if b == nil || !b.Eligible() {
			return nil, nil, false, nil
		}
		svc, err := s.service(ctx, br.Namespace, b)
		if err != nil {
			return nil, nil, false, err
		}
		return nil, &driver.ServiceBackendInRequest{Service: *svc, Port: b.Port, NodeName: b.NodeName, NodeAddresses: b.NodeAddresses}, true, nil
	}
	return nil, nil, false, nil
}

// service returns the Service template with the member's nodePort (members allocate their own).
func (s *Source) service(ctx context.Context, ns string, b *controller.Backend) (*corev1.Service, error) {
	svc := &corev1.Service{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.Name}, svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get service %s: %w", b.Name, err)
		}
		svc = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b.Name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort}}
	}
	svc = svc.DeepCopy()
	svc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	found := false
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(corev1.ProtocolTCP)
		}
		if p.Port == b.Port.GetPort() && proto == b.Port.GetProtocol() {
			p.NodePort, found = b.NodePort, true
		}
	}
	if !found {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Port: b.Port.GetPort(), Protocol: corev1.Protocol(b.Port.GetProtocol()), NodePort: b.NodePort})
	}
	return svc, nil
}
