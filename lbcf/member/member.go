// Package member is lbcf-controller --mode=member: a member cluster of the federation reports
// each BackendGroup's backends as candidates in its status and never calls a driver; the pods'
// readiness gates follow the federation's answer to those reports.
package member

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
)

// DefaultCandidatesBudget is a member's share of the ≈ 1.2 MiB of candidate data one
// BackendGroup may carry in its Karmada ResourceBinding (one etcd object), assuming three members,
// until the federation tells the member its real share (template annotation
// lbfed.io/candidates-budget, propagated by Karmada).
const DefaultCandidatesBudget = 1200 * 1024 / 3

// reconciler never calls a driver and creates no records. For each BackendGroup it writes every
// selected backend, compactly, into status.candidates, with status.backends,
// status.observedGeneration and the Ready and CandidatesTruncated conditions — and nothing else,
// so Karmada sees a change only when the backends change.
type reconciler struct {
	client.Client
	controller.Options
	Source controller.LocalSource
	// Budget caps the candidates' items and node table in bytes (DefaultCandidatesBudget when 0).
	Budget int
	// History remembers the last reports, for the readiness gates (optional).
	History *reportHistory
}

// Reconcile implements reconcile.Reconciler.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bg := &lbcfv1beta1.BackendGroup{}
	if err := r.Get(ctx, req.NamespacedName, bg); err != nil {
		if apierrors.IsNotFound(err) && r.History != nil {
			r.History.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if bg.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	backends, _, err := r.Source.Backends(ctx, bg)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("select backends: %w", err)
	}
	cands := make([]lbcfv1beta1.Candidate, 0, len(backends))
	var eligible int32
	for i := range backends {
		cands = append(cands, backends[i].Candidate())
		if backends[i].Eligible() {
			eligible++
		}
	}
	budget := r.Budget
	if budget <= 0 {
		budget = DefaultCandidatesBudget
	}
	// The federation tells each member its share of the group's binding (it knows how many
	// members there are); a member alone cannot.
	if v, err := strconv.Atoi(bg.Annotations[lbcfv1beta1.AnnotationCandidatesBudget]); err == nil && v > 0 {
		budget = v
	}
	enc, truncated := lbcfv1beta1.EncodeCandidates(bg.Spec.Parameters, cands, budget)
	if r.History != nil {
		// Before the status is written: the federation may answer about it at once.
		r.History.Add(req.NamespacedName, enc.Items)
	}

	orig := bg.DeepCopy()
	bg.Status.Candidates = enc
	bg.Status.Backends = eligible
	bg.Status.ObservedGeneration = bg.Generation
	// Echoed so that the federation can tell a report made after this member's return to
	// Karmada from one it remembers from before.
	bg.Status.ReportRequest = bg.Annotations[lbcfv1beta1.AnnotationReportRequest]
	meta.SetStatusCondition(&bg.Status.Conditions, metav1.Condition{
		Type: lbcfv1beta1.BackendGroupReady, Status: metav1.ConditionTrue, ObservedGeneration: bg.Generation,
		Reason: "CandidatesReported", Message: fmt.Sprintf("%d candidates, %d ready", enc.Total, enc.Ready),
	})
	tc := metav1.Condition{Type: lbcfv1beta1.BackendGroupCandidatesTruncated, Status: metav1.ConditionFalse, ObservedGeneration: bg.Generation, Reason: "WithinBudget"}
	if truncated {
		tc.Status, tc.Reason = metav1.ConditionTrue, "OverBudget"
		tc.Message = fmt.Sprintf("%d candidates need more than %d bytes; %d reported, Ready ones first. Split the BackendGroup.", enc.Total, budget, len(enc.Items))
	}
	meta.SetStatusCondition(&bg.Status.Conditions, tc)
	if equality.Semantic.DeepEqual(orig.Status, bg.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Write(ctx, bg, "UpdateStatus", func() error {
		return client.IgnoreNotFound(r.Status().Patch(ctx, bg, client.MergeFrom(orig)))
	})
}

// Setup registers member mode on mgr: candidates reporting and the readiness gates. budget is
// DefaultCandidatesBudget when 0.
func Setup(ctx context.Context, mgr ctrl.Manager, opts controller.Options, budget int) error {
	opts.Defaults()
	history := &reportHistory{}
	r := &reconciler{Client: mgr.GetClient(), Options: opts, Source: controller.LocalSource{Reader: mgr.GetClient()}, Budget: budget, History: history}
	return controller.SetupReporter(ctx, mgr, opts, r, &registrations{History: history})
}
