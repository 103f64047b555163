package pace

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// enqueued records how a handler enqueued: at once (0) or after a delay.
type enqueued struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	adds []time.Duration
}

func (q *enqueued) Add(reconcile.Request)                         { q.adds = append(q.adds, 0) }
func (q *enqueued) AddAfter(_ reconcile.Request, d time.Duration) { q.adds = append(q.adds, d) }

// TestGroupPacerSpacesRecordEvents: a record event of a group that was not reconciled within its
// interval reconciles it at once; during a burst, an interval after the last reconcile started
// (which grows with the group, up to the second every group waited before); another group and
// a record without a group owner are not affected.
func TestGroupPacerSpacesRecordEvents(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	p := New()
	p.now = func() time.Time { return now }
	h := p.OwnerHandler()
	record := func(group string) *lbcfv1beta1.BackendRecord {
		br := &lbcfv1beta1.BackendRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}}
		if group != "" {
			yes := true
			br.OwnerReferences = []metav1.OwnerReference{{APIVersion: lbcfv1beta1.APIVersion, Kind: lbcfv1beta1.KindBackendGroup, Name: group, UID: "u", Controller: &yes}}
		}
		return br
	}
	web := client.ObjectKey{Namespace: "ns", Name: "web"}
	type step struct {
		name      string
		advance   time.Duration // the clock moves first
		reconcile int           // >= 0: web is reconciled now with that many records; -1: not
		group     string        // the event's record's group
		want      []time.Duration
	}
	for _, s := range []step{
		{"never reconciled: at once", 0, -1, "web", []time.Duration{0}},
		{"right after a reconcile of a small group: its shortest interval", 0, 10, "web", []time.Duration{minGroupPace}},
		{"later in the interval: what is left of it", 150 * time.Millisecond, -1, "web", []time.Duration{50 * time.Millisecond}},
		{"the interval has passed: at once", 50 * time.Millisecond, -1, "web", []time.Duration{0}},
		{"a group of 2,500 records: half a second", 0, 2500, "web", []time.Duration{500 * time.Millisecond}},
		{"another group is not held back", 0, -1, "api", []time.Duration{0}},
		{"no group owner: nothing", 0, -1, "", nil},
		{"a group of 20,000 records: the old fixed second at most", time.Second, 20000, "web", []time.Duration{time.Second}},
		{"a group gone (0 records): the shortest interval", time.Second, 0, "web", []time.Duration{minGroupPace}},
	} {
		now = now.Add(s.advance)
		if s.reconcile >= 0 {
			p.Reconciled(web, now, s.reconcile)
		}
		for _, ev := range []string{"create", "update", "delete"} {
			q := &enqueued{}
			switch o := record(s.group); ev {
			case "create":
				h.Create(context.Background(), event.CreateEvent{Object: o}, q)
			case "update":
				h.Update(context.Background(), event.UpdateEvent{ObjectOld: o, ObjectNew: o}, q)
			case "delete":
				h.Delete(context.Background(), event.DeleteEvent{Object: o}, q)
			}
			g.Expect(q.adds).To(Equal(s.want), "%s (%s)", s.name, ev)
		}
	}
}

// TestGroupPacerForgetsPassedGroups: the groups whose interval has passed (deleted ones among
// them) are dropped at the next sweep; those still within theirs are kept.
func TestGroupPacerForgetsPassedGroups(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	p := New()
	p.now = func() time.Time { return now }
	p.Reconciled(client.ObjectKey{Namespace: "ns", Name: "gone"}, now, 0) // sweeps an empty map
	now = now.Add(groupPaceSweep)
	p.Reconciled(client.ObjectKey{Namespace: "ns", Name: "busy"}, now, 10)
	g.Expect(p.last).To(HaveLen(1))
	g.Expect(p.last).To(HaveKey(client.ObjectKey{Namespace: "ns", Name: "busy"}))
}
