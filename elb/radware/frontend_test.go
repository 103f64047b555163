package radware

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/elb/radware/alteon"
	"github.com/lbfed/lbfed/elb/radware/alteonsim"
)

func mustLB(t *testing.T, spec map[string]string, owner string) LoadBalancer {
	t.Helper()
	lb, err := ParseLoadBalancer(spec)
	if err != nil {
		t.Fatal(err)
	}
	lb.Owner, lb.Prefix = owner, "elb"
	return lb
}

func be(ip string, port int) Backend {
	return Backend{IP: netip.MustParseAddr(ip), Port: port, Weight: 1}
}

func TestSyncDrainsRemovedMembers(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{frontend: FrontendOptions{DrainPeriod: 200 * time.Millisecond}})
	lb := mustLB(t, map[string]string{"vip": "192.0.2.20", "port": "443"}, "elb/c1/ns/web")
	id := lb.ID()
	g.Expect(id).To(Equal("elb_192.0.2.20_tcp_443"))
	res, err := e.fe.Sync(testCtx(t), lb, []Backend{be("10.0.0.1", 30443), be("10.0.0.2", 30443)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Requeue).To(BeZero())
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).Members(id)).To(HaveLen(2))

	res, err = e.fe.Sync(testCtx(t), lb, []Backend{be("10.0.0.1", 30443)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Requeue).To(Equal(200 * time.Millisecond))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).Members(id)).To(Equal(map[string]int{id + "_10.0.0.1_30443": 1, id + "_10.0.0.2_30443": 3}))

	g.Eventually(func() map[string]int {
		_, err := e.fe.Sync(testCtx(t), lb, []Backend{be("10.0.0.1", 30443)})
		g.Expect(err).NotTo(HaveOccurred())
		return e.sim.A.Snapshot(alteonsim.Running).Members(id)
	}).WithTimeout(3 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal(map[string]int{id + "_10.0.0.1_30443": 1}))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{id + "_10.0.0.1_30443"}))
}

func TestSyncOwnerAndDeleteOwner(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{})
	owner := "elb/c1/ns/web"
	http := mustLB(t, map[string]string{"vip": "192.0.2.30", "port": "80"}, owner)
	dns := mustLB(t, map[string]string{"vip": "192.0.2.30", "port": "53", "protocol": "UDP"}, owner)
	other := mustLB(t, map[string]string{"vip": "192.0.2.31", "port": "80"}, "elb/c1/ns/other")
	_, err := e.fe.SyncOwner(testCtx(t), other.Owner, []Desired{{other, []Backend{be("10.0.0.9", 30080)}}})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = e.fe.SyncOwner(testCtx(t), owner, []Desired{
		{http, []Backend{be("10.0.0.1", 30080), be("10.0.0.2", 30080)}},
		{dns, []Backend{be("10.0.0.1", 30053)}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	run := e.sim.A.Snapshot(alteonsim.Running)
	g.Expect(run.VirtualServers()).To(ConsistOf(http.ID(), dns.ID(), other.ID()))
	g.Expect(run.Members(http.ID())).To(HaveLen(2))

	// The Service lost its UDP port and changed VIP for HTTP: old objects of the owner go.
	moved := mustLB(t, map[string]string{"vip": "192.0.2.32", "port": "80"}, owner)
	_, err = e.fe.SyncOwner(testCtx(t), owner, []Desired{{moved, []Backend{be("10.0.0.1", 30080)}}})
	g.Expect(err).NotTo(HaveOccurred())
	run = e.sim.A.Snapshot(alteonsim.Running)
	g.Expect(run.VirtualServers()).To(ConsistOf(moved.ID(), other.ID()))
	g.Expect(run.Groups()).To(ConsistOf(moved.ID(), other.ID()))
	g.Expect(run.RealServers()).To(ConsistOf(moved.ID()+"_10.0.0.1_30080", other.ID()+"_10.0.0.9_30080"))

	// Taking another owner's VIP:port is refused and writes nothing.
	thief := mustLB(t, map[string]string{"vip": "192.0.2.31", "port": "80"}, owner)
	applies := e.sim.A.Applies()
	_, err = e.fe.SyncOwner(testCtx(t), owner, []Desired{{moved, nil}, {thief, nil}})
	g.Expect(IsRejected(err)).To(BeTrue(), "got %v", err)
	g.Expect(err).To(MatchError(ContainSubstring(`belongs to "elb/c1/ns/other"`)))
	g.Expect(e.sim.A.Applies()).To(Equal(applies))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).Members(moved.ID())).To(HaveLen(1), "the refused change did not remove members")

	g.Expect(e.fe.DeleteOwner(testCtx(t), owner)).To(Succeed())
	run = e.sim.A.Snapshot(alteonsim.Running)
	g.Expect(run.VirtualServers()).To(ConsistOf(other.ID()))
	g.Expect(run.RealServers()).To(ConsistOf(other.ID() + "_10.0.0.9_30080"))
	g.Expect(e.fe.DeleteOwner(testCtx(t), owner)).To(Succeed(), "idempotent")
}

// TestRunFinishesAFailedSave: the periodic check saves and syncs what a failed save left behind
// although no further change comes (issue 14.1).
func TestRunFinishesAFailedSave(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{frontend: FrontendOptions{SettleInterval: 20 * time.Millisecond}})
	lb := mustLB(t, map[string]string{"vip": "192.0.2.21", "port": "80"}, "elb/c1/ns/web")
	e.sim.A.InjectSaveFailure("Flash write error.")
	_, err := e.fe.Sync(testCtx(t), lb, []Backend{be("10.0.0.1", 30080)})
	g.Expect(err).To(MatchError(ContainSubstring("Flash write error.")))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).VirtualServers()).To(Equal([]string{lb.ID()}), "live")
	g.Expect(e.sim.A.Snapshot(alteonsim.Flash).VirtualServers()).To(BeEmpty(), "not saved")

	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error)
	go func() { done <- e.fe.Run(ctx) }()
	g.Eventually(func() []string { return e.sim.A.Snapshot(alteonsim.Flash).VirtualServers() }).Should(Equal([]string{lb.ID()}))
	g.Eventually(func() []string { return e.sim.B.Snapshot(alteonsim.Flash).VirtualServers() }).Should(Equal([]string{lb.ID()}))
	cancel()
	g.Expect(<-done).To(Succeed())
}

// queueBatch runs calls so that they all land in one batch: a first change holds the transaction
// until every call is queued behind it.
func queueBatch(t *testing.T, e *testEnv, calls []func() error) []error {
	t.Helper()
	started, release := make(chan struct{}), make(chan struct{})
	gate := make(chan error, 1)
	go func() {
		gate <- e.fe.submit(testCtx(t), "gate", func(context.Context, *alteon.Tx) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = call() }()
	}
	NewWithT(t).Eventually(func() int {
		e.fe.mu.Lock()
		defer e.fe.mu.Unlock()
		return len(e.fe.pending)
	}).Should(Equal(len(calls)))
	close(release)
	wg.Wait()
	if err := <-gate; err != nil {
		t.Fatal(err)
	}
	return errs
}

// TestPoisonedChangeFailsAlone reproduces issue 14.3: a change the device refuses with a 406 failed
// every change coalesced with it, on every retry. Now it fails alone with the device's message and
// the others commit in one apply: whether its first write was refused (weight 99) or a later one
// after earlier ones were accepted (port 3: the real server was written, its port refused).
func TestPoisonedChangeFailsAlone(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{})
	lb := mustLB(t, map[string]string{"vip": "192.0.2.22", "port": "80"}, "lbfed")
	g.Expect(e.fe.EnsureLoadBalancer(testCtx(t), lb)).To(Succeed())
	const n = 20
	poison := map[int]struct {
		change func(*Backend)
		msg    string
	}{
		7:  {func(b *Backend) { b.Weight = 99 }, "Wrong input 99"},
		13: {func(b *Backend) { b.Port = 3 }, "Wrong input 3"},
	}
	var calls []func() error
	var all []Backend
	for i := 0; i < n; i++ {
		b := be(fmt.Sprintf("10.4.0.%d", i+1), 30080)
		if p, ok := poison[i]; ok {
			p.change(&b)
		}
		all = append(all, b)
		calls = append(calls, func() error { return e.fe.EnsureBackend(testCtx(t), lb, b) })
	}
	before := e.sim.A.Applies()
	errs := queueBatch(t, e, calls)
	for i, err := range errs {
		if p, ok := poison[i]; ok {
			g.Expect(err).To(MatchError(And(ContainSubstring(all[i].String()), ContainSubstring(p.msg))))
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), "change %d", i)
	}
	g.Expect(e.sim.A.Applies()-before).To(BeEquivalentTo(1), "the others commit together")
	members := e.sim.B.Snapshot(alteonsim.Running).Members(lb.ID())
	g.Expect(members).To(HaveLen(n - len(poison)))
	for i := range poison {
		g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).NotTo(ContainElement(lb.realServerID(all[i])), "nothing of it was applied")
	}
}

// TestLongOwnerMarksFitTheDevice reproduces issue 14.8: owner marks (elb/<cluster>/<namespace>/
// <service>) reach about 140 characters, but a virtual server's Vname holds 128, so the device
// refused such a Service's virtual server. Marks are now cut to fit, deterministically (a hash of
// the whole mark keeps two long owners apart), and every generated name stays within the limits.
func TestLongOwnerMarksFitTheDevice(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{})
	long := func(svc string) string {
		return "elb/" + strings.Repeat("c", 20) + "/" + strings.Repeat("n", 63) + "/" + svc + strings.Repeat("s", 62)
	}
	ownerA, ownerB := long("a"), long("b")
	g.Expect(len(ownerA)).To(BeNumerically(">", 140))
	lbA := mustLB(t, map[string]string{"vip": "192.0.2.23", "port": "80"}, ownerA)
	lbB := mustLB(t, map[string]string{"vip": "192.0.2.24", "port": "80"}, ownerB)
	for _, lb := range []LoadBalancer{lbA, lbB} {
		_, err := e.fe.SyncOwner(testCtx(t), lb.Owner, []Desired{{lb, []Backend{be("10.5.0.1", 30080)}}})
		g.Expect(err).NotTo(HaveOccurred())
	}
	run := e.sim.A.Snapshot(alteonsim.Running)
	g.Expect(run.VirtualServers()).To(ConsistOf(lbA.ID(), lbB.ID()))
	names := map[string]bool{}
	for _, id := range run.VirtualServers() {
		names[run.VirtualServerName(id)] = true
		g.Expect(len(id)).To(BeNumerically("<=", 255))
	}
	for _, id := range run.RealServers() {
		g.Expect(len(id)).To(BeNumerically("<=", 255))
		g.Expect(len(run.RealServer(id)["Name"].(string))).To(BeNumerically("<=", 128))
	}
	g.Expect(names).To(HaveLen(2), "two long owners keep different marks")
	g.Expect(Mark(ownerA)).To(HaveLen(MaxMarkLen))
	g.Expect(Mark(ownerA)).To(Equal(Mark(ownerA)), "deterministic")
	g.Expect(Mark("elb/c1/ns/web")).To(Equal("elb/c1/ns/web"), "short marks are kept")

	// Idempotent: the same sync again writes nothing.
	applies := e.sim.A.Applies()
	_, err := e.fe.SyncOwner(testCtx(t), ownerA, []Desired{{lbA, []Backend{be("10.5.0.1", 30080)}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.sim.A.Applies()).To(Equal(applies))
	// The owners are told apart: deleting one leaves the other.
	g.Expect(e.fe.DeleteOwner(testCtx(t), ownerA)).To(Succeed())
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).VirtualServers()).To(Equal([]string{lbB.ID()}))
}

func TestOwnFault(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&alteon.APIError{HTTPStatus: 406, TestErr: "Wrong input 99."}, true},
		{&alteon.APIError{HTTPStatus: 406, AppMessage: "Apply is in progress, try again later."}, false},
		{&alteon.APIError{HTTPStatus: 404, TestErr: "Row does not exist."}, true},
		{&alteon.APIError{HTTPStatus: 403}, false},
		{&alteon.APIError{HTTPStatus: 401}, false},
		{&alteon.APIError{HTTPStatus: 500}, false},
		{&alteon.APIError{HTTPStatus: 200, Message: "Internal error"}, false},
		{fmt.Errorf("change: %w", &alteon.ApplyError{Messages: []string{"x"}}), false},
		{context.DeadlineExceeded, false},
	} {
		if got := ownFault(tt.err); got != tt.want {
			t.Errorf("ownFault(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
	if !IsRefusedByDevice(&alteon.ApplyError{Messages: []string{"x"}}) {
		t.Error("a failed apply is the change's own")
	}
}
