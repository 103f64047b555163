package controller

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

func TestRecentWrites(t *testing.T) {
	g := NewWithT(t)
	w := newRecentWrites()
	t0 := time.Now()
	rec := func(deleting bool) *lbcfv1beta1.BackendRecord {
		br := &lbcfv1beta1.BackendRecord{}
		if deleting {
			br.DeletionTimestamp = &metav1.Time{Time: t0}
		}
		return br
	}
	w.wrote("g", "created", false, "", t0)
	w.wrote("g", "deleted", true, "", t0)
	w.wrote("other", "x", false, "", t0)

	// The cache shows neither write yet: both stay pending, the group comes back when they expire.
	pending, next := w.settle("g", map[string]*lbcfv1beta1.BackendRecord{"deleted": rec(false)}, w.cacheSeen(), t0.Add(time.Second))
	g.Expect(pending).To(HaveLen(2))
	g.Expect(pending["deleted"].deleted).To(BeTrue())
	g.Expect(next).To(Equal(recentWriteTTL - time.Second))

	// The cache shows the created record and the deleted one deleting: nothing pending.
	pending, next = w.settle("g", map[string]*lbcfv1beta1.BackendRecord{"created": rec(false), "deleted": rec(true)}, w.cacheSeen(), t0.Add(2*time.Second))
	g.Expect(pending).To(BeEmpty())
	g.Expect(next).To(BeZero())

	// A write the cache never confirms expires.
	pending, _ = w.settle("other", nil, w.cacheSeen(), t0.Add(recentWriteTTL))
	g.Expect(pending).To(BeEmpty())
	g.Expect(w.m).To(BeEmpty())

	// A deleted record gone from the cache is confirmed too.
	w.wrote("g", "gone", true, "", t0)
	pending, _ = w.settle("g", nil, w.cacheSeen(), t0.Add(time.Second))
	g.Expect(pending).To(BeEmpty())

	// Groups never reconciled again are pruned by later writes.
	w.wrote("deleted-group", "x", false, "", t0)
	w.wrote("g", "y", false, "", t0.Add(2*recentWriteTTL))
	g.Expect(w.m).NotTo(HaveKey(BeEquivalentTo("deleted-group")))
}

// A create the cache does not show yet stays written for as long as the cache has shown nothing
// as new as it — past recentWriteTTL, which a saturated API server's watch lag exceeded (the
// group then created again thousands of records it had just created) — and is given up as soon
// as the cache is past it without showing it (the record was deleted again).
func TestRecentCreatesWaitForTheCache(t *testing.T) {
	g := NewWithT(t)
	w := newRecentWrites()
	t0 := time.Now()
	w.observe("90")
	w.wrote("g", "created", false, "100", t0)
	w.wrote("g", "deleted", true, "", t0)

	pending, next := w.settle("g", nil, w.cacheSeen(), t0.Add(2*recentWriteTTL))
	g.Expect(pending).To(HaveKey("created"), "the cache (at 90) is behind the create (100)")
	g.Expect(pending).NotTo(HaveKey("deleted"), "a delete keeps the short TTL")
	g.Expect(next).To(Equal(recentCreateTTL - 2*recentWriteTTL))

	w.observe("95")
	w.observe("42") // older events change nothing
	pending, _ = w.settle("g", nil, w.cacheSeen(), t0.Add(3*recentWriteTTL))
	g.Expect(pending).To(HaveKey("created"))

	w.observe("101")
	pending, next = w.settle("g", nil, w.cacheSeen(), t0.Add(3*recentWriteTTL))
	g.Expect(pending).To(BeEmpty(), "the cache is past the create and does not show it")
	g.Expect(next).To(BeZero())

	// Resource versions that cannot be compared: the short TTL, as before.
	w.wrote("g", "odd", false, "not-a-number", t0)
	pending, _ = w.settle("g", nil, w.cacheSeen(), t0.Add(recentWriteTTL))
	g.Expect(pending).To(BeEmpty())

	// A create that never shows, with a cache that stops moving: given up after recentCreateTTL.
	w.wrote("g", "stuck", false, "200", t0)
	pending, _ = w.settle("g", nil, w.cacheSeen(), t0.Add(recentCreateTTL-time.Second))
	g.Expect(pending).To(HaveKey("stuck"))
	pending, _ = w.settle("g", nil, w.cacheSeen(), t0.Add(recentCreateTTL))
	g.Expect(pending).To(BeEmpty())

	// The reconcile listed the cache when it had shown 300; the create (301) arrived after that
	// list: the entry stays, though the cache has shown 301 by the time the reconcile settles.
	w.observe("300")
	seen := w.cacheSeen()
	w.wrote("g", "raced", false, "301", t0)
	w.observe("301")
	pending, _ = w.settle("g", nil, seen, t0.Add(time.Second))
	g.Expect(pending).To(HaveKey("raced"), "the list was older than the create")
}
