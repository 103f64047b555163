package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/elb/radware/alteon"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/podresponder"
)

// Bounds the soak states and checks.
const (
	// ConvergeBound: after the last fault of an episode ends, the device and the records match
	// the members' Ready pods within this long. It covers Karmada's own recovery (a member seen
	// Ready again 32-39 s after its return, its status flowing again up to ≈ 1-2 min later) and
	// the federation's grace period.
	ConvergeBound = 4 * time.Minute
	// CheckEvery is the period of the continuous checks.
	CheckEvery = 5 * time.Second
	// UnbackedFor: a record that says Registered for an address the master does not hold is a
	// violation once seen unchanged in this many checks in a row (a single check can race a
	// deregistration that starts between reading the records and reading the device).
	UnbackedFor = 3
	// Grace is the federation's NotReady grace period in the soak, as in the e2e suites.
	Grace = 20 * time.Second
)

// Scheme knows the kinds the soak reads.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = lbcfv1beta1.AddToScheme(s)
	return s
}()

// Config is a soak run.
type Config struct {
	Duration time.Duration
	Seed     uint64
	Apps     int
	// BFEBin is a BFE binary: the first app's pods are also behind a BFE route.
	BFEBin string
	// Logf prints progress (fault start/end, checks that fail).
	Logf func(format string, args ...any)
}

// Runner is a soak run on a topology with lbfed deployed.
type Runner struct {
	cfg     Config
	topo    *localup.Topology
	lbfed   *deploy.Deployment
	karmada client.Client
	members map[string]client.Client
	names   []string // members
	push    []string // members with a link to cut
	apps    []*App
	proxy   *DriverProxy
	bfe     *BFE
	traffic *Traffic
	ctx     context.Context

	mu            sync.Mutex
	windows       []Window
	stops         []PodStop
	injected      map[Kind]int
	checks        int
	failed        int
	violations    []string
	convergeTimes []time.Duration
	unbacked      map[string]int // record@version -> checks in a row
	peakRSS       int64
	podStops      podStops
	paused        bool
	pauseCond     *sync.Cond
	changes       map[Action]int
	restarted     []string // topology processes that exited on their own
}

// NewRunner deploys the workload and its driver proxy on a running topology and lbfed.
func NewRunner(ctx context.Context, cfg Config, topo *localup.Topology, lbfed *deploy.Deployment) (*Runner, error) {
	if cfg.Apps == 0 {
		cfg.Apps = 2
	}
	r := &Runner{cfg: cfg, topo: topo, lbfed: lbfed, members: map[string]client.Client{}, ctx: ctx,
		injected: map[Kind]int{}, unbacked: map[string]int{}, changes: map[Action]int{}}
	r.pauseCond = sync.NewCond(&r.mu)
	var err error
	if r.karmada, err = client.New(topo.KarmadaConfig(), client.Options{Scheme: Scheme}); err != nil {
		return nil, err
	}
	for _, m := range topo.Members() {
		c, err := client.New(m.RESTConfig(), client.Options{Scheme: Scheme})
		if err != nil {
			return nil, err
		}
		r.members[m.Name()] = c
		r.names = append(r.names, m.Name())
		if m.Link() != nil {
			r.push = append(r.push, m.Name())
		}
	}
	run := filepath.Join(topo.Dir(), "lbfed", "driver-client")
	if r.proxy, err = NewDriverProxy(lbfed.DriverURL, filepath.Join(run, "tls.crt"), filepath.Join(run, "tls.key"), lbfed.DriverCA.PEM); err != nil {
		return nil, err
	}
	url, _, err := lbfed.ServeDriver("soak-driver-proxy", r.proxy)
	if err != nil {
		return nil, fmt.Errorf("serve the driver proxy: %w", err)
	}
	r.apps = NewApps(cfg.Apps, r.names, url)
	for _, a := range r.apps {
		if err := a.Example.Apply(ctx, r.karmada, lbfed); err != nil {
			return nil, fmt.Errorf("app %s: %w", a.Namespace, err)
		}
		objs, err := a.extraObjects()
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if err := deploy.Apply(ctx, r.karmada, o); err != nil {
				return nil, fmt.Errorf("app %s: %s %s: %w", a.Namespace, o.GetKind(), o.GetName(), err)
			}
		}
	}
	if cfg.BFEBin != "" {
		if r.bfe, err = StartBFE(ctx, topo, lbfed, cfg.BFEBin); err != nil {
			return nil, fmt.Errorf("start BFE: %w", err)
		}
		a := r.apps[0]
		b, _ := r.bfe.Objects(a.Namespace)
		objs, err := localup.DecodeManifests(b)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if err := deploy.Apply(ctx, r.karmada, o); err != nil {
				return nil, fmt.Errorf("BFE route: %s %s: %w", o.GetKind(), o.GetName(), err)
			}
		}
		a.bfe = true
	}
	r.traffic = NewTraffic()
	return r, nil
}

func (r *Runner) logf(format string, args ...any) {
	r.cfg.Logf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func (r *Runner) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.violations = append(r.violations, time.Now().Format("15:04:05")+" "+msg)
	r.mu.Unlock()
	r.logf("VIOLATION %s", msg)
}

// bound waits for the apps' BackendGroups' ResourceBindings; Karmada's detector misses objects
// created in the seconds after their CRD appeared until they change again.
func (r *Runner) bound(ctx context.Context) error {
	for _, a := range r.apps {
		for _, group := range a.Groups() {
			if err := r.boundGroup(ctx, a, group); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Runner) boundGroup(ctx context.Context, a *App, group string) error {
	rb := &unstructured.Unstructured{}
	rb.SetGroupVersionKind(schema.GroupVersionKind{Group: "work.karmada.io", Version: "v1alpha2", Kind: "ResourceBinding"})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := r.karmada.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: group + "-backendgroup"}, rb)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no ResourceBinding for the BackendGroup %s: %w", a.Namespace, group, err)
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"soak.lbfed.io/touched":%q}}}`, time.Now().Format(time.RFC3339Nano))
		bg := &lbcfv1beta1.BackendGroup{}
		bg.Namespace, bg.Name = a.Namespace, group
		_ = r.karmada.Patch(ctx, bg, client.RawPatch(types.MergePatchType, []byte(patch)))
		time.Sleep(5 * time.Second)
	}
}

// --- the device ---

func (r *Runner) alteonClient(i int) (*alteon.Client, error) {
	return alteon.NewClient(alteon.Config{URL: r.lbfed.AlteonURLs[i], User: "admin", Password: r.lbfed.AlteonPassword, Attempts: 1, HTTPClient: &http.Client{Timeout: 10 * time.Second}})
}

// roles returns unit name → role.
func (r *Runner) roles(ctx context.Context) (map[string]string, error) {
	var roles map[string]string
	return roles, r.control(ctx, http.MethodGet, "/roles", "", &roles)
}

func (r *Runner) control(ctx context.Context, method, path, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, r.lbfed.AlteonControl+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("alteon control %s %s: %w", method, path, err)
	}
	defer rsp.Body.Close()
	b, _ := io.ReadAll(rsp.Body)
	if rsp.StatusCode != http.StatusOK {
		return fmt.Errorf("alteon control %s %s: HTTP %d: %s", method, path, rsp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// units reads both units, the master first.
func (r *Runner) units(ctx context.Context) ([]Unit, error) {
	roles, err := r.roles(ctx)
	if err != nil {
		return nil, err
	}
	var out []Unit
	for i, name := range []string{"alteon-a", "alteon-b"} {
		c, err := r.alteonClient(i)
		if err != nil {
			return nil, err
		}
		u, err := ReadUnit(ctx, name+"("+roles[name]+")", c)
		if err != nil {
			return nil, err
		}
		if roles[name] == "master" {
			out = append([]Unit{u}, out...)
		} else {
			out = append(out, u)
		}
	}
	return out, nil
}

// --- what should be ---

// want is what the device must hold now, from every member's Ready pods.
func (r *Runner) want(ctx context.Context) (Want, error) {
	want := Want{}
	for _, a := range r.apps {
		if err := a.sync(ctx, r.karmada); err != nil {
			return nil, fmt.Errorf("%s on Karmada: %w", a.Namespace, err)
		}
		ready := map[string][]string{}
		for _, m := range r.names {
			pods, err := deploy.ReadyBackends(ctx, r.members[m], a.Namespace)
			if err != nil {
				return nil, fmt.Errorf("pods of %s in %s: %w", a.Namespace, m, err)
			}
			ready[m] = pods
		}
		a.want(want, ready)
	}
	return want, nil
}

// records lists the apps' BackendRecords on Karmada.
func (r *Runner) records(ctx context.Context) ([]Record, []lbcfv1beta1.BackendRecord, error) {
	var out []Record
	var raw []lbcfv1beta1.BackendRecord
	for _, a := range r.apps {
		lbs := a.LoadBalancers()
		list := &lbcfv1beta1.BackendRecordList{}
		if err := r.karmada.List(ctx, list, client.InNamespace(a.Namespace)); err != nil {
			return nil, nil, fmt.Errorf("records of %s: %w", a.Namespace, err)
		}
		for _, br := range list.Items {
			out = append(out, Record{Name: a.Namespace + "/" + br.Name, Service: lbs[br.Spec.LBName], Addr: br.Status.BackendAddr,
				Registered: br.IsRegistered(), Deleting: br.DeletionTimestamp != nil, Version: br.ResourceVersion})
			raw = append(raw, br)
		}
	}
	return out, raw, nil
}

// converged lists what still differs from invariants 2 and 3 (nil: converged).
func (r *Runner) converged(ctx context.Context) ([]string, error) {
	want, err := r.want(ctx)
	if err != nil {
		return nil, err
	}
	units, err := r.units(ctx)
	if err != nil {
		return nil, err
	}
	recs, raw, err := r.records(ctx)
	if err != nil {
		return nil, err
	}
	alteonWant, bfeWant := Want{}, Want{}
	var alteonRecs, bfeRecs []Record
	for k, v := range want {
		if strings.HasPrefix(k, "bfe:") {
			bfeWant[k] = v
		} else {
			alteonWant[k] = v
		}
	}
	for _, rec := range recs {
		if strings.HasPrefix(rec.Service, "bfe:") {
			bfeRecs = append(bfeRecs, rec)
		} else {
			alteonRecs = append(alteonRecs, rec)
		}
	}
	var out []string
	for _, u := range units {
		out = append(out, Diff(u, alteonWant)...)
	}
	for _, msg := range Unbacked(alteonRecs, units[0]) {
		out = append(out, msg)
	}
	if r.bfe != nil {
		u, err := r.bfe.Unit(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, Diff(u, bfeWant)...)
		for _, msg := range Unbacked(bfeRecs, u) {
			out = append(out, msg)
		}
	}
	// Registered records per LoadBalancer equal the members' Ready backends: none lost, none extra.
	registered := map[string][]string{}
	for _, rec := range recs {
		if rec.Deleting {
			out = append(out, "record "+rec.Name+" is still being deleted")
		}
		if rec.Registered && !rec.Deleting && rec.Service != "" {
			registered[rec.Service] = append(registered[rec.Service], rec.Addr)
		}
		if rec.Service == "" {
			out = append(out, "record "+rec.Name+" of a LoadBalancer the app does not have")
		}
	}
	for svc, members := range want {
		var addrs []string
		for _, m := range members {
			addrs = append(addrs, m.IP+":"+strconv.Itoa(m.Port))
		}
		sort.Strings(addrs)
		got := registered[svc]
		sort.Strings(got)
		if fmt.Sprint(addrs) != fmt.Sprint(got) {
			out = append(out, fmt.Sprintf("registered records of %s: %v, want %v", svc, got, addrs))
		}
	}
	out = append(out, r.owners(ctx, raw)...)
	return out, nil
}

// owners checks invariant 3's objects: every app's LoadBalancers and group exist and none is
// being deleted, and every record's group and LoadBalancer exist (no finalizer without owner).
func (r *Runner) owners(ctx context.Context, records []lbcfv1beta1.BackendRecord) []string {
	var out []string
	for _, a := range r.apps {
		for name := range a.LoadBalancers() {
			lb := &lbcfv1beta1.LoadBalancer{}
			if err := r.karmada.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, lb); err != nil {
				out = append(out, fmt.Sprintf("LoadBalancer %s/%s: %v", a.Namespace, name, err))
			} else if lb.DeletionTimestamp != nil {
				out = append(out, fmt.Sprintf("LoadBalancer %s/%s is being deleted (finalizers %v)", a.Namespace, name, lb.Finalizers))
			}
		}
		for _, g := range a.Groups() {
			bg := &lbcfv1beta1.BackendGroup{}
			if err := r.karmada.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: g}, bg); err != nil {
				out = append(out, fmt.Sprintf("BackendGroup %s/%s: %v", a.Namespace, g, err))
			} else if bg.DeletionTimestamp != nil {
				out = append(out, fmt.Sprintf("BackendGroup %s/%s is being deleted", a.Namespace, g))
			}
		}
	}
	for _, br := range records {
		if len(br.Finalizers) == 0 {
			continue
		}
		if g := br.Labels[lbcfv1beta1.LabelGroupName]; g != "" {
			if err := r.karmada.Get(ctx, client.ObjectKey{Namespace: br.Namespace, Name: g}, &lbcfv1beta1.BackendGroup{}); apierrors.IsNotFound(err) {
				out = append(out, fmt.Sprintf("record %s/%s holds %v for group %s, which is gone", br.Namespace, br.Name, br.Finalizers, g))
			}
		}
		if err := r.karmada.Get(ctx, client.ObjectKey{Namespace: br.Namespace, Name: br.Spec.LBName}, &lbcfv1beta1.LoadBalancer{}); apierrors.IsNotFound(err) {
			out = append(out, fmt.Sprintf("record %s/%s holds %v for LoadBalancer %s, which is gone", br.Namespace, br.Name, br.Finalizers, br.Spec.LBName))
		}
	}
	return out
}

// converge waits until invariants 2 and 3 hold, at most ConvergeBound, and returns how long it
// took; a run that does not converge is a violation.
func (r *Runner) converge(ctx context.Context, after string) (time.Duration, bool) {
	start := time.Now()
	var last []string
	for time.Since(start) < ConvergeBound {
		diff, err := r.converged(ctx)
		if err != nil {
			diff = []string{err.Error()}
		}
		r.mu.Lock()
		r.checks++
		r.mu.Unlock()
		if len(diff) == 0 {
			took := time.Since(start)
			r.logf("converged %s after %s", took.Round(100*time.Millisecond), after)
			return took, true
		}
		last = diff
		r.enableServed(ctx)
		time.Sleep(2 * time.Second)
	}
	r.mu.Lock()
	r.failed++
	r.mu.Unlock()
	if len(last) > 12 {
		last = append(last[:12], fmt.Sprintf("… %d more", len(last)-12))
	}
	r.violate("invariant 2/3: not converged %s after %s:\n  %s", ConvergeBound, after, strings.Join(last, "\n  "))
	return ConvergeBound, false
}

// enableServed starts the load through the VIPs the soak has given a group once the master
// serves them: members, all enabled, each a Ready pod now. A VIP taken on purpose, not yet
// programmed, or still holding the backends of a previous life (a front door deleted and made
// again while the driver could not deregister) is not counted.
func (r *Runner) enableServed(ctx context.Context) {
	units, err := r.units(ctx)
	if err != nil {
		return
	}
	want, err := r.want(ctx)
	if err != nil {
		return
	}
	live := func(u Unit, vip string) bool {
		ready := map[string]bool{}
		for _, m := range want[vip] {
			ready[m.IP+":"+strconv.Itoa(m.Port)] = true
		}
		ms := u.Members[vip]
		ok := len(ms) > 0
		for _, m := range ms {
			ok = ok && m.Enabled && ready[m.IP+":"+strconv.Itoa(m.Port)]
		}
		return ok
	}
	for _, a := range r.apps {
		a.mu.Lock()
		vips := []string{a.VIP}
		if a.extra {
			vips = append(vips, a.ExtraVIP)
		}
		if a.mcs {
			vips = append(vips, a.MCSVIP)
		}
		a.mu.Unlock()
		for _, vip := range vips {
			if !r.traffic.Enabled(vip) && live(units[0], vip) {
				r.traffic.Enable(vip)
				r.logf("load through %s", vip)
			}
		}
	}
	if target := BFEHost + "@" + r.bfeAddr(); r.bfe != nil && !r.traffic.Enabled(target) {
		if u, err := r.bfe.Unit(ctx); err == nil && len(u.Orphans) == 0 && live(u, bfeService) {
			r.traffic.Enable(target)
			r.logf("load through BFE %s", target)
		}
	}
}

func (r *Runner) bfeAddr() string {
	if r.bfe == nil {
		return ""
	}
	return r.bfe.HTTPAddr
}

// --- continuous checks ---

// watch runs the continuous checks until ctx ends: records against the master (invariant 3),
// pods stopping (for attribution), lbfed-controller's RSS.
func (r *Runner) watch(ctx context.Context) {
	// Pods, processes and RSS every second on their own: a check of a slow device takes a while.
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			r.superviseTopology(ctx)
			r.trackPods(ctx)
			r.sampleRSS()
		}
	}()
	tick := time.NewTicker(CheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r.enableServed(ctx)
		units, err := r.units(ctx)
		if err != nil {
			continue // the device or its control API busy: the next check
		}
		recs, _, err := r.records(ctx)
		if err != nil {
			continue
		}
		var alteonRecs []Record
		for _, rec := range recs {
			if !strings.HasPrefix(rec.Service, "bfe:") {
				alteonRecs = append(alteonRecs, rec)
			}
		}
		bad := Unbacked(alteonRecs, units[0])
		r.mu.Lock()
		r.checks++
		failedNow := false
		for key, msg := range bad {
			r.unbacked[key]++
			if r.unbacked[key] == UnbackedFor {
				failedNow = true
				r.mu.Unlock()
				r.violate("invariant 3: %s (for %d checks)", msg, UnbackedFor)
				r.mu.Lock()
			}
		}
		for key := range r.unbacked {
			if _, ok := bad[key]; !ok {
				delete(r.unbacked, key)
			}
		}
		if failedNow {
			r.failed++
		}
		r.mu.Unlock()
	}
}

// trackPods records when the workload's pods' processes stopped (for attribution, podStops).
func (r *Runner) trackPods(ctx context.Context) {
	for _, m := range r.names {
		for _, a := range r.apps {
			list := &corev1.PodList{}
			if err := r.members[m].List(ctx, list, client.InNamespace(a.Namespace), client.MatchingLabels{"app": "web"}); err != nil {
				continue
			}
			r.mu.Lock()
			r.stops = append(r.stops, r.podStops.observe(m+"/"+a.Namespace, list.Items, time.Now())...)
			r.mu.Unlock()
		}
	}
}

// superviseTopology starts again, as a kubelet or a supervisor would, a process of the topology
// that exited on its own (testinfra/deploy restarts lbfed's own): a Karmada component that exits when
// its API server or etcd is gone must not stay down for the rest of the run.
func (r *Runner) superviseTopology(ctx context.Context) {
	for _, p := range r.topo.Exited() {
		if r.lbfed.Process(p.Name) != nil {
			continue
		}
		r.logf("%s exited on its own; restarting it: %s", p.Name, lastLine(p.LogTail(3)))
		r.mu.Lock()
		r.restarted = append(r.restarted, p.Name)
		r.mu.Unlock()
		if _, err := r.topo.Restart(ctx, p.Name, time.Second); err != nil {
			r.logf("restart %s: %v", p.Name, err)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func (r *Runner) sampleRSS() {
	for _, name := range deploy.ControllerNames(2) {
		if p := r.lbfed.Process(name); p != nil {
			if rss := localup.MemoryOf(p.PID(), "VmRSS"); rss > 0 {
				r.mu.Lock()
				r.peakRSS = max(r.peakRSS, rss)
				r.mu.Unlock()
			}
		}
	}
}

// --- the workload ---

// setPaused stops (or resumes) the workload's changes: convergence is measured on a fixed target.
func (r *Runner) setPaused(p bool) {
	r.mu.Lock()
	r.paused = p
	r.mu.Unlock()
	r.pauseCond.Broadcast()
}

func (r *Runner) workload(ctx context.Context) {
	next := Changes(r.cfg.Seed, len(r.apps), r.names)
	for ctx.Err() == nil {
		c := next()
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.Wait):
		}
		r.mu.Lock()
		for r.paused && ctx.Err() == nil {
			r.pauseCond.Wait()
		}
		r.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if err := r.change(ctx, c); err != nil {
			r.logf("change %s: %v", c, err)
			continue
		}
		r.mu.Lock()
		r.changes[c.Action]++
		r.mu.Unlock()
	}
}

func (r *Runner) change(ctx context.Context, c Change) error {
	a := r.apps[c.App]
	switch c.Action {
	case Scale:
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, c.N)
		dep := &appsv1.Deployment{}
		dep.Namespace, dep.Name = a.Namespace, "web"
		return r.karmada.Patch(ctx, dep, client.RawPatch(types.MergePatchType, []byte(patch)))
	case Rollout:
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
		dep := &appsv1.Deployment{}
		dep.Namespace, dep.Name = a.Namespace, "web"
		return r.karmada.Patch(ctx, dep, client.RawPatch(types.MergePatchType, []byte(patch)))
	case DeletePod:
		var pods []corev1.Pod
		var in []string
		for _, m := range r.names {
			list := &corev1.PodList{}
			if err := r.members[m].List(ctx, list, client.InNamespace(a.Namespace), client.MatchingLabels{"app": "web"}); err != nil {
				continue
			}
			for _, p := range list.Items {
				if p.DeletionTimestamp == nil {
					pods, in = append(pods, p), append(in, m)
				}
			}
		}
		if len(pods) == 0 {
			return nil
		}
		i := c.Pick % len(pods)
		return client.IgnoreNotFound(r.members[in[i]].Delete(ctx, &pods[i]))
	case ToggleLB:
		a.mu.Lock()
		give := !a.extra
		a.mu.Unlock()
		lbs := `["web-vip"]`
		if give {
			lbs = `["web-vip","web-extra"]`
		} else {
			// Taken on purpose: its VIP empties by design, so it no longer counts.
			r.traffic.Disable(a.ExtraVIP)
			time.Sleep(100 * time.Millisecond)
		}
		bg := &lbcfv1beta1.BackendGroup{}
		bg.Namespace, bg.Name = a.Namespace, "web"
		if err := r.karmada.Patch(ctx, bg, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"loadBalancers":`+lbs+`}}`))); err != nil {
			return err
		}
		a.mu.Lock()
		a.extra = give
		a.mu.Unlock()
		return nil
	case SetWeights:
		var err error
		if c.Weights == nil {
			op := a.weightsObject(nil)
			err = client.IgnoreNotFound(r.karmada.Delete(ctx, op))
		} else {
			err = deploy.Apply(ctx, r.karmada, a.weightsObject(c.Weights))
		}
		if err != nil {
			return err
		}
		a.mu.Lock()
		a.weights = c.Weights
		a.mu.Unlock()
		return nil
	case ToggleMCS:
		a = r.apps[0]
		a.mu.Lock()
		create := !a.mcs
		a.mu.Unlock()
		if create {
			if err := deploy.Apply(ctx, r.karmada, a.mcsObject()); err != nil {
				return err
			}
		} else {
			r.traffic.Disable(a.MCSVIP)
			time.Sleep(100 * time.Millisecond)
			if err := client.IgnoreNotFound(r.karmada.Delete(ctx, a.mcsObject())); err != nil {
				return err
			}
		}
		a.mu.Lock()
		a.mcs = create
		a.mu.Unlock()
		return nil
	}
	return fmt.Errorf("unknown change %s", c.Action)
}

// --- faults ---

func (r *Runner) window(k Kind, target string) (end func()) {
	w := &Window{Kind: k, Target: target, Start: time.Now()}
	r.mu.Lock()
	r.windows = append(r.windows, *w)
	i := len(r.windows) - 1
	r.injected[k]++
	r.mu.Unlock()
	r.logf("fault start %s %s", k, target)
	return func() {
		r.mu.Lock()
		r.windows[i].End = time.Now()
		d := r.windows[i].End.Sub(r.windows[i].Start)
		r.mu.Unlock()
		r.logf("fault end   %s %s (%s)", k, target, d.Round(100*time.Millisecond))
	}
}

// leader returns the lbfed-controller replica holding the federation lease, and the others.
func (r *Runner) leader(ctx context.Context) (leader string, standby []string) {
	for i, name := range deploy.ControllerNames(len(r.lbfed.ControllerMetrics)) {
		if v, ok := metric(ctx, r.lbfed.ControllerMetrics[i], `leader_election_master_status{name="lbfed-controller-federation"}`); ok && v == 1 {
			leader = name
		} else {
			standby = append(standby, name)
		}
	}
	return leader, standby
}

// metric reads one sample of a Prometheus text exposition.
func metric(ctx context.Context, url, series string) (float64, bool) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer rsp.Body.Close()
	sc := bufio.NewScanner(rsp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// killDeployed kills one of lbfed's processes; testinfra/deploy starts it again as a kubelet would.
// The fault ends once the new process serves its metrics (or its webhooks' port for others).
func (r *Runner) killDeployed(ctx context.Context, name, ready string) error {
	old := r.lbfed.Process(name)
	if old == nil {
		return fmt.Errorf("no process %s", name)
	}
	if err := syscall.Kill(old.PID(), syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s: %w", name, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if p := r.lbfed.Process(name); p != nil && p != old {
			if ready == "" {
				return nil
			}
			if rsp, err := http.Get(ready); err == nil {
				rsp.Body.Close()
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not back within 2m", name)
}

func (r *Runner) inject(ctx context.Context, f Fault) error {
	sleep := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	switch f.Kind {
	case KillLbfedLeader, KillLbfedStandby:
		leader, standby := r.leader(ctx)
		name := leader
		if f.Kind == KillLbfedStandby {
			if len(standby) == 0 {
				return errors.New("no standby")
			}
			name = standby[0]
		}
		if name == "" {
			return errors.New("no leader")
		}
		i := 0
		for j, n := range deploy.ControllerNames(len(r.lbfed.ControllerMetrics)) {
			if n == name {
				i = j
			}
		}
		defer r.window(f.Kind, name)()
		if err := r.killDeployed(ctx, name, r.lbfed.ControllerMetrics[i]); err != nil {
			return err
		}
		if f.Kind == KillLbfedLeader {
			// The fault lasts until a replica leads again (the lease's 15 s).
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); sleep(500 * time.Millisecond) {
				if l, _ := r.leader(ctx); l != "" {
					return nil
				}
			}
			return errors.New("no leader within 1m")
		}
		return nil
	case KillLbcfController:
		defer r.window(f.Kind, f.Target)()
		return r.killDeployed(ctx, "lbcf-controller-"+f.Target, "")
	case KillElbDriver:
		defer r.window(f.Kind, "")()
		return r.killDeployed(ctx, "elb-driver", strings.TrimSuffix(r.lbfed.DriverMetrics, "/metrics")+"/healthz")
	case KillKarmadaCM, KillKarmadaAPIServer, KillKarmadaEtcd:
		name := map[Kind]string{KillKarmadaCM: "karmada-controller-manager", KillKarmadaAPIServer: "karmada-apiserver", KillKarmadaEtcd: "etcd"}[f.Kind]
		defer r.window(f.Kind, name)()
		_, err := r.topo.Restart(ctx, name, f.Duration)
		return err
	case PauseMemberAPIServer:
		p := r.topo.Process(f.Target + "-apiserver")
		if p == nil {
			return fmt.Errorf("no %s-apiserver", f.Target)
		}
		defer r.window(f.Kind, f.Target)()
		if err := syscall.Kill(p.PID(), syscall.SIGSTOP); err != nil {
			return err
		}
		sleep(f.Duration)
		return syscall.Kill(p.PID(), syscall.SIGCONT)
	case CutMemberLink:
		l := r.topo.Member(f.Target).Link()
		defer r.window(f.Kind, f.Target)()
		if err := l.Cut(); err != nil {
			return err
		}
		sleep(f.Duration)
		return l.Restore()
	case AlteonFailover:
		defer r.window(f.Kind, "")()
		return r.control(ctx, http.MethodPost, "/failover", "", nil)
	case AlteonSaveFails:
		defer r.window(f.Kind, "")()
		end := time.Now().Add(f.Duration)
		for time.Now().Before(end) && ctx.Err() == nil {
			roles, err := r.roles(ctx)
			if err == nil {
				for name, role := range roles {
					if role == "master" {
						// A queued failure for the next save; cleared at the end.
						_ = r.control(ctx, http.MethodPost, "/save-fault?device="+name, `{"fail":"soak: flash write error"}`, nil)
					}
				}
			}
			sleep(2 * time.Second)
		}
		return r.clearDeviceFaults(ctx)
	case AlteonSlow:
		defer r.window(f.Kind, f.Param.String())()
		for _, u := range []string{"a", "b"} {
			if err := r.control(ctx, http.MethodPost, "/faults?device="+u, fmt.Sprintf(`{"kind":"latency","delay":%q}`, f.Param.String()), nil); err != nil {
				return err
			}
		}
		sleep(f.Duration)
		return r.clearDeviceFaults(ctx)
	case DriverFail, DriverTimeout:
		defer r.window(f.Kind, "")()
		mode := DriverFails
		if f.Kind == DriverTimeout {
			mode = DriverHangs
		}
		r.proxy.Set(mode)
		sleep(f.Duration)
		r.proxy.Set(DriverPass)
		return nil
	case PodKill:
		return r.killPod(ctx, f)
	}
	return fmt.Errorf("unknown fault %s", f.Kind)
}

func (r *Runner) clearDeviceFaults(ctx context.Context) error {
	var errs []error
	for _, u := range []string{"a", "b"} {
		errs = append(errs, r.control(context.WithoutCancel(ctx), http.MethodDelete, "/faults?device="+u, "", nil))
	}
	return errors.Join(errs...)
}

// killPod makes a serving pod's process die without warning (the pod responder closes its
// sockets; the pod stays Ready), then deletes the pod after f.Duration, as a liveness probe and
// its restart would end it.
func (r *Runner) killPod(ctx context.Context, f Fault) error {
	a := r.apps[int(f.Delay/time.Second)%len(r.apps)]
	var pods []corev1.Pod
	var in []string
	for _, m := range r.names {
		list := &corev1.PodList{}
		if err := r.members[m].List(ctx, list, client.InNamespace(a.Namespace), client.MatchingLabels{"app": "web"}); err != nil {
			continue
		}
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
				pods, in = append(pods, p), append(in, m)
			}
		}
	}
	if len(pods) == 0 {
		return errors.New("no pod to kill")
	}
	i := int(f.Duration/time.Second+f.Delay/time.Second) % len(pods)
	p, m := pods[i], in[i]
	defer r.window(f.Kind, m+"/"+a.Namespace+"/"+p.Name)()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, podresponder.StoppedAnnotation)
	if err := r.members[m].Patch(ctx, &p, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return err
	}
	r.mu.Lock()
	r.stops = append(r.stops, PodStop{Addr: p.Status.PodIP + ":8080", At: time.Now(), Killed: true})
	r.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(f.Duration):
	}
	return client.IgnoreNotFound(r.members[m].Delete(context.WithoutCancel(ctx), &p))
}

// --- the run ---

// Report is a run's figures.
type Report struct {
	Duration        time.Duration
	Seed            uint64
	Episodes        int
	FaultsByKind    map[Kind]int
	ChangesByAction map[Action]int
	Sent            int
	SentByVIP       map[string]int
	FailedByCause   map[string]int
	FirstFailures   map[string][]string
	// Failures lists every failed request with its cause (at most 20,000).
	Failures        []string
	Checks, Failed  int
	ConvergeP50     time.Duration
	ConvergeMax     time.Duration
	Converged       int
	PeakRSS         int64
	Baseline, After map[string]Usage
	// Restarted are topology processes (Karmada's, the members') that exited on their own and
	// were started again.
	Restarted  []string
	Violations []string
}

// Usage is a process's footprint.
type Usage struct {
	Goroutines int
	RSS        int64
}

// Run runs the soak: workload and traffic throughout, fault episodes until Duration, then the
// settle and the final checks.
func (r *Runner) Run(ctx context.Context) (*Report, error) {
	start := time.Now()
	if err := r.bound(ctx); err != nil {
		return nil, err
	}
	if _, ok := r.converge(ctx, "the initial deployment"); !ok {
		return nil, errors.New("the initial deployment did not converge")
	}
	r.enableServed(ctx)
	r.mu.Lock()
	r.convergeTimes = nil // the initial deployment is no fault's
	r.mu.Unlock()
	time.Sleep(20 * time.Second) // idle: the baseline
	baseline := r.usage(ctx)
	r.logf("baseline %v; seed %d; duration %s", baseline, r.cfg.Seed, r.cfg.Duration)

	wctx, stopWatch := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); r.watch(wctx) }()
	go func() { defer bg.Done(); r.workload(wctx) }()

	topo := Topology{PushMembers: r.push, Members: r.names, NoLinks: len(r.push) == 0}
	plan := Plan(r.cfg.Seed, 1000, topo)
	end := time.Now().Add(r.cfg.Duration)
	episodes := 0
	for _, e := range plan {
		if time.Now().Add(e.Gap).After(end) {
			break
		}
		time.Sleep(e.Gap)
		episodes++
		var names []string
		for _, f := range e.Faults {
			names = append(names, f.String())
		}
		r.logf("episode %d: %s", episodes, strings.Join(names, ", "))
		var wg sync.WaitGroup
		for _, f := range e.Faults {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(f.Delay)
				if err := r.inject(ctx, f); err != nil {
					r.logf("fault %s: %v", f, err)
				}
			}()
		}
		wg.Wait()
		r.setPaused(true)
		took, ok := r.converge(ctx, fmt.Sprintf("episode %d (%s)", episodes, strings.Join(names, ", ")))
		if ok {
			r.mu.Lock()
			r.convergeTimes = append(r.convergeTimes, took)
			r.mu.Unlock()
		}
		r.setPaused(false)
	}
	// Settle: no more faults nor changes; then every check once more.
	r.setPaused(true)
	stopWatch()
	r.pauseCond.Broadcast()
	bg.Wait()
	r.converge(ctx, "the run")
	time.Sleep(30 * time.Second)
	if diff, err := r.converged(ctx); err != nil || len(diff) > 0 {
		r.violate("invariant 2/3 after the settle: %v %v", err, diff)
	}
	r.traffic.Stop()
	after := r.usage(ctx)
	for name, b := range baseline {
		a := after[name]
		if a.Goroutines > b.Goroutines+b.Goroutines/5+30 {
			r.violate("invariant 4: %s has %d goroutines after the run, %d before", name, a.Goroutines, b.Goroutines)
		}
		if a.RSS > b.RSS*3/2+32<<20 {
			r.violate("invariant 4: %s's RSS is %d MiB after the run, %d MiB before", name, a.RSS>>20, b.RSS>>20)
		}
	}
	for _, p := range r.panics() {
		r.violate("invariant 4: %s", p)
	}
	if err := r.topo.CheckProcesses(); err != nil {
		r.violate("invariant 4: %v", err)
	}
	return r.report(time.Since(start), episodes, baseline, after), nil
}

// usage reads goroutines and RSS of lbfed-controller's leader and standby (by role: a replica
// killed comes back as the standby) and of elb-driver.
func (r *Runner) usage(ctx context.Context) map[string]Usage {
	out := map[string]Usage{}
	leader, _ := r.leader(ctx)
	for i, name := range deploy.ControllerNames(len(r.lbfed.ControllerMetrics)) {
		role := "lbfed-controller (standby)"
		if name == leader {
			role = "lbfed-controller (leader)"
		}
		out[role] = r.footprint(ctx, name, r.lbfed.ControllerMetrics[i])
	}
	out["elb-driver"] = r.footprint(ctx, "elb-driver", r.lbfed.DriverMetrics)
	return out
}

func (r *Runner) footprint(ctx context.Context, name, metrics string) Usage {
	g, _ := metric(ctx, metrics, "go_goroutines")
	u := Usage{Goroutines: int(g)}
	if p := r.lbfed.Process(name); p != nil {
		u.RSS = localup.MemoryOf(p.PID(), "VmRSS")
	}
	return u
}

// panics scans the logs of lbfed's processes and the device's for a panic or a fatal error.
func (r *Runner) panics() []string {
	var out []string
	files, _ := filepath.Glob(filepath.Join(r.topo.LogDir(), "*.log"))
	for _, f := range files {
		base := filepath.Base(f)
		if !strings.HasPrefix(base, "lbfed-controller") && !strings.HasPrefix(base, "lbcf-controller") && base != "elb-driver.log" && base != "alteon-sim.log" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, marker := range []string{"panic:", "Observed a panic", "fatal error:"} {
			if i := bytes.Index(b, []byte(marker)); i >= 0 {
				line := b[i:]
				if j := bytes.IndexByte(line, '\n'); j > 0 {
					line = line[:j]
				}
				out = append(out, fmt.Sprintf("%s: %s", base, line))
			}
		}
	}
	return out
}

func (r *Runner) report(d time.Duration, episodes int, baseline, after map[string]Usage) *Report {
	sent, failed := r.traffic.Totals()
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := &Report{Duration: d, Seed: r.cfg.Seed, Episodes: episodes, FaultsByKind: r.injected, ChangesByAction: r.changes, SentByVIP: sent,
		FailedByCause: map[string]int{}, FirstFailures: map[string][]string{}, Checks: r.checks, Failed: r.failed,
		ConvergeP50: Percentile(r.convergeTimes, 0.5), ConvergeMax: Percentile(r.convergeTimes, 1), Converged: len(r.convergeTimes),
		PeakRSS: r.peakRSS, Baseline: baseline, After: after, Restarted: r.restarted}
	for _, n := range sent {
		rep.Sent += n
	}
	for _, f := range failed {
		c := Cause(f, r.stops, r.windows)
		rep.FailedByCause[c]++
		line := fmt.Sprintf("%s %s %s: %s", f.At.Format("15:04:05.000"), f.VIP, f.Reason, f.Err)
		if len(rep.FirstFailures[c]) < 3 {
			rep.FirstFailures[c] = append(rep.FirstFailures[c], line)
		}
		if len(rep.Failures) < 20000 {
			rep.Failures = append(rep.Failures, c+" "+line)
		}
	}
	for c, n := range rep.FailedByCause {
		if Violation(c) {
			rep.Violations = append(rep.Violations, fmt.Sprintf("invariant 1: %d requests failed, cause %s", n, c))
		}
	}
	rep.Violations = append(rep.Violations, r.violations...)
	return rep
}

// String renders the figures as issue 46 asks for them.
func (rep *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: duration %s, seed %d, %d fault episodes\n", rep.Duration.Round(time.Second), rep.Seed, rep.Episodes)
	fmt.Fprintf(&b, "faults injected by kind:\n")
	for _, k := range Kinds {
		fmt.Fprintf(&b, "  %-32s %d\n", k, rep.FaultsByKind[k])
	}
	fmt.Fprintf(&b, "workload changes: %v\n", rep.ChangesByAction)
	fmt.Fprintf(&b, "requests sent: %d (%v)\n", rep.Sent, rep.SentByVIP)
	total := 0
	for _, n := range rep.FailedByCause {
		total += n
	}
	fmt.Fprintf(&b, "failed requests: %d\n", total)
	for _, c := range sortedKeys(rep.FailedByCause) {
		fmt.Fprintf(&b, "  %-60s %d  %q\n", c, rep.FailedByCause[c], rep.FirstFailures[c])
	}
	fmt.Fprintf(&b, "invariant checks: %d made, %d failed\n", rep.Checks, rep.Failed)
	fmt.Fprintf(&b, "time to converge after the last fault of an episode: p50 %s, max %s (%d episodes converged, bound %s)\n",
		rep.ConvergeP50.Round(100*time.Millisecond), rep.ConvergeMax.Round(100*time.Millisecond), rep.Converged, ConvergeBound)
	fmt.Fprintf(&b, "peak RSS of lbfed-controller: %d MiB\n", rep.PeakRSS>>20)
	fmt.Fprintf(&b, "before the run: %v\nafter the run:  %v\n", rep.Baseline, rep.After)
	fmt.Fprintf(&b, "topology processes that exited on their own and were restarted: %v\n", rep.Restarted)
	fmt.Fprintf(&b, "violations: %d\n", len(rep.Violations))
	for _, v := range rep.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	return b.String()
}
