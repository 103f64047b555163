package bfe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"

	"github.com/go-logr/logr"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
)

// Reloader is the part of BFE's monitor API the Frontend uses; *Monitor implements it.
type Reloader interface {
	Reload(ctx context.Context, g bfeconf.Group, dir string) error
	Versions(ctx context.Context) (ActiveVersions, error)
}

// FrontendOptions configure a Frontend.
type FrontendOptions struct {
	Store    *Store
	Reloader Reloader
	Generate GenerateOptions
	// KeepVersions is how many version directories to keep besides the current one (default 5).
	KeepVersions int
	// SkipVerify disables the /monitor/*_version check after each reload.
	SkipVerify bool
	// SkipResyncOnStart disables the full reload of the current version at the first Apply after
	// start (by default the driver does not assume BFE serves what the store says).
	SkipResyncOnStart bool
	Metrics           *Metrics
	Log               logr.Logger
}

// Frontend applies models to one BFE instance: generate, validate, write a version, reload in a safe
// order, verify, and only then make the version current. Apply calls are serialized (BFE does not
// serialize its reload handlers).
type Frontend struct {
	opts FrontendOptions

	mu         sync.Mutex
	cur        *Snapshot
	curSet     *bfeconf.Set
	curState   []byte
	latest     uint64
	needResync bool
	lastErr    error
}

// ApplyResult describes a finished Apply.
type ApplyResult struct {
	// Version is the current version after the call.
	Version uint64
	// Changed is false when the generated files equal the current ones (nothing written or reloaded).
	Changed bool
	// Reloads lists the reloads performed, in order.
	Reloads []string
	// Reports is generation's verdict per LoadBalancer.
	Reports map[string]LBReport
}

// NewFrontend opens the store. Without a current version it writes version 1 from an empty model and
// makes it current, so BFE can start from the store before any LoadBalancer exists.
func NewFrontend(opts FrontendOptions) (*Frontend, error) {
	if opts.Store == nil || opts.Reloader == nil {
		return nil, errors.New("bfe frontend needs a store and a reloader")
	}
	if opts.KeepVersions <= 0 {
		opts.KeepVersions = 5
	}
	opts.Generate = opts.Generate.withDefaults()
	f := &Frontend{opts: opts, needResync: !opts.SkipResyncOnStart}
	latest, err := opts.Store.LatestVersion()
	if err != nil {
		return nil, err
	}
	f.latest = latest
	cur, err := opts.Store.Current()
	if err != nil {
		return nil, err
	}
	if cur == nil {
		f.latest++
		st := State{Version: f.latest, Versions: Versions{ServerData: strconv.FormatUint(f.latest, 10),
			GslbData: strconv.FormatUint(f.latest, 10)}, Model: NewModel()}
		gen := Generate(st.Model, st.Versions, opts.Generate)
		files, err := gen.Set.Render()
		if err != nil {
			return nil, err
		}
		if err := opts.Store.WriteVersion(st, files, nil); err != nil {
			return nil, err
		}
		if err := opts.Store.SetCurrent(st.Version); err != nil {
			return nil, err
		}
		cur = &Snapshot{State: st, Files: files}
	}
	set, err := bfeconf.Parse(cur.Files)
	if err != nil {
		return nil, fmt.Errorf("current version %d: %w", cur.Version, err)
	}
	f.cur, f.curSet = cur, set
	if f.curState, err = json.Marshal(cur.Model); err != nil {
		return nil, err
	}
	opts.Metrics.setVersion(cur.Version)
	return f, nil
}

// Model returns a copy of the model of the current version.
func (f *Frontend) Model() *Model {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur.Model.Clone()
}

// Version returns the current version number.
func (f *Frontend) Version() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur.Version
}

// LastError returns the error of the last Apply, nil when it succeeded.
func (f *Frontend) LastError() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}

// step is one reload: BFE loads group from dir and must then report version.
type step struct {
	group   bfeconf.Group
	dir     string
	version string
	set     *bfeconf.Set // the group's content, for the routability check of intermediate states
}

// Apply makes BFE serve the configuration generated from next. On error BFE is brought back to the
// current version (best effort; if that fails too the next Apply reloads everything) and the current
// version and model stay as they were.
func (f *Frontend) Apply(ctx context.Context, next *Model) (*ApplyResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res, err := f.apply(ctx, next)
	f.lastErr = err
	return res, err
}

func (f *Frontend) apply(ctx context.Context, next *Model) (*ApplyResult, error) {
	log := f.opts.Log
	cur := f.cur
	gen := Generate(next, cur.Versions, f.opts.Generate)
	res := &ApplyResult{Version: cur.Version, Reports: gen.Reports}
	files, err := gen.Set.Render()
	if err != nil {
		return res, err
	}
	serverChanged := !files.GroupEqual(cur.Files, bfeconf.ServerData)
	gslbChanged := !files.GroupEqual(cur.Files, bfeconf.GslbData)
	if !serverChanged && !gslbChanged && !f.needResync {
		return res, f.saveModelOnly(next)
	}

	version := f.latest + 1
	vs := strconv.FormatUint(version, 10)
	st := State{Version: version, Versions: cur.Versions, Model: next}
	if serverChanged {
		st.Versions.ServerData = vs
		stamp(gen.Set, bfeconf.ServerData, vs)
	}
	if gslbChanged {
		st.Versions.GslbData = vs
		stamp(gen.Set, bfeconf.GslbData, vs)
	}
	if files, err = gen.Set.Render(); err != nil {
		return res, err
	}
	// Validate exactly the bytes that will be written, decoded strictly.
	nextSet, err := bfeconf.Parse(files)
	if err == nil {
		err = nextSet.Validate()
	}
	if err != nil {
		f.opts.Metrics.validationFailed()
		return res, fmt.Errorf("generated configuration is invalid, nothing written: %w", err)
	}

	dir := f.opts.Store.VersionDir(version)
	nextStep := func(g bfeconf.Group) step {
		v := st.Versions.ServerData
		if g == bfeconf.GslbData {
			v = st.Versions.GslbData
		}
		return step{group: g, dir: filepath.Join(dir, g.Dir()), version: v, set: nextSet}
	}
	stepFiles := map[string]bfeconf.Files{}
	// union keeps the clusters that only the current routes use, so that routes and balancing data
	// never disagree between two reloads.
	union, unionFiles, err := unionGslb(nextSet, f.curSet, vs+"-pre")
	if err != nil {
		return res, err
	}
	unionStep := step{group: bfeconf.GslbData, dir: filepath.Join(f.opts.Store.StepDir(version, "pre"), bfeconf.GslbData.Dir()),
		version: vs + "-pre", set: union}
	removesClusters := len(union.Gslb.Clusters) != len(nextSet.Gslb.Clusters)
	// When only clusters go away, the union is what BFE already serves: skip reloading it.
	unionIsCurrent := reflect.DeepEqual(union.Gslb.Clusters, f.curSet.Gslb.Clusters) &&
		reflect.DeepEqual(union.ClusterTable.Config, f.curSet.ClusterTable.Config)

	var steps []step
	switch {
	case f.needResync:
		// BFE's state is unknown: every state in between must be safe whatever it routes now.
		if removesClusters {
			steps = []step{unionStep, nextStep(bfeconf.ServerData), nextStep(bfeconf.GslbData)}
		} else {
			steps = []step{nextStep(bfeconf.GslbData), nextStep(bfeconf.ServerData)}
		}
	case gslbChanged && serverChanged && removesClusters && unionIsCurrent:
		steps = []step{nextStep(bfeconf.ServerData), nextStep(bfeconf.GslbData)}
	case gslbChanged && serverChanged && removesClusters:
		steps = []step{unionStep, nextStep(bfeconf.ServerData), nextStep(bfeconf.GslbData)}
	case gslbChanged && serverChanged:
		steps = []step{nextStep(bfeconf.GslbData), nextStep(bfeconf.ServerData)}
	case gslbChanged:
		steps = []step{nextStep(bfeconf.GslbData)}
	default:
		steps = []step{nextStep(bfeconf.ServerData)}
	}
	if steps[0].set == union {
		stepFiles["pre"] = unionFiles
	}
	if err := checkSequence(f.curSet, steps); err != nil {
		return res, fmt.Errorf("unsafe reload sequence, nothing written: %w", err)
	}
	// Rollback data: the current version plus the clusters next adds, for when next routes are live.
	rollUnion, rollFiles, err := unionGslb(f.curSet, nextSet, vs+"-rollback")
	if err != nil {
		return res, err
	}
	stepFiles["rollback"] = rollFiles

	if err := f.opts.Store.WriteVersion(st, files, stepFiles); err != nil {
		return res, err
	}
	f.latest = version

	done, err := f.run(ctx, steps, res)
	if err != nil {
		f.rollback(ctx, steps[:done+1], rollUnion, version, res)
		return res, err
	}
	if err := f.opts.Store.SetCurrent(version); err != nil {
		// BFE serves the new version but a restart would load the old one; retry everything next time.
		f.needResync = true
		return res, err
	}
	f.needResync = false
	f.cur = &Snapshot{State: st, Files: files}
	f.curSet = nextSet
	f.curState, _ = json.Marshal(next)
	res.Version, res.Changed = version, true
	f.opts.Metrics.setVersion(version)
	if err := f.opts.Store.GC(f.opts.KeepVersions); err != nil {
		log.Error(err, "Garbage collection of old BFE configuration versions failed")
	}
	lbs, backends := next.Size()
	log.Info("BFE configuration applied", "version", version, "reloads", res.Reloads, "loadBalancers", lbs, "backends", backends)
	return res, nil
}

// run performs the steps in order; it returns the index of the failed step with the error.
func (f *Frontend) run(ctx context.Context, steps []step, res *ApplyResult) (int, error) {
	for i, s := range steps {
		if err := f.reload(ctx, s); err != nil {
			return i, err
		}
		res.Reloads = append(res.Reloads, string(s.group)+"@"+s.version)
	}
	return len(steps), nil
}

func (f *Frontend) reload(ctx context.Context, s step) error {
	err := f.opts.Reloader.Reload(ctx, s.group, s.dir)
	if err == nil && !f.opts.SkipVerify {
		var active ActiveVersions
		if active, err = f.opts.Reloader.Versions(ctx); err == nil {
			err = active.Check(s.group, s.version)
		}
	}
	f.opts.Metrics.reloaded(s.group, err)
	return err
}

// rollback brings BFE back to the current version after attempted (the steps tried, the last one
// failed). A failed server_data_conf reload changes nothing in BFE; a failed gslb_data_conf reload
// may have applied part of the data.
func (f *Frontend) rollback(ctx context.Context, attempted []step, rollUnion *bfeconf.Set, version uint64, res *ApplyResult) {
	log := f.opts.Log
	serverLive := false
	touched := false
	for i, s := range attempted {
		last := i == len(attempted)-1
		if s.group == bfeconf.ServerData && !last {
			serverLive = true
		}
		if s.group == bfeconf.GslbData || !last {
			touched = true
		}
	}
	if !touched {
		return
	}
	curDir := f.opts.Store.VersionDir(f.cur.Version)
	gslbCur := step{group: bfeconf.GslbData, dir: filepath.Join(curDir, bfeconf.GslbData.Dir()), version: f.cur.Versions.GslbData, set: f.curSet}
	var steps []step
	if serverLive {
		steps = append(steps,
			step{group: bfeconf.GslbData, dir: filepath.Join(f.opts.Store.StepDir(version, "rollback"), bfeconf.GslbData.Dir()),
				version: strconv.FormatUint(version, 10) + "-rollback", set: rollUnion},
			step{group: bfeconf.ServerData, dir: filepath.Join(curDir, bfeconf.ServerData.Dir()), version: f.cur.Versions.ServerData, set: f.curSet})
	}
	steps = append(steps, gslbCur)
	if _, err := f.run(ctx, steps, res); err != nil {
		f.needResync = true
		log.Error(err, "Rolling BFE back to the current version failed; the next apply reloads everything", "current", f.cur.Version)
		return
	}
	log.Info("BFE rolled back to the current version", "current", f.cur.Version, "failed", version)
}

// saveModelOnly records a model change that changed no BFE file.
func (f *Frontend) saveModelOnly(next *Model) error {
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if bytes.Equal(b, f.curState) {
		return nil
	}
	st := f.cur.State
	st.Model = next
	if err := f.opts.Store.WriteState(st); err != nil {
		return err
	}
	f.cur = &Snapshot{State: st, Files: f.cur.Files}
	f.curState = b
	return nil
}

// stamp sets the version fields of group g.
func stamp(s *bfeconf.Set, g bfeconf.Group, v string) {
	if g == bfeconf.ServerData {
		s.HostRule.Version, s.VipRule.Version, s.RouteRule.Version, s.ClusterConf.Version = v, v, v, v
		return
	}
	s.ClusterTable.Version, s.Gslb.Ts = v, v
}

// unionGslb returns base's GSLB data plus the clusters only extra has, stamped with version v, and
// its gslb files. Only the GslbData part of the returned set is meaningful.
func unionGslb(base, extra *bfeconf.Set, v string) (*bfeconf.Set, bfeconf.Files, error) {
	u := &bfeconf.Set{
		ClusterTable: bfeconf.ClusterTableConf{Version: v, Config: make(map[string]map[string][]bfeconf.Instance, len(base.ClusterTable.Config))},
		Gslb:         bfeconf.GslbConf{Clusters: make(map[string]map[string]int, len(base.Gslb.Clusters)), Hostname: base.Gslb.Hostname, Ts: v},
	}
	for _, s := range []*bfeconf.Set{extra, base} { // base last: its entries win
		for c, subs := range s.Gslb.Clusters {
			u.Gslb.Clusters[c] = subs
			u.ClusterTable.Config[c] = s.ClusterTable.Config[c]
		}
	}
	if err := u.ValidateGslbData(); err != nil {
		return nil, nil, fmt.Errorf("intermediate gslb data: %w", err)
	}
	all, err := u.Render()
	if err != nil {
		return nil, nil, err
	}
	files := bfeconf.Files{}
	for rel, b := range all {
		if g, ok := bfeconf.GroupOf(rel); ok && g == bfeconf.GslbData {
			files[rel] = b
		}
	}
	return u, files, nil
}

// checkSequence verifies that after every step each routed cluster is balanced, starting from cur.
func checkSequence(cur *bfeconf.Set, steps []step) error {
	server, gslb := cur, cur
	for i, s := range steps {
		if s.group == bfeconf.ServerData {
			server = s.set
		} else {
			gslb = s.set
		}
		if err := bfeconf.CheckRoutable(server, gslb); err != nil {
			return fmt.Errorf("after step %d (%s %s): %w", i+1, s.group, s.version, err)
		}
	}
	return nil
}
