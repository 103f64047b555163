package controller

import (
	"context"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// AnnotationBackendAddr on a BackendRecord is the address generateBackendAddr gave before the
// record was created: the BackendGroup reconciler asks for it and creates the record with it, so
// that a backend costs two API writes (the record, then its Registered status, which copies the
// address into status.backendAddr) instead of three (record, address, Registered). Until the
// status names an address, this one is the record's (recordAddr), for ensureBackend as for
// deregisterBackend.
//
// Crash safety is that of the address written to the status before ensureBackend: the address
// is in the record's first write, together with the deregister finalizer, so no ensureBackend
// can ever run for a record whose address is not stored — wherever the process is killed, the
// record that may have reached the device names what to deregister. A record created without it
// (the driver failed, hung or was busy; records of older versions) takes the three-write path.
const AnnotationBackendAddr = "lbfed.io/backend-addr"

// preGenerateTimeout bounds one generateBackendAddr asked for by the BackendGroup reconciler: it
// holds one of the group's record writes, and a driver slow to answer only costs the third
// write (the record asks again, with the driver's own timeout).
const preGenerateTimeout = 2 * time.Second

// addrRequest builds br's generateBackendAddr request; ok is false when the backend is gone or
// not eligible.
func (o *Options) addrRequest(ctx context.Context, b AddrRequestBuilder, br *lbcfv1beta1.BackendRecord, recordID string) (*driver.GenerateBackendAddrRequest, bool, error) {
	pod, svc, ok, err := b.GenerateRequest(ctx, br)
	if err != nil || !ok {
		return nil, ok, err
	}
	if c := br.Labels[lbcfv1beta1.LabelCluster]; pod != nil && c != "" {
		pod.Pod = *memberPod(ctx, o.MemberPods, c, &pod.Pod)
	}
	return &driver.GenerateBackendAddrRequest{
		RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: recordID},
		DryRun:               o.DryRun, LBInfo: br.Spec.LBInfo, LBAttributes: br.Spec.LBAttributes, Parameters: br.Spec.Parameters,
		PodBackend: pod, ServiceBackend: svc,
	}, true, nil
}

// addrPreGenerator asks drivers for the addresses of the records one BackendGroup reconcile is
// about to create. It is best effort: any failure, Running answer, busy or degraded driver
// leaves the record to generate its address itself, and the first failure stops it for the
// rest of the batch, so that a failing or hanging driver costs at most two short waits
// (preGenerateTimeout each: for a slot of the address reserve, then the call) per reconcile.
// Its calls take a slot of the driver's budget while they run, so a driver never sees more
// calls at once than its budget; a share of that budget is kept for them (the address reserve
// of budget.NewForRecords), so a budget full of the records' calls does not cost the records
// created meanwhile a write.
type addrPreGenerator struct {
	r        *backendGroupReconciler
	groupUID string
	eps      map[string]driver.Endpoint // by driver name (spec.lbDriver), healthy drivers only
	stopped  atomic.Bool
}

// preGenerator returns nil when nothing can be asked for: dry run, no request builder, no record
// needing a generated address, or no healthy driver among those the records use.
func (r *backendGroupReconciler) preGenerator(ctx context.Context, bg *lbcfv1beta1.BackendGroup, toCreate []*lbcfv1beta1.BackendRecord) *addrPreGenerator {
	if r.DryRun || r.Addr == nil || r.budget == nil {
		return nil
	}
	p := &addrPreGenerator{r: r, groupUID: string(bg.UID), eps: map[string]driver.Endpoint{}}
	seen := map[string]bool{}
	for _, br := range toCreate {
		name := br.Spec.LBDriver
		if !needsGeneratedAddr(br) || seen[name] {
			continue
		}
		seen[name] = true
		drv := &lbcfv1beta1.LoadBalancerDriver{}
		if err := r.Get(ctx, sharedKey(bg.Namespace, name), drv); err != nil || driverUnhealthy(drv) {
			continue
		}
		ep := driver.EndpointFor(drv)
		if t, ok := ep.Timeouts[driver.GenerateBackendAddr]; !ok || t > preGenerateTimeout {
			ep.Timeouts[driver.GenerateBackendAddr] = preGenerateTimeout
		}
		p.eps[name] = ep
	}
	if len(p.eps) == 0 {
		return nil
	}
	return p
}

func needsGeneratedAddr(br *lbcfv1beta1.BackendRecord) bool {
	return br.Spec.StaticAddr == nil && (br.Spec.PodBackendInfo != nil || br.Spec.ServiceBackendInfo != nil)
}

// generate sets br's AnnotationBackendAddr when the driver gives an address, and reports whether
// it did.
func (p *addrPreGenerator) generate(ctx context.Context, br *lbcfv1beta1.BackendRecord) bool {
	if p == nil || p.stopped.Load() || !needsGeneratedAddr(br) {
		return false
	}
	ep, ok := p.eps[br.Spec.LBDriver]
	if !ok || !p.acquire(ctx, ep.Name) {
		return false // a busy or degraded driver: its records wait in its line as before
	}
	defer p.r.budget.ReleaseAddr(ctx, ep.Name)
	if p.stopped.Load() {
		return false // another call failed while this one waited for its slot: no call after the first failure
	}
	// The record has no UID yet: its recordID names the group and the record, as Bind's
	// createLoadBalancer(<bindUID>-<lbName>) names an object that does not exist yet.
	req, ok, err := p.r.addrRequest(ctx, p.r.Addr, br, driver.RecordID(driver.GenerateBackendAddr, p.groupUID+"-"+br.Name))
	if err != nil || !ok {
		return false // gone or not eligible any more: the record's own reconcile waits for it
	}
	rsp, err := p.r.Invoker.GenerateBackendAddr(ctx, ep, req)
	if err != nil || rsp.Status != driver.StatusSucc || rsp.BackendAddr == "" {
		p.stopped.Store(true)
		o := outcomeOf(commonOf(rsp, err))
		ctrl.LoggerFrom(ctx).V(1).Info("generateBackendAddr before creating the record did not succeed; the records of this batch generate their own",
			"record", br.Name, "status", o.status, "msg", o.msg)
		return false
	}
	if br.Annotations == nil {
		br.Annotations = map[string]string{}
	}
	br.Annotations[AnnotationBackendAddr] = rsp.BackendAddr
	return true
}

// acquire takes a slot of drv's budget for an address call, waiting at most preGenerateTimeout
// for one of the reserve (see budget.Drivers.AcquireAddr).
func (p *addrPreGenerator) acquire(ctx context.Context, drv string) bool {
	ctx, cancel := context.WithTimeout(ctx, preGenerateTimeout)
	defer cancel()
	return p.r.budget.AcquireAddr(ctx, drv)
}

// created emits the SuccGenerateAddr event of a record created with a generated address.
func (p *addrPreGenerator) created(br *lbcfv1beta1.BackendRecord) {
	if p.r.BackendSuccessEvents {
		p.r.Recorder.Eventf(br, nil, corev1.EventTypeNormal, "SuccGenerateAddr", "GenerateAddr", "addr: %s", br.Annotations[AnnotationBackendAddr])
	}
}
