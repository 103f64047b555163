package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller/internal/budget"
	"github.com/lbfed/lbfed/lbcf/controller/internal/pace"
	"github.com/lbfed/lbfed/lbcf/controller/internal/wakeup"
	"github.com/lbfed/lbfed/lbcf/controller/internal/writes"
)

// backendGroupReconciler keeps a BackendGroup's BackendRecords equal to
// usable LoadBalancers × eligible backends (plus the not-ready backends its deregister policy
// keeps), and its status counts. Registration and deregistration themselves happen in the
// backendRecordReconciler, driven by each record's finalizer.
type backendGroupReconciler struct {
	client.Client
	Options
	// Source lists the group's backends.
	Source BackendSource
	// ResyncPeriod re-reconciles every group periodically, as a guard against drift.
	ResyncPeriod time.Duration

	// Addr, when set, builds the generateBackendAddr requests of the records about to be created:
	// a record created with its address costs one API write less (see AnnotationBackendAddr).
	Addr AddrRequestBuilder

	wakeups *wakeup.Records // shared with the BackendRecord reconciler by SetupEngine
	budget  *budget.Drivers // idem: the address calls take slots of the drivers' budgets
	recent  *writes.Recent  // record writes the cache does not show yet
	pacer   *pace.Groups    // spaces the reconciles its records' events cause

	readinessClock readinessClock // since when pods have been not Ready, or unobserved
}

// Reconcile implements reconcile.Reconciler.
func (r *backendGroupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	start := time.Now()
	defer r.Metrics.observeProcess(lbcfv1beta1.KindBackendGroup, start)
	bg := &lbcfv1beta1.BackendGroup{}
	if err := r.Get(ctx, req.NamespacedName, bg); err != nil {
		r.pacer.Reconciled(req.NamespacedName, start, 0)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if bg.DeletionTimestamp != nil {
		r.pacer.Reconciled(req.NamespacedName, start, 0)
		r.readinessClock.forget(bg.UID)
		// Records are owned by the group: the garbage collector (or the record reconciler, when
		// it finds its owner gone) deletes them, and their finalizers deregister.
		return ctrl.Result{}, nil
	}
	w := writer{r.Client, r.DryRun, r.Metrics}
	lbs, unusable, err := r.loadBalancers(ctx, bg)
	if err != nil {
		return ctrl.Result{}, err
	}
	backends, authoritative, err := r.Source.Backends(ctx, bg)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("select backends: %w", err)
	}
	seen := r.recent.CacheSeen()
	existing, err := r.records(ctx, bg)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.pacer.Reconciled(req.NamespacedName, start, len(existing))
	// Records this controller has just created or deleted, which the cache does not show yet:
	// not written again.
	pending, pendingFor := r.recent.Settle(bg.UID, existing, seen, time.Now())

	// The expected records are only described here; record objects are built for creations
	// alone, so that a large group's frequent reconciles allocate little.
	expected := map[string]expectedRecord{}
	listed := map[string]bool{} // records of every listed backend, eligible or not
	for _, lb := range lbs {
		for i := range backends {
			b := &backends[i]
			name := b.RecordName(lb.Name, bg.Name)
			listed[name] = true
			if b.Eligible() {
				expected[name] = expectedRecord{lb: lb, backend: b}
			}
		}
	}
	kept, held := r.keptPods(ctx, bg, backends, func(b *Backend) bool {
		for _, lb := range lbs {
			if _, ok := existing[b.RecordName(lb.Name, bg.Name)]; ok {
				return true
			}
		}
		return false
	})
	keep := map[string]bool{}
	for i := range backends {
		if b := &backends[i]; kept[podIdentity(b)] {
			for _, lb := range lbs {
				keep[b.RecordName(lb.Name, bg.Name)] = true
			}
		}
	}

	var toCreate, toUpdate, toDelete []*lbcfv1beta1.BackendRecord
	for name, want := range expected {
		have, ok := existing[name]
		recent, wrote := pending[name]
		spec := r.recordSpec(bg, want.lb, want.backend)
		switch {
		case !ok && wrote && !recent.Deleted:
			// Created a moment ago: the cache does not show it yet.
		case !ok:
			toCreate = append(toCreate, r.newRecord(bg, want.lb, want.backend, name))
		case have.DeletionTimestamp == nil && recordSpecChanged(&have.Spec, &spec):
			upd := have.DeepCopy() // existing records are the cache's own objects
			withBackendLabel(upd)  // written whole
			upd.Spec.LBInfo, upd.Spec.LBAttributes, upd.Spec.Parameters, upd.Spec.EnsurePolicy =
				spec.LBInfo, spec.LBAttributes, spec.Parameters, spec.EnsurePolicy
			toUpdate = append(toUpdate, upd)
		}
	}
	for name, have := range existing {
		if _, ok := expected[name]; ok || keep[name] || have.DeletionTimestamp != nil || pending[name].Deleted {
			continue
		}
		// Where the source does not know every backend, only records known to be unwanted go:
		// those of listed backends and those of LoadBalancers the group cannot use.
		if authoritative == nil || authoritative(have) || listed[name] || unusable[have.Spec.LBName] {
			toDelete = append(toDelete, have)
		}
	}
	// The status is written even when some record writes failed: what it says (counts, and the
	// source's own part, e.g. the federation's member states) must not wait for them.
	applyErr := r.apply(ctx, w, bg, toCreate, toUpdate, toDelete)
	// Records kept while their backend was not eligible wait for it without any change of their
	// own: wake those whose backend is eligible now.
	if r.wakeups != nil {
		for name := range expected {
			if have, ok := existing[name]; ok && have.DeletionTimestamp == nil && recordAddr(have) == "" {
				r.wakeups.WakeIfWaiting(ctx, client.ObjectKeyFromObject(have))
			}
		}
	}
	if n := len(toCreate) + len(toUpdate) + len(toDelete); n > 0 && applyErr == nil {
		r.Recorder.Eventf(bg, nil, corev1.EventTypeNormal, "SuccSyncedBackendGroup", "Sync",
			"records: %d created, %d updated, %d deleted", len(toCreate), len(toUpdate), len(toDelete))
	}
	if err := r.updateStatus(ctx, w, bg, expected, existing, held); err != nil || applyErr != nil {
		return ctrl.Result{}, errors.Join(applyErr, err)
	}
	next := r.ResyncPeriod
	if held.requeue > 0 && held.requeue < next {
		next = held.requeue + time.Second // a grace period ends: the pod's records go then
	}
	if pendingFor > 0 && pendingFor < next {
		next = pendingFor // a write the cache never confirmed is done again then
	}
	if rq, ok := r.Source.(Requeuer); ok {
		if d := rq.RequeueAfter(bg); d > 0 && d < next {
			next = d
		}
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// loadBalancers returns the LoadBalancers bg can use now (found, not deleting, created, in
// scope), and the names of those it cannot.
func (r *backendGroupReconciler) loadBalancers(ctx context.Context, bg *lbcfv1beta1.BackendGroup) ([]*lbcfv1beta1.LoadBalancer, map[string]bool, error) {
	var usable []*lbcfv1beta1.LoadBalancer
	unusable := map[string]bool{}
	for _, name := range bg.Spec.GetLoadBalancers() {
		lb, err := lookupLB(ctx, r.Client, bg.Namespace, name)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case lb == nil:
			unusable[name] = true
			r.Recorder.Eventf(bg, nil, corev1.EventTypeWarning, "GetLoadBalancerFailed", "Sync", "load balancer %s not found", name)
		case lb.DeletionTimestamp != nil, !lb.IsAllowedFor(bg.Namespace):
			unusable[name] = true
		case !lb.IsCreated():
			// Not created yet: nothing to register; existing records (none, normally) stay.
		default:
			usable = append(usable, lb)
		}
	}
	return usable, unusable, nil
}

// lookupLB finds a LoadBalancer used from namespace ns: in ns first, then in kube-system for
// "lbcf-" names (pre-1.4 shared LoadBalancers may live outside kube-system).
func lookupLB(ctx context.Context, c client.Reader, ns, name string) (*lbcfv1beta1.LoadBalancer, error) {
	keys := []client.ObjectKey{{Namespace: ns, Name: name}}
	if k := sharedKey(ns, name); k.Namespace != ns {
		keys = append(keys, k)
	}
	for _, k := range keys {
		lb := &lbcfv1beta1.LoadBalancer{}
		err := c.Get(ctx, k, lb)
		if err == nil {
			return lb, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get load balancer %s: %w", k, err)
		}
	}
	return nil, nil
}

// records returns the group's records by name (only those it owns: a group recreated with the
// same name does not adopt its predecessor's records, which its garbage collection removes).
func (r *backendGroupReconciler) records(ctx context.Context, bg *lbcfv1beta1.BackendGroup) (map[string]*lbcfv1beta1.BackendRecord, error) {
	return GroupRecords(ctx, r.Client, bg)
}

// GroupRecords returns the records bg owns, by name: read-only views of the cache (no deep copy
// of a large group's records on every reconcile), which callers copy before changing anything.
// c is the cache of a manager set up by SetupEngine (it reads setupIndexes' group index).
func GroupRecords(ctx context.Context, c client.Reader, bg *lbcfv1beta1.BackendGroup) (map[string]*lbcfv1beta1.BackendRecord, error) {
	list := &lbcfv1beta1.BackendRecordList{}
	if err := c.List(ctx, list, client.InNamespace(bg.Namespace), client.MatchingFields{indexRecordGroup: labelValue(bg.Name)},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	out := make(map[string]*lbcfv1beta1.BackendRecord, len(list.Items))
	for i := range list.Items {
		br := &list.Items[i]
		if ref := metav1.GetControllerOf(br); ref != nil && ref.UID == bg.UID {
			out[br.Name] = br
		}
	}
	return out, nil
}

// expectedRecord describes a record the group should have.
type expectedRecord struct {
	lb      *lbcfv1beta1.LoadBalancer
	backend *Backend
}

// recordSpec is the part of a record's spec that follows the group and its LoadBalancer.
func (r *backendGroupReconciler) recordSpec(bg *lbcfv1beta1.BackendGroup, lb *lbcfv1beta1.LoadBalancer, b *Backend) lbcfv1beta1.BackendRecordSpec {
	params := b.Parameters
	if params == nil {
		params = bg.Spec.Parameters
	}
	return lbcfv1beta1.BackendRecordSpec{
		LBName: lb.Name, LBDriver: lb.Spec.LBDriver, LBInfo: lb.Status.LBInfo, LBAttributes: lb.Spec.Attributes,
		Parameters: params, EnsurePolicy: bg.Spec.EnsurePolicy,
	}
}

func (r *backendGroupReconciler) newRecord(bg *lbcfv1beta1.BackendGroup, lb *lbcfv1beta1.LoadBalancer, b *Backend, name string) *lbcfv1beta1.BackendRecord {
	br := &lbcfv1beta1.BackendRecord{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: bg.Namespace,
			Labels: map[string]string{
				lbcfv1beta1.LabelDriverName: labelValue(lb.Spec.LBDriver),
				lbcfv1beta1.LabelLBName:     labelValue(lb.Name),
				lbcfv1beta1.LabelGroupName:  labelValue(bg.Name),
			},
			Finalizers: []string{lbcfv1beta1.FinalizerDeregisterBackend},
		},
		Spec: r.recordSpec(bg, lb, b),
	}
	if b.Cluster != "" {
		br.Labels[lbcfv1beta1.LabelCluster] = labelValue(b.Cluster)
	}
	switch b.Kind {
	case lbcfv1beta1.CandidatePod:
		br.Labels[lbcfv1beta1.LabelPodName] = labelValue(b.Name)
		br.Spec.PodBackendInfo = &lbcfv1beta1.PodBackendRecord{Name: b.Name, Port: b.Port}
	case lbcfv1beta1.CandidateNode:
		br.Labels[lbcfv1beta1.LabelServiceName] = labelValue(b.Name)
		br.Spec.ServiceBackendInfo = &lbcfv1beta1.ServiceBackendRecord{Name: b.Name, Port: b.Port, NodePort: b.NodePort, NodeName: b.NodeName}
	default:
		br.Labels[lbcfv1beta1.LabelStaticAddr] = lbcfv1beta1.StaticAddrLabelValue(b.Name)
		addr := b.Name
		br.Spec.StaticAddr = &addr
	}
	_ = controllerutil.SetControllerReference(bg, br, r.Scheme())
	return br
}

// labelValue keeps names usable as label values: long names are hashed like static addresses.
func labelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	return lbcfv1beta1.StaticAddrLabelValue(s)
}

// recordSpecChanged compares what a group may change on an existing record. Unlike the original,
// lbInfo is refreshed too, so records never deregister with a stale identity.
func recordSpecChanged(have, want *lbcfv1beta1.BackendRecordSpec) bool {
	return !maps.Equal(have.Parameters, want.Parameters) ||
		!maps.Equal(have.LBAttributes, want.LBAttributes) ||
		!maps.Equal(have.LBInfo, want.LBInfo) ||
		!reflect.DeepEqual(have.EnsurePolicy, want.EnsurePolicy)
}

// apply performs the record writes, WriteParallelism at a time.
func (r *backendGroupReconciler) apply(ctx context.Context, w writer, bg *lbcfv1beta1.BackendGroup, toCreate, toUpdate, toDelete []*lbcfv1beta1.BackendRecord) error {
	type op struct {
		br   *lbcfv1beta1.BackendRecord
		verb string
	}
	ops := make([]op, 0, len(toCreate)+len(toUpdate)+len(toDelete))
	for _, br := range toUpdate {
		ops = append(ops, op{br, "Update"})
	}
	// Creations and deletions alternate, a creation first: when pods are replaced, the new
	// backends neither wait for every old one's deletion (which held 500 creations of a
	// 1,000-change burst back by a second of API writes, and their registrations by more) nor
	// make the old ones wait; and the front end gains a backend before it loses one.
	for i := 0; i < max(len(toCreate), len(toDelete)); i++ {
		if i < len(toCreate) {
			ops = append(ops, op{toCreate[i], "Create"})
		}
		if i < len(toDelete) {
			ops = append(ops, op{toDelete[i], "Delete"})
		}
	}
	if len(ops) == 0 {
		return nil
	}
	log := ctrl.LoggerFrom(ctx)
	pre := r.preGenerator(ctx, bg, toCreate)
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, r.WriteParallelism)
	var wg sync.WaitGroup
	for _, o := range ops {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			withAddr := o.verb == "Create" && pre.generate(ctx, o.br)
			err := w.do(ctx, o.br, o.verb, func() error {
				switch o.verb {
				case "Delete":
					return client.IgnoreNotFound(r.Delete(ctx, o.br, client.Preconditions{UID: &o.br.UID}))
				case "Update":
					return r.Update(ctx, o.br)
				}
				err := r.Create(ctx, o.br)
				if apierrors.IsAlreadyExists(err) {
					return nil // a record of the same backend still being deregistered: next round
				}
				if err == nil && withAddr {
					pre.created(o.br)
				}
				return err
			})
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s record %s: %w", strings.ToLower(o.verb), o.br.Name, err))
				mu.Unlock()
				return
			}
			if !r.DryRun && o.verb != "Update" {
				r.recent.Wrote(bg.UID, o.br.Name, o.verb == "Delete", o.br.ResourceVersion, time.Now())
			}
			log.V(2).Info("record written", "op", o.verb, "record", o.br.Name)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *backendGroupReconciler) updateStatus(ctx context.Context, w writer, bg *lbcfv1beta1.BackendGroup, expected map[string]expectedRecord, existing map[string]*lbcfv1beta1.BackendRecord, held heldPods) error {
	orig := bg.DeepCopy()
	var registered int32
	for name := range expected {
		if have, ok := existing[name]; ok && have.IsRegistered() && have.DeletionTimestamp == nil {
			registered++
		}
	}
	bg.Status.Backends = int32(len(expected))
	bg.Status.RegisteredBackends = registered
	bg.Status.ObservedGeneration = bg.Generation
	cond := metav1.Condition{Type: lbcfv1beta1.BackendGroupReady, ObservedGeneration: bg.Generation}
	switch {
	case registered == bg.Status.Backends:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "AllRegistered", fmt.Sprintf("%d backends registered", registered)
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Registering", fmt.Sprintf("%d of %d backends registered", registered, bg.Status.Backends)
	}
	meta.SetStatusCondition(&bg.Status.Conditions, cond)
	setDuplicatesCondition(bg, existing)
	r.setHeldConditions(bg, held)
	if sc, ok := r.Source.(StatusContributor); ok {
		if err := sc.ContributeStatus(ctx, bg); err != nil {
			return err
		}
	}
	if equalStatus(orig.Status, bg.Status) {
		return nil
	}
	return w.do(ctx, bg, "UpdateStatus", func() error {
		return client.IgnoreNotFound(r.Status().Patch(ctx, bg, client.MergeFrom(orig)))
	})
}

// setDuplicatesCondition sums up the records' DuplicateAddress conditions; a group that never had
// a shared address gets no condition.
func setDuplicatesCondition(bg *lbcfv1beta1.BackendGroup, existing map[string]*lbcfv1beta1.BackendRecord) {
	n := 0
	for _, br := range existing {
		if c := br.Status.Condition(DuplicateAddress); br.DeletionTimestamp == nil && c != nil && c.Status == lbcfv1beta1.ConditionTrue {
			n++
		}
	}
	cond := metav1.Condition{Type: GroupDuplicateAddresses, ObservedGeneration: bg.Generation}
	switch {
	case n > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, "SharedAddresses"
		cond.Message = fmt.Sprintf("%d records share their address with other records of the same load balancer (see their DuplicateAddress condition); an address is deregistered by its last holder", n)
	case meta.FindStatusCondition(bg.Status.Conditions, GroupDuplicateAddresses) != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "NoSharedAddress", "no record shares its address"
	default:
		return
	}
	meta.SetStatusCondition(&bg.Status.Conditions, cond)
}
