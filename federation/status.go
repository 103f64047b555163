package federation

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// ContributeStatus implements controller.StatusContributor: the template's status.members and
// the federation's conditions from the group's current plan, events for the members' changes,
// and the annotations members read (report request, candidate budget).
func (s *Source) ContributeStatus(ctx context.Context, bg *lbcfv1beta1.BackendGroup) error {
	s.mu.Lock()
	p := s.plans[bg.UID]
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	if err := s.writeAnnotations(ctx, bg, p); err != nil {
		return err
	}
	previous := map[string]lbcfv1beta1.MemberStatus{}
	for _, m := range bg.Status.Members {
		previous[m.Name] = m
	}
	members := make([]lbcfv1beta1.MemberStatus, 0, len(p.members))
	var withdrawn, held, truncated []string
	for _, m := range p.sorted() {
		st := m.status
		members = append(members, st)
		switch st.State {
		case lbcfv1beta1.MemberWithdrawn:
			withdrawn = append(withdrawn, fmt.Sprintf("%s (%s since %s)", st.Name, st.Reason, st.Since.UTC().Format("2006-01-02T15:04:05Z")))
		case lbcfv1beta1.MemberHeld:
			held = append(held, fmt.Sprintf("%s (%s)", st.Name, st.Reason))
		}
		if st.Truncated {
			truncated = append(truncated, st.Name)
		}
		s.event(bg, previous[st.Name], st)
	}
	bg.Status.Members = members
	set := func(typ string, on bool, reason, message string) {
		c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: "None", ObservedGeneration: bg.Generation}
		if on {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, reason, message
		}
		if !on && meta.FindStatusCondition(bg.Status.Conditions, typ) == nil {
			return // only conditions that have been True are kept, as False
		}
		meta.SetStatusCondition(&bg.Status.Conditions, c)
	}
	set(lbcfv1beta1.BackendGroupMembersWithdrawn, len(withdrawn) > 0, "MemberWithdrawn",
		"backends withdrawn from the front ends: "+strings.Join(withdrawn, ", "))
	set(lbcfv1beta1.BackendGroupFailStatic, len(held) > 0, "MembersHeld",
		"unobserved members kept past their grace period, the front end's health checks decide: "+strings.Join(held, ", "))
	set(lbcfv1beta1.BackendGroupBindingMissing, p.bindingMissing, "NoPlacement",
		"the group's ResourceBinding is missing or places it on no member: its backends are kept for the grace period, then as the member-loss policy says")
	budget := ""
	if v := bg.Annotations[lbcfv1beta1.AnnotationCandidatesBudget]; v != "" {
		budget = " (" + v + " bytes each)"
	}
	set(lbcfv1beta1.BackendGroupCandidatesTruncated, len(truncated) > 0, "OverBudget",
		fmt.Sprintf("members report only part of their candidates%s: %s; records of unlisted backends are kept. Split the BackendGroup.", budget, strings.Join(truncated, ", ")))
	return nil
}

// event tells of a member's change of state.
func (s *Source) event(bg *lbcfv1beta1.BackendGroup, was, now lbcfv1beta1.MemberStatus) {
	if s.Recorder == nil || (was.State == now.State && was.Reason == now.Reason) {
		return
	}
	typ, reason := corev1.EventTypeNormal, ""
	switch now.State {
	case lbcfv1beta1.MemberWithdrawn:
		typ, reason = corev1.EventTypeWarning, "MemberWithdrawn"
	case lbcfv1beta1.MemberHeld:
		typ, reason = corev1.EventTypeWarning, "MemberHeld"
	case lbcfv1beta1.MemberUnobserved:
		typ, reason = corev1.EventTypeWarning, "MemberUnobserved"
	case lbcfv1beta1.MemberRecovering:
		reason = "MemberRecovering"
	case lbcfv1beta1.MemberContributing:
		switch was.State {
		case lbcfv1beta1.MemberWithdrawn, lbcfv1beta1.MemberRecovering:
			reason = "MemberRestored"
		case lbcfv1beta1.MemberHeld, lbcfv1beta1.MemberUnobserved, lbcfv1beta1.MemberStale:
			reason = "MemberObserved"
		}
		switch {
		case reason != "":
		case now.Reason == ReasonReadinessUnobserved:
			typ, reason = corev1.EventTypeWarning, "MemberReadinessUnobserved"
		case was.Reason == ReasonReadinessUnobserved:
			reason = "MemberReadinessObserved"
		}
	}
	if reason == "" {
		return
	}
	// The member's Cluster is the related object: events of two members are two series.
	member := &clusterv1alpha1.Cluster{TypeMeta: metav1.TypeMeta{APIVersion: clusterv1alpha1.GroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: now.Name}}
	s.Recorder.Eventf(bg, member, typ, reason, "Federate", "member %s: %s (%s): %s", now.Name, now.State, now.Reason, now.Message)
}

// writeAnnotations sets the template annotations members read: a new report request, and each
// member's candidate budget (the group's budget shared by the members the binding names).
func (s *Source) writeAnnotations(ctx context.Context, bg *lbcfv1beta1.BackendGroup, p *groupPlan) error {
	want := map[string]string{}
	if p.request != "" && bg.Annotations[lbcfv1beta1.AnnotationReportRequest] != p.request {
		want[lbcfv1beta1.AnnotationReportRequest] = p.request
	}
	if total := s.CandidatesBudget; p.targets > 0 {
		if total <= 0 {
			total = DefaultCandidatesBudget
		}
		if v := strconv.Itoa(total / p.targets); bg.Annotations[lbcfv1beta1.AnnotationCandidatesBudget] != v {
			want[lbcfv1beta1.AnnotationCandidatesBudget] = v
		}
	}
	if len(want) == 0 || s.DryRun || s.Writer == nil {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": want}})
	if err != nil {
		return err
	}
	obj := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: bg.Namespace, Name: bg.Name}}
	if err := s.Writer.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		return fmt.Errorf("annotate template for members: %w", err)
	}
	if bg.Annotations == nil {
		bg.Annotations = map[string]string{}
	}
	for k, v := range want {
		bg.Annotations[k] = v
	}
	ctrl.LoggerFrom(ctx).Info("told members", "annotations", want)
	return nil
}
