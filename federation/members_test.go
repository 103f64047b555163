package federation

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	grace := time.Minute
	serving := &clusterReport{backends: []controller.Backend{{Name: "a", Ready: true, HasIP: true, Phase: "Running"}}}
	empty := &clusterReport{}
	// Issue 43: a member whose node controller marked its pods not Ready (readiness unobserved).
	marked := &clusterReport{unobserved: 2, backends: []controller.Backend{
		{Kind: lbcfv1beta1.CandidatePod, Name: "a", HasIP: true, Phase: "Running", ReadinessUnobserved: true},
		{Kind: lbcfv1beta1.CandidatePod, Name: "b", HasIP: true, Phase: "Running", ReadinessUnobserved: true}}}
	recent, old := now.Add(-10*time.Second), now.Add(-2*time.Minute)
	live := func(name string, r *clusterReport) observation {
		return observation{name: name, target: true, live: true, fresh: r, last: r}
	}
	down := func(name string, since time.Time, r *clusterReport) observation {
		return observation{name: name, target: true, reason: "ClusterNotReady", since: since, last: r}
	}
	prev := func(name string, st lbcfv1beta1.MemberState, req string) lbcfv1beta1.MemberStatus {
		return lbcfv1beta1.MemberStatus{Name: name, State: st, Request: req, Since: metav1.NewTime(old)}
	}
	type want struct {
		state  lbcfv1beta1.MemberState
		reason string
		auth   bool
		report bool
	}
	for _, tc := range []struct {
		name     string
		policy   lbcfv1beta1.MemberLossPolicy
		obs      []observation
		previous []lbcfv1beta1.MemberStatus
		missing  bool
		want     map[string]want
		request  bool
	}{
		{name: "all live", obs: []observation{live("m1", serving), live("m2", serving)},
			want: map[string]want{"m1": {lbcfv1beta1.MemberContributing, "Reporting", true, true}, "m2": {lbcfv1beta1.MemberContributing, "Reporting", true, true}}},
		{name: "live without any report", obs: []observation{live("m1", nil)},
			want: map[string]want{"m1": {lbcfv1beta1.MemberStale, "NoCurrentReport", false, false}}},
		{name: "unobserved within grace keeps its last report", obs: []observation{live("m1", serving), down("m2", recent, serving)},
			want: map[string]want{"m2": {lbcfv1beta1.MemberUnobserved, "ClusterNotReady", false, true}}},
		{name: "past grace while another serves: withdrawn", obs: []observation{live("m1", serving), down("m2", old, serving)},
			want: map[string]want{"m2": {lbcfv1beta1.MemberWithdrawn, "ClusterNotReady", true, false}}},
		{name: "all past grace: all held", obs: []observation{down("m1", old, serving), down("m2", old, serving)},
			want: map[string]want{"m1": {lbcfv1beta1.MemberHeld, "NoOtherMemberServes", false, true}, "m2": {lbcfv1beta1.MemberHeld, "NoOtherMemberServes", false, true}}},
		{name: "one past grace, the other within grace: held (the other does not serve)", obs: []observation{down("m1", old, serving), down("m2", recent, serving)},
			want: map[string]want{"m1": {lbcfv1beta1.MemberHeld, "NoOtherMemberServes", false, true}, "m2": {lbcfv1beta1.MemberUnobserved, "ClusterNotReady", false, true}}},
		{name: "the other is live with no ready backend: held", obs: []observation{live("m1", empty), down("m2", old, serving)},
			want: map[string]want{"m2": {lbcfv1beta1.MemberHeld, "NoOtherMemberServes", false, true}}},
		{name: "a recovering member does not serve", obs: []observation{live("m1", serving), down("m2", old, serving)},
			previous: []lbcfv1beta1.MemberStatus{prev("m1", lbcfv1beta1.MemberWithdrawn, "")}, request: true,
			want: map[string]want{"m1": {lbcfv1beta1.MemberRecovering, "AwaitingFreshReport", true, false}, "m2": {lbcfv1beta1.MemberHeld, "NoOtherMemberServes", false, true}}},
		{name: "policy Withdraw: all go", policy: lbcfv1beta1.MemberLossWithdraw, obs: []observation{down("m1", old, serving), down("m2", old, serving)},
			want: map[string]want{"m1": {lbcfv1beta1.MemberWithdrawn, "ClusterNotReady", true, false}, "m2": {lbcfv1beta1.MemberWithdrawn, "ClusterNotReady", true, false}}},
		{name: "policy Keep: kept while another serves", policy: lbcfv1beta1.MemberLossKeep, obs: []observation{live("m1", serving), down("m2", old, serving)},
			want: map[string]want{"m2": {lbcfv1beta1.MemberHeld, "PolicyKeep", false, true}}},
		{name: "removed from placement while another serves: withdrawn at once",
			obs:  []observation{live("m1", serving), {name: "m2", removed: true, reason: "RemovedFromPlacement", since: now, last: serving}},
			want: map[string]want{"m2": {lbcfv1beta1.MemberWithdrawn, "RemovedFromPlacement", true, false}}},
		{name: "removed from placement, nobody else serves yet: held (make before break)",
			obs:  []observation{live("m1", nil), {name: "m2", removed: true, reason: "RemovedFromPlacement", since: now, last: serving}},
			want: map[string]want{"m2": {lbcfv1beta1.MemberHeld, "NoOtherMemberServes", false, true}}},
		{name: "withdrawn member back: recovering, a request is made", obs: []observation{live("m1", serving), live("m2", serving)},
			previous: []lbcfv1beta1.MemberStatus{prev("m2", lbcfv1beta1.MemberWithdrawn, "")}, request: true,
			want: map[string]want{"m2": {lbcfv1beta1.MemberRecovering, "AwaitingFreshReport", true, false}}},
		{name: "recovering member with a report echoing its request: restored",
			obs:      []observation{live("m1", serving), live("m2", &clusterReport{request: "1764000000000", backends: serving.backends})},
			previous: []lbcfv1beta1.MemberStatus{prev("m2", lbcfv1beta1.MemberRecovering, "1764000000000")},
			want:     map[string]want{"m2": {lbcfv1beta1.MemberContributing, "FreshReport", true, true}}},
		{name: "recovering member with an older report: still recovering, no new request",
			obs:      []observation{live("m1", serving), live("m2", &clusterReport{request: "1763999999999", backends: serving.backends})},
			previous: []lbcfv1beta1.MemberStatus{prev("m2", lbcfv1beta1.MemberRecovering, "1764000000000")},
			want:     map[string]want{"m2": {lbcfv1beta1.MemberRecovering, "AwaitingFreshReport", true, false}}},
		{name: "recovering member lost again: withdrawn", obs: []observation{live("m1", serving), down("m2", recent, serving)},
			previous: []lbcfv1beta1.MemberStatus{prev("m2", lbcfv1beta1.MemberRecovering, "1764000000000")},
			want:     map[string]want{"m2": {lbcfv1beta1.MemberWithdrawn, "ClusterNotReady", true, false}}},
		{name: "held member when another serves again: a new grace period, not withdrawn at once",
			obs:      []observation{live("m1", serving), down("m2", old, serving)},
			previous: []lbcfv1beta1.MemberStatus{prev("m2", lbcfv1beta1.MemberHeld, "")},
			want:     map[string]want{"m2": {lbcfv1beta1.MemberUnobserved, "ClusterNotReady", false, true}}},
		{name: "released from the floor past its new grace: withdrawn",
			obs:      []observation{live("m1", serving), down("m2", old, serving)},
			previous: []lbcfv1beta1.MemberStatus{{Name: "m2", State: lbcfv1beta1.MemberUnobserved, Reason: "ClusterNotReady", Since: metav1.NewTime(now.Add(-61 * time.Second))}},
			want:     map[string]want{"m2": {lbcfv1beta1.MemberWithdrawn, "ClusterNotReady", true, false}}},
		{name: "released from the floor within its new grace: kept",
			obs:      []observation{live("m1", serving), down("m2", old, serving)},
			previous: []lbcfv1beta1.MemberStatus{{Name: "m2", State: lbcfv1beta1.MemberUnobserved, Reason: "ClusterNotReady", Since: metav1.NewTime(now.Add(-30 * time.Second))}},
			want:     map[string]want{"m2": {lbcfv1beta1.MemberUnobserved, "ClusterNotReady", false, true}}},
		{name: "pods marked not Ready by the member's control plane: contributing, says so", obs: []observation{live("m1", marked), live("m2", serving)},
			want: map[string]want{"m1": {lbcfv1beta1.MemberContributing, ReasonReadinessUnobserved, true, true}, "m2": {lbcfv1beta1.MemberContributing, "Reporting", true, true}}},
		{name: "every member's pods marked: all contribute (the engine holds the pods)", obs: []observation{live("m1", marked), live("m2", marked)},
			want: map[string]want{"m1": {lbcfv1beta1.MemberContributing, ReasonReadinessUnobserved, true, true}, "m2": {lbcfv1beta1.MemberContributing, ReasonReadinessUnobserved, true, true}}},
		{name: "a marked member does not serve: an unobserved one past grace is held", obs: []observation{live("m1", marked), down("m2", old, serving)},
			want: map[string]want{"m1": {lbcfv1beta1.MemberContributing, ReasonReadinessUnobserved, true, true}, "m2": {lbcfv1beta1.MemberHeld, "NoOtherMemberServes", false, true}}},
		{name: "a marked member's last report kept while Karmada lost it", obs: []observation{live("m1", serving), down("m2", recent, marked)},
			want: map[string]want{"m2": {lbcfv1beta1.MemberUnobserved, "ClusterNotReady", false, true}}},
		{name: "binding missing within grace", missing: true,
			obs:  []observation{{name: "m1", reason: "BindingMissing", since: recent, last: serving}},
			want: map[string]want{"m1": {lbcfv1beta1.MemberUnobserved, "BindingMissing", false, true}}},
		{name: "binding missing past grace: held", missing: true,
			obs:  []observation{{name: "m1", reason: "BindingMissing", since: old, last: serving}, {name: "m2", reason: "BindingMissing", since: old, last: serving}},
			want: map[string]want{"m1": {lbcfv1beta1.MemberHeld, "NoOtherMemberServes", false, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			policy := tc.policy
			if policy == "" {
				policy = lbcfv1beta1.MemberLossFailStatic
			}
			in := planInput{now: now, grace: grace, policy: policy, observations: tc.obs, bindingMissing: tc.missing,
				previous: map[string]lbcfv1beta1.MemberStatus{}, request: "1763000000000"}
			for _, p := range tc.previous {
				in.previous[p.Name] = p
			}
			p := decide(in)
			for name, w := range tc.want {
				m := p.members[name]
				g.Expect(m).NotTo(BeNil(), name)
				g.Expect(m.status.State).To(Equal(w.state), name)
				g.Expect(m.status.Reason).To(Equal(w.reason), name)
				g.Expect(m.authoritative).To(Equal(w.auth), name+" authoritative")
				g.Expect(m.report != nil).To(Equal(w.report), name+" contributes")
				g.Expect(m.status.Message).NotTo(BeEmpty(), name)
				if m.report != nil {
					g.Expect(m.status.UnobservedCandidates).To(BeEquivalentTo(m.report.unobserved), name+" counts its unobserved pods")
				}
			}
			if tc.request {
				g.Expect(p.request).NotTo(BeEmpty())
				g.Expect(requestAtLeast(p.request, "1763000000001")).To(BeTrue(), "a new request is newer than the template's")
			} else {
				g.Expect(p.request).To(BeEmpty())
			}
		})
	}
}

func TestDecideKeepsSinceAndRequeues(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	serving := &clusterReport{backends: []controller.Backend{{Name: "a", Ready: true, HasIP: true, Phase: "Running"}}}
	earlier := metav1.NewTime(now.Add(-time.Hour))
	p := decide(planInput{now: now, grace: time.Minute, policy: lbcfv1beta1.MemberLossFailStatic,
		previous: map[string]lbcfv1beta1.MemberStatus{"m2": {Name: "m2", State: lbcfv1beta1.MemberUnobserved, Reason: "ClusterNotReady", Since: earlier}},
		observations: []observation{
			{name: "m1", target: true, live: true, fresh: serving, last: serving},
			{name: "m2", target: true, reason: "ClusterNotReady", since: now.Add(-45 * time.Second), last: serving},
		}})
	g.Expect(p.members["m2"].status.Since).To(Equal(earlier), "unchanged state keeps its time")
	g.Expect(p.members["m1"].status.Since.Time).To(Equal(now))
	g.Expect(p.requeue).To(Equal(15 * time.Second))
	g.Expect(p.targets).To(Equal(2))
	g.Expect(p.unknownAuthoritative).To(BeTrue(), "records of unknown members go where a withdrawn member's would")
}
