package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// podIdentity identifies a pod across its ports (and across clusters when federated).
func podIdentity(b *Backend) string { return b.Cluster + "/" + b.Name + "/" + b.UID }

// keptPods applies bg's deregister policy to the backends that are not eligible for
// registration but still have records (hasRecord): it returns the identities of the pods whose
// records stay. Registration itself always requires Ready; the policy only delays
// deregistration.
//
//	IfNotReady (default): none stay.
//	IfNotRunning: pods still in phase Running stay.
//	Webhook: the driver's judgePodDeregister decides; on error or succ=false the failurePolicy
//	applies (DoNothing: all stay; IfNotRunning: Running ones stay; IfNotReady: none).
//
// Pods being deleted never stay.
func (r *BackendGroupReconciler) keptPods(ctx context.Context, bg *lbcfv1beta1.BackendGroup, backends []Backend, hasRecord func(*Backend) bool) map[string]bool {
	var notReady []*Backend
	seen := map[string]bool{}
	for i := range backends {
		b := &backends[i]
		if b.Kind != lbcfv1beta1.CandidatePod || b.Eligible() || b.Deleting || seen[podIdentity(b)] || !hasRecord(b) {
			continue
		}
		seen[podIdentity(b)] = true
		notReady = append(notReady, b)
	}
	keep := map[string]bool{}
	if len(notReady) == 0 {
		return keep
	}
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

// judge asks the webhook driver which not-ready pods stay registered.
func (r *BackendGroupReconciler) judge(ctx context.Context, bg *lbcfv1beta1.BackendGroup, notReady []*Backend) ([]string, error) {
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
