// Package federation is lbfed's control-plane controller: LBCF whose backends are the candidates
// every member cluster reports. It runs the LBCF engine (lbcf/controller) on the Karmada API
// server — LoadBalancers and BackendRecords live there, so each load balancer and each backend is
// programmed once whatever the number of members — with a BackendSource that reads each member's
// compact report from the BackendGroup's ResourceBinding and takes member liveness from Karmada's
// Cluster objects.
//
// What each member contributes is decided per group by a member plan (members.go): withdraw what
// is known to be gone, keep within bounds what is only unobserved, never empty a group on
// control-plane evidence alone (the fail-static floor), restore a withdrawn member only from a
// report it made after its return. ClusterProxyPods reads members' pods for drivers through
// Karmada's cluster proxy.
//
// How registration state travels back to the members (readiness gates), its size, writes, latency
// and safety: docs/design/federation.md.
package federation

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
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
	// Writer writes the template annotations the members read (report requests, budgets).
	Writer client.Writer
	// Recorder receives the member events (MemberWithdrawn, MemberHeld, MemberRestored, …).
	Recorder events.EventRecorder
	// Grace is how long a member may be unobserved (Cluster NotReady or gone, binding missing)
	// before the member-loss policy applies.
	Grace time.Duration
	// Policy is the member-loss policy of groups without the lbfed.io/member-loss-policy annotation.
	Policy lbcfv1beta1.MemberLossPolicy
	// CandidatesBudget is the candidate data, in bytes, one group's ResourceBinding may carry over
	// all its members; each member is told its share through the template.
	CandidatesBudget int
	// DryRun: nothing is written.
	DryRun bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Metrics receives per-cluster figures (optional).
	Metrics *Metrics

	mu sync.Mutex
	// last is each member's last current report per group: what is used while Karmada delivers
	// no status or a stale one for that member.
	last map[types.UID]map[string]*clusterReport
	// plans are the latest decisions per group.
	plans map[types.UID]*groupPlan
	// params shares the members' parameters among their decoded reports: 10,000 groups on two
	// members kept 20,000 equal maps, ≈ 350 bytes each (BenchmarkDecodedReportBytes).
	paramsOnce sync.Once
	params     *controller.MapInterner
	// firstMissing is when a Cluster object (by name) or a group's binding (by UID) was first
	// found missing; restarted with the process (the grace period starts again).
	firstMissing map[string]time.Time
}

// sharedParamsGeneration bounds the parameter maps the interner keeps (see MapInterner): a
// fleet's distinct member parameters are a few per member.
const sharedParamsGeneration = 1024

// DefaultCandidatesBudget is the candidate data one group's ResourceBinding may carry over all
// its members: etcd refuses objects over 1.5 MiB, and the binding holds more than candidates.
const DefaultCandidatesBudget = 1200 * 1024

var (
	_ controller.BackendSource      = &Source{}
	_ controller.AddrRequestBuilder = &Source{}
	_ controller.Requeuer           = &Source{}
	_ controller.StatusContributor  = &Source{}
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

// observeCluster tells whether a member is live and, when not, why and since when.
func (s *Source) observeCluster(ctx context.Context, o *observation) error {
	c := &clusterv1alpha1.Cluster{}
	if err := s.Client.Get(ctx, client.ObjectKey{Name: o.name}, c); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get cluster %s: %w", o.name, err)
		}
		o.reason, o.since = "ClusterGone", s.missingSince("cluster/"+o.name)
		return nil
	}
	s.found("cluster/" + o.name)
	cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
	if cond == nil || cond.Status == metav1.ConditionTrue {
		o.live = true
		return nil
	}
	o.reason, o.since = "ClusterNotReady", cond.LastTransitionTime.Time
	return nil
}

func (s *Source) missingSince(key string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstMissing == nil {
		s.firstMissing = map[string]time.Time{}
	}
	t, ok := s.firstMissing[key]
	if !ok {
		t = s.now()
		s.firstMissing[key] = t
	}
	return t
}

func (s *Source) found(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.firstMissing, key)
}

// policy returns the group's member-loss policy.
func (s *Source) policy(bg *lbcfv1beta1.BackendGroup) lbcfv1beta1.MemberLossPolicy {
	if p, ok := lbcfv1beta1.ParseMemberLossPolicy(bg.Annotations[lbcfv1beta1.AnnotationMemberLossPolicy]); ok {
		return p
	}
	if s.Policy != "" {
		return s.Policy
	}
	return lbcfv1beta1.MemberLossFailStatic
}

// plan observes every member of bg and decides what each contributes.
func (s *Source) plan(ctx context.Context, bg *lbcfv1beta1.BackendGroup) (*groupPlan, error) {
	rb, err := s.binding(ctx, bg)
	if err != nil {
		return nil, err
	}
	in := planInput{now: s.now(), grace: s.Grace, policy: s.policy(bg), previous: map[string]lbcfv1beta1.MemberStatus{},
		request: bg.Annotations[lbcfv1beta1.AnnotationReportRequest]}
	for _, m := range bg.Status.Members {
		in.previous[m.Name] = m
	}
	seen := map[string]bool{}
	var bindingSince time.Time
	if rb != nil && len(rb.Spec.Clusters) > 0 {
		s.found("binding/" + string(bg.UID))
		items := map[string]*workv1alpha2.AggregatedStatusItem{}
		for i := range rb.Status.AggregatedStatus {
			items[rb.Status.AggregatedStatus[i].ClusterName] = &rb.Status.AggregatedStatus[i]
		}
		for _, t := range rb.Spec.Clusters {
			if seen[t.Name] {
				continue
			}
			seen[t.Name] = true
			o := observation{name: t.Name, target: true}
			if err := s.observeCluster(ctx, &o); err != nil {
				return nil, err
			}
			o.fresh = s.fresh(bg, t.Name, items[t.Name])
			o.last = o.fresh
			if o.last == nil {
				o.last = s.lastReport(bg.UID, t.Name)
			}
			in.observations = append(in.observations, o)
		}
	} else {
		in.bindingMissing = true
		bindingSince = s.missingSince("binding/" + string(bg.UID))
		if c := meta.FindStatusCondition(bg.Status.Conditions, lbcfv1beta1.BackendGroupBindingMissing); c != nil && c.Status == metav1.ConditionTrue && c.LastTransitionTime.Time.Before(bindingSince) {
			bindingSince = c.LastTransitionTime.Time // persisted across restarts
		}
	}
	// Members the group knew that the binding does not (or no longer) name.
	known := map[string]bool{}
	s.mu.Lock()
	for c := range s.last[bg.UID] {
		known[c] = true
	}
	s.mu.Unlock()
	for c := range in.previous {
		known[c] = true
	}
	names := make([]string, 0, len(known))
	for c := range known {
		if !seen[c] {
			names = append(names, c)
		}
	}
	sort.Strings(names)
	for _, c := range names {
		o := observation{name: c, last: s.lastReport(bg.UID, c)}
		if prev, ok := in.previous[c]; ok && !in.bindingMissing && o.last == nil && prev.State == lbcfv1beta1.MemberWithdrawn {
			continue // withdrawn and out of the placement: nothing left to say
		}
		if in.bindingMissing {
			o.reason, o.since = "BindingMissing", bindingSince
		} else {
			o.removed, o.reason, o.since = true, "RemovedFromPlacement", in.now
		}
		in.observations = append(in.observations, o)
	}
	p := decide(in)
	// Reports of members that left the placement are forgotten once they are withdrawn.
	s.mu.Lock()
	for c := range s.last[bg.UID] {
		if m := p.members[c]; m == nil || (!in.bindingMissing && !seen[c] && m.status.State == lbcfv1beta1.MemberWithdrawn) {
			delete(s.last[bg.UID], c)
		}
	}
	if s.plans == nil {
		s.plans = map[types.UID]*groupPlan{}
	}
	s.plans[bg.UID] = p
	s.mu.Unlock()
	s.Metrics.setPlan(bg.UID, p)
	return p, nil
}

// Backends implements controller.BackendSource: what the member plan contributes (see decide).
func (s *Source) Backends(ctx context.Context, bg *lbcfv1beta1.BackendGroup) ([]controller.Backend, func(*lbcfv1beta1.BackendRecord) bool, error) {
	if len(bg.Spec.Static) > 0 {
		return controller.StaticBackends(bg), nil, nil // static addresses are the template's own
	}
	p, err := s.plan(ctx, bg)
	if err != nil {
		return nil, nil, err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("member plan", "members", len(p.members), "bindingMissing", p.bindingMissing)
	return p.backends(), p.authoritative, nil
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
	s.paramsOnce.Do(func() { s.params = controller.NewMapInterner(sharedParamsGeneration) })
	cr, _ := rep.decode(cluster, bg, s.params.Share) // entries that do not decode make the report partial
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
	delete(s.last, uid)
	delete(s.plans, uid)
	delete(s.firstMissing, "binding/"+string(uid))
	s.Metrics.forget(uid)
}

// RequeueAfter implements controller.Requeuer: a group is looked at again when a NotReady member's
// grace period ends.
func (s *Source) RequeueAfter(bg *lbcfv1beta1.BackendGroup) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.plans[bg.UID]; p != nil {
		return p.requeue
	}
	return 0
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
	cr, planned := s.contributed(bg.UID, cluster)
	if !planned {
		// After a restart the record may be reconciled before its group: plan now.
		if _, err := s.plan(ctx, bg); err != nil {
			return nil, nil, false, err
		}
		cr, _ = s.contributed(bg.UID, cluster)
	}
	if cr == nil {
		return nil, nil, false, nil // withdrawn, recovering, or nothing reported
	}
	switch {
	case br.Spec.PodBackendInfo != nil:
		b := cr.find(lbcfv1beta1.CandidatePod, br.Spec.PodBackendInfo.Name, br.Spec.PodBackendInfo.Port, "")
		if b == nil || !b.Eligible() || b.RecordName(br.Spec.LBName, bg.Name) != br.Name {
			return nil, nil, false, nil
		}
		return &driver.PodBackendInRequest{Pod: *b.PodObject(br.Namespace), Port: b.Port}, nil, true, nil
	case br.Spec.ServiceBackendInfo != nil:
		sb := br.Spec.ServiceBackendInfo
		b := cr.find(lbcfv1beta1.CandidateNode, sb.Name, sb.Port, sb.NodeName)
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

// contributed returns the report a member contributes in the group's current plan; planned is
// false when the group has no plan yet.
func (s *Source) contributed(uid types.UID, cluster string) (r *clusterReport, planned bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.plans[uid]
	if p == nil {
		return nil, false
	}
	if m := p.members[cluster]; m != nil {
		return m.report, true
	}
	return nil, true
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
