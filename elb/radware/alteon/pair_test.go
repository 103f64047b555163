package alteon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/elb/radware/alteonsim"
)

type env struct {
	sim  *alteonsim.Pair
	pair *Pair
	a, b *Client
}

func fastClient(t *testing.T, url string) *Client {
	t.Helper()
	c, err := NewClient(Config{URL: url, User: "admin", Password: "admin", RetryDelay: 2 * time.Millisecond, PageSize: 50})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newEnv(t *testing.T, a, b alteonsim.Options, opts PairOptions) *env {
	t.Helper()
	for _, o := range []*alteonsim.Options{&a, &b} {
		if o.ApplyDuration == 0 {
			o.ApplyDuration = 5 * time.Millisecond
		}
		o.SaveDuration, o.SyncDuration = time.Millisecond, time.Millisecond
	}
	sim := alteonsim.NewPair(a, b)
	ua, ub, err := sim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	if opts.PollInterval == 0 {
		opts.PollInterval = 2 * time.Millisecond
	}
	e := &env{sim: sim, a: fastClient(t, ua), b: fastClient(t, ub)}
	e.pair, err = NewPair(opts, e.a, e.b)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// program writes one complete L4 service, idempotently.
func program(servers ...string) func(context.Context, *Tx) error {
	return func(ctx context.Context, tx *Tx) error {
		if _, err := tx.EnsureGroup(ctx, Group{Index: "g1", Metric: MetricRoundRobin, HealthID: "tcp", Name: "lbfed"}); err != nil {
			return err
		}
		for i, s := range servers {
			if _, err := tx.EnsureRealServer(ctx, RealServer{Index: s, IP: fmt.Sprintf("10.0.0.%d", i+1), Weight: 1, State: RealServerEnabled}); err != nil {
				return err
			}
			if _, err := tx.EnsureRealServerPort(ctx, s, 1, 30080); err != nil {
				return err
			}
			if _, err := tx.AddMember(ctx, "g1", s); err != nil {
				return err
			}
		}
		if _, err := tx.EnsureVirtualServer(ctx, VirtualServer{Index: "v1", IP: "192.0.2.10", Enabled: true}); err != nil {
			return err
		}
		_, err := tx.EnsureVirtualService(ctx, VirtualService{Server: "v1", Index: 1, VirtPort: 80, Balance: BalanceTCP, DBind: 2, PBind: 3, Group: "g1", PersistentTimeout: 10, ProxyIPMode: 1})
		return err
	}
}

func TestDoCommitsAppliesSavesAndSyncs(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{})
	res, err := e.pair.Do(ctx(t), program("rs1", "rs2"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Committed).To(BeTrue())
	g.Expect(res.Unit).To(Equal(e.a.Name()))
	g.Expect(res.SyncErr).NotTo(HaveOccurred())
	run := e.sim.A.Snapshot(alteonsim.Running)
	g.Expect(run.RealServers()).To(Equal([]string{"rs1", "rs2"}))
	g.Expect(run.Members("g1")).To(Equal(map[string]int{"rs1": 1, "rs2": 1}))
	g.Expect(e.sim.A.Snapshot(alteonsim.Flash).Equal(run)).To(BeTrue(), "saved")
	g.Expect(e.sim.B.Snapshot(alteonsim.Running).Equal(run)).To(BeTrue(), "synced to the backup")
	g.Expect(e.sim.B.Requests()).To(HaveEach(HaveField("Method", "GET")), "the backup is only read")
	g.Expect(e.sim.A.Applies()).To(BeEquivalentTo(1))

	// Running it again reads, writes nothing and does not apply.
	e.sim.A.ResetRecording()
	res, err = e.pair.Do(ctx(t), program("rs1", "rs2"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Committed).To(BeFalse())
	g.Expect(res.Writes).To(BeZero())
	g.Expect(e.sim.A.Applies()).To(BeEquivalentTo(1))
	for _, r := range e.sim.A.Requests() {
		g.Expect(r.Method).To(Equal("GET"), "unexpected %s %s", r.Method, r.Path)
	}

	// A changed field is written alone.
	e.sim.A.ResetRecording()
	_, err = e.pair.Do(ctx(t), func(ctx context.Context, tx *Tx) error {
		_, err := tx.EnsureRealServer(ctx, RealServer{Index: "rs1", IP: "10.0.0.1", Weight: 9, State: RealServerEnabled})
		return err
	})
	g.Expect(err).NotTo(HaveOccurred())
	var puts []string
	for _, r := range e.sim.A.Requests() {
		if r.Method == "PUT" {
			puts = append(puts, strings.Join(strings.Fields(r.Body), ""))
		}
	}
	g.Expect(puts).To(Equal([]string{`{"Weight":9}`}))
}

func TestTxReadsAndDeletes(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, alteonsim.Options{DefaultPageSize: 7}, alteonsim.Options{}, PairOptions{})
	var servers []string
	for i := 0; i < 120; i++ {
		servers = append(servers, fmt.Sprintf("rs%03d", i))
	}
	_, err := e.pair.Do(ctx(t), program(servers...))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = e.pair.Do(ctx(t), func(ctx context.Context, tx *Tx) error {
		all, err := tx.RealServers(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(all).To(HaveLen(120), "paged with count/offset")
		g.Expect(all[5]).To(Equal(RealServer{Index: "rs005", IP: "10.0.0.6", Weight: 1, State: RealServerEnabled,
			Health: HealthTiming{Interval: 2, Retries: 4, Restore: 2}}), "the device's default health-check timing")
		members, err := tx.Members(ctx, "g1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(members).To(HaveLen(120))
		ports, err := tx.RealServerPorts(ctx, "rs001")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ports).To(Equal(map[int]int{1: 30080}))
		svc, ok, err := tx.VirtualService(ctx, "v1", 1)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeTrue())
		g.Expect(svc).To(Equal(VirtualService{Server: "v1", Index: 1, VirtPort: 80, Balance: BalanceTCP, DBind: 2, PBind: 3, Group: "g1", PersistentTimeout: 10, ProxyIPMode: 1}))
		vs, _, _ := tx.VirtualServer(ctx, "v1")
		g.Expect(vs).To(Equal(VirtualServer{Index: "v1", IP: "192.0.2.10", Enabled: true}))
		grp, _, _ := tx.Group(ctx, "g1")
		g.Expect(grp).To(Equal(Group{Index: "g1", Metric: MetricRoundRobin, HealthID: "tcp", Name: "lbfed"}))

		// Drain, remove, delete; then everything else.
		if _, err := tx.SetMemberState(ctx, "g1", "rs000", MemberShutdownConnection); err != nil {
			return err
		}
		for _, s := range servers {
			if _, err := tx.RemoveMember(ctx, "g1", s); err != nil {
				return err
			}
			if _, err := tx.DeleteRealServer(ctx, s); err != nil {
				return err
			}
		}
		if _, err := tx.DeleteVirtualService(ctx, "v1", 1); err != nil {
			return err
		}
		if _, err := tx.DeleteVirtualServer(ctx, "v1"); err != nil {
			return err
		}
		_, err = tx.DeleteGroup(ctx, "g1")
		return err
	})
	g.Expect(err).NotTo(HaveOccurred())
	run := e.sim.A.Snapshot(alteonsim.Running)
	g.Expect(run.RealServers()).To(BeEmpty())
	g.Expect(run.Groups()).To(BeEmpty())
	g.Expect(run.VirtualServers()).To(BeEmpty())
	// Deleting what is gone is not an error and writes nothing.
	res, err := e.pair.Do(ctx(t), func(ctx context.Context, tx *Tx) error {
		_, err := tx.DeleteRealServer(ctx, "rs000")
		return err
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Writes).To(BeZero())
}

func TestMasterDiscovery(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{})
	e.sim.Failover()
	res, err := e.pair.Do(ctx(t), program("rs1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Unit).To(Equal(e.b.Name()))
	g.Expect(e.sim.B.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{"rs1"}))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{"rs1"}), "synced from B")

	e.sim.SetRoles(alteonsim.RoleMaster, alteonsim.RoleMaster)
	_, err = e.pair.Do(ctx(t), program("rs2"))
	g.Expect(err).To(MatchError(ErrSplitBrain))
	e.sim.SetRoles(alteonsim.RoleBackup, alteonsim.RoleBackup)
	_, err = e.pair.Do(ctx(t), program("rs2"))
	g.Expect(err).To(MatchError(ErrNoMaster))
	g.Expect(e.sim.A.Snapshot(alteonsim.Pending).RealServers()).To(Equal([]string{"rs1"}), "nothing written without a master")
	g.Expect(e.sim.B.Snapshot(alteonsim.Pending).RealServers()).To(Equal([]string{"rs1"}))

	// One unit down: the other, if master, is used.
	e.sim.SetRoles(alteonsim.RoleMaster, alteonsim.RoleBackup)
	_ = e.sim.B.Close()
	res, err = e.pair.Do(ctx(t), program("rs1", "rs2"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Unit).To(Equal(e.a.Name()))
	g.Expect(res.SyncErr).To(MatchError(ContainSubstring("unreachable")), "the dead backup cannot be synced")
}

func TestRoleFallbackToHaSwitchInfoState(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{})
	for _, d := range e.sim.Units() {
		d.AddFault(alteonsim.Fault{Query: "prop=vrrpInfoHAState", Kind: alteonsim.FaultStatus, Status: 405})
	}
	e.sim.Failover()
	role, err := e.b.Role(ctx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(role).To(Equal("master"))
	res, err := e.pair.Do(ctx(t), program("rs1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Unit).To(Equal(e.b.Name()))
}

func TestFailoverBetweenWritesIsRetriedOnNewMaster(t *testing.T) {
	for _, mode := range []alteonsim.BackupWriteMode{alteonsim.BackupAccept, alteonsim.BackupReject, alteonsim.BackupIgnore} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t, alteonsim.Options{BackupWrites: mode}, alteonsim.Options{BackupWrites: mode}, PairOptions{})
			e.sim.A.AddFault(alteonsim.Fault{Method: "PUT", Kind: alteonsim.FaultHook, Skip: 3, Times: 1, Hook: e.sim.Failover})
			res, err := e.pair.Do(ctx(t), program("rs1", "rs2", "rs3"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Attempts).To(Equal(2))
			g.Expect(res.Unit).To(Equal(e.b.Name()))
			want := []string{"rs1", "rs2", "rs3"}
			g.Expect(e.sim.B.Snapshot(alteonsim.Running).RealServers()).To(Equal(want))
			g.Expect(e.sim.B.Snapshot(alteonsim.Running).Members("g1")).To(HaveLen(3))
			g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(Equal(want), "synced back to A")
			g.Expect(e.sim.A.Applies()).To(BeZero(), "never applied on the unit that lost mastership")
			g.Expect(e.pair.Stats().Failovers).To(BeEquivalentTo(1))
		})
	}
}

func TestFailoverMidApplyIsRetriedOnNewMaster(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, alteonsim.Options{ApplyDuration: 20 * time.Millisecond}, alteonsim.Options{}, PairOptions{})
	e.sim.A.InjectApply(alteonsim.ApplyFault{During: e.sim.Failover})
	res, err := e.pair.Do(ctx(t), program("rs1", "rs2"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Attempts).To(Equal(2))
	g.Expect(res.Unit).To(Equal(e.b.Name()))
	g.Expect(e.sim.B.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{"rs1", "rs2"}))
	g.Expect(e.sim.B.Snapshot(alteonsim.Flash).RealServers()).To(Equal([]string{"rs1", "rs2"}))
}

func TestApplyFailureIsReportedAndReverted(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{})
	_, err := e.pair.Do(ctx(t), func(ctx context.Context, tx *Tx) error {
		_, err := tx.AddMember(ctx, "missing-group-ok", "ghost") // group created by AddServer upsert, ghost missing
		return err
	})
	var ae *ApplyError
	g.Expect(errors.As(err, &ae)).To(BeTrue(), "got %v", err)
	g.Expect(ae.Messages).To(ContainElement(ContainSubstring("real server ghost does not exist")))
	g.Expect(e.sim.A.ApplyPending()).To(BeFalse(), "reverted")
	g.Expect(e.sim.A.Applies()).To(BeEquivalentTo(1), "an apply failure is not retried")

	e.sim.A.InjectApply(alteonsim.ApplyFault{Fail: "Out of memory."})
	_, err = e.pair.Do(ctx(t), program("rs1"))
	g.Expect(err).To(MatchError(ContainSubstring("Out of memory.")))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(BeEmpty())
}

func TestApplyQuirks(t *testing.T) {
	t.Run("hanging apply times out", func(t *testing.T) {
		g := NewWithT(t)
		e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{ApplyTimeout: 100 * time.Millisecond})
		e.sim.A.InjectApply(alteonsim.ApplyFault{Hang: true})
		_, err := e.pair.Do(ctx(t), program("rs1"))
		g.Expect(err).To(MatchError(errPollTimeout))
		e.sim.A.ReleaseApply()
		// The next transaction waits out the 406s of the finishing apply and succeeds.
		_, err = e.pair.Do(ctx(t), program("rs1", "rs2"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{"rs1", "rs2"}))
	})
	t.Run("apply reported complete too early", func(t *testing.T) {
		g := NewWithT(t)
		e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{PollInterval: 5 * time.Millisecond})
		e.sim.A.InjectApply(alteonsim.ApplyFault{EarlyComplete: 20 * time.Millisecond})
		res, err := e.pair.Do(ctx(t), program("rs1"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Committed).To(BeTrue())
		g.Expect(e.sim.A.Snapshot(alteonsim.Flash).RealServers()).To(Equal([]string{"rs1"}), "saved after the apply really finished")
	})
	t.Run("save failure", func(t *testing.T) {
		g := NewWithT(t)
		e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{})
		e.sim.A.InjectSaveFailure("Flash is full.")
		_, err := e.pair.Do(ctx(t), program("rs1"))
		var se *SaveError
		g.Expect(errors.As(err, &se)).To(BeTrue())
		g.Expect(se.Messages).To(Equal([]string{"Flash is full."}))
	})
	t.Run("sync failure does not fail the commit", func(t *testing.T) {
		g := NewWithT(t)
		e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{})
		e.sim.A.InjectSyncFailure("peer timed out")
		res, err := e.pair.Do(ctx(t), program("rs1"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.SyncErr).To(MatchError(ContainSubstring("peer timed out")))
		g.Expect(e.pair.Stats().SyncFailures).To(BeEquivalentTo(1))
		g.Expect(e.pair.SyncOwed()).To(BeTrue())
		// A transaction that changes nothing still repeats the owed sync.
		res, err = e.pair.Do(ctx(t), program("rs1"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Committed).To(BeFalse())
		g.Expect(res.SyncErr).NotTo(HaveOccurred())
		g.Expect(e.pair.SyncOwed()).To(BeFalse())
		g.Expect(e.sim.B.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{"rs1"}))
		res, err = e.pair.Do(ctx(t), program("rs1", "rs2"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.SyncErr).NotTo(HaveOccurred())
		g.Expect(e.sim.B.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{"rs1", "rs2"}))
	})
	t.Run("own leftover pending edits are reverted first", func(t *testing.T) {
		g := NewWithT(t)
		e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{ForeignWait: time.Millisecond})
		// A transaction fails after a write and its revert fails too: the edit stays pending.
		revertFault := e.sim.A.AddFault(alteonsim.Fault{Method: "POST", Query: "action=revert", Kind: alteonsim.FaultStatus, Times: 10})
		_, err := e.pair.Do(ctx(t), func(ctx context.Context, tx *Tx) error {
			if _, err := tx.EnsureRealServer(ctx, RealServer{Index: "stray", IP: "10.9.9.9", Weight: 1, State: RealServerEnabled}); err != nil {
				return err
			}
			return errors.New("the transaction gives up")
		})
		g.Expect(err).To(MatchError("the transaction gives up"))
		g.Expect(e.sim.A.FaultFired(revertFault)).To(Equal(10))
		g.Expect(e.sim.A.Snapshot(alteonsim.Pending).RealServers()).To(Equal([]string{"stray"}))
		_, err = e.pair.Do(ctx(t), program("rs1"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{"rs1"}))
	})
	t.Run("automatic sync", func(t *testing.T) {
		g := NewWithT(t)
		e := newEnv(t, alteonsim.Options{AutoSync: true}, alteonsim.Options{}, PairOptions{Sync: SyncAuto})
		_, err := e.pair.Do(ctx(t), program("rs1"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(e.pair.Stats().Syncs).To(BeZero())
		g.Eventually(func() []string { return e.sim.B.Snapshot(alteonsim.Running).RealServers() }).Should(Equal([]string{"rs1"}))
	})
}

func TestTransientHTTPFaultsAreRetried(t *testing.T) {
	kinds := []alteonsim.FaultKind{alteonsim.FaultUnauthorized, alteonsim.FaultStatus, alteonsim.FaultErrorOK,
		alteonsim.FaultReset, alteonsim.FaultResetAfter, alteonsim.FaultEmptyBody, alteonsim.FaultMalformedJSON, alteonsim.FaultNumbersAsStrings}
	for _, k := range kinds {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{})
			// Every third request of either unit is hit, in bursts of up to 2.
			for _, d := range e.sim.Units() {
				if k == alteonsim.FaultUnauthorized {
					// A spurious 401 is a single event: two in a row mean a wrong password
					// (TestWrongPasswordFailsFast). Requests 3, 11, 21, 33, … are hit.
					for i := 0; i < 6; i++ {
						d.AddFault(alteonsim.Fault{Kind: k, Skip: 2 + 7*i, Times: 1})
					}
					continue
				}
				d.AddFault(alteonsim.Fault{Kind: k, Probability: 0.3, Message: "transient"})
			}
			_, err := e.pair.Do(ctx(t), program("rs1", "rs2", "rs3"))
			g.Expect(err).NotTo(HaveOccurred())
			for _, d := range e.sim.Units() {
				d.ClearFaults()
			}
			run := e.sim.A.Snapshot(alteonsim.Running)
			g.Expect(run.RealServers()).To(Equal([]string{"rs1", "rs2", "rs3"}))
			g.Expect(run.Members("g1")).To(HaveLen(3))
			g.Expect(e.sim.B.Snapshot(alteonsim.Running).Equal(run)).To(BeTrue())
		})
	}
}

func TestValidationErrorIsFinal(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{})
	_, err := e.pair.Do(ctx(t), func(ctx context.Context, tx *Tx) error {
		_, err := tx.EnsureRealServer(ctx, RealServer{Index: "rs1", IP: "10.0.0.1", Weight: 99, State: RealServerEnabled})
		return err
	})
	g.Expect(IsValidation(err)).To(BeTrue(), "got %v", err)
	var ae *APIError
	g.Expect(errors.As(err, &ae)).To(BeTrue())
	g.Expect(ae.MibName).To(Equal("SlbNewCfgEnhRealServerTable,Weight"))
	g.Expect(e.sim.A.RequestCounts()).To(HaveKeyWithValue("PUT SlbNewCfgEnhRealServerTable", 1), "not retried")
}

func TestTransactionsAreSerialised(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.pair.Do(ctx(t), func(ctx context.Context, tx *Tx) error {
				_, err := tx.EnsureRealServer(ctx, RealServer{Index: fmt.Sprintf("rs%d", i), IP: "10.0.0.1", Weight: 1, State: RealServerEnabled})
				return err
			})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(HaveLen(8))
	// No write ever hit the device between an apply and the end of its save: one transaction at a time.
	writes, applies := 0, 0
	for _, r := range e.sim.A.Requests() {
		switch {
		case r.Method == http.MethodPut:
			writes++
			g.Expect(r.Status).To(Equal(200), "a write was refused (apply in progress?)")
		case r.Query == "action=apply":
			applies++
		}
	}
	g.Expect(writes).To(Equal(8))
	g.Expect(applies).To(Equal(8))
}

func TestSingleUnit(t *testing.T) {
	g := NewWithT(t)
	d := alteonsim.New(alteonsim.Options{ApplyDuration: time.Millisecond, SaveDuration: time.Millisecond})
	url, err := d.Start("127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer d.Close()
	p, err := NewPair(PairOptions{PollInterval: 2 * time.Millisecond}, fastClient(t, url))
	g.Expect(err).NotTo(HaveOccurred())
	res, err := p.Do(ctx(t), program("rs1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Committed).To(BeTrue())
	g.Expect(d.Syncs()).To(BeZero())
	g.Expect(d.RequestCounts()).NotTo(HaveKey("GET ?prop=vrrpInfoHAState"), "no role checks with one unit")
}

func TestClientErrors(t *testing.T) {
	g := NewWithT(t)
	_, err := NewClient(Config{URL: "not a url"})
	g.Expect(err).To(HaveOccurred())
	_, err = NewPair(PairOptions{})
	g.Expect(err).To(HaveOccurred())

	d := alteonsim.New(alteonsim.Options{Password: "right"})
	url, _ := d.Start("127.0.0.1:0")
	defer d.Close()
	c, _ := NewClient(Config{URL: url, User: "admin", Password: "wrong", Attempts: 3, RetryDelay: time.Millisecond})
	_, _, err = c.Get(ctx(t), TableRealServer, "x")
	var ae *APIError
	g.Expect(errors.As(err, &ae)).To(BeTrue())
	g.Expect(ae.HTTPStatus).To(Equal(401))
	g.Expect(IsUnauthorized(err)).To(BeTrue())
	g.Expect(c.Requests()).To(BeEquivalentTo(2), "a 401 is retried once, then reported")
	_, _, err = c.Get(ctx(t), TableRealServer, "x")
	g.Expect(IsUnauthorized(err)).To(BeTrue())
	g.Expect(c.Requests()).To(BeEquivalentTo(2), "rejected credentials are not sent again during AuthHold")
}

// TestOwedSaveAndSyncAreFinished reproduces issue 14.1: a failed save or a timed-out apply left the
// change live but neither saved nor synced, and the next transaction (with nothing to write)
// returned early. A reboot of the master then lost the change, and a failover rolled it back.
func TestOwedSaveAndSyncAreFinished(t *testing.T) {
	for _, tt := range []struct {
		name   string
		break_ func(e *env)
		// repair is how the owed work gets done: a transaction with nothing to write, or the
		// periodic check.
		repair func(e *env) error
	}{
		{
			name:   "failed save, then a transaction with nothing to write",
			break_: func(e *env) { e.sim.A.InjectSaveFailure("Flash write error.") },
			repair: func(e *env) error { _, err := e.pair.Do(ctx(t), program("rs1")); return err },
		},
		{
			name:   "failed save, then the periodic check",
			break_: func(e *env) { e.sim.A.InjectSaveFailure("Flash write error.") },
			repair: func(e *env) error { return e.pair.Settle(ctx(t)) },
		},
		{
			name: "apply timed out and finished later, then the periodic check",
			break_: func(e *env) {
				e.sim.A.InjectApply(alteonsim.ApplyFault{Hang: true})
			},
			repair: func(e *env) error { return e.pair.Settle(ctx(t)) },
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{ApplyTimeout: 50 * time.Millisecond})
			tt.break_(e)
			_, err := e.pair.Do(ctx(t), program("rs1"))
			g.Expect(err).To(HaveOccurred(), "the commit was not confirmed")
			e.sim.A.ReleaseApply()
			g.Eventually(func() []string { return e.sim.A.Snapshot(alteonsim.Running).RealServers() }).Should(Equal([]string{"rs1"}), "the change is live")
			saves, syncs := e.sim.A.Saves(), e.sim.A.Syncs()

			g.Expect(tt.repair(e)).To(Succeed())
			g.Expect(e.sim.A.Saves()).To(BeNumerically(">", saves), "the owed save was done")
			g.Expect(e.sim.A.Syncs()).To(BeNumerically(">", syncs), "the owed sync was done")
			g.Expect(e.pair.Owed()).To(Equal(Owed{}))
			g.Expect(e.sim.A.Snapshot(alteonsim.Flash).RealServers()).To(Equal([]string{"rs1"}), "saved")
			g.Expect(e.sim.B.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{"rs1"}), "synced")

			e.sim.A.Reboot()
			g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{"rs1"}), "survives a reboot")
			e.sim.Failover()
			g.Expect(e.sim.B.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{"rs1"}), "the new master serves it")
		})
	}
}

// TestNothingOwedCostsNoSave pairs the test above: with nothing owed, a transaction that writes
// nothing neither saves nor syncs (after the one sync a new Pair owes, not knowing the backup).
func TestNothingOwedCostsNoSave(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{})
	res, err := e.pair.Do(ctx(t), program("rs1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Committed).To(BeTrue())
	saves, syncs := e.sim.A.Saves(), e.sim.A.Syncs()
	g.Expect(saves).To(BeEquivalentTo(1))
	g.Expect(e.pair.Settle(ctx(t))).To(Succeed())
	_, err = e.pair.Do(ctx(t), program("rs1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.sim.A.Saves()).To(Equal(saves))
	g.Expect(e.sim.A.Syncs()).To(Equal(syncs))
	g.Expect(e.sim.A.RequestCounts()).To(HaveKeyWithValue("GET ?prop=agApplyPending%2CagSavePending", BeNumerically(">=", 3)), "the device was asked each time")
}

// TestWrongPasswordFailsFast reproduces issue 14.5: a 401 was retried like a transient error (10
// attempts per request, and the transaction again on the other unit), which risks locking the
// account on a real device. A spurious 401 is retried once; a second one is final, and the client
// then refuses to send the same credentials again for a while.
func TestWrongPasswordFailsFast(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, alteonsim.Options{Password: "right"}, alteonsim.Options{Password: "right"}, PairOptions{})
	var units []*Client
	for _, d := range e.sim.Units() {
		c, err := NewClient(Config{URL: d.URL(), User: "admin", Password: "wrong", RetryDelay: time.Millisecond})
		g.Expect(err).NotTo(HaveOccurred())
		units = append(units, c)
	}
	p, err := NewPair(PairOptions{PollInterval: time.Millisecond}, units...)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = p.Do(ctx(t), program("rs1"))
	g.Expect(IsUnauthorized(err)).To(BeTrue(), "got %v", err)
	g.Expect(p.Check(ctx(t))).To(Satisfy(IsUnauthorized))
	for _, d := range e.sim.Units() {
		var rejected int
		for _, r := range d.Requests() {
			if r.Status == http.StatusUnauthorized {
				rejected++
			}
		}
		g.Expect(rejected).To(BeNumerically("<=", 2), "%d rejected requests to %s: at most one retry of a 401, and no more attempts after it", rejected, d.Name())
		g.Expect(rejected).To(BeNumerically(">=", 1), "%s was asked", d.Name())
	}
}

// TestOtherWritersAreNotDiscarded reproduces issue 14.2: every transaction reverted whatever was
// pending on the master first, silently discarding an operator's unapplied edit or another
// process's transaction in flight, whose apply then found nothing pending and reported success.
func TestOtherWritersAreNotDiscarded(t *testing.T) {
	stray := func(g Gomega, e *env) {
		g.Expect(e.a.Put(ctx(t), TableRealServer, []string{"operator-edit"}, map[string]any{"IpAddr": "10.9.9.9"})).To(Succeed())
	}
	t.Run("an edit that stays pending is refused with a clear error", func(t *testing.T) {
		g := NewWithT(t)
		e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{ForeignWait: 30 * time.Millisecond})
		stray(g, e)
		_, err := e.pair.Do(ctx(t), program("rs1"))
		g.Expect(err).To(MatchError(ErrForeignPending))
		g.Expect(err).To(MatchError(ContainSubstring("operator-edit")), "the error says what is pending (getdiff)")
		g.Expect(e.sim.A.Snapshot(alteonsim.Pending).RealServers()).To(ContainElement("operator-edit"), "not discarded")
		g.Expect(e.sim.A.Applies()).To(BeZero(), "not applied either")
		g.Expect(e.sim.A.RequestCounts()).To(HaveKeyWithValue("GET getdiff", BeNumerically(">=", 1)))
	})
	t.Run("an edit its writer applies while the transaction waits is kept", func(t *testing.T) {
		g := NewWithT(t)
		e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{ForeignWait: time.Minute})
		stray(g, e)
		done := make(chan error)
		go func() { _, err := e.pair.Do(ctx(t), program("rs1")); done <- err }()
		g.Eventually(func() int { return e.sim.A.RequestCounts()["GET ?prop=agApplyPending%2CagSavePending"] }).Should(BeNumerically(">=", 3), "waiting")
		g.Expect(e.a.Action(ctx(t), "apply")).To(Succeed(), "the other writer commits")
		g.Expect(<-done).To(Succeed())
		g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(ConsistOf("operator-edit", "rs1"))
	})
	t.Run("edits reverted by another writer before the apply are written again", func(t *testing.T) {
		g := NewWithT(t)
		e := newEnv(t, alteonsim.Options{}, alteonsim.Options{}, PairOptions{})
		other := fastClient(t, e.sim.A.URL())
		// Just before the commit (the role check that precedes the apply), another writer reverts.
		e.sim.A.AddFault(alteonsim.Fault{Method: "GET", Query: "prop=vrrpInfoHAState", Kind: alteonsim.FaultHook, Skip: 1, Times: 1,
			Hook: func() { _ = other.Action(context.Background(), "revert") }})
		res, err := e.pair.Do(ctx(t), program("rs1"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Attempts).To(Equal(2))
		g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{"rs1"}), "success means applied")
	})
}
