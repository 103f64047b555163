package radware

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/lbfed/lbfed/elb/radware/alteon"
)

// FrontendOptions configure a Frontend.
type FrontendOptions struct {
	// Pair is the Alteon unit or HA pair to program.
	Pair *alteon.Pair
	// Window is how long a batch waits for more changes after its latest one before it is
	// committed (default 20ms): a lone change waits Window. Changes arriving while a commit runs
	// form the next batch anyway.
	Window time.Duration
	// MaxWindow bounds that wait while changes keep coming (each within Window of the one
	// before; in a burst — changes came while the last commit ran, or within MaxWindow/4 after a
	// commit of several changes ended — within MaxWindow/4): a batch
	// is committed at the latest MaxWindow after its first change arrived (default 1s; at most
	// Window: no extension). A burst of calls that arrives over seconds — the pace of the API
	// writes that cause them — becomes a few large commits instead of one per commit cycle; each
	// of its changes is answered up to MaxWindow later, a lone change on an idle frontend no
	// later. Negative: no extension.
	MaxWindow time.Duration
	// MaxBatch caps the changes of one commit (0: no cap). 1 disables coalescing: every change
	// gets its own apply and save (the baseline the coalescing is measured against).
	MaxBatch int
	// CommitTimeout bounds one transaction, retries on a new master included (default 5m).
	CommitTimeout time.Duration
	// DrainPeriod is how long a removed backend stays in shutdown-connection (no new connections,
	// existing ones continue) before it is removed. 0 removes at once.
	DrainPeriod time.Duration
	// ProxyIPMode is the virtual services' ProxyIpMode: ingress(0, device default), egress(1),
	// address(2), nwclss(3), disable(4).
	ProxyIPMode int
	// HealthCheck is the health-check timing written on every real server, unless a load
	// balancer's attributes say otherwise; zero fields are the device's (DefaultHealthTiming).
	HealthCheck HealthTiming
	// SettleInterval is the period of the check that finishes owed saves and syncs when no change
	// comes along to do it (Run; default 30s).
	SettleInterval time.Duration
	// Metrics records commits and the pair's owed work (nil: none). Device calls and HA roles are
	// recorded when the clients and the pair report to it (Metrics.Request, Metrics.Role).
	Metrics *Metrics
	Logger  logr.Logger
}

// DefaultMaxWindow is FrontendOptions.MaxWindow's default.
const DefaultMaxWindow = time.Second

// Frontend programs L4 load balancers on an Alteon pair. Concurrent changes are coalesced: all
// changes queued within a short window (or while a commit runs) are written in one transaction
// and committed with one apply and one save; each caller is answered when its transaction has
// committed or failed. It is shared by the LBCF driver and the Service controller.
type Frontend struct {
	opts FrontendOptions
	log  logr.Logger

	mu      sync.Mutex
	pending []*change
	busy    bool
	// burstEnd is when the last commit of a burst (a batch of more than one change) ended; a
	// change that comes within MaxWindow/4 of it gathers as a burst.
	burstEnd time.Time

	drainMu sync.Mutex
	drains  map[string]time.Time // real server id -> when its drain started

	healthMu sync.Mutex
	health   map[string]HealthTiming // load balancer id -> timing its last ensure wrote

	// legacyBatchFailure restores the old behaviour in which any error of one change failed its
	// whole batch (the benchmark's baseline for batch isolation).
	legacyBatchFailure bool
}

// NewFrontend returns a Frontend.
func NewFrontend(opts FrontendOptions) (*Frontend, error) {
	if opts.Pair == nil {
		return nil, errors.New("radware frontend: no Alteon pair")
	}
	if opts.Window <= 0 {
		opts.Window = 20 * time.Millisecond
	}
	switch {
	case opts.MaxWindow == 0:
		opts.MaxWindow = DefaultMaxWindow
	case opts.MaxWindow < opts.Window:
		opts.MaxWindow = opts.Window
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = 5 * time.Minute
	}
	if opts.SettleInterval <= 0 {
		opts.SettleInterval = 30 * time.Second
	}
	opts.HealthCheck = over(opts.HealthCheck, DefaultHealthTiming)
	if err := CheckHealthTiming(opts.HealthCheck, "health-check interval", "health-check retries", "health-check restore"); err != nil {
		return nil, fmt.Errorf("radware frontend: %w", err)
	}
	opts.Metrics.watchPair(opts.Pair)
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	return &Frontend{opts: opts, log: opts.Logger, drains: map[string]time.Time{}, health: map[string]HealthTiming{}}, nil
}

// Run finishes owed work periodically until ctx ends: a save that failed or an apply that timed
// out leaves the change live but unsaved and unsynced, and without a later change nothing else
// would save and sync it before a reboot or failover loses it.
func (f *Frontend) Run(ctx context.Context) error {
	t := time.NewTicker(f.opts.SettleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, f.opts.CommitTimeout)
		if err := f.opts.Pair.Settle(sctx); err != nil && ctx.Err() == nil {
			f.log.Error(err, "finishing owed Alteon save/sync failed; trying again later", "owed", f.opts.Pair.Owed())
		}
		cancel()
	}
}

// Pair returns the Alteon pair.
func (f *Frontend) Pair() *alteon.Pair { return f.opts.Pair }

// RejectedError is a change the frontend refused without writing anything: the device holds
// conflicting objects it does not own, or the load balancer does not exist. Retrying helps only
// after someone resolves the conflict.
type RejectedError struct{ Msg string }

func (e *RejectedError) Error() string { return e.Msg }

func rejectf(format string, args ...any) error {
	return &RejectedError{Msg: fmt.Sprintf(format, args...)}
}

// IsRejected reports a RejectedError.
func IsRejected(err error) bool {
	var r *RejectedError
	return errors.As(err, &r)
}

// change is one caller's part of a transaction. fn must refuse (RejectedError) before writing
// anything, and must be idempotent: a transaction is run again on a new master.
type change struct {
	at   time.Time // queued
	what string
	fn   func(ctx context.Context, tx *alteon.Tx) error
	done chan struct{}
	err  error
}

// submit queues fn and waits until the transaction holding it committed or failed. A caller that
// gives up (ctx) still has its change committed; callers retry idempotently.
func (f *Frontend) submit(ctx context.Context, what string, fn func(ctx context.Context, tx *alteon.Tx) error) error {
	ch := &change{at: time.Now(), what: what, fn: fn, done: make(chan struct{})}
	f.mu.Lock()
	f.pending = append(f.pending, ch)
	if !f.busy {
		f.busy = true
		go f.drain()
	}
	f.mu.Unlock()
	select {
	case <-ch.done:
		return ch.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for the Alteon commit of %s: %w", what, ctx.Err())
	}
}

func (f *Frontend) drain() {
	// A burst whose callers all wait for its commit (a controller's per-driver call budget) has
	// nothing pending when the commit ends; its callers come back over the next tens of
	// milliseconds and are still the burst.
	f.mu.Lock()
	burst := !f.burstEnd.IsZero() && time.Since(f.burstEnd) < f.opts.MaxWindow/4
	f.mu.Unlock()
	var committed time.Time
	for {
		f.gather(burst, committed)
		f.mu.Lock()
		n := len(f.pending)
		if f.opts.MaxBatch > 0 && n > f.opts.MaxBatch {
			n = f.opts.MaxBatch
		}
		batch := f.pending[:n:n]
		f.pending = f.pending[n:]
		if len(batch) == 0 {
			f.busy = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		f.commit(batch)
		for _, ch := range batch {
			close(ch.done)
		}
		committed = time.Now()
		f.mu.Lock()
		burst = len(f.pending) > 0 // changes came while it committed
		if len(batch) > 1 {
			f.burstEnd = committed
		}
		f.mu.Unlock()
	}
}

// gather returns once the pending batch is complete: Window after its latest change, or MaxWindow
// after its first one while changes keep coming. In a burst (changes came while the last commit
// ran) a batch waits for MaxWindow/4 without a change before MaxWindow: the calls of a burst come
// at the pace of the API writes that cause them, in clumps with gaps longer than Window. The quiet
// time counts from the end of the commit before (committed) at the earliest: callers with only so
// many changes in flight (a controller's call budget) come back only once that commit answered
// them, and a batch that had filled the budget while it ran would otherwise go alone.
func (f *Frontend) gather(burst bool, committed time.Time) {
	quiet := f.opts.Window
	if burst {
		quiet = max(quiet, f.opts.MaxWindow/4)
	}
	for {
		f.mu.Lock()
		var until time.Time
		if n := len(f.pending); n > 0 {
			latest := f.pending[n-1].at
			if burst && committed.After(latest) {
				latest = committed
			}
			until = latest.Add(quiet)
			if limit := f.pending[0].at.Add(f.opts.MaxWindow); limit.Before(until) {
				until = limit
			}
		}
		f.mu.Unlock()
		wait := time.Until(until)
		if wait <= 0 {
			return
		}
		time.Sleep(wait)
	}
}

// preloadAt is the batch size from which whole tables are read up front instead of row by row.
const preloadAt = 16

// errIsolated aborts a transaction in which one change failed on its own account; the change is
// taken out of the batch and the rest runs again.
var errIsolated = errors.New("a change of the batch failed; running the batch again without it")

// ownFault reports an error that the device raised because of what one change wrote (a column it
// refuses, a missing row), as opposed to the unit or the link failing: such a change fails alone.
func ownFault(err error) bool {
	var ae *alteon.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.HTTPStatus {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusMethodNotAllowed, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	case http.StatusNotAcceptable:
		// With testErr a column was refused; without, the device was busy (an apply running).
		return ae.TestErr != ""
	}
	return ae.HTTPStatus >= 400 && ae.HTTPStatus < 500
}

// IsRefusedByDevice reports an error that is the change's own: the device refused what it wrote
// (a 406 on a write, an apply that failed over it). Retrying the same change cannot help; any other
// error (the device unreachable, no master, another writer's edits pending) may pass.
func IsRefusedByDevice(err error) bool {
	var ae *alteon.ApplyError
	return errors.As(err, &ae) || ownFault(err)
}

// commit runs a batch in one transaction. A change the device refuses (ownFault) fails alone with
// the device's message: when none of its writes was accepted the transaction goes on without it,
// otherwise (earlier writes of it are pending) the batch runs again without it. A failed apply (whose message does not
// say which change caused it) is bisected. Either way one bad change does not fail the others.
func (f *Frontend) commit(batch []*change) {
	// The commit serves the whole batch, so it does not depend on any caller's context.
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.CommitTimeout)
	defer cancel()
	for len(batch) > 0 {
		start := time.Now()
		var bad *change
		res, err := f.opts.Pair.Do(ctx, func(ctx context.Context, tx *alteon.Tx) error {
			bad = nil
			if len(batch) >= preloadAt {
				if err := tx.Preload(ctx, alteon.TableRealServer, alteon.TableRealServerPort); err != nil {
					return err
				}
			}
			for _, ch := range batch {
				ch.err = nil
				writes := tx.Writes()
				if err := ch.fn(ctx, tx); err != nil {
					if IsRejected(err) {
						ch.err = err
						continue
					}
					err = fmt.Errorf("%s: %w", ch.what, err)
					if !ownFault(err) || f.legacyBatchFailure {
						return err
					}
					ch.err = err
					if tx.Writes() == writes {
						// No write of it was accepted (a refused request changes nothing):
						// it left nothing pending, so the others go on.
						continue
					}
					bad = ch
					return errIsolated
				}
			}
			return nil
		})
		if bad != nil && errors.Is(err, errIsolated) {
			f.opts.Metrics.commit(len(batch), res, bad.err, time.Since(start))
			f.log.Info("the device refused a change; committing the rest of its batch without it", "change", bad.what, "changes", len(batch)-1, "err", bad.err.Error())
			batch = without(batch, bad)
			continue
		}
		var ae *alteon.ApplyError
		if errors.As(err, &ae) && len(batch) > 1 {
			f.log.Info("apply of a batch failed; committing its halves separately", "changes", len(batch), "err", err.Error())
			f.opts.Metrics.commit(len(batch), res, err, time.Since(start))
			half := len(batch) / 2
			f.commit(batch[:half])
			f.commit(batch[half:])
			return
		}
		f.opts.Metrics.commit(len(batch), res, err, time.Since(start))
		if err != nil {
			f.log.Error(err, "Alteon transaction failed", "changes", len(batch), "unit", res.Unit, "attempts", res.Attempts)
			for _, ch := range batch {
				if ch.err == nil {
					ch.err = err
				}
			}
			return
		}
		f.log.V(1).Info("Alteon transaction committed", "changes", len(batch), "unit", res.Unit, "writes", res.Writes,
			"committed", res.Committed, "attempts", res.Attempts, "duration", time.Since(start))
		return
	}
}

func without(batch []*change, bad *change) []*change {
	out := make([]*change, 0, len(batch)-1)
	for _, ch := range batch {
		if ch != bad {
			out = append(out, ch)
		}
	}
	return out
}

// --- drain bookkeeping ---

func (f *Frontend) drainStart(rs string, now time.Time) time.Time {
	f.drainMu.Lock()
	defer f.drainMu.Unlock()
	t, ok := f.drains[rs]
	if !ok {
		// Draining already (e.g. before a restart): start counting now, to be safe.
		f.drains[rs] = now
		t = now
	}
	return t
}

func (f *Frontend) setDrainStart(rs string, t time.Time) {
	f.drainMu.Lock()
	defer f.drainMu.Unlock()
	f.drains[rs] = t
}

func (f *Frontend) endDrain(rs string) {
	f.drainMu.Lock()
	defer f.drainMu.Unlock()
	delete(f.drains, rs)
}

func (f *Frontend) drainRemaining(rs string, now time.Time) (time.Duration, bool) {
	f.drainMu.Lock()
	defer f.drainMu.Unlock()
	t, ok := f.drains[rs]
	if !ok {
		return 0, false
	}
	return f.opts.DrainPeriod - now.Sub(t), true
}

// --- operations ---

// EnsureLoadBalancer creates or repairs the load balancer's group, virtual server and service,
// and sets the health-check timing of its real servers (healthOf).
func (f *Frontend) EnsureLoadBalancer(ctx context.Context, lb LoadBalancer) error {
	lb = lb.marked()
	h := f.healthOf(lb)
	err := f.submit(ctx, "ensure load balancer "+lb.String(), func(ctx context.Context, tx *alteon.Tx) error {
		if err := f.checkLB(ctx, tx, lb); err != nil {
			return err
		}
		if err := f.writeLB(ctx, tx, lb); err != nil {
			return err
		}
		return f.writeMembersHealth(ctx, tx, lb, h)
	})
	if err == nil {
		f.rememberHealth(lb, h)
	}
	return err
}

// DeleteLoadBalancer removes everything the load balancer created (service, virtual server,
// group, its real servers) and nothing else. Deleting a missing load balancer succeeds.
func (f *Frontend) DeleteLoadBalancer(ctx context.Context, lb LoadBalancer) error {
	lb = lb.marked()
	err := f.submit(ctx, "delete load balancer "+lb.String(), func(ctx context.Context, tx *alteon.Tx) error {
		return f.deleteLB(ctx, tx, lb.ID(), lb.Owner)
	})
	if err == nil {
		f.forgetHealth(lb.ID())
	}
	return err
}

// EnsureBackend adds or updates a backend of an existing load balancer (enabling it again if it
// was draining).
func (f *Frontend) EnsureBackend(ctx context.Context, lb LoadBalancer, b Backend) error {
	lb = lb.marked()
	return f.submit(ctx, "ensure backend "+b.String()+" of "+lb.String(), func(ctx context.Context, tx *alteon.Tx) error {
		if err := f.checkExists(ctx, tx, lb); err != nil {
			return err
		}
		if err := f.checkBackend(ctx, tx, lb, b); err != nil {
			return err
		}
		h, err := f.backendHealth(ctx, tx, lb, lb.realServerID(b))
		if err != nil {
			return err
		}
		return f.writeBackend(ctx, tx, lb, b, h)
	})
}

// DeregisterBackend drains a backend (shutdown-connection) and removes it once DrainPeriod has
// passed. It returns how long to wait before calling again while the drain runs, 0 when the
// backend is gone. Deregistering an unknown backend, or from a missing load balancer, succeeds.
func (f *Frontend) DeregisterBackend(ctx context.Context, lb LoadBalancer, b Backend) (time.Duration, error) {
	lb = lb.marked()
	rs := lb.realServerID(b)
	if left, ok := f.drainRemaining(rs, time.Now()); ok && left > 0 {
		return left, nil // still draining: nothing to tell the device
	}
	var wait time.Duration
	err := f.submit(ctx, "deregister backend "+b.String()+" of "+lb.String(), func(ctx context.Context, tx *alteon.Tx) error {
		var err error
		wait, err = f.retire(ctx, tx, lb, rs, time.Now())
		return err
	})
	return wait, err
}

// SyncResult tells a level-triggered caller when to come back.
type SyncResult struct {
	// Requeue is set while removed backends are draining: sync again after it.
	Requeue time.Duration
}

func (r *SyncResult) wait(d time.Duration) {
	if d > 0 && (r.Requeue == 0 || d < r.Requeue) {
		r.Requeue = d
	}
}

// Sync makes the load balancer serve exactly backends: it ensures the load balancer and every
// backend, and drains then removes any other member.
func (f *Frontend) Sync(ctx context.Context, lb LoadBalancer, backends []Backend) (SyncResult, error) {
	lb = lb.marked()
	var res SyncResult
	err := f.submit(ctx, "sync load balancer "+lb.String(), func(ctx context.Context, tx *alteon.Tx) error {
		res = SyncResult{}
		if err := f.checkDesired(ctx, tx, Desired{lb, backends}); err != nil {
			return err
		}
		return f.syncLB(ctx, tx, lb, backends, time.Now(), &res)
	})
	return res, err
}

// Desired is one load balancer and the exact set of its backends.
type Desired struct {
	LoadBalancer LoadBalancer
	Backends     []Backend
}

// SyncOwner makes the device hold exactly the desired load balancers among those marked with
// owner: each is synced as by Sync, and every other load balancer of owner is deleted. All of
// them must carry owner. Nothing is written when any of them is refused.
func (f *Frontend) SyncOwner(ctx context.Context, owner string, desired []Desired) (SyncResult, error) {
	owner = Mark(owner)
	desired = slices.Clone(desired)
	for i := range desired {
		desired[i].LoadBalancer = desired[i].LoadBalancer.marked()
	}
	var res SyncResult
	err := f.submit(ctx, "sync load balancers of "+owner, func(ctx context.Context, tx *alteon.Tx) error {
		res = SyncResult{}
		keep := map[string]bool{}
		for _, d := range desired {
			if d.LoadBalancer.Owner != owner {
				return rejectf("load balancer %s has owner %q, not %q", d.LoadBalancer, d.LoadBalancer.Owner, owner)
			}
			if keep[d.LoadBalancer.ID()] {
				return rejectf("load balancer %s is listed twice", d.LoadBalancer)
			}
			keep[d.LoadBalancer.ID()] = true
			if err := f.checkDesired(ctx, tx, d); err != nil {
				return err
			}
		}
		now := time.Now()
		for _, d := range desired {
			if err := f.syncLB(ctx, tx, d.LoadBalancer, d.Backends, now, &res); err != nil {
				return err
			}
		}
		return f.deleteOwned(ctx, tx, owner, keep)
	})
	return res, err
}

// DeleteOwner removes every load balancer marked with owner, and its real servers.
func (f *Frontend) DeleteOwner(ctx context.Context, owner string) error {
	owner = Mark(owner)
	return f.submit(ctx, "delete load balancers of "+owner, func(ctx context.Context, tx *alteon.Tx) error {
		return f.deleteOwned(ctx, tx, owner, nil)
	})
}

// Healthy asks the device whether changes can be committed: a unit answers as master (with a
// single unit: it answers).
func (f *Frontend) Healthy(ctx context.Context) error {
	return f.opts.Pair.Check(ctx)
}

// ServedBy finds the virtual server that serves the load balancer's VIP:port/protocol on the
// master, and its owner mark. It only reads.
func (f *Frontend) ServedBy(ctx context.Context, lb LoadBalancer) (vs, owner string, found bool, err error) {
	err = f.opts.Pair.Read(ctx, func(ctx context.Context, tx *alteon.Tx) error {
		all, err := tx.VirtualServers(ctx)
		if err != nil {
			return err
		}
		for _, v := range all {
			if v.IP != lb.VIP.String() {
				continue
			}
			svcs, err := tx.VirtualServices(ctx, v.Index)
			if err != nil {
				return err
			}
			for _, s := range svcs {
				if s.VirtPort == lb.Port && overlaps(s.Balance, lb.balance()) {
					vs, owner, found = v.Index, v.Name, true
					return nil
				}
			}
		}
		return nil
	})
	return vs, owner, found, err
}

// --- transaction steps (inside Pair.Do) ---
//
// check* steps only read and refuse (RejectedError); write* and the others write. A change runs
// every check before its first write, so that a refused change leaves nothing in the batch.

// checkExists refuses when the load balancer's group is missing or not ours.
func (f *Frontend) checkExists(ctx context.Context, tx *alteon.Tx, lb LoadBalancer) error {
	g, ok, err := tx.Group(ctx, lb.ID())
	if err != nil {
		return err
	}
	if !ok {
		return rejectf("load balancer %s does not exist on the Alteon (group %s missing)", lb, lb.ID())
	}
	if g.Name != lb.Owner {
		return rejectf("group %s belongs to %q, not %q", lb.ID(), g.Name, lb.Owner)
	}
	return nil
}

// checkLB refuses objects with the load balancer's ids but another owner, and another virtual
// server already serving VIP:port.
func (f *Frontend) checkLB(ctx context.Context, tx *alteon.Tx, lb LoadBalancer) error {
	id := lb.ID()
	if vs, ok, err := tx.VirtualServer(ctx, id); err != nil {
		return err
	} else if ok && vs.Name != lb.Owner {
		return rejectf("virtual server %s belongs to %q, not %q", id, vs.Name, lb.Owner)
	}
	if g, ok, err := tx.Group(ctx, id); err != nil {
		return err
	} else if ok && g.Name != lb.Owner {
		return rejectf("group %s belongs to %q, not %q", id, g.Name, lb.Owner)
	}
	all, err := tx.VirtualServers(ctx)
	if err != nil {
		return err
	}
	for _, vs := range all {
		if vs.Index == id || vs.IP != lb.VIP.String() {
			continue
		}
		svcs, err := tx.VirtualServices(ctx, vs.Index)
		if err != nil {
			return err
		}
		for _, s := range svcs {
			if s.VirtPort == lb.Port && overlaps(s.Balance, lb.balance()) {
				return rejectf("%s is already served by virtual server %s (service %d)", lb, vs.Index, s.Index)
			}
		}
	}
	return nil
}

// checkBackend refuses a real server id held by another owner.
func (f *Frontend) checkBackend(ctx context.Context, tx *alteon.Tx, lb LoadBalancer, b Backend) error {
	rs := lb.realServerID(b)
	cur, ok, err := tx.RealServer(ctx, rs)
	if err != nil {
		return err
	}
	if ok && cur.Name != lb.Owner {
		return rejectf("real server %s belongs to %q, not %q", rs, cur.Name, lb.Owner)
	}
	return nil
}

func (f *Frontend) checkDesired(ctx context.Context, tx *alteon.Tx, d Desired) error {
	if err := f.checkLB(ctx, tx, d.LoadBalancer); err != nil {
		return err
	}
	for _, b := range d.Backends {
		if err := f.checkBackend(ctx, tx, d.LoadBalancer, b); err != nil {
			return err
		}
	}
	return nil
}

func (f *Frontend) writeLB(ctx context.Context, tx *alteon.Tx, lb LoadBalancer) error {
	id := lb.ID()
	if _, err := tx.EnsureGroup(ctx, alteon.Group{Index: id, Metric: lb.metric(), HealthID: lb.HealthCheck, Name: lb.Owner}); err != nil {
		return err
	}
	if _, err := tx.EnsureVirtualServer(ctx, alteon.VirtualServer{Index: id, IP: lb.VIP.String(), Enabled: true, Name: lb.Owner}); err != nil {
		return err
	}
	_, err := tx.EnsureVirtualService(ctx, alteon.VirtualService{
		Server: id, Index: 1, VirtPort: lb.Port, RealPort: 0, Balance: lb.balance(),
		DBind: 2, PBind: 3, Group: id, PersistentTimeout: 10, ProxyIPMode: f.opts.ProxyIPMode,
	})
	return err
}

// syncLB writes the load balancer and its backends and retires other members (checks done).
func (f *Frontend) syncLB(ctx context.Context, tx *alteon.Tx, lb LoadBalancer, backends []Backend, now time.Time, res *SyncResult) error {
	if err := f.writeLB(ctx, tx, lb); err != nil {
		return err
	}
	want := map[string]bool{}
	h := f.healthOf(lb)
	for _, b := range backends {
		want[lb.realServerID(b)] = true
		if err := f.writeBackend(ctx, tx, lb, b, h); err != nil {
			return err
		}
	}
	members, err := tx.Members(ctx, lb.ID())
	if err != nil {
		return err
	}
	for m := range members {
		if want[m] {
			continue
		}
		wait, err := f.retire(ctx, tx, lb, m, now)
		if err != nil {
			return err
		}
		res.wait(wait)
	}
	// Real servers of this load balancer left outside the group (a transaction cut short) go too.
	return f.deleteStrayRealServers(ctx, tx, lb.ID(), lb.Owner, want)
}

func overlaps(a, b alteon.Balance) bool {
	udp := func(x alteon.Balance) bool { return x == alteon.BalanceUDP || x == alteon.BalanceTCPAndUDP }
	tcp := func(x alteon.Balance) bool { return x != alteon.BalanceUDP }
	return (udp(a) && udp(b)) || (tcp(a) && tcp(b))
}

// deleteLB removes the load balancer with id, if owner owns it: service, virtual server,
// memberships, group and its real servers.
func (f *Frontend) deleteLB(ctx context.Context, tx *alteon.Tx, id, owner string) error {
	vs, ok, err := tx.VirtualServer(ctx, id)
	if err != nil {
		return err
	}
	if ok && vs.Name == owner {
		// The service goes first: it references the group.
		if _, err := tx.DeleteVirtualService(ctx, id, 1); err != nil {
			return err
		}
		if _, err := tx.DeleteVirtualServer(ctx, id); err != nil {
			return err
		}
	}
	g, ok, err := tx.Group(ctx, id)
	if err != nil {
		return err
	}
	if ok && g.Name == owner {
		members, err := tx.Members(ctx, id)
		if err != nil {
			return err
		}
		for m := range members {
			if _, err := tx.RemoveMember(ctx, id, m); err != nil {
				return err
			}
		}
		if _, err := tx.DeleteGroup(ctx, id); err != nil {
			return err
		}
	}
	return f.deleteStrayRealServers(ctx, tx, id, owner, nil)
}

// deleteOwned deletes every load balancer marked with owner whose id is not in keep, and real
// servers of owner that belong to none of the kept ones.
func (f *Frontend) deleteOwned(ctx context.Context, tx *alteon.Tx, owner string, keep map[string]bool) error {
	vss, err := tx.VirtualServers(ctx)
	if err != nil {
		return err
	}
	groups, err := tx.Groups(ctx)
	if err != nil {
		return err
	}
	ids := map[string]bool{}
	for _, vs := range vss {
		if vs.Name == owner && !keep[vs.Index] {
			ids[vs.Index] = true
		}
	}
	for _, g := range groups {
		if g.Name == owner && !keep[g.Index] {
			ids[g.Index] = true
		}
	}
	for id := range ids {
		if err := f.deleteLB(ctx, tx, id, owner); err != nil {
			return err
		}
	}
	all, err := tx.RealServers(ctx)
	if err != nil {
		return err
	}
	for _, rs := range all {
		if rs.Name != owner || keptRealServer(rs.Index, keep) {
			continue
		}
		if _, err := tx.DeleteRealServer(ctx, rs.Index); err != nil {
			return err
		}
		f.endDrain(rs.Index)
	}
	return nil
}

func keptRealServer(rs string, keep map[string]bool) bool {
	for id := range keep {
		if strings.HasPrefix(rs, id+"_") {
			return true
		}
	}
	return false
}

// deleteStrayRealServers deletes real servers of the load balancer id (marked owner) that are no
// group member and not in keep.
func (f *Frontend) deleteStrayRealServers(ctx context.Context, tx *alteon.Tx, id, owner string, keep map[string]bool) error {
	all, err := tx.RealServers(ctx)
	if err != nil {
		return err
	}
	var members map[string]alteon.MemberState
	if _, ok, err := tx.Group(ctx, id); err != nil {
		return err
	} else if ok {
		if members, err = tx.Members(ctx, id); err != nil {
			return err
		}
	}
	for _, rs := range all {
		if !strings.HasPrefix(rs.Index, id+"_") || rs.Name != owner || keep[rs.Index] {
			continue
		}
		if _, member := members[rs.Index]; member {
			continue
		}
		if _, err := tx.DeleteRealServer(ctx, rs.Index); err != nil {
			return err
		}
		f.endDrain(rs.Index)
	}
	return nil
}

// writeBackend adds or updates one real server, with health-check timing h, and its membership
// (checks done).
func (f *Frontend) writeBackend(ctx context.Context, tx *alteon.Tx, lb LoadBalancer, b Backend, h HealthTiming) error {
	id, rs := lb.ID(), lb.realServerID(b)
	if _, err := tx.EnsureRealServer(ctx, alteon.RealServer{Index: rs, IP: b.IP.String(), Weight: b.Weight, State: alteon.RealServerEnabled, Name: lb.Owner, Health: h}); err != nil {
		return err
	}
	// The service uses "multiple real ports" (RealPort 0), so each real server carries its port.
	if _, err := tx.EnsureRealServerPort(ctx, rs, 1, b.Port); err != nil {
		return err
	}
	st, ok, err := tx.Member(ctx, id, rs)
	if err != nil {
		return err
	}
	switch {
	case !ok:
		_, err = tx.AddMember(ctx, id, rs)
	case st != alteon.MemberEnabled:
		_, err = tx.SetMemberState(ctx, id, rs, alteon.MemberEnabled)
	}
	if err == nil {
		f.endDrain(rs)
	}
	return err
}

// retire drains then removes one member (a real server id of lb). It returns the time left to
// drain, 0 once the real server is gone.
func (f *Frontend) retire(ctx context.Context, tx *alteon.Tx, lb LoadBalancer, rs string, now time.Time) (time.Duration, error) {
	id := lb.ID()
	g, ok, err := tx.Group(ctx, id)
	if err != nil {
		return 0, err
	}
	var st alteon.MemberState
	member := false
	if ok && g.Name == lb.Owner {
		if st, member, err = tx.Member(ctx, id, rs); err != nil {
			return 0, err
		}
	}
	if member && f.opts.DrainPeriod > 0 {
		if st != alteon.MemberShutdownConnection {
			if _, err := tx.SetMemberState(ctx, id, rs, alteon.MemberShutdownConnection); err != nil {
				return 0, err
			}
			f.setDrainStart(rs, now)
			return f.opts.DrainPeriod, nil
		}
		if left := f.opts.DrainPeriod - now.Sub(f.drainStart(rs, now)); left > 0 {
			return left, nil
		}
	}
	if member {
		if _, err := tx.RemoveMember(ctx, id, rs); err != nil {
			return 0, err
		}
	}
	if lb.owns(rs) {
		cur, ok, err := tx.RealServer(ctx, rs)
		if err != nil {
			return 0, err
		}
		if ok && cur.Name == lb.Owner {
			if _, err := tx.DeleteRealServer(ctx, rs); err != nil {
				return 0, err
			}
		}
	}
	f.endDrain(rs)
	return 0, nil
}
