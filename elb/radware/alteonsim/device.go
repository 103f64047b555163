package alteonsim

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Role is the HA state a unit reports in vrrpInfoHAState / haSwitchInfoState.
type Role string

// HA roles.
const (
	RoleMaster Role = "master"
	RoleBackup Role = "backup"
	RoleInit   Role = "init"
)

// BackupWriteMode is what a unit in the backup role does with configuration writes. Real devices
// accept them (the pending configuration is per unit), which is why clients must find the master
// themselves; the other modes model stricter set-ups.
type BackupWriteMode int

const (
	// BackupAccept applies writes to the backup's own pending configuration (device default).
	BackupAccept BackupWriteMode = iota
	// BackupReject answers writes and actions with 403 and an error envelope.
	BackupReject
	// BackupIgnore answers {"status":"ok"} and discards the write.
	BackupIgnore
)

// Scalar values (ALTEON-CHEETAH-SWITCH MIB).
const (
	applyApply      = 1
	applyIdle       = 2
	applyInProgress = 3
	applyComplete   = 4
	applyFailed     = 5

	saveSave       = 1
	saveIdle       = 2
	saveInProgress = 3
	saveComplete   = 4
	saveFailed     = 5
	saveNoBackup   = 6

	applyNeeded   = 2
	noApplyNeeded = 3
	saveNeeded    = 1
	noSaveNeeded  = 2
	syncNeeded    = 1
	syncNotNeeded = 2

	syncIdle       = 0
	syncInProgress = 1
	syncSuccess    = 2
	syncFailure    = 3

	haModeSwitch = 3
)

// Options configures one simulated unit. Zero values get the defaults documented per field.
type Options struct {
	// Name identifies the unit in recordings and logs (default "alteon").
	Name string
	// User and Password are the HTTP Basic credentials (default admin/admin). Sync between peers
	// requires identical passwords, as on the device.
	User, Password string
	// MgmtIP is the management address peers use in SlbNewCfgPeerTable (default 192.0.2.1).
	MgmtIP string
	// ApplyDuration, SaveDuration and SyncDuration are how long each asynchronous operation stays
	// in progress (defaults 30ms, 10ms, 30ms).
	ApplyDuration, SaveDuration, SyncDuration time.Duration
	// DefaultPageSize is the number of rows a list returns without count= (default 100).
	DefaultPageSize int
	// BackupWrites is what the unit does with writes while it is backup.
	BackupWrites BackupWriteMode
	// AutoSync pushes the configuration to peers AutoSyncDelay after every successful apply.
	AutoSync      bool
	AutoSyncDelay time.Duration
	// DataPlane enables L4 forwarding from applied virtual services (master only).
	DataPlane bool
	// HealthCheckTimeScale is how many seconds one second of a real server's PingInterval lasts in
	// the simulation: 0 or 1 is the device's own timing (default PingInterval 2 s, FailRetry 4);
	// 0.01 makes the checks a hundred times faster (tests). The per-real-server columns
	// PingInterval, FailRetry and SuccRetry stay the truth; only the clock is scaled.
	HealthCheckTimeScale float64
	// HealthCheckManual runs no periodic health checks: a check round runs only when CheckHealth
	// is called, and servers never checked count as running.
	HealthCheckManual bool
	// RecordLimit caps the request recording (default 100000; older entries are dropped).
	RecordLimit int
	// TLS, when set, makes Start serve HTTPS (as the device does) instead of HTTP.
	TLS *tls.Config
	// Logger receives operational logs (default: discard).
	Logger logr.Logger
}

func (o *Options) defaults() {
	if o.Name == "" {
		o.Name = "alteon"
	}
	if o.User == "" {
		o.User = "admin"
	}
	if o.Password == "" {
		o.Password = "admin"
	}
	if o.MgmtIP == "" {
		o.MgmtIP = "192.0.2.1"
	}
	if o.ApplyDuration == 0 {
		o.ApplyDuration = 30 * time.Millisecond
	}
	if o.SaveDuration == 0 {
		o.SaveDuration = 10 * time.Millisecond
	}
	if o.SyncDuration == 0 {
		o.SyncDuration = 30 * time.Millisecond
	}
	if o.DefaultPageSize == 0 {
		o.DefaultPageSize = 100
	}
	if o.RecordLimit == 0 {
		o.RecordLimit = 100000
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
}

// ApplyFault changes the outcome of the next apply on a unit (consumed in order, one per apply).
type ApplyFault struct {
	// Fail makes the apply end in failed(5) with this text in AgApplyTable.
	Fail string
	// Hang keeps the apply in progress until ReleaseApply is called.
	Hang bool
	// EarlyComplete reports complete(4) this long before the running configuration changes.
	EarlyComplete time.Duration
	// During runs half-way through the apply (e.g. to fail over mid-apply).
	During func()
}

var knownHealthIDs = map[string]bool{"": true, "none": true, "tcp": true, "udp": true, "icmp": true, "http": true, "https": true, "arp": true, "dns": true}

// Device is one simulated Alteon unit. It implements http.Handler for the /config REST API.
type Device struct {
	opts Options
	log  logr.Logger

	mu            sync.Mutex
	pending       *config // new_config
	running       *config // current_config
	flash         *config
	role          Role
	haMode        int64
	applyState    int64
	saveState     int64
	applyErrs     []string
	saveErrs      []string
	syncStatus    int64
	syncErr       string
	lastSync      []syncInfo
	runningGen    uint64 // bumped whenever the running configuration changes
	syncedGen     uint64 // runningGen at the last successful sync (or received sync)
	sessions      map[string]time.Time
	sessionsSwept time.Time // when expired sessions were last dropped
	applyFaults   []ApplyFault
	saveFaults    []string
	syncFaults    []string
	release       chan struct{}
	pair          *Pair
	boots         uint64 // bumped by Reboot: asynchronous operations of an earlier boot end unfinished

	faults     faultSet
	middleware atomic.Pointer[Middleware]
	rec        recorder

	applies, saves, syncs atomic.Int64

	dp     *dataPlane
	server *http.Server
	url    string
	closed chan struct{}
}

// New creates a standalone unit in the master role with an empty configuration.
func New(opts Options) *Device {
	opts.defaults()
	d := &Device{
		opts:       opts,
		log:        opts.Logger.WithValues("device", opts.Name),
		pending:    newConfig(),
		running:    newConfig(),
		flash:      newConfig(),
		role:       RoleMaster,
		haMode:     haModeSwitch,
		applyState: applyIdle,
		saveState:  saveIdle,
		sessions:   map[string]time.Time{},
		release:    make(chan struct{}),
		closed:     make(chan struct{}),
	}
	d.rec.limit = opts.RecordLimit
	d.dp = newDataPlane(d.log, opts.HealthCheckTimeScale, opts.HealthCheckManual)
	return d
}

// Name returns the unit's name.
func (d *Device) Name() string { return d.opts.Name }

// MgmtIP returns the management address peers use to reach this unit.
func (d *Device) MgmtIP() string { return d.opts.MgmtIP }

// URL returns the base URL (scheme://host:port) once Start has been called.
func (d *Device) URL() string { return d.url }

// Start serves the REST API on addr (e.g. "127.0.0.1:0") and returns the base URL; HTTPS when
// Options.TLS is set.
func (d *Device) Start(addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen %s: %w", addr, err)
	}
	d.server = &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second}
	d.url = "http://" + l.Addr().String()
	if d.opts.TLS != nil {
		l = tls.NewListener(l, d.opts.TLS)
		d.url = "https://" + l.Addr().String()
	}
	go func() {
		if err := d.server.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error(err, "REST server stopped")
		}
	}()
	return d.url, nil
}

// Close stops the REST server, the data plane and pending asynchronous work.
func (d *Device) Close() error {
	select {
	case <-d.closed:
		return nil
	default:
		close(d.closed)
	}
	d.dp.close()
	if d.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return d.server.Shutdown(ctx)
	}
	return nil
}

// Role returns the unit's HA role.
func (d *Device) Role() Role {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.role
}

// SetRole forces the unit's HA role (out-of-band knob; use Pair.Failover for a real failover).
func (d *Device) SetRole(r Role) {
	d.mu.Lock()
	d.role = r
	d.mu.Unlock()
	d.refreshDataPlane()
	d.log.Info("role changed", "role", r)
}

// SetBackupWrites changes the backup write behaviour at run time.
func (d *Device) SetBackupWrites(m BackupWriteMode) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.opts.BackupWrites = m
}

// InjectApply queues faults for the next applies, one per apply.
func (d *Device) InjectApply(f ...ApplyFault) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.applyFaults = append(d.applyFaults, f...)
}

// InjectSaveFailure makes the next save fail with text in AgSaveTable.
func (d *Device) InjectSaveFailure(text string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.saveFaults = append(d.saveFaults, text)
}

// InjectSyncFailure makes the next sync fail with reason in agLastSyncErrorReason.
func (d *Device) InjectSyncFailure(reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.syncFaults = append(d.syncFaults, reason)
}

// Reboot restarts the unit: what was not saved is lost. The running and pending configurations
// are loaded from flash, asynchronous operations and sessions end, and the HA role is kept (a
// failover is a separate knob).
func (d *Device) Reboot() {
	d.mu.Lock()
	d.boots++
	d.pending = d.flash.clone()
	d.running = d.flash.clone()
	d.runningGen++
	d.applyState, d.saveState, d.syncStatus = applyIdle, saveIdle, syncIdle
	d.applyErrs, d.saveErrs, d.syncErr = nil, nil, ""
	d.sessions = map[string]time.Time{}
	d.mu.Unlock()
	d.refreshDataPlane()
	d.log.Info("rebooted")
}

// ReleaseApply lets every hanging apply finish.
func (d *Device) ReleaseApply() {
	d.mu.Lock()
	defer d.mu.Unlock()
	close(d.release)
	d.release = make(chan struct{})
}

// Applies, Saves and Syncs count the operations started on this unit.
func (d *Device) Applies() int64 { return d.applies.Load() }

// Saves counts saves started on this unit.
func (d *Device) Saves() int64 { return d.saves.Load() }

// Syncs counts syncs started on this unit.
func (d *Device) Syncs() int64 { return d.syncs.Load() }

// ApplyPending reports whether the pending configuration differs from the running one.
func (d *Device) ApplyPending() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.pending.sameAs(d.running)
}

// Snapshot is a read-only copy of one configuration store of a unit, for test assertions.
type Snapshot struct{ cfg *config }

// Which configuration a snapshot is taken from.
type Which int

// Configuration copies.
const (
	Pending Which = iota
	Running
	Flash
)

// Snapshot copies one configuration of the unit.
func (d *Device) Snapshot(w Which) Snapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch w {
	case Running:
		return Snapshot{d.running.clone()}
	case Flash:
		return Snapshot{d.flash.clone()}
	default:
		return Snapshot{d.pending.clone()}
	}
}

// RealServers lists real server indexes.
func (s Snapshot) RealServers() []string { return indexes(s.cfg, stRealServer) }

// Groups lists group indexes.
func (s Snapshot) Groups() []string { return indexes(s.cfg, stGroup) }

// VirtualServers lists virtual server indexes.
func (s Snapshot) VirtualServers() []string { return indexes(s.cfg, stVirtServer) }

// Members lists a group's real servers with their membership State
// (1 enabled, 2 disabled, 3 shutdown-connection, 4 shutdown-persistent-sessions).
func (s Snapshot) Members(group string) map[string]int {
	out := map[string]int{}
	for _, m := range s.cfg.children(stGroupMember, []any{group}) {
		out[m.idxString(1)] = int(m.int("State"))
	}
	return out
}

// VirtualServerName returns a virtual server's Vname ("" when absent).
func (s Snapshot) VirtualServerName(index string) string {
	r := s.cfg.get(stVirtServer, []any{index})
	if r == nil {
		return ""
	}
	return r.str("VirtServerVname")
}

// RealServer returns a real server's columns (nil when absent).
func (s Snapshot) RealServer(index string) map[string]any {
	r := s.cfg.get(stRealServer, []any{index})
	if r == nil {
		return nil
	}
	return r.clone().vals
}

// Group returns a group's columns (nil when absent).
func (s Snapshot) Group(index string) map[string]any {
	r := s.cfg.get(stGroup, []any{index})
	if r == nil {
		return nil
	}
	return r.clone().vals
}

// Equal reports whether two snapshots hold the same configuration, ignoring peer tables.
func (s Snapshot) Equal(o Snapshot) bool { return s.cfg.equal(o.cfg, stPeer) }

func indexes(c *config, store string) []string {
	var out []string
	for _, r := range c.list(store) {
		out = append(out, idxPath(r.idx))
	}
	return out
}

// --- actions (called with d.mu held unless noted) ---

var errApplyInProgress = &apiError{status: http.StatusNotAcceptable, message: "406 Not Acceptable", appMessage: "Apply is in progress, try again later."}

func (d *Device) startApply() *apiError {
	if d.applyState == applyInProgress {
		return errApplyInProgress
	}
	d.applyState = applyInProgress
	d.applies.Add(1)
	snap := d.pending.clone()
	var f ApplyFault
	if len(d.applyFaults) > 0 {
		f, d.applyFaults = d.applyFaults[0], d.applyFaults[1:]
	}
	release := d.release
	go d.runApply(snap, f, release, d.boots)
	return nil
}

func (d *Device) sleep(dur time.Duration) bool {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-d.closed:
		return false
	}
}

func (d *Device) runApply(snap *config, f ApplyFault, release chan struct{}, boot uint64) {
	if f.During != nil {
		if !d.sleep(d.opts.ApplyDuration / 2) {
			return
		}
		f.During()
		if !d.sleep(d.opts.ApplyDuration - d.opts.ApplyDuration/2) {
			return
		}
	} else if !d.sleep(d.opts.ApplyDuration) {
		return
	}
	if f.Hang {
		select {
		case <-release:
		case <-d.closed:
			return
		}
	}
	d.mu.Lock()
	if d.boots != boot {
		d.mu.Unlock()
		return // rebooted meanwhile
	}
	errs := snap.validate(knownHealthIDs)
	if f.Fail != "" {
		errs = append(errs, f.Fail)
	}
	if len(errs) > 0 {
		d.applyState = applyFailed
		d.applyErrs = errs
		d.mu.Unlock()
		d.log.Info("apply failed", "errors", errs)
		return
	}
	d.applyErrs = nil
	if f.EarlyComplete > 0 {
		d.applyState = applyComplete
		d.mu.Unlock()
		if !d.sleep(f.EarlyComplete) {
			return
		}
		d.mu.Lock()
		if d.boots != boot {
			d.mu.Unlock()
			return
		}
	}
	d.running = snap
	d.runningGen++
	if d.applyState == applyInProgress {
		d.applyState = applyComplete
	}
	auto := d.opts.AutoSync && d.pair != nil
	d.mu.Unlock()
	d.refreshDataPlane()
	if auto {
		go func() {
			if !d.sleep(d.opts.AutoSyncDelay) {
				return
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			_ = d.startSync(3)
		}()
	}
}

func (d *Device) startSave() *apiError {
	if d.applyState == applyInProgress {
		return errApplyInProgress
	}
	if d.saveState == saveInProgress {
		return &apiError{status: http.StatusNotAcceptable, message: "406 Not Acceptable", appMessage: "Save is in progress, try again later."}
	}
	d.saveState = saveInProgress
	d.saves.Add(1)
	snap := d.running.clone()
	var fail string
	if len(d.saveFaults) > 0 {
		fail, d.saveFaults = d.saveFaults[0], d.saveFaults[1:]
	}
	boot := d.boots
	go func() {
		if !d.sleep(d.opts.SaveDuration) {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.boots != boot {
			return // rebooted meanwhile
		}
		if fail != "" {
			d.saveState = saveFailed
			d.saveErrs = []string{fail}
			return
		}
		d.flash = snap
		d.saveErrs = nil
		d.saveState = saveComplete
	}()
	return nil
}

func (d *Device) revert() *apiError {
	if d.applyState == applyInProgress {
		return errApplyInProgress
	}
	d.pending = d.running.clone()
	return nil
}

func (d *Device) revertApply() *apiError {
	if d.applyState == applyInProgress {
		return errApplyInProgress
	}
	d.pending = d.flash.clone()
	d.running = d.flash.clone()
	d.runningGen++
	go d.refreshDataPlane()
	return nil
}

type syncInfo struct {
	peerIP string
	typ    int64 // none(1), manual(2), auto(3)
	status int64 // as agSyncStatus
}

// startSync pushes the running and saved configuration to every enabled peer. typ is manual(2)
// or auto(3).
func (d *Device) startSync(typ int64) *apiError {
	if d.syncStatus == syncInProgress {
		return &apiError{status: http.StatusNotAcceptable, message: "406 Not Acceptable", appMessage: "Synchronization is in progress, try again later."}
	}
	d.syncStatus = syncInProgress
	d.syncs.Add(1)
	running, flash, gen := d.running.clone(), d.flash.clone(), d.runningGen
	var peers []*row
	for _, p := range running.list(stPeer) {
		if p.int("State") == 1 {
			peers = append(peers, p)
		}
	}
	var fail string
	if len(d.syncFaults) > 0 {
		fail, d.syncFaults = d.syncFaults[0], d.syncFaults[1:]
	}
	go func() {
		if !d.sleep(d.opts.SyncDuration) {
			return
		}
		var infos []syncInfo
		var errs []string
		if len(peers) == 0 {
			errs = append(errs, "no enabled peer configured")
		}
		for _, p := range peers {
			ip := p.str("IpAddr")
			err := fail
			if err == "" {
				err = d.pushTo(ip, running, flash)
			}
			st := int64(syncSuccess)
			if err != "" {
				st = syncFailure
				errs = append(errs, fmt.Sprintf("peer %s: %s", ip, err))
			}
			infos = append(infos, syncInfo{peerIP: ip, typ: typ, status: st})
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.lastSync = infos
		if len(errs) > 0 {
			d.syncStatus = syncFailure
			d.syncErr = strings.Join(errs, "; ")
			d.log.Info("sync failed", "reason", d.syncErr)
			return
		}
		d.syncStatus = syncSuccess
		d.syncErr = ""
		d.syncedGen = gen
	}()
	return nil
}

// pushTo delivers a sync to the peer with management address ip; it returns a failure reason.
func (d *Device) pushTo(ip string, running, flash *config) string {
	if d.pair == nil {
		return "peer unreachable"
	}
	peer := d.pair.byMgmtIP(ip)
	if peer == nil || peer == d {
		return "peer unreachable"
	}
	if peer.opts.Password != d.opts.Password {
		return "authentication with peer failed (administrator passwords differ)"
	}
	return peer.receiveSync(running, flash)
}

func (d *Device) receiveSync(running, flash *config) string {
	select {
	case <-d.closed:
		return "peer unreachable"
	default:
	}
	d.mu.Lock()
	if d.applyState == applyInProgress {
		d.mu.Unlock()
		return "peer is busy (apply in progress)"
	}
	keepPeers := func(dst *config, src *config) *config {
		out := src.clone()
		out.replaceTable(stPeer, dst)
		return out
	}
	d.pending = keepPeers(d.pending, running)
	d.running = keepPeers(d.running, running)
	d.flash = keepPeers(d.flash, flash)
	d.runningGen++
	d.syncedGen = d.runningGen
	d.mu.Unlock()
	d.refreshDataPlane()
	return ""
}

// refreshDataPlane hands the running configuration to the data plane (active on the master only).
// Must be called without d.mu held.
func (d *Device) refreshDataPlane() {
	if !d.opts.DataPlane {
		return
	}
	d.mu.Lock()
	running, master := d.running, d.role == RoleMaster
	d.mu.Unlock()
	d.dp.update(running, master)
}

// --- sessions ---

const sessionCookie = "AlteonSession"
const sessionTTL = 10 * time.Minute

func newSessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
