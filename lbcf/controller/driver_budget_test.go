package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

func TestDriverBudget(t *testing.T) {
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }
	type step struct {
		op        string // acquire, try, release, timeout, answer
		drv       string
		key       string
		unhealthy bool
		want      bool     // acquire: got a slot
		woken     []string // release: records requeued
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"each driver has its own budget", []step{
			{op: "acquire", drv: "hang", key: "h1", want: true},
			{op: "acquire", drv: "hang", key: "h2", want: true},
			{op: "acquire", drv: "hang", key: "h3", want: false},
			{op: "acquire", drv: "ok", key: "o1", want: true},
			{op: "acquire", drv: "ok", key: "o2", want: true},
		}},
		{"a release wakes the parked records in order, once each", []step{
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
		{"a parked record that gets a slot on its own is not woken again", []step{
			{op: "acquire", drv: "d", key: "a", want: true},
			{op: "acquire", drv: "d", key: "b", want: true},
			{op: "acquire", drv: "d", key: "c", want: false},
			{op: "acquire", drv: "d", key: "e", want: false},
			{op: "release", drv: "d", woken: []string{"c"}},
			{op: "acquire", drv: "d", key: "e", want: true}, // its safety-net requeue came first
			{op: "release", drv: "d", woken: nil},           // c was woken already, e runs
			{op: "release", drv: "d", woken: nil},
		}},
		{"an unhealthy driver gets the degraded budget", []step{
			{op: "acquire", drv: "d", key: "a", unhealthy: true, want: true},
			{op: "acquire", drv: "d", key: "b", unhealthy: true, want: false},
		}},
		{"a timeout degrades the driver until a call is answered", []step{
			{op: "acquire", drv: "d", key: "a", want: true},
			{op: "timeout", drv: "d"},
			{op: "acquire", drv: "d", key: "b", want: false},
			{op: "answer", drv: "d"},
			{op: "acquire", drv: "d", key: "b", want: true},
		}},
		{"tryAcquire takes a free slot but never parks, nor takes one while records wait", []step{
			{op: "try", drv: "d", want: true},
			{op: "acquire", drv: "d", key: "a", want: true},
			{op: "try", drv: "d", want: false},
			{op: "acquire", drv: "d", key: "b", want: false},
			{op: "try", drv: "d", want: false},
			{op: "release", drv: "d", woken: []string{"b"}},
			{op: "acquire", drv: "d", key: "b", want: true},
			{op: "try", drv: "d", want: false},
		}},
		{"tryAcquire leaves a degraded driver alone", []step{
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
			b := newDriverBudget(2, 1, func(_ context.Context, k types.NamespacedName) { woken = append(woken, k.Name) })
			for i, s := range tc.steps {
				switch s.op {
				case "acquire":
					g.Expect(b.acquire(s.drv, s.unhealthy, key(s.key))).To(Equal(s.want), "step %d", i)
				case "try":
					g.Expect(b.tryAcquire(s.drv)).To(Equal(s.want), "step %d", i)
				case "release":
					woken = nil
					b.release(context.Background(), s.drv, s.unhealthy)
					g.Expect(woken).To(Equal(s.woken), "step %d", i)
				case "timeout", "answer":
					b.observe(s.drv, s.op == "timeout")
				}
			}
		})
	}
}
