package federation

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
)

// memberGaugeModel is what the member gauges must say, recomputed from scratch over every group.
type memberGaugeModel map[types.UID]map[string]*memberPlan

func (mo memberGaugeModel) candidates(cluster string) float64 {
	n := 0
	for _, members := range mo {
		if mp := members[cluster]; mp != nil && mp.report != nil {
			n += len(mp.report.backends)
		}
	}
	return float64(n)
}

func (mo memberGaugeModel) states(cluster string, st lbcfv1beta1.MemberState) float64 {
	n := 0
	for _, members := range mo {
		if mp := members[cluster]; mp != nil && mp.status.State == st {
			n++
		}
	}
	return float64(n)
}

func (mo memberGaugeModel) truncated(cluster string) float64 {
	n := 0
	for _, members := range mo {
		if mp := members[cluster]; mp != nil && mp.status.Truncated {
			n++
		}
	}
	return float64(n)
}

// randomPlan places a group on some of clusters, each member in a random state, truncated or not,
// with 0-3 backends.
func randomPlan(rnd *rand.Rand, clusters []string) *groupPlan {
	p := &groupPlan{members: map[string]*memberPlan{}}
	for _, c := range clusters {
		if rnd.Intn(3) == 0 {
			continue
		}
		mp := &memberPlan{status: lbcfv1beta1.MemberStatus{
			State: memberStates[rnd.Intn(len(memberStates))], Truncated: rnd.Intn(4) == 0,
		}}
		if n := rnd.Intn(4); n > 0 {
			mp.report = &clusterReport{cluster: c, backends: make([]controller.Backend, n)}
		}
		p.members[c] = mp
	}
	return p
}

// TestMemberGaugesFollowPlans: after any sequence of group plans and forgotten groups, each
// member's gauges (candidates, groups per state, truncated groups) are the sums over the groups
// it is in now — members leaving a group, groups deleted, states changing.
func TestMemberGaugesFollowPlans(t *testing.T) {
	rnd := rand.New(rand.NewSource(7))
	clusters := []string{"m1", "m2", "m3", "m4"}
	m := NewMetrics(nil)
	model := memberGaugeModel{}
	for step := 0; step < 2000; step++ {
		bg := types.UID(fmt.Sprintf("g%d", rnd.Intn(30)))
		op := "plan"
		if rnd.Intn(6) == 0 {
			op = "forget"
			m.forget(bg)
			delete(model, bg)
		} else {
			p := randomPlan(rnd, clusters)
			m.setPlan(bg, p)
			model[bg] = p.members
		}
		for _, c := range clusters {
			if got, want := testutil.ToFloat64(m.candidates.WithLabelValues(c)), model.candidates(c); got != want {
				t.Fatalf("step %d (%s %s): lbfed_cluster_candidates{cluster=%q} = %v, want %v", step, op, bg, c, got, want)
			}
			if got, want := testutil.ToFloat64(m.truncated.WithLabelValues(c)), model.truncated(c); got != want {
				t.Fatalf("step %d (%s %s): lbfed_cluster_candidates_truncated{cluster=%q} = %v, want %v", step, op, bg, c, got, want)
			}
			for _, st := range memberStates {
				if got, want := testutil.ToFloat64(m.states.WithLabelValues(c, string(st))), model.states(c, st); got != want {
					t.Fatalf("step %d (%s %s): lbfed_member_groups{cluster=%q,state=%q} = %v, want %v", step, op, bg, c, st, got, want)
				}
			}
		}
	}
	if len(model) == 0 {
		t.Fatal("the sequence ended with no group: it checked little")
	}
	for bg := range model {
		m.forget(bg)
	}
	if len(m.groups) != 0 {
		t.Fatalf("deleted groups left figures behind: %v", m.groups)
	}
	for _, c := range clusters {
		if got := testutil.ToFloat64(m.candidates.WithLabelValues(c)); got != 0 {
			t.Fatalf("no group left, lbfed_cluster_candidates{cluster=%q} = %v", c, got)
		}
	}
}

// BenchmarkSetPlan: the member gauges' cost of one group reconcile (a two-member plan) in a
// federation of 100 and of 10,000 groups. It should not grow with the groups: every group is
// reconciled on a restart, so a cost per reconcile that grows with the groups makes the resync
// quadratic.
func BenchmarkSetPlan(b *testing.B) {
	for _, groups := range []int{100, 10000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			m := NewMetrics(nil)
			rnd := rand.New(rand.NewSource(1))
			for i := 0; i < groups; i++ {
				m.setPlan(types.UID(fmt.Sprintf("g%d", i)), randomPlan(rnd, []string{"m1", "m2"}))
			}
			plans := make([]*groupPlan, 64)
			for i := range plans {
				plans[i] = randomPlan(rnd, []string{"m1", "m2"})
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.setPlan(types.UID(fmt.Sprintf("g%d", i%groups)), plans[i%len(plans)])
			}
		})
	}
}
