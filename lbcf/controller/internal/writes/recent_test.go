package writes

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

func TestRecentWrites(t *testing.T) {
	g := NewWithT(t)
	w := NewRecent()
	t0 := time.Now()
	rec := func(deleting bool) *lbcfv1beta1.BackendRecord {
		br := &lbcfv1beta1.BackendRecord{}
		if deleting {
			br.DeletionTimestamp = &metav1.Time{Time: t0}
		}
		return br
	}
	w.Wrote("g", "created", false, "", t0)
	w.Wrote("g", "deleted", true, "", t0)
	w.Wrote("other", "x", false, "", t0)

	// The cache shows neither write yet: both stay pending, the group comes back when they expire.
	pending, next := w.Settle("g", map[string]*lbcfv1beta1.BackendRecord{"deleted": rec(false)}, w.CacheSeen(), t0.Add(time.Second))
	g.Expect(pending).To(HaveLen(2))
	g.Expect(pending["deleted"].Deleted).To(BeTrue())
	g.Expect(next).To(Equal(recentWriteTTL - time.Second))

	// The cache shows the created record and the deleted one deleting: nothing pending.
	pending, next = w.Settle("g", map[string]*lbcfv1beta1.BackendRecord{"created": rec(false), "deleted": rec(true)}, w.CacheSeen(), t0.Add(2*time.Second))
	g.Expect(pending).To(BeEmpty())
	g.Expect(next).To(BeZero())

	// A write the cache never confirms expires.
	pending, _ = w.Settle("other", nil, w.CacheSeen(), t0.Add(recentWriteTTL))
	g.Expect(pending).To(BeEmpty())
	g.Expect(w.m).To(BeEmpty())

	// A deleted record gone from the cache is confirmed too.
	w.Wrote("g", "gone", true, "", t0)
	pending, _ = w.Settle("g", nil, w.CacheSeen(), t0.Add(time.Second))
	g.Expect(pending).To(BeEmpty())

	// Groups never reconciled again are pruned by later writes.
	w.Wrote("deleted-group", "x", false, "", t0)
	w.Wrote("g", "y", false, "", t0.Add(2*recentWriteTTL))
	g.Expect(w.m).NotTo(HaveKey(BeEquivalentTo("deleted-group")))
}

// A create the cache does not show yet stays written for as long as the cache has shown nothing
// as new as it — past recentWriteTTL, which a saturated API server's watch lag exceeded (the
// group then created again thousands of records it had just created) — and is given up as soon
// as the cache is past it without showing it (the record was deleted again).
func TestRecentCreatesWaitForTheCache(t *testing.T) {
	g := NewWithT(t)
	w := NewRecent()
	t0 := time.Now()
	w.Observe("90")
	w.Wrote("g", "created", false, "100", t0)
	w.Wrote("g", "deleted", true, "", t0)

	pending, next := w.Settle("g", nil, w.CacheSeen(), t0.Add(2*recentWriteTTL))
	g.Expect(pending).To(HaveKey("created"), "the cache (at 90) is behind the create (100)")
	g.Expect(pending).NotTo(HaveKey("deleted"), "a delete keeps the short TTL")
	g.Expect(next).To(Equal(recentCreateTTL - 2*recentWriteTTL))

	w.Observe("95")
	w.Observe("42") // older events change nothing
	pending, _ = w.Settle("g", nil, w.CacheSeen(), t0.Add(3*recentWriteTTL))
	g.Expect(pending).To(HaveKey("created"))

	w.Observe("101")
	pending, next = w.Settle("g", nil, w.CacheSeen(), t0.Add(3*recentWriteTTL))
	g.Expect(pending).To(BeEmpty(), "the cache is past the create and does not show it")
	g.Expect(next).To(BeZero())

	// Resource versions that cannot be compared: the short TTL, as before.
	w.Wrote("g", "odd", false, "not-a-number", t0)
	pending, _ = w.Settle("g", nil, w.CacheSeen(), t0.Add(recentWriteTTL))
	g.Expect(pending).To(BeEmpty())

	// A create that never shows, with a cache that stops moving: given up after recentCreateTTL.
	w.Wrote("g", "stuck", false, "200", t0)
	pending, _ = w.Settle("g", nil, w.CacheSeen(), t0.Add(recentCreateTTL-time.Second))
	g.Expect(pending).To(HaveKey("stuck"))
	pending, _ = w.Settle("g", nil, w.CacheSeen(), t0.Add(recentCreateTTL))
	g.Expect(pending).To(BeEmpty())

	// The reconcile listed the cache when it had shown 300; the create (301) arrived after that
	// list: the entry stays, though the cache has shown 301 by the time the reconcile settles.
	w.Observe("300")
	seen := w.CacheSeen()
	w.Wrote("g", "raced", false, "301", t0)
	w.Observe("301")
	pending, _ = w.Settle("g", nil, seen, t0.Add(time.Second))
	g.Expect(pending).To(HaveKey("raced"), "the list was older than the create")
}
