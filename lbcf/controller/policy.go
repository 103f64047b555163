package controller

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// podIdentity identifies a pod across its ports (and across clusters when federated).
func podIdentity(b *Backend) string { return b.Cluster + "/" + b.Name + "/" + b.UID }

// keptPods decides which pods that are not eligible for registration but still have records
// (hasRecord) keep them: it returns their identities, and what was held for the group's status.
// Registration itself always requires Ready; this only delays deregistration. Pods being deleted
// never stay. In order:
//
//  1. A pod whose readiness is unobserved (Backend.ReadinessUnobserved) stays for the grace
//     period, then as the group's member-loss policy says: FailStatic keeps it only while no other
//     backend of the group is eligible (the floor), Keep keeps it, Withdraw lets it go.
//  2. The deregister policy, for the others:
//     IfNotReady (default): none stay.
//     IfNotRunning: pods still in phase Running stay.
//     Webhook: the driver's judgePodDeregister decides; on error or succ=false the failurePolicy
//     applies (DoNothing: all stay; IfNotRunning: Running ones stay; IfNotReady: none).
//  3. The panic threshold, over the pods left to go: when they, with those the group let go for
//     readiness alone within the panic window, are more than the threshold's share of the
//     group's registered pods (counting those let go), they all stay, and the front end's health
//     checks decide. Pods that turn not Ready together rarely do so in one instant (probes fail
//     on their own clocks, members report one by one): counted over the window, a collapse
//     arriving pod by pod takes at most the threshold's share off the front end, while a pod
//     failing alone still goes at once.
func (r *backendGroupReconciler) keptPods(ctx context.Context, bg *lbcfv1beta1.BackendGroup, backends []Backend, hasRecord func(*Backend) bool) (map[string]bool, heldPods) {
	var notReady []*Backend
	seen := map[string]bool{}
	notEligible := map[string]bool{} // every listed pod that is not eligible, with records or not
	eligible := false
	for i := range backends {
		b := &backends[i]
		if b.Eligible() {
			eligible = true
			continue
		}
		if b.Kind != lbcfv1beta1.CandidatePod || b.Deleting {
			continue
		}
		notEligible[podIdentity(b)] = true
		if seen[podIdentity(b)] || !hasRecord(b) {
			continue
		}
		seen[podIdentity(b)] = true
		notReady = append(notReady, b)
	}
	keep := map[string]bool{}
	var held heldPods
	now := time.Now()
	clock := r.readinessClock.update(bg, notReady, now)
	// Pods let go for readiness alone within the panic window, still not Ready.
	gone := r.readinessClock.recentlyGone(bg.UID, now.Add(-r.Readiness.PanicWindow), notEligible)
	if len(notReady) == 0 {
		return keep, held
	}
	requeueAt := func(t time.Time) {
		if left := t.Sub(now); left > 0 && (held.requeue == 0 || left < held.requeue) {
			held.requeue = left
		}
	}
	var plain []*Backend
	policy := r.Readiness.Policy
	if p, ok := lbcfv1beta1.ParseMemberLossPolicy(bg.Annotations[lbcfv1beta1.AnnotationMemberLossPolicy]); ok {
		policy = p
	}
	for _, b := range notReady {
		if !b.ReadinessUnobserved {
			plain = append(plain, b)
			continue
		}
		if end := clock[podIdentity(b)].unobserved.Add(r.Readiness.UnobservedGrace); now.Before(end) {
			keep[podIdentity(b)] = true
			held.unobservedInGrace++
			requeueAt(end)
			continue
		}
		switch {
		case policy == lbcfv1beta1.MemberLossKeep:
			keep[podIdentity(b)] = true
			held.unobservedKept++
		case policy != lbcfv1beta1.MemberLossWithdraw && !eligible:
			keep[podIdentity(b)] = true
			held.unobservedFloor++
		default:
			plain = append(plain, b)
		}
	}
	if len(plain) == 0 {
		return keep, held
	}
	for id := range r.deregisterPolicyKeeps(ctx, bg, plain) {
		keep[id] = true
	}
	var losing []*Backend
	for _, b := range plain {
		if !keep[podIdentity(b)] {
			losing = append(losing, b)
		}
	}
	threshold := r.Readiness.PanicThreshold
	if v, ok := bg.Annotations[lbcfv1beta1.AnnotationReadinessPanicThreshold]; ok {
		if t, err := lbcfv1beta1.ParseReadinessPanicThreshold(v); err == nil {
			threshold = t
		}
	}
	var fresh []*Backend // losing pods the group has not let go before
	for _, b := range losing {
		if _, ok := gone[podIdentity(b)]; !ok {
			fresh = append(fresh, b)
		}
	}
	if threshold <= 0 || len(fresh) == 0 {
		return keep, held
	}
	// The group's registered pods: those with records, not being deleted, and those it let go
	// within the window (whose records are gone or going). Counted only here, as it hashes every
	// backend's record names.
	counted := map[string]bool{}
	for _, b := range notReady {
		counted[podIdentity(b)] = true
	}
	for id := range gone {
		counted[id] = true
	}
	for i := range backends {
		if b := &backends[i]; b.Kind == lbcfv1beta1.CandidatePod && b.Eligible() && !counted[podIdentity(b)] && hasRecord(b) {
			counted[podIdentity(b)] = true
		}
	}
	registered, lost := len(counted), len(gone)+len(fresh)
	if float64(lost) > threshold*float64(registered) {
		for _, b := range fresh {
			keep[podIdentity(b)] = true
		}
		held.panic, held.registered, held.threshold = len(fresh), registered, threshold
		return keep, held
	}
	r.readinessClock.letGo(bg.UID, fresh, now)
	return keep, held
}

// heldPods is what keptPods held back from deregistration, for the group's status.
type heldPods struct {
	// Pods whose readiness is unobserved kept within the grace period, by the floor (no other
	// backend eligible), by policy Keep.
	unobservedInGrace, unobservedFloor, unobservedKept int
	// panic is the number of not-Ready pods kept by the panic threshold (0: it did not act), of
	// registered pods with records (not being deleted) at the threshold's share.
	panic, registered int
	threshold         float64
	// requeue is when the first grace period held here ends.
	requeue time.Duration
}

func (h heldPods) unobserved() int { return h.unobservedInGrace + h.unobservedFloor + h.unobservedKept }

// deregisterPolicyKeeps applies bg's deregister policy to not-Ready pods with records: it returns
// the identities of those that stay.
func (r *backendGroupReconciler) deregisterPolicyKeeps(ctx context.Context, bg *lbcfv1beta1.BackendGroup, notReady []*Backend) map[string]bool {
	keep := map[string]bool{}
	keepRunning := func() {
		for _, b := range notReady {
			if b.Phase == corev1.PodRunning {
				keep[podIdentity(b)] = true
			}
		}
	}
	switch bg.Spec.GetDeregisterPolicy() {
	case lbcfv1beta1.DeregisterIfNotRunning:
		keepRunning()
	case lbcfv1beta1.DeregisterWebhook:
		kept, err := r.judge(ctx, bg, notReady)
		if err == nil {
			for _, id := range kept {
				keep[id] = true
			}
			return keep
		}
		fp := bg.Spec.DeregisterWebhook.GetFailurePolicy()
		r.Recorder.Eventf(bg, nil, corev1.EventTypeWarning, "WebhookFailed", "JudgePodDeregister", "%v; failurePolicy %s applies", err, fp)
		switch fp {
		case lbcfv1beta1.FailurePolicyIfNotRunning:
			keepRunning()
		case lbcfv1beta1.FailurePolicyIfNotReady:
		default:
			for _, b := range notReady {
				keep[podIdentity(b)] = true
			}
		}
	}
	return keep
}

// readinessClock remembers, per group, since when each of its pods with records has been not
// Ready and since when its readiness has been unobserved (the grace period runs from then), and
// which pods it let go for readiness alone, when (they count against the panic threshold for the
// panic window). It lives in memory only: after a restart it starts again, which keeps a pod
// longer, never shorter.
type readinessClock struct {
	mu sync.Mutex
	m  map[types.UID]*groupClock
}

type groupClock struct {
	pods map[string]notReadySince
	gone map[string]time.Time
}

// notReadySince is since when a pod has been not Ready, and since when its readiness has been
// unobserved (zero when it is observed).
type notReadySince struct {
	notReady, unobserved time.Time
}

func (c *readinessClock) group(uid types.UID) *groupClock {
	if c.m == nil {
		c.m = map[types.UID]*groupClock{}
	}
	g := c.m[uid]
	if g == nil {
		g = &groupClock{}
		c.m[uid] = g
	}
	return g
}

// tidy forgets a group that has nothing left to remember.
func (c *readinessClock) tidy(uid types.UID) {
	if g := c.m[uid]; g != nil && len(g.pods) == 0 && len(g.gone) == 0 {
		delete(c.m, uid)
	}
}

// update records the group's not-Ready pods with records and returns their times; pods that are
// Ready again (or gone) are forgotten, and a pod observed again loses its unobserved time.
func (c *readinessClock) update(bg *lbcfv1beta1.BackendGroup, notReady []*Backend, now time.Time) map[string]notReadySince {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[string]notReadySince
	if g := c.m[bg.UID]; g != nil {
		old = g.pods
	}
	cur := make(map[string]notReadySince, len(notReady))
	for _, b := range notReady {
		id := podIdentity(b)
		t, ok := old[id]
		if !ok {
			t.notReady = now
		}
		switch {
		case !b.ReadinessUnobserved:
			t.unobserved = time.Time{}
		case t.unobserved.IsZero():
			t.unobserved = now
		}
		cur[id] = t
	}
	if len(cur) > 0 || c.m[bg.UID] != nil {
		c.group(bg.UID).pods = cur
	}
	c.tidy(bg.UID)
	return cur
}

// recentlyGone returns the pods the group let go for readiness alone since from that are still
// listed and not eligible; the others are forgotten (Ready again, deleted, or let go before from).
func (c *readinessClock) recentlyGone(uid types.UID, from time.Time, notEligible map[string]bool) map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.m[uid]
	if g == nil {
		return nil
	}
	for id, at := range g.gone {
		if at.Before(from) || !notEligible[id] {
			delete(g.gone, id)
		}
	}
	out := maps.Clone(g.gone)
	c.tidy(uid)
	return out
}

// letGo records pods the group lets go for readiness alone.
func (c *readinessClock) letGo(uid types.UID, pods []*Backend, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.group(uid)
	if g.gone == nil {
		g.gone = map[string]time.Time{}
	}
	for _, b := range pods {
		g.gone[podIdentity(b)] = now
	}
}

// forget drops a group that is gone.
func (c *readinessClock) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, uid)
}

// judge asks the webhook driver which not-ready pods stay registered.
func (r *backendGroupReconciler) judge(ctx context.Context, bg *lbcfv1beta1.BackendGroup, notReady []*Backend) ([]string, error) {
	if bg.Spec.DeregisterWebhook == nil || bg.Spec.DeregisterWebhook.DriverName == "" {
		return nil, fmt.Errorf("deregisterPolicy Webhook without deregisterWebhook.driverName")
	}
	drv := &lbcfv1beta1.LoadBalancerDriver{}
	if err := r.Get(ctx, sharedKey(bg.Namespace, bg.Spec.DeregisterWebhook.DriverName), drv); err != nil {
		return nil, fmt.Errorf("get deregister webhook driver: %w", err)
	}
	if !r.callsDriver(drv.Spec.AcceptDryRunCall) {
		return nil, fmt.Errorf("driver %s does not accept dry-run calls", drv.Name)
	}
	req := &driver.JudgePodDeregisterRequest{DryRun: r.DryRun}
	byName := map[string][]*Backend{}
	for _, b := range notReady {
		req.NotReadyPods = append(req.NotReadyPods, memberPod(ctx, r.MemberPods, b.Cluster, b.PodObject(bg.Namespace)))
		byName[b.Name] = append(byName[b.Name], b)
	}
	rsp, err := r.Invoker.JudgePodDeregister(ctx, driver.EndpointFor(drv), req)
	if err != nil {
		return nil, err
	}
	if !rsp.Succ {
		return nil, fmt.Errorf("driver %s refused judgePodDeregister: %s", drv.Name, rsp.Msg)
	}
	var kept []string
	for _, p := range rsp.DoNotDeregister {
		for _, b := range byName[p.Name] {
			// Drivers echo the pods; the uid, when echoed, must be the one asked about (federated
			// backends know only the short form of the member pod's uid).
			if p.UID == "" || string(p.UID) == b.UID || (b.Cluster != "" && lbcfv1beta1.ShortUID(p.UID) == b.UID) {
				kept = append(kept, podIdentity(b))
			}
		}
	}
	return kept, nil
}

// setHeldConditions says in bg's status, events and metrics what keptPods held back: the
// ReadinessUnobserved and ReadinessPanic conditions (set True while they act, False once they
// stop; a group where neither ever acted gets neither), a Warning event when one starts acting
// and a Normal one when it stops.
func (r *backendGroupReconciler) setHeldConditions(bg *lbcfv1beta1.BackendGroup, h heldPods) {
	set := func(typ string, active bool, reason, message, offReason, offMessage string) {
		prev := meta.FindStatusCondition(bg.Status.Conditions, typ)
		was := prev != nil && prev.Status == metav1.ConditionTrue
		switch {
		case active:
			meta.SetStatusCondition(&bg.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue,
				ObservedGeneration: bg.Generation, Reason: reason, Message: message})
			if !was {
				r.Recorder.Eventf(bg, nil, corev1.EventTypeWarning, typ, "Hold", "%s", message)
			}
		case prev != nil:
			meta.SetStatusCondition(&bg.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionFalse,
				ObservedGeneration: bg.Generation, Reason: offReason, Message: offMessage})
			if was {
				r.Recorder.Eventf(bg, nil, corev1.EventTypeNormal, typ+"Over", "Release", "%s", offMessage)
			}
		}
	}
	reason := "WithinGracePeriod"
	switch {
	case h.unobservedFloor > 0:
		reason = "NoOtherBackendEligible"
	case h.unobservedKept > 0:
		reason = "PolicyKeep"
	}
	set(lbcfv1beta1.BackendGroupReadinessUnobserved, h.unobserved() > 0, reason,
		fmt.Sprintf("%d registered pods are not Ready on control-plane evidence alone (node unreachable or NotReady, or Ready cleared by the node lifecycle controller while their containers are ready) and stay registered: %d within the %s grace period, %d because no other backend is eligible, %d by policy Keep; the front end's health checks decide for them",
			h.unobserved(), h.unobservedInGrace, r.Readiness.UnobservedGrace, h.unobservedFloor, h.unobservedKept),
		"Observed", "every registered pod's readiness is observed again")
	set(lbcfv1beta1.BackendGroupReadinessPanic, h.panic > 0, "TooManyNotReady",
		fmt.Sprintf("%d of %d registered pods turned not Ready, more than the panic threshold (%.0f%%) lets go at once: all stay registered and the front end's health checks decide, until enough are Ready again or the pods are gone",
			h.panic, h.registered, h.threshold*100),
		"BelowThreshold", "not-Ready pods are deregistered as the deregister policy says")
	r.Metrics.setHeld(bg, h.unobserved(), h.panic)
}
