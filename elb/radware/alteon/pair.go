package alteon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// SyncMode says how configuration reaches the backup unit after a commit.
type SyncMode int

const (
	// SyncExplicit runs POST /config?action=sync after every commit and waits for its result
	// (default for two units).
	SyncExplicit SyncMode = iota
	// SyncAuto relies on the pair's automatic sync.
	SyncAuto
	// SyncNone never syncs (single unit).
	SyncNone
)

// PairOptions tunes commits.
type PairOptions struct {
	// Sync is how the backup gets the configuration (ignored with one unit).
	Sync SyncMode
	// Attempts is how often a transaction is run when the master changes or cannot be reached
	// (default 3).
	Attempts int
	// PollInterval is the period of apply/save/sync status polling (default 200ms, as goalteon).
	// Each wait polls first after PollInterval/8 and doubles up to it: a quick commit is seen
	// sooner, a slow one costs three more reads.
	PollInterval time.Duration
	// ApplyTimeout, SaveTimeout and SyncTimeout bound each wait (defaults 3m, 30s, 60s).
	ApplyTimeout, SaveTimeout, SyncTimeout time.Duration
	// ForeignWait is how long a transaction waits for configuration pending on the master that is
	// not its own (another writer's) to be applied or reverted by its writer before it fails with
	// ErrForeignPending (default 20s).
	ForeignWait time.Duration
	// RevertForeign discards another writer's pending configuration instead (the old behaviour):
	// only for a pair that nothing but this process ever edits, e.g. to recover from a crash of a
	// previous process in the middle of a transaction.
	RevertForeign bool
	// Logger receives commit logs.
	Logger logr.Logger
	// OnRole, when set, is called with each unit's HA role as read ("" when it could not be read),
	// e.g. for metrics.
	OnRole func(unit, role string)
}

func (o *PairOptions) defaults() {
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 200 * time.Millisecond
	}
	if o.ApplyTimeout <= 0 {
		o.ApplyTimeout = 3 * time.Minute
	}
	if o.SaveTimeout <= 0 {
		o.SaveTimeout = 30 * time.Second
	}
	if o.SyncTimeout <= 0 {
		o.SyncTimeout = time.Minute
	}
	if o.ForeignWait <= 0 {
		o.ForeignWait = 20 * time.Second
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
}

// Pair drives one Alteon unit or an HA pair. Every configuration change goes through Do, which
// serialises transactions (the pending configuration is global to a unit), writes to the master
// only, and commits with apply + save (+ sync).
type Pair struct {
	units []*Client
	opts  PairOptions
	log   logr.Logger
	mu    sync.Mutex

	stats struct {
		commits, applies, saves, syncs, syncFailures, failovers, retries atomic.Int64
	}
	lastMaster atomic.Pointer[Client]
	// saveOwed is set from the start of an apply until a save is confirmed: the running
	// configuration may then differ from flash (a failed save, an apply that timed out but may
	// still finish). The device's agSavePending says the same and is read by every transaction;
	// the flag covers the time before the device admits it (an apply still running).
	saveOwed atomic.Bool
	// syncOwed is set while the backup may lack committed configuration (from the start of an
	// apply until a sync succeeded), so the next transaction syncs even when it changes nothing.
	// A new Pair owes one sync: it cannot know whether a previous process finished its last one.
	syncOwed atomic.Bool
	// ownPending is the unit on which this Pair's edits may be pending (a transaction wrote and
	// neither committed nor reverted them); pending configuration on any other unit, or when nil,
	// belongs to another writer.
	ownPending atomic.Pointer[Client]
}

// Owed is commit work a Pair still has to finish: a save (the running configuration may not be in
// flash, so a reboot would lose it) and a sync (the backup may lack it, so a failover would roll
// traffic back). Every transaction, and Settle, finishes it first.
type Owed struct{ Save, Sync bool }

// Owed reports the work still owed.
func (p *Pair) Owed() Owed { return Owed{Save: p.saveOwed.Load(), Sync: p.syncOwed.Load()} }

// SyncOwed reports whether a sync to the backup is owed.
func (p *Pair) SyncOwed() bool { return p.syncOwed.Load() }

// NewPair returns a Pair over one or two units.
func NewPair(opts PairOptions, units ...*Client) (*Pair, error) {
	if len(units) == 0 || len(units) > 2 {
		return nil, fmt.Errorf("an Alteon pair has one or two units, got %d", len(units))
	}
	opts.defaults()
	if len(units) == 1 {
		opts.Sync = SyncNone
	}
	p := &Pair{units: units, opts: opts, log: opts.Logger}
	p.syncOwed.Store(opts.Sync == SyncExplicit)
	return p, nil
}

// Stats are counters of a Pair's activity.
type Stats struct {
	Commits, Applies, Saves, Syncs, SyncFailures, Failovers, Retries int64
}

// Stats returns the counters.
func (p *Pair) Stats() Stats {
	s := &p.stats
	return Stats{Commits: s.commits.Load(), Applies: s.applies.Load(), Saves: s.saves.Load(), Syncs: s.syncs.Load(),
		SyncFailures: s.syncFailures.Load(), Failovers: s.failovers.Load(), Retries: s.retries.Load()}
}

// Errors returned by Do.
var (
	// ErrNoMaster: no unit reports the master role.
	ErrNoMaster = errors.New("no Alteon unit reports the master role")
	// ErrSplitBrain: both units report master; writing to either could be lost.
	ErrSplitBrain = errors.New("both Alteon units report the master role")
	// ErrForeignPending: the master holds unapplied configuration that is not this Pair's (an
	// operator's WebUI or CLI edit, another process driving the pair) and its writer did not apply
	// or revert it within ForeignWait. Applying would commit it and reverting would discard it,
	// so the transaction is refused.
	ErrForeignPending = errors.New("the Alteon master has unapplied configuration changes from another writer")
	// errEditsVanished: this transaction's edits were no longer pending when it was about to apply
	// them (another writer reverted or applied them); the transaction runs again.
	errEditsVanished = errors.New("the transaction's pending edits vanished before the apply (another writer reverted or applied them)")
	// errRoleChanged: the unit being written stopped being master.
	errRoleChanged = errors.New("the Alteon master changed during the transaction")
)

// ApplyError is an apply that ended in failed(5); Messages come from AgApplyTable.
type ApplyError struct{ Messages []string }

func (e *ApplyError) Error() string {
	return "apply failed: " + strings.Join(e.Messages, "; ")
}

// SaveError is a save that ended in failed(5); Messages come from AgSaveTable.
type SaveError struct{ Messages []string }

func (e *SaveError) Error() string { return "save failed: " + strings.Join(e.Messages, "; ") }

// Result describes a finished transaction.
type Result struct {
	// Unit is the master the transaction was committed on.
	Unit string
	// Committed is false when the transaction changed nothing (no apply was needed).
	Committed bool
	// Writes is the number of write requests of the successful attempt.
	Writes int
	// Attempts is how many times the transaction function ran.
	Attempts int
	// SyncErr is set when the configuration could not be synced to the backup; the commit itself
	// succeeded (the next commit syncs again).
	SyncErr error
}

// Check asks the device whether configuration can be written now: with two units, that exactly
// one reports the master role (Master); with one, that it answers at all. Health checks use it:
// Master alone does not contact a single unit.
func (p *Pair) Check(ctx context.Context) error {
	if len(p.units) == 1 {
		u := p.units[0]
		role := "standalone"
		_, err := u.Scalars(ctx, "agApplyPending")
		if err != nil {
			role = ""
		}
		if p.opts.OnRole != nil {
			p.opts.OnRole(u.Name(), role)
		}
		if err != nil {
			return fmt.Errorf("alteon unit %s: %w", u.Name(), err)
		}
		return nil
	}
	_, err := p.Master(ctx)
	return err
}

// Master finds the unit that reports the master role. With one unit, that unit, without asking
// (its first request in a transaction fails if it is down; Check asks).
func (p *Pair) Master(ctx context.Context) (*Client, error) {
	if len(p.units) == 1 {
		return p.units[0], nil
	}
	type answer struct {
		role string
		err  error
	}
	answers := make([]answer, len(p.units))
	var wg sync.WaitGroup
	for i, u := range p.units {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := u.Role(ctx)
			answers[i] = answer{r, err}
		}()
	}
	wg.Wait()
	var masters []*Client
	var errs []error
	for i, a := range answers {
		if p.opts.OnRole != nil {
			p.opts.OnRole(p.units[i].Name(), a.role)
		}
		if a.err != nil {
			errs = append(errs, a.err)
			continue
		}
		if a.role == "master" {
			masters = append(masters, p.units[i])
		}
	}
	switch len(masters) {
	case 1:
		m := masters[0]
		if prev := p.lastMaster.Swap(m); prev != nil && prev != m {
			p.stats.failovers.Add(1)
			p.log.Info("Alteon master changed", "from", prev.Name(), "to", m.Name())
		}
		return m, nil
	case 2:
		return nil, ErrSplitBrain
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrNoMaster, errors.Join(errs...))
	}
	return nil, ErrNoMaster
}

// Do runs fn in a transaction on the master and commits it (apply, then save, then sync). fn must
// be idempotent: it is run again from scratch on the new master when the master changes before the
// commit is confirmed, and it must bring the device to the desired state by reading first (Tx
// helps). Leftover pending edits on the master are reverted before fn runs, so that an apply
// commits only this transaction. An error returned by fn aborts the transaction (pending edits are
// reverted) and is returned as is.
func (p *Pair) Do(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) (Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var res Result
	var last error
	for attempt := 1; attempt <= p.opts.Attempts; attempt++ {
		res.Attempts = attempt
		if attempt > 1 {
			p.stats.retries.Add(1)
			p.log.Info("retrying Alteon transaction", "attempt", attempt, "err", last.Error())
			if err := sleep(ctx, p.opts.PollInterval); err != nil {
				return res, fmt.Errorf("%w (last error: %w)", err, last)
			}
		}
		var retry bool
		var err error
		res, retry, err = p.attempt(ctx, fn)
		res.Attempts = attempt
		if err == nil {
			return res, nil
		}
		last = err
		if !retry || ctx.Err() != nil {
			return res, err
		}
	}
	return res, last
}

// Read runs fn on the master with a transaction that only reads (writes fail), outside the
// transaction lock: it sees the pending configuration as it is, and commits nothing.
func (p *Pair) Read(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) error {
	m, err := p.Master(ctx)
	if err != nil {
		return err
	}
	tx := newTx(m)
	tx.readOnly = true
	return fn(ctx, tx)
}

// attempt runs one try of a transaction; retry says whether a new try (after rediscovering the
// master) may succeed.
func (p *Pair) attempt(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) (Result, bool, error) {
	m, err := p.Master(ctx)
	if err != nil {
		return Result{}, !IsUnauthorized(err), err
	}
	res := Result{Unit: m.Name()}
	st, err := p.pendingState(ctx, m)
	if err != nil {
		return res, true, err
	}
	if st.apply {
		if p.ownPending.Load() == m || p.opts.RevertForeign {
			p.log.Info("reverting pending configuration left before the transaction", "unit", m.Name(), "own", p.ownPending.Load() == m)
			if err := m.Action(ctx, "revert"); err != nil {
				return res, true, fmt.Errorf("revert leftovers on %s: %w", m.Name(), err)
			}
		} else if st, err = p.waitForeign(ctx, m); err != nil {
			return res, !errors.Is(err, ErrForeignPending) && p.masterLost(ctx, m, err), err
		}
	}
	tx := newTx(m)
	p.ownPending.Store(m)
	if err := fn(ctx, tx); err != nil {
		p.revert(m)
		// A unit that stopped being master (403 from a strict backup, unreachable, role flip)
		// gets the transaction again on the new master.
		return res, p.masterLost(ctx, m, err), err
	}
	res.Writes = tx.Writes()
	if tx.Writes() == 0 {
		p.ownPending.CompareAndSwap(m, nil)
		// Nothing to apply, but an earlier transaction may have left its save or sync undone.
		if st.save || p.saveOwed.Load() {
			p.log.Info("finishing an owed save", "unit", m.Name(), "devicePending", st.save)
			if err := p.save(ctx, m); err != nil {
				return res, p.masterLost(ctx, m, err), fmt.Errorf("owed save: %w", err)
			}
		}
		if p.opts.Sync == SyncExplicit && p.syncOwed.Load() {
			res.SyncErr = p.syncNow(ctx, m)
		}
		return res, false, nil
	}
	if err := p.confirmMaster(ctx, m); err != nil {
		p.revert(m)
		return res, true, err
	}
	if st, err := p.pendingState(ctx, m); err != nil {
		return res, p.masterLost(ctx, m, err), err
	} else if !st.apply {
		p.ownPending.CompareAndSwap(m, nil)
		p.log.Info("pending edits vanished before the apply; running the transaction again", "unit", m.Name())
		return res, true, fmt.Errorf("%s: %w", m.Name(), errEditsVanished)
	}
	if err := p.commit(ctx, m); err != nil {
		var ae *ApplyError
		if errors.As(err, &ae) {
			p.revert(m)
			return res, false, err
		}
		return res, p.masterLost(ctx, m, err), err
	}
	// The master could have changed while applying or saving: then the new master never saw the
	// writes, so the transaction runs again there.
	if err := p.confirmMaster(ctx, m); err != nil {
		return res, true, err
	}
	res.Committed = true
	p.stats.commits.Add(1)
	if p.opts.Sync == SyncExplicit {
		res.SyncErr = p.syncNow(ctx, m)
	}
	return res, false, nil
}

// Settle finishes owed work (save, sync) without changing anything: the periodic check that
// repairs what a failed transaction left undone even when no change comes along.
func (p *Pair) Settle(ctx context.Context) error {
	res, err := p.Do(ctx, func(context.Context, *Tx) error { return nil })
	if err == nil {
		err = res.SyncErr
	}
	return err
}

func (p *Pair) syncNow(ctx context.Context, m *Client) error {
	err := p.sync(ctx, m)
	p.syncOwed.Store(err != nil)
	if err != nil {
		p.stats.syncFailures.Add(1)
		p.log.Error(err, "config sync to the backup failed; the next transaction syncs again", "unit", m.Name())
	}
	return err
}

// masterLost decides after an error whether the transaction should move to another unit: the unit
// is unreachable, refuses writes as a strict backup (403), fails persistently, or is no longer
// master. Errors of the transaction function itself and validation errors are final.
func (p *Pair) masterLost(ctx context.Context, m *Client, err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || IsUnauthorized(err) {
		// Both units share the administrator password (sync requires it): a rejected password
		// is final, and trying the other unit would only count towards a lockout.
		return false
	}
	var ue *url.Error
	var ae *APIError
	switch {
	case errors.Is(err, errRoleChanged), errors.As(err, &ue):
		return true
	case errors.As(err, &ae):
		if IsValidation(err) {
			return false
		}
		if ae.HTTPStatus == http.StatusForbidden || ae.HTTPStatus == http.StatusUnauthorized || ae.HTTPStatus >= 500 {
			return true
		}
		return p.confirmMaster(ctx, m) != nil
	}
	return false
}

func (p *Pair) confirmMaster(ctx context.Context, m *Client) error {
	if len(p.units) == 1 {
		return nil
	}
	role, err := m.Role(ctx)
	if p.opts.OnRole != nil {
		p.opts.OnRole(m.Name(), role)
	}
	if err != nil {
		return fmt.Errorf("confirm master %s: %w", m.Name(), err)
	}
	if role != "master" {
		return fmt.Errorf("%w: %s is now %q", errRoleChanged, m.Name(), role)
	}
	return nil
}

// revert drops this transaction's pending edits (best effort: a unit that is gone cannot be
// reverted, and the next transaction reverts leftovers anyway).
func (p *Pair) revert(m *Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Action(ctx, "revert"); err != nil {
		p.log.Error(err, "revert after a failed transaction", "unit", m.Name())
		return
	}
	p.ownPending.CompareAndSwap(m, nil)
}

// waitForeign waits up to ForeignWait for another writer's pending configuration on m to be
// applied or reverted by that writer. It never discards it: when it stays, the transaction fails
// with ErrForeignPending, naming what is pending.
func (p *Pair) waitForeign(ctx context.Context, m *Client) (pending, error) {
	p.log.Info("another writer's configuration is pending on the master; waiting for it to be applied or reverted", "unit", m.Name(), "wait", p.opts.ForeignWait)
	deadline := time.Now().Add(p.opts.ForeignWait)
	interval := p.opts.PollInterval
	for {
		if err := sleep(ctx, interval); err != nil {
			return pending{}, err
		}
		st, err := p.pendingState(ctx, m)
		if err != nil {
			return st, err
		}
		if !st.apply {
			return st, nil
		}
		if time.Now().After(deadline) {
			diff, derr := m.Diff(ctx)
			if derr != nil {
				diff = fmt.Sprintf("(getdiff failed: %v)", derr)
			}
			if len(diff) > 2000 {
				diff = diff[:2000] + " …"
			}
			return st, fmt.Errorf("%w (unit %s, still pending after %s; lbfed neither applies nor discards it: apply or revert it on the device, and let one writer drive the pair): %s",
				ErrForeignPending, m.Name(), p.opts.ForeignWait, strings.TrimSpace(diff))
		}
		interval = min(2*interval, time.Second)
	}
}

// pending is what a unit reports as not yet applied or not yet saved.
type pending struct{ apply, save bool }

func (p *Pair) pendingState(ctx context.Context, m *Client) (pending, error) {
	r, err := m.Scalars(ctx, "agApplyPending", "agSavePending")
	if err != nil {
		return pending{}, fmt.Errorf("read agApplyPending,agSavePending on %s: %w", m.Name(), err)
	}
	return pending{apply: r.Int("agApplyPending") == 2, save: r.Int("agSavePending") == 1}, nil
}

// commit applies and saves on m and verifies both. From the apply on, a save and a sync are owed
// until they are confirmed; an apply that failed changed nothing and owes nothing new.
func (p *Pair) commit(ctx context.Context, m *Client) error {
	prevSave, prevSync := p.saveOwed.Swap(true), p.syncOwed.Load()
	if p.opts.Sync == SyncExplicit {
		p.syncOwed.Store(true)
	}
	if err := p.apply(ctx, m); err != nil {
		var ae *ApplyError
		if errors.As(err, &ae) {
			p.saveOwed.Store(prevSave)
			p.syncOwed.Store(prevSync)
		}
		return err
	}
	return p.save(ctx, m)
}

func (p *Pair) apply(ctx context.Context, m *Client) error {
	// A device can report complete(4) before the running configuration changed; agApplyPending
	// tells, and a second apply settles it.
	for round := 1; round <= 2; round++ {
		p.stats.applies.Add(1)
		if err := m.Action(ctx, "apply"); err != nil {
			return fmt.Errorf("apply on %s: %w", m.Name(), err)
		}
		state, err := p.poll(ctx, m, "agApplyConfig", p.opts.ApplyTimeout, func(v int) bool { return v != 3 })
		if err != nil {
			return fmt.Errorf("apply on %s: %w", m.Name(), err)
		}
		if state == 5 {
			msgs := p.errorTable(ctx, m, TableApplyErrors)
			return &ApplyError{Messages: msgs}
		}
		// complete(4); idle(2) when something else reset the state. Either way the pending flag is
		// the truth.
		settled, err := p.poll(ctx, m, "agApplyPending", p.opts.PollInterval*10, func(v int) bool { return v == 3 })
		if err == nil && settled == 3 {
			p.ownPending.CompareAndSwap(m, nil)
			return nil
		}
		if err != nil && !errors.Is(err, errPollTimeout) {
			return fmt.Errorf("verify apply on %s: %w", m.Name(), err)
		}
		p.log.Info("apply reported done but configuration still pending; applying again", "unit", m.Name(), "state", state)
	}
	return fmt.Errorf("apply on %s: configuration still pending after two applies", m.Name())
}

func (p *Pair) save(ctx context.Context, m *Client) error {
	p.stats.saves.Add(1)
	if err := m.Action(ctx, "save"); err != nil {
		return fmt.Errorf("save on %s: %w", m.Name(), err)
	}
	state, err := p.poll(ctx, m, "agSaveConfig", p.opts.SaveTimeout, func(v int) bool { return v != 3 })
	if err != nil {
		return fmt.Errorf("save on %s: %w", m.Name(), err)
	}
	if state == 5 {
		return &SaveError{Messages: p.errorTable(ctx, m, TableSaveErrors)}
	}
	r, err := m.Scalars(ctx, "agSavePending")
	if err != nil {
		return fmt.Errorf("verify save on %s: %w", m.Name(), err)
	}
	if r.Int("agSavePending") == 1 {
		return &SaveError{Messages: []string{"agSavePending still saveNeeded after save"}}
	}
	p.saveOwed.Store(false)
	return nil
}

func (p *Pair) sync(ctx context.Context, m *Client) error {
	p.stats.syncs.Add(1)
	if err := m.Action(ctx, "sync"); err != nil {
		return fmt.Errorf("sync from %s: %w", m.Name(), err)
	}
	state, err := p.poll(ctx, m, "agSyncStatus", p.opts.SyncTimeout, func(v int) bool { return v == 2 || v == 3 })
	if err != nil {
		return fmt.Errorf("sync from %s: %w", m.Name(), err)
	}
	if state == 3 {
		r, _ := m.Scalars(ctx, "agLastSyncErrorReason")
		return fmt.Errorf("sync from %s failed: %s", m.Name(), r.Str("agLastSyncErrorReason"))
	}
	return nil
}

var errPollTimeout = errors.New("timed out waiting for the device")

// poll reads a scalar until done accepts it.
func (p *Pair) poll(ctx context.Context, m *Client, name string, timeout time.Duration, done func(int) bool) (int, error) {
	deadline := time.Now().Add(timeout)
	interval := p.opts.PollInterval / 8
	for {
		r, err := m.Scalars(ctx, name)
		if err != nil {
			return 0, err
		}
		v := r.Int(name)
		if done(v) {
			return v, nil
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("%w: %s is %d after %s", errPollTimeout, name, v, timeout)
		}
		if err := sleep(ctx, interval); err != nil {
			return v, err
		}
		interval = min(2*interval, p.opts.PollInterval)
	}
}

func (p *Pair) errorTable(ctx context.Context, m *Client, table string) []string {
	rows, err := m.List(ctx, table)
	if err != nil {
		return []string{fmt.Sprintf("(could not read %s: %v)", table, err)}
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Str("StringVal"))
	}
	if len(out) == 0 {
		out = []string{"(no reason given)"}
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
