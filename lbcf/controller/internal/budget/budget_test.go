package budget

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

func TestDriverBudget(t *testing.T) {
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }
	type step struct {
		op        string // acquire, try (an address call), release, releaseAddr, timeout, answer
		drv       string
		key       string
		unhealthy bool
		want      bool     // acquire, try: got a slot
		woken     []string // release, releaseAddr: records requeued
	}
	// records acquires n slots for records r0, r1, … of drv, each of which must get one.
	records := func(drv string, n int) []step {
		var out []step
		for i := 0; i < n; i++ {
			out = append(out, step{op: "acquire", drv: drv, key: fmt.Sprintf("r%d", i), want: true})
		}
		return out
	}
	steps := func(parts ...[]step) []step { return slices.Concat(parts...) }
	cases := []struct {
		name  string
		size  int // the budget (2 unless set); a record budget keeps a sixteenth for address calls
		steps []step
	}{
		{name: "each driver has its own budget", steps: []step{
			{op: "acquire", drv: "hang", key: "h1", want: true},
			{op: "acquire", drv: "hang", key: "h2", want: true},
			{op: "acquire", drv: "hang", key: "h3", want: false},
			{op: "acquire", drv: "ok", key: "o1", want: true},
			{op: "acquire", drv: "ok", key: "o2", want: true},
		}},
		{name: "a release wakes the parked records in order, once each", steps: []step{
			{op: "acquire", drv: "d", key: "a", want: true},
			{op: "acquire", drv: "d", key: "b", want: true},
			{op: "acquire", drv: "d", key: "c", want: false},
			{op: "acquire", drv: "d", key: "c", want: false},
			{op: "acquire", drv: "d", key: "e", want: false},
			{op: "release", drv: "d", woken: []string{"c"}},
			{op: "acquire", drv: "d", key: "c", want: true},
			{op: "release", drv: "d", woken: []string{"e"}},
			{op: "release", drv: "d", woken: nil},
		}},
		{name: "a parked record that gets a slot on its own is not woken again", steps: []step{
			{op: "acquire", drv: "d", key: "a", want: true},
			{op: "acquire", drv: "d", key: "b", want: true},
			{op: "acquire", drv: "d", key: "c", want: false},
			{op: "acquire", drv: "d", key: "e", want: false},
			{op: "release", drv: "d", woken: []string{"c"}},
			{op: "acquire", drv: "d", key: "e", want: true}, // its safety-net requeue came first
			{op: "release", drv: "d", woken: nil},           // c was woken already, e runs
			{op: "release", drv: "d", woken: nil},
		}},
		{name: "an unhealthy driver gets the degraded budget", steps: []step{
			{op: "acquire", drv: "d", key: "a", unhealthy: true, want: true},
			{op: "acquire", drv: "d", key: "b", unhealthy: true, want: false},
		}},
		{name: "a timeout degrades the driver until a call is answered", steps: []step{
			{op: "acquire", drv: "d", key: "a", want: true},
			{op: "timeout", drv: "d"},
			{op: "acquire", drv: "d", key: "b", want: false},
			{op: "answer", drv: "d"},
			{op: "acquire", drv: "d", key: "b", want: true},
		}},
		{name: "an address call takes a free slot but never parks, nor takes one while records wait", steps: []step{
			{op: "try", drv: "d", want: true},
			{op: "acquire", drv: "d", key: "a", want: true},
			{op: "try", drv: "d", want: false},
			{op: "acquire", drv: "d", key: "b", want: false},
			{op: "try", drv: "d", want: false},
			{op: "release", drv: "d", woken: []string{"b"}},
			{op: "acquire", drv: "d", key: "b", want: true},
			{op: "try", drv: "d", want: false},
		}},
		{name: "records leave the address reserve free", size: 32, steps: steps(records("d", 30), []step{
			{op: "acquire", drv: "d", key: "late", want: false},
			{op: "try", drv: "d", want: true},
			{op: "try", drv: "d", want: true},
			{op: "try", drv: "d", want: false}, // 32 calls in flight: the whole budget
			{op: "releaseAddr", drv: "d", woken: nil},
			{op: "try", drv: "d", want: true},
			{op: "release", drv: "d", woken: []string{"late"}},
		})},
		{name: "address calls beyond the reserve only while no record waits", size: 32, steps: []step{
			{op: "acquire", drv: "d", key: "a", unhealthy: true, want: true},
			{op: "acquire", drv: "d", key: "b", unhealthy: true, want: false},
			{op: "try", drv: "d", want: true},
			{op: "try", drv: "d", want: true},
			{op: "try", drv: "d", want: false}, // b waits: the reserve's two only
			{op: "release", drv: "d", unhealthy: true, woken: []string{"b"}},
			{op: "acquire", drv: "d", key: "b", unhealthy: true, want: true},
			{op: "try", drv: "d", want: true}, // nobody waits
		}},
		{name: "an address call's release wakes a record it kept out", size: 32, steps: steps([]step{
			{op: "try", drv: "d", want: true},
			{op: "try", drv: "d", want: true},
			{op: "try", drv: "d", want: true},
		}, records("d", 29), []step{
			{op: "acquire", drv: "d", key: "late", want: false},
			{op: "releaseAddr", drv: "d", woken: []string{"late"}},
		})},
		{name: "an address call leaves a degraded driver alone", steps: []step{
			{op: "timeout", drv: "d"},
			{op: "try", drv: "d", want: false},
			{op: "answer", drv: "d"},
			{op: "try", drv: "d", want: true},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var woken []string
			size := tc.size
			if size == 0 {
				size = 2
			}
			b := NewForRecords(size, 1, func(_ context.Context, k types.NamespacedName) { woken = append(woken, k.Name) })
			for i, s := range tc.steps {
				switch s.op {
				case "acquire":
					g.Expect(b.Acquire(s.drv, s.unhealthy, key(s.key))).To(Equal(s.want), "step %d", i)
				case "try":
					// Without time to wait: the slot it takes at once, if any.
					ctx, cancel := context.WithCancel(context.Background())
					cancel()
					g.Expect(b.AcquireAddr(ctx, s.drv)).To(Equal(s.want), "step %d", i)
				case "release", "releaseAddr":
					woken = nil
					if s.op == "release" {
						b.Release(context.Background(), s.drv, s.unhealthy)
					} else {
						b.ReleaseAddr(context.Background(), s.drv)
					}
					g.Expect(woken).To(Equal(s.woken), "step %d", i)
				case "timeout", "answer":
					b.Observe(s.drv, s.op == "timeout")
				}
			}
		})
	}
}

// An address call finding the reserve taken waits for one of its slots (they are returned within
// milliseconds), never for the records' slots, and gives up when its context ends.
func TestDriverBudgetAddressCallWaitsForTheReserve(t *testing.T) {
	g := NewWithT(t)
	b := NewForRecords(32, 1, func(context.Context, types.NamespacedName) {})
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		g.Expect(b.Acquire("d", false, types.NamespacedName{Name: fmt.Sprint(i)})).To(BeTrue())
	}
	g.Expect(b.Acquire("d", false, types.NamespacedName{Name: "late"})).To(BeFalse(), "parked")
	g.Expect(b.AcquireAddr(ctx, "d")).To(BeTrue())
	g.Expect(b.AcquireAddr(ctx, "d")).To(BeTrue())

	got := make(chan bool)
	go func() { got <- b.AcquireAddr(ctx, "d") }()
	g.Consistently(got, 100*time.Millisecond).ShouldNot(Receive(), "the reserve is taken: it waits")
	b.Release(ctx, "d", false) // a record's slot, which the parked record takes
	g.Expect(b.Acquire("d", false, types.NamespacedName{Name: "late"})).To(BeTrue())
	g.Consistently(got, 100*time.Millisecond).ShouldNot(Receive(), "a record's slot is not for it")
	b.ReleaseAddr(ctx, "d")
	g.Eventually(got).Should(Receive(BeTrue()), "an address call's slot is")

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	g.Expect(b.AcquireAddr(short, "d")).To(BeFalse(), "no slot came back in time")
}
