package federation

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
)

// The member plan is the federation's decision, per group and member, of what each member
// contributes to the front ends. Its rule (ARCHITECTURE.md, "Failure semantics"): withdraw what
// is known to be gone, keep within bounds what is only unobserved, never empty a group on
// control-plane evidence alone, and restore a withdrawn member only from a report it made after
// its return.

// ReasonReadinessUnobserved is the reason of a Contributing member some of whose pods are not
// Ready on its control plane's evidence alone.
const ReasonReadinessUnobserved = "ReadinessUnobserved"

// observation is what Karmada tells of one member of one group.
type observation struct {
	name string
	// target: the binding places the group on the member. removed: the binding places the group
	// on other members only (known gone, no grace).
	target, removed bool
	// live: the Cluster is Ready (or reports no readiness yet).
	live bool
	// reason and since describe why and since when a member that is not live (or not a target)
	// is unobserved: ClusterNotReady, ClusterGone, BindingMissing, RemovedFromPlacement.
	reason string
	since  time.Time
	// fresh is the report Karmada delivers now for the current template generation; last the
	// last such report (fresh when there is one).
	fresh, last *clusterReport
}

// memberPlan is the decision for one member.
type memberPlan struct {
	status lbcfv1beta1.MemberStatus
	// report is the report whose backends the member contributes (nil: none).
	report *clusterReport
	// authoritative: records of this member's backends that report does not list are deleted.
	authoritative bool
}

// groupPlan is the decision for one group.
type groupPlan struct {
	members map[string]*memberPlan
	// unknownAuthoritative applies to records of members the plan does not know (e.g. records of
	// a member removed from the placement before this process started).
	unknownAuthoritative bool
	bindingMissing       bool
	// targets is the number of members the binding places the group on (0 when missing).
	targets int
	// request, when set, is a new lbfed.io/report-request value to write on the template.
	request string
	// requeue is when the plan changes with time alone (a grace period ending).
	requeue time.Duration
}

// backends returns the backends the plan contributes.
func (p *groupPlan) backends() []controller.Backend {
	var out []controller.Backend
	for _, m := range p.sorted() {
		if m.report != nil {
			out = append(out, m.report.list()...)
		}
	}
	return out
}

// authoritative tells whether a record may be deleted when its backend is not contributed.
func (p *groupPlan) authoritative(br *lbcfv1beta1.BackendRecord) bool {
	if m, ok := p.members[br.Labels[lbcfv1beta1.LabelCluster]]; ok {
		return m.authoritative
	}
	return p.unknownAuthoritative
}

func (p *groupPlan) sorted() []*memberPlan {
	out := make([]*memberPlan, 0, len(p.members))
	for _, m := range p.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].status.Name < out[j].status.Name })
	return out
}

// planInput is everything decide needs: no I/O happens in decide.
type planInput struct {
	now    time.Time
	grace  time.Duration
	policy lbcfv1beta1.MemberLossPolicy
	// previous is the members' state as last written on the template.
	previous map[string]lbcfv1beta1.MemberStatus
	// observations of every member known to the group (targets, remembered, previous).
	observations   []observation
	bindingMissing bool
	// request is the template's current lbfed.io/report-request value.
	request string
}

// serves reports whether a report has a backend the front ends can use.
func serves(r *clusterReport) bool {
	if r == nil {
		return false
	}
	backends := r.list()
	for i := range backends {
		if backends[i].Eligible() {
			return true
		}
	}
	return false
}

// decide computes the plan of one group.
func decide(in planInput) *groupPlan {
	p := &groupPlan{members: map[string]*memberPlan{}, bindingMissing: in.bindingMissing}
	var pending []observation // unobserved past grace, or removed: withdrawn or held below
	since := func(name string, state lbcfv1beta1.MemberState, reason string, at time.Time) metav1.Time {
		if prev, ok := in.previous[name]; ok && prev.State == state && prev.Reason == reason && !prev.Since.IsZero() {
			return prev.Since
		}
		return metav1.NewTime(at.Truncate(time.Second))
	}
	newRequest := ""
	for _, o := range in.observations {
		prev, hadPrev := in.previous[o.name]
		wasOut := hadPrev && (prev.State == lbcfv1beta1.MemberWithdrawn || prev.State == lbcfv1beta1.MemberRecovering)
		m := &memberPlan{status: lbcfv1beta1.MemberStatus{Name: o.name}}
		p.members[o.name] = m
		if o.target {
			p.targets++
		}
		switch {
		case o.target && o.live && wasOut:
			// A withdrawn member is back: only a report it made after its return restores it.
			req := prev.Request
			if prev.State != lbcfv1beta1.MemberRecovering || req == "" {
				if newRequest == "" {
					newRequest = nextRequest(in.request, in.now)
				}
				req = newRequest
			}
			if o.fresh != nil && requestAtLeast(o.fresh.request, req) {
				m.report, m.authoritative = o.fresh, !o.fresh.partial
				m.status.State, m.status.Reason = lbcfv1beta1.MemberContributing, "FreshReport"
				m.status.Message = fmt.Sprintf("restored from a report made after its return (request %s)", req)
				break
			}
			m.authoritative = true // its records, if any are left, keep going
			m.status.State, m.status.Reason, m.status.Request = lbcfv1beta1.MemberRecovering, "AwaitingFreshReport", req
			m.status.Message = fmt.Sprintf("observed again; its backends come back with its first report echoing request %s (the report Karmada still holds may predate the outage)", req)
		case o.target && o.live:
			r := o.fresh
			m.status.State, m.status.Reason = lbcfv1beta1.MemberContributing, "Reporting"
			m.status.Message = "observed and reporting"
			if r == nil {
				r = o.last
				m.status.State, m.status.Reason = lbcfv1beta1.MemberStale, "NoCurrentReport"
				m.status.Message = "Karmada delivers no current report: its last known backends are kept"
			}
			m.report = r
			m.authoritative = r != nil && !r.partial
		case wasOut:
			// Still unobserved after its withdrawal (or gone again while recovering).
			m.status.State, m.status.Reason = lbcfv1beta1.MemberWithdrawn, o.reason
			m.authoritative = true
		case !o.removed && in.now.Sub(graceStart(o, prev, hadPrev)) < in.grace:
			start := graceStart(o, prev, hadPrev)
			m.report = o.last
			m.authoritative = false
			m.status.State, m.status.Reason = lbcfv1beta1.MemberUnobserved, o.reason
			left := in.grace - in.now.Sub(start)
			m.status.Message = fmt.Sprintf("unobserved since %s; its backends are kept until the grace period ends at %s", o.since.UTC().Format(time.RFC3339), start.Add(in.grace).UTC().Format(time.RFC3339))
			if p.requeue == 0 || left < p.requeue {
				p.requeue = left
			}
		default:
			pending = append(pending, o)
			m.report = o.last
		}
		if m.report != nil && m.report.partial && m.report.truncated {
			m.status.Truncated = true
		}
		if m.report != nil && m.report.unobserved > 0 {
			// Pods its control plane marked not Ready without looking at them: the engine keeps
			// them as unobserved (controller.Readiness), the member says how many.
			m.status.UnobservedCandidates = int32(m.report.unobserved)
			if m.status.State == lbcfv1beta1.MemberContributing && m.status.Reason == "Reporting" {
				m.status.Reason = ReasonReadinessUnobserved
				m.status.Message = fmt.Sprintf("observed and reporting; %d of its pods are not Ready on its control plane's evidence alone (node unreachable or NotReady, Ready cleared by the node lifecycle controller while their containers are ready): registered ones stay for the grace period and the floor (see the ReadinessUnobserved condition)", m.report.unobserved)
			}
		}
	}
	anyServes := func(except string) bool {
		for name, m := range p.members {
			if name != except && (m.status.State == lbcfv1beta1.MemberContributing || m.status.State == lbcfv1beta1.MemberStale) && serves(m.report) {
				return true
			}
		}
		return false
	}
	for _, o := range pending {
		m := p.members[o.name]
		removed := o.removed
		withdraw := false
		switch {
		case in.policy == lbcfv1beta1.MemberLossWithdraw:
			withdraw = true
		case in.policy == lbcfv1beta1.MemberLossKeep && !removed:
			m.status.State, m.status.Reason = lbcfv1beta1.MemberHeld, "PolicyKeep"
			m.status.Message = fmt.Sprintf("unobserved (%s) since %s; policy Keep: its backends stay, the front end's health checks decide", o.reason, o.since.UTC().Format(time.RFC3339))
		default:
			withdraw = anyServes(o.name)
			if !withdraw {
				m.status.State, m.status.Reason = lbcfv1beta1.MemberHeld, "NoOtherMemberServes"
				m.status.Message = fmt.Sprintf("unobserved (%s) since %s, but no other member serves: its backends stay (fail-static), the front end's health checks decide", o.reason, o.since.UTC().Format(time.RFC3339))
			}
		}
		if prev, ok := in.previous[o.name]; withdraw && !removed && in.policy != lbcfv1beta1.MemberLossWithdraw && ok && prev.State == lbcfv1beta1.MemberHeld {
			// The floor held it because no member was observed; one is again. Members lost in the
			// same fault come back one by one as Karmada notices them: give this one a grace period
			// of its own from now before withdrawing it.
			withdraw = false
			m.status.State, m.status.Reason = lbcfv1beta1.MemberUnobserved, o.reason
			m.status.Message = fmt.Sprintf("unobserved (%s) since %s; another member serves again, so its backends are kept until a new grace period ends at %s",
				o.reason, o.since.UTC().Format(time.RFC3339), in.now.Add(in.grace).UTC().Format(time.RFC3339))
			if p.requeue == 0 || in.grace < p.requeue {
				p.requeue = in.grace
			}
		}
		if withdraw {
			m.report, m.authoritative = nil, true
			m.status.State, m.status.Reason = lbcfv1beta1.MemberWithdrawn, o.reason
			m.status.Message = fmt.Sprintf("unobserved (%s) since %s: its backends are withdrawn", o.reason, o.since.UTC().Format(time.RFC3339))
			if removed {
				m.status.Message = "removed from the group's placement: its backends are withdrawn"
			}
		} else {
			m.authoritative = false
		}
	}
	for name, m := range p.members {
		if m.status.State == lbcfv1beta1.MemberWithdrawn && m.status.Message == "" {
			m.status.Message = "its backends are withdrawn; they come back with a report it makes after its return"
		}
		m.status.Since = since(name, m.status.State, m.status.Reason, in.now)
	}
	// Records of members the plan does not know: removed from the placement before this process
	// knew them. They go only where a withdrawn member's would.
	p.unknownAuthoritative = in.policy == lbcfv1beta1.MemberLossWithdraw || (!in.bindingMissing && anyServes(""))
	if newRequest != "" {
		p.request = newRequest
	}
	return p
}

// graceStart is when a member's grace period began: when it became unobserved, or later when the
// floor let it go (its previous Unobserved state then carries the later time).
func graceStart(o observation, prev lbcfv1beta1.MemberStatus, hadPrev bool) time.Time {
	if hadPrev && prev.State == lbcfv1beta1.MemberUnobserved && prev.Since.Time.After(o.since) {
		return prev.Since.Time
	}
	return o.since
}

// nextRequest returns a report request greater than current: the time in milliseconds, or
// current+1 when the clock is behind it.
func nextRequest(current string, now time.Time) string {
	n := now.UnixMilli()
	if c, err := strconv.ParseInt(current, 10, 64); err == nil && c >= n {
		n = c + 1
	}
	return strconv.FormatInt(n, 10)
}

// requestAtLeast reports whether a member's echoed request is want or newer.
func requestAtLeast(echoed, want string) bool {
	e, err1 := strconv.ParseInt(strings.TrimSpace(echoed), 10, 64)
	w, err2 := strconv.ParseInt(want, 10, 64)
	return err1 == nil && err2 == nil && e >= w
}
