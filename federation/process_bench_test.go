package federation_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// controllerProcess is lbfed-controller (federation only) run as a process, so that its memory
// and restart behave as in production.
type controllerProcess struct {
	cmd     *exec.Cmd
	metrics string
}

func buildLbfedController(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "lbfed-controller")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/lbfed/lbfed/cmd/lbfed-controller").CombinedOutput(); err != nil {
		tb.Fatalf("build lbfed-controller: %v\n%s", err, out)
	}
	return bin
}

// controllerLogs numbers the controller logs kept (LBFED_BENCH_CONTROLLER_LOG).
var controllerLogs int

func startLbfedController(tb testing.TB, bin, kubeconfig string, env ...string) *controllerProcess {
	return startLbfedControllerWith(tb, bin, kubeconfig, nil, env...)
}

// startLbfedControllerWith starts the controller with more flags (after the benchmark's own and
// LBFED_BENCH_CONTROLLER_ARGS).
func startLbfedControllerWith(tb testing.TB, bin, kubeconfig string, args []string, env ...string) *controllerProcess {
	mp := testenv.FreePort(tb)
	p := &controllerProcess{metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", mp)}
	// With the front doors, as the chart runs it: the test API server serves stand-ins of the
	// Karmada kinds they watch (testenv.KarmadaStandIns).
	p.cmd = exec.Command(bin, "--kubeconfig="+kubeconfig, "--interpreter-enabled=false", "--federation-leader-elect=false",
		"--federation-metrics-bind-address=127.0.0.1:"+strconv.Itoa(mp), "--federation-health-probe-bind-address=0", "--federation-profiling")
	// Extra flags for an experiment, e.g. -vmodule=reflector=4 to log the informers' lists and
	// watch ends.
	p.cmd.Args = append(p.cmd.Args, strings.Fields(os.Getenv("LBFED_BENCH_CONTROLLER_ARGS"))...)
	p.cmd.Args = append(p.cmd.Args, args...)
	logPath := filepath.Join(tb.TempDir(), "lbfed-controller.log")
	if prefix := os.Getenv("LBFED_BENCH_CONTROLLER_LOG"); prefix != "" {
		controllerLogs++
		logPath = fmt.Sprintf("%s-%d.log", prefix, controllerLogs) // kept after the run
	}
	logf, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.Env = append(os.Environ(), env...)
	if v := os.Getenv("LBFED_BENCH_CONTROLLER_GODEBUG"); v != "" {
		// For the controller alone: GODEBUG itself would reach the API server and etcd too.
		p.cmd.Env = append(p.cmd.Env, "GODEBUG="+v)
	}
	// Dies with the test process, should that be killed (its API server goes too).
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() })
	return p
}

// metric returns the sum of a metric's samples whose labels contain match.
func (p *controllerProcess) metric(name, match string) float64 {
	return scrapeSum(p.metrics, name, match)
}

// scrapeSum reads a /metrics URL and returns the sum of metric name's samples whose line contains
// match (-1 when the URL does not answer).
func scrapeSum(url, name, match string) float64 {
	rsp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer rsp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(rsp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") || !strings.Contains(line, match) {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		sum += v
	}
	return sum
}

// peakRSS is the process's peak resident set (VmHWM) in MiB.
func (p *controllerProcess) peakRSS() float64 {
	if hwm := localup.MemoryOf(p.cmd.Process.Pid, "VmHWM"); hwm > 0 {
		return float64(hwm) / (1 << 20)
	}
	return -1
}

// scaleWorld creates groups BackendGroups, each with perCluster Ready pods in each of the
// clusters, behind one LoadBalancer each.
func (e *env) scaleWorld(tb testing.TB, lbs, groups, perCluster int, clusters ...string) {
	g := e.g
	long := metav1.Duration{Duration: time.Minute}
	g.Expect(e.c.Create(e.ctx, &lbcfv1beta1.LoadBalancerDriver{ObjectMeta: metav1.ObjectMeta{Name: "mem", Namespace: e.ns},
		Spec: lbcfv1beta1.LoadBalancerDriverSpec{DriverType: "Webhook", URL: e.url, Webhooks: []lbcfv1beta1.WebhookConfig{
			{Name: driver.EnsureBackend, Timeout: long}, {Name: driver.DeregisterBackend, Timeout: long}}}})).To(Succeed())
	for _, c := range clusters {
		e.cluster(c, true)
	}
	parallel(lbs, func(i int) error {
		return e.c.Create(e.ctx, &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lb-%04d", i), Namespace: e.ns},
			Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: "mem", LBSpec: map[string]string{"vip": fmt.Sprintf("10.250.%d.%d", i/250, i%250+1)}}})
	})
	parallel(groups, func(i int) error {
		bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bg-%04d", i), Namespace: e.ns}, Spec: lbcfv1beta1.BackendGroupSpec{
			LoadBalancers: []string{fmt.Sprintf("lb-%04d", i%lbs)},
			Pods:          &lbcfv1beta1.PodBackend{Ports: []lbcfv1beta1.PortSelector{{Port: 80, Protocol: "TCP"}}, ByLabel: &lbcfv1beta1.SelectPodByLabel{Selector: map[string]string{"app": "x"}}},
		}}
		if err := e.c.Create(e.ctx, bg); err != nil {
			return err
		}
		rb := &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: bg.Name + "-backendgroup", Namespace: e.ns}, Spec: workv1alpha2.ResourceBindingSpec{
			Resource: workv1alpha2.ObjectReference{APIVersion: lbcfv1beta1.APIVersion, Kind: "BackendGroup", Namespace: e.ns, Name: bg.Name, UID: bg.UID}}}
		for _, c := range clusters {
			rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: e.ns + "-" + c})
		}
		if err := e.c.Create(e.ctx, rb); err != nil {
			return err
		}
		for ci, c := range clusters {
			var pods []pod
			for j := 0; j < perCluster; j++ {
				n := i*perCluster + j
				pods = append(pods, pod{fmt.Sprintf("g%d-p%d", i, j), fmt.Sprintf("10.%d.%d.%d", 100+ci, n/250, n%250+1), true})
			}
			rb.Status.AggregatedStatus = append(rb.Status.AggregatedStatus, workv1alpha2.AggregatedStatusItem{
				ClusterName: e.ns + "-" + c, Status: report(nil, 1, 1, false, pods...), Applied: true, Health: workv1alpha2.ResourceHealthy})
		}
		return e.c.Status().Update(e.ctx, rb)
	})
}

func parallel(n int, f func(i int) error) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			for attempt := 0; attempt < 5; attempt++ {
				if f(i) == nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}(i)
	}
	wg.Wait()
}

// BenchmarkRestartResync: a federation with 10,000 LoadBalancers and 100,000 registered records
// (10,000 groups × two members × 5 pods) is restarted with the lbfed chart's defaults (its
// controller.goMemLimit as GOMEMLIMIT). Measured: time until every object was reconciled again,
// the driver calls that changed something, the restarted process's peak RSS, and its CPU while
// nothing changes afterwards (two minutes, after the resync). Targets: < 60 s, no call, < 512 MiB,
// idle CPU ≈ 0 (no periodic work that grows with the fleet). The first controller's time and
// peak RSS to register everything from scratch are reported beside them.
//
//	go test ./federation -run XXX -bench RestartResync -benchtime 1x -timeout 120m
//
// LBFED_BENCH_RESYNC_LBS sets the number of LoadBalancers (and groups; 10 records each) for a
// quicker run, LBFED_BENCH_GOMEMLIMIT another GOMEMLIMIT than the chart's;
// LBFED_BENCH_HEAP_PROFILE a file for the restarted process's heap profile (taken when idle),
// LBFED_BENCH_CPU_PROFILE one for a CPU profile of its first LBFED_BENCH_CPU_SECONDS (10)
// seconds (LBFED_BENCH_APISERVER_PROFILE: the API server's of the same seconds),
// LBFED_BENCH_IDLE_CPU_PROFILE one for a CPU profile of the idle window.
// LBFED_BENCH_RESTART_GOMEMLIMITS lists GOMEMLIMITs for further restarts on the same world, in
// turn (see restartsByLimit). LBFED_BENCH_CONTROLLER_GODEBUG is the controllers' GODEBUG
// (memprofilerate=4096: a finer heap profile; gctrace=1 logs each collection's live heap),
// LBFED_BENCH_CONTROLLER_LOG a path prefix for their logs, kept, LBFED_BENCH_CONTROLLER_ARGS
// more flags for them. LBFED_BENCH_ROLLOUT_AT restarts the API server during the first build
// (rolloutAt), LBFED_BENCH_ROLLOUT=0 leaves out the rollout after the restart (apiServerRollout).
//
// Measurements and their history: docs/benchmarks.md ("BenchmarkRestartResync (federation)").
func BenchmarkRestartResync(b *testing.B) {
	lbs, perCluster := 10000, 5
	if n, err := strconv.Atoi(os.Getenv("LBFED_BENCH_RESYNC_LBS")); err == nil && n > 0 {
		lbs = n
	}
	groups, records := lbs, lbs*perCluster*2
	b.StopTimer()
	if !inOwnProcess(b) {
		return
	}
	e := newEnvWithoutController(b)
	bin := buildLbfedController(b)
	kc := testenv.Cluster(b).KubeconfigPath()
	e.scaleWorld(b, lbs, groups, perCluster, "m1", "m2")
	start := time.Now()
	first := startLbfedController(b, bin, kc, "GOMEMLIMIT="+chartGoMemLimit(b))
	e.g.Eventually(rolloutAt(b, e, records), 60*time.Minute, 5*time.Second).Should(Equal(records))
	b.ReportMetric(time.Since(start).Seconds(), "s-to-registered-first")
	b.ReportMetric(first.peakRSS(), "MiB-peak-RSS-first")
	_ = first.cmd.Process.Kill()
	_ = first.cmd.Wait()
	e.drv.ResetCalls()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		b.StartTimer()
		p := startLbfedController(b, bin, kc, "GOMEMLIMIT="+chartGoMemLimit(b))
		if path := os.Getenv("LBFED_BENCH_CPU_PROFILE"); path != "" {
			go p.saveCPUProfile(path, cpuProfileSeconds())
		}
		// The API server's side of the first seconds: it encodes what the controller decodes.
		apiProfiled := testenv.ProfileAPIServer(b, e.cfg, "restartresync", time.Duration(cpuProfileSeconds())*time.Second)
		cp0 := testenv.ControlPlaneCPU(b)
		e.g.Eventually(p.resynced(lbs, groups, records), 30*time.Minute, 200*time.Millisecond).Should(BeTrue())
		b.StopTimer()
		b.ReportMetric(time.Since(start).Seconds(), "s-to-resynced")
		b.ReportMetric((testenv.ControlPlaneCPU(b) - cp0).Seconds(), "cp-cpu-s-resync")
		apiProfiled()
		idle := measureIdle(b, e, p)
		b.ReportMetric(idle.allocKiBps, "alloc-KiB/s-idle")
		b.ReportMetric(idle.gcs, "gcs-idle")
		b.ReportMetric(idle.cpuMsPerS, "cpu-ms/s-idle")
		b.ReportMetric(idle.reconciles, "reconciles-idle")
		b.ReportMetric(float64(mutatingCalls(e.drv.Calls())), "driver-calls")
		b.ReportMetric(p.peakRSS(), "MiB-peak-RSS")
		// The live heap: what the heap holds right after a collection (the profile's gc=1).
		path := os.Getenv("LBFED_BENCH_HEAP_PROFILE")
		if path == "" {
			path = filepath.Join(b.TempDir(), "heap.pprof")
		}
		p.saveHeapProfile(b, path)
		b.ReportMetric(p.metric("go_memstats_heap_alloc_bytes", "")/1e6, "MB-live-heap")
		if r, ok := apiServerRollout(b, e, p, groups); ok {
			b.ReportMetric(r.seconds, "s-to-relisted")
			b.ReportMetric(r.rss, "MiB-peak-RSS-rollout")
			b.ReportMetric(r.calls, "driver-calls-rollout")
		}
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
	if os.Getenv("LBFED_BENCH_IDLE_BASELINE") != "0" {
		// The baseline of the idle figures, on the same world: the runtime's own collections
		// (--suspend-idle-gc=false), forced every two minutes.
		p := startLbfedControllerWith(b, bin, kc, []string{"--suspend-idle-gc=false"}, "GOMEMLIMIT="+chartGoMemLimit(b))
		e.g.Eventually(p.resynced(lbs, groups, records), 30*time.Minute, 200*time.Millisecond).Should(BeTrue())
		idle := measureIdle(b, e, p)
		b.ReportMetric(idle.cpuMsPerS, "cpu-ms/s-idle-forced-gc")
		b.ReportMetric(idle.gcs, "gcs-idle-forced-gc")
		b.ReportMetric(idle.reconciles, "reconciles-idle-forced-gc")
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
	if limits := os.Getenv("LBFED_BENCH_RESTART_GOMEMLIMITS"); limits != "" {
		restartsByLimit(b, e, bin, kc, strings.Split(limits, ","), lbs, groups, records)
	}
}

// idleFigures is what measureIdle measured over idleWindow.
type idleFigures struct{ cpuMsPerS, gcs, allocKiBps, reconciles float64 }

// measureIdle measures the resynced controller p while nothing changes. The controller is alive
// (its metrics answer, and it reconciled every object just before). In the first grace period (a
// minute) after the restart each group is looked at once more (members are re-observed); after
// that, what the process does while nothing changes should grow with nothing: measured over the
// next two minutes (idleWindow).
func measureIdle(b *testing.B, e *env, p *controllerProcess) idleFigures {
	kinds := []string{"BackendGroup", "LoadBalancer", "BackendRecord"}
	reconciled := func() (n []float64) {
		for _, k := range kinds {
			n = append(n, p.metric("key_process_latency_count", `crd="`+k+`"`))
		}
		return n
	}
	time.Sleep(70 * time.Second)
	// The scrapes stay outside the CPU window: they are the benchmark's, not idle work.
	before, gc0 := reconciled(), p.metric("go_gc_duration_seconds_count", "")
	alloc0 := p.metric("go_memstats_alloc_bytes_total", "")
	profiled := make(chan struct{})
	if path := os.Getenv("LBFED_BENCH_IDLE_CPU_PROFILE"); path != "" {
		// The profile is what the idle window's CPU was spent on; its 100 Hz sampling is in the
		// figure too (a few µs a second).
		go func() {
			defer close(profiled)
			if err := p.saveProfile(fmt.Sprintf("profile?seconds=%d", int(idleWindow.Seconds())), path); err != nil {
				b.Log("idle CPU profile:", err)
			}
		}()
	} else {
		close(profiled)
	}
	cpu0 := p.cpuTime()
	time.Sleep(idleWindow)
	cpu1 := p.cpuTime()
	<-profiled
	after, gc1 := reconciled(), p.metric("go_gc_duration_seconds_count", "")
	e.g.Expect(after[0]).To(BeNumerically(">=", before[0]), "the controller answers its metrics")
	f := idleFigures{
		cpuMsPerS: float64((cpu1 - cpu0).Milliseconds()) / idleWindow.Seconds(),
		// Collections in the idle window: the runtime forces one every two minutes unless the
		// controller suspends them (--suspend-idle-gc), and its marking grows with the live heap.
		gcs: gc1 - gc0,
		// What the idle process allocates drives its collections: with GOMEMLIMIT near the live
		// heap, each few megabytes allocated start one.
		allocKiBps: (p.metric("go_memstats_alloc_bytes_total", "") - alloc0) / 1024 / idleWindow.Seconds(),
	}
	for i := range kinds {
		f.reconciles += after[i] - before[i]
	}
	return f
}

// rolloutAt returns the registered backends, as e.registeredBackends does, and with
// LBFED_BENCH_ROLLOUT_AT (a share of the records, e.g. 0.5) restarts the API server once that
// share is registered: the first controller then lists every kind again while it builds its
// caches and registers the rest, as a control-plane rollout during a large first sync does. Its
// MiB-peak-RSS-first then holds the relist beside the caches being built; the new server is
// required to have served the relists (its metrics) before the records count as registered.
func rolloutAt(b *testing.B, e *env, records int) func() int {
	v := os.Getenv("LBFED_BENCH_ROLLOUT_AT")
	if v == "" {
		return e.registeredBackends
	}
	at, err := strconv.ParseFloat(v, 64)
	if err != nil || at <= 0 || at > 1 {
		b.Fatalf("LBFED_BENCH_ROLLOUT_AT=%q: want a share of the records, 0 < share <= 1", v)
	}
	done := false
	return func() int {
		n := e.registeredBackends()
		if !done && float64(n) >= at*float64(records) {
			done = true
			b.Logf("restarting the API server at %d of %d records registered", n, records)
			if err := testenv.Cluster(b).RestartAPIServer(e.ctx); err != nil {
				b.Fatal(err)
			}
			return -1
		}
		if done && n == records && !e.relisted() {
			return -1 // not yet listed again
		}
		return n
	}
}

// apiServerRollout restarts the API server under the resynced controller p, as a control-plane
// rollout does: every watch ends, and the new server's watch caches begin at etcd's current
// revision, so each informer lists its kind again ("too old resource version") while it still
// holds its store. Reported: the controller's peak RSS from the restart on
// (MiB-peak-RSS-rollout: the relist beside the cache it holds), its mutating driver calls
// meanwhile (driver-calls-rollout: nothing changed, none expected), and the time from the new
// server's readiness until it has answered the controller's list of every kind it caches and
// the controller has reconciled each group again with nothing left queued (s-to-relisted).
// LBFED_BENCH_ROLLOUT=0 leaves it out (ok false).
func apiServerRollout(b *testing.B, e *env, p *controllerProcess, groups int) (r rollout, ok bool) {
	if os.Getenv("LBFED_BENCH_ROLLOUT") == "0" {
		return r, false
	}
	groups0 := p.metric("key_process_latency_count", `crd="BackendGroup"`)
	calls := mutatingCalls(e.drv.Calls())
	// Resets the process's VmHWM to its current RSS (proc(5), clear_refs).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0); err != nil {
		b.Fatal("reset the controller's peak RSS: ", err)
	}
	if err := testenv.Cluster(b).RestartAPIServer(e.ctx); err != nil {
		b.Fatal(err)
	}
	start := time.Now() // the new server ready: its stop took the supervisor's timeout at most
	e.g.Eventually(func() bool {
		return e.relisted() && p.metric("key_process_latency_count", `crd="BackendGroup"`) >= groups0+float64(groups) &&
			p.metric("pending_key", "") == 0 && p.metric("working_key", "") == 0
	}, 15*time.Minute, time.Second).Should(BeTrue(), "the controller lists again and reconciles its groups")
	return rollout{time.Since(start).Seconds(), p.peakRSS(), float64(mutatingCalls(e.drv.Calls()) - calls)}, true
}

// rollout is what apiServerRollout measured: seconds to relisted, the controller's peak RSS
// (MiB) and its mutating driver calls from the restart on.
type rollout struct{ seconds, rss, calls float64 }

// relisted tells whether the API server (since it started) has sent a whole list of each kind
// the controller caches: a watch list's initial events (client-go's default since 1.35) or a
// LIST, in the server's own metrics. The benchmark lists groups itself; the records and
// bindings only the controller lists.
func (e *env) relisted() bool {
	raw, err := kubernetes.NewForConfigOrDie(e.cfg).RESTClient().Get().AbsPath("/metrics").DoRaw(e.ctx)
	if err != nil {
		return false
	}
	lines := strings.Split(string(raw), "\n")
	for _, resource := range []string{"backendrecords", "backendgroups", "loadbalancers", "resourcebindings"} {
		if !slices.ContainsFunc(lines, func(line string) bool {
			return strings.Contains(line, `resource="`+resource+`"`) &&
				(strings.HasPrefix(line, "apiserver_watch_list_duration_seconds_count{") && !strings.HasSuffix(line, " 0") ||
					strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `verb="LIST"`) && strings.Contains(line, `code="200"`))
		}) {
			return false
		}
	}
	return true
}

// mutatingCalls counts the driver calls that can change a load balancer.
func mutatingCalls(calls []memdriver.Call) int {
	n := 0
	for _, c := range calls {
		if c.Webhook != driver.Healthz && c.Webhook != driver.ValidateLoadBalancer && c.Webhook != driver.ValidateBackend {
			n++
		}
	}
	return n
}

// restartsByLimit restarts the controller once per entry of limits, in the order given, on the
// world BenchmarkRestartResync built (LBFED_BENCH_RESTART_GOMEMLIMITS=800MiB,480MiB,800MiB,…):
// alternated on one world, restarts under two limits are compared on the same objects and
// machine state, where single full-size runs vary by 10-20 % between identical binaries. Each
// limit's median resync, peak RSS, controller CPU and collections are reported (units suffixed
// with the limit), each restart is logged. Unless LBFED_BENCH_ROLLOUT=0, each resynced controller
// then goes through an API server rollout (apiServerRollout) under its limit, where a relist can
// make the limit bind: the median of its peak RSS, time to relisted and driver calls too.
func restartsByLimit(b *testing.B, e *env, bin, kc string, limits []string, lbs, groups, records int) {
	type round struct {
		resync, rss, cpu, gcs float64
		rollout               rollout
	}
	got := map[string][]round{}
	rolledOut := false // apiServerRollout ran (not left out by LBFED_BENCH_ROLLOUT=0)
	for _, limit := range limits {
		start := time.Now()
		p := startLbfedController(b, bin, kc, "GOMEMLIMIT="+limit)
		e.g.Eventually(p.resynced(lbs, groups, records), 30*time.Minute, 200*time.Millisecond).Should(BeTrue())
		r := round{resync: time.Since(start).Seconds(), rss: p.peakRSS(), cpu: p.cpuTime().Seconds(), gcs: p.metric("go_gc_duration_seconds_count", "")}
		b.Logf("GOMEMLIMIT=%s: resync %.2f s, peak RSS %.1f MiB, controller CPU %.2f s, %.0f collections, heap %.1f MB",
			limit, r.resync, r.rss, r.cpu, r.gcs, p.metric("go_memstats_heap_alloc_bytes", "")/1e6)
		if ro, ok := apiServerRollout(b, e, p, groups); ok {
			r.rollout, rolledOut = ro, true
			b.Logf("GOMEMLIMIT=%s: rollout peak RSS %.1f MiB, relisted in %.2f s, %.0f driver calls", limit, ro.rss, ro.seconds, ro.calls)
		}
		got[limit] = append(got[limit], r)
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
	for limit, rounds := range got {
		med := func(f func(round) float64) float64 {
			v := make([]float64, len(rounds))
			for i, r := range rounds {
				v[i] = f(r)
			}
			slices.Sort(v)
			return (v[(len(v)-1)/2] + v[len(v)/2]) / 2
		}
		b.ReportMetric(med(func(r round) float64 { return r.resync }), "s-to-resynced@"+limit)
		b.ReportMetric(med(func(r round) float64 { return r.rss }), "MiB-peak-RSS@"+limit)
		b.ReportMetric(med(func(r round) float64 { return r.cpu }), "cpu-s@"+limit)
		b.ReportMetric(med(func(r round) float64 { return r.gcs }), "gcs@"+limit)
		if rolledOut {
			b.ReportMetric(med(func(r round) float64 { return r.rollout.rss }), "MiB-peak-RSS-rollout@"+limit)
			b.ReportMetric(med(func(r round) float64 { return r.rollout.seconds }), "s-to-relisted@"+limit)
			b.ReportMetric(med(func(r round) float64 { return r.rollout.calls }), "driver-calls-rollout@"+limit)
		}
	}
}

// resynced tells when the restarted controller has reconciled every object of the world once and
// has nothing queued or in hand.
func (p *controllerProcess) resynced(lbs, groups, records int) func() bool {
	return func() bool {
		return p.metric("key_process_latency_count", `crd="BackendRecord"`) >= float64(records) &&
			p.metric("key_process_latency_count", `crd="LoadBalancer"`) >= float64(lbs) &&
			p.metric("key_process_latency_count", `crd="BackendGroup"`) >= float64(groups) &&
			p.metric("pending_key", "") == 0 && p.metric("working_key", "") == 0
	}
}

// idleWindow is how long BenchmarkRestartResync measures the idle controller: the Go runtime
// forces a collection every two minutes when nothing else starts one, so a window of that length
// holds one and the CPU figure is their average rather than none or a whole one (one minute at
// 100,000 records: 12.2 ms/s).
const idleWindow = 2 * time.Minute

// chartGoMemLimit is the lbfed chart's default controller.goMemLimit: benchmarks run the
// controller as the chart would.
func chartGoMemLimit(tb testing.TB) string {
	if v := os.Getenv("LBFED_BENCH_GOMEMLIMIT"); v != "" {
		return v // an experiment's limit instead of the chart's
	}
	data, err := os.ReadFile("../charts/lbfed/values.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	var v struct {
		Controller struct {
			GoMemLimit string `json:"goMemLimit"`
		} `json:"controller"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil || v.Controller.GoMemLimit == "" {
		tb.Fatalf("charts/lbfed/values.yaml: controller.goMemLimit: %q, %v", v.Controller.GoMemLimit, err)
	}
	return v.Controller.GoMemLimit
}

// cpuTime is the process's CPU time so far.
func (p *controllerProcess) cpuTime() time.Duration { return localup.CPUTimeOf(p.cmd.Process.Pid) }

func (e *env) registeredRecords() int {
	list := &lbcfv1beta1.BackendRecordList{}
	if err := e.c.List(e.ctx, list, client.InNamespace(e.ns)); err != nil {
		return -1
	}
	n := 0
	for i := range list.Items {
		if list.Items[i].IsRegistered() {
			n++
		}
	}
	return n
}

// registeredBackends sums the groups' registered backends (a list of groups, not of the records:
// at 100,000 records that would cost the API server more than the controller under test).
func (e *env) registeredBackends() int {
	list := &lbcfv1beta1.BackendGroupList{}
	if err := e.c.List(e.ctx, list, client.InNamespace(e.ns)); err != nil {
		return -1
	}
	n := 0
	for i := range list.Items {
		n += int(list.Items[i].Status.RegisteredBackends)
	}
	return n
}

// BenchmarkControllerRSS: the federation controller's peak RSS while it registers 10,000
// backends in each of three members (30,000 records, 20 groups so that each member report stays
// within its byte budget). Target < 256 MiB. Run with Go's default GC, and with GOMEMLIMIT=200MiB
// as the lbfed chart's goMemLimit would set it for a 256Mi container: the live heap is about
// 70 MiB, so the limit bounds the garbage without making the GC thrash.
//
//	go test ./federation -run XXX -bench ControllerRSS -benchtime 1x -timeout 60m
//
// Each variant runs in a test process of its own, so on an API server of its own: the test API
// server is shared by a process's tests, and a second variant's controller used to find the
// first one's records, groups and load balancers (whose driver had gone) beside its own —
// a bigger cache and more work, which was read as "GOMEMLIMIT costs RSS and time" (at 12,000
// records, one run each: the second variant in the shared process 223.5 MiB and 109 s, in its own
// 190.3 MiB and 71 s — 1.17× the RSS and 1.53× the time). At 30,000 records, each variant in its
// own process (2 cores, load 7-13 from other benchmarks): default GC 460.8 MiB and 422 s,
// GOMEMLIMIT=200MiB 243.7 MiB and 403 s (0.53× the RSS, 0.95× the time) — the chart's advice
// (256Mi with goMemLimit 200MiB) holds; the time is the API server's (two writes per record at
// its ≈ 7 ms of control-plane CPU per record on this machine, see BenchmarkRegister5000Pods).
// Its floor is measured in the same run: the controller stopped, its records are written again
// by a bare client (testenv.Replay, as BenchmarkRegister5000Pods does), reported as
// s-bare-writes and bare-cp-cpu-ms/record beside the controller's s-to-registered and
// cp-cpu-ms/record. Full size with the floor, 2026-11-29 (nothing else running): default GC
// 202.5 s against 195.8 s of bare writes (1.03×), 10.35 against 11.68 ms of control-plane CPU a
// record, peak RSS 276.1 MiB; GOMEMLIMIT=200MiB 236.0 s against 210.9 s (1.12×), 12.37 against
// 12.60 ms, peak RSS 229.5 MiB, of it at most 191.7 MiB anonymous (the limit held) and ≈ 31 MiB
// the binary's pages, which GOMEMLIMIT does not count. Again 2026-12-02 (GOMEMLIMIT=200MiB alone):
// 258.6 s against 261.4 s of bare writes (0.99×), 12.52 against 14.83 ms, peak RSS 231.9 MiB.
// LBFED_BENCH_RSS_PODS sets the pods per group and member (default 500) for a quicker run.
func BenchmarkControllerRSS(b *testing.B) {
	groups, perCluster := 20, 500 // 20 groups × 500 pods × 3 members = 30,000 records
	if n, err := strconv.Atoi(os.Getenv("LBFED_BENCH_RSS_PODS")); err == nil && n > 0 {
		perCluster = n
	}
	for _, v := range []struct{ name, env string }{{"default-GC", ""}, {"GOMEMLIMIT-200MiB", "GOMEMLIMIT=200MiB"}} {
		b.Run(v.name, func(b *testing.B) {
			b.StopTimer()
			if !inOwnProcess(b) {
				return
			}
			for i := 0; i < b.N; i++ {
				e := newEnvWithoutController(b)
				bin := buildLbfedController(b)
				kc := testenv.Cluster(b).KubeconfigPath()
				e.scaleWorld(b, groups, groups, perCluster, "m1", "m2", "m3")
				start, cp0 := time.Now(), testenv.ControlPlaneCPU(b)
				var env []string
				if v.env != "" {
					env = append(env, v.env)
				}
				p := startLbfedController(b, bin, kc, env...)
				if path := os.Getenv("LBFED_BENCH_HEAP_PROFILE"); path != "" {
					// A profile half-way, when the controller is busiest.
					e.g.Eventually(e.registeredBackends, 60*time.Minute, time.Second).Should(BeNumerically(">=", groups*perCluster*3/2))
					p.saveHeapProfile(b, path+".mid")
				}
				e.g.Eventually(e.registeredBackends, 60*time.Minute, 5*time.Second).Should(Equal(groups * perCluster * 3))
				elapsed := time.Since(start)
				records := float64(groups * perCluster * 3)
				b.ReportMetric(elapsed.Seconds(), "s-to-registered")
				b.ReportMetric(float64((testenv.ControlPlaneCPU(b)-cp0).Milliseconds())/records, "cp-cpu-ms/record")
				b.ReportMetric(p.peakRSS(), "MiB-peak-RSS")
				if path := os.Getenv("LBFED_BENCH_HEAP_PROFILE"); path != "" {
					p.saveHeapProfile(b, path)
				}
				// The floor in the same run: the controller stopped, its records written again
				// by a bare client (see testenv.Replay).
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
				bare, bareCPU := e.replayRecords(b)
				b.ReportMetric(bare.Seconds(), "s-bare-writes")
				b.ReportMetric(float64(bareCPU.Milliseconds())/records, "bare-cp-cpu-ms/record")
				b.ReportMetric(elapsed.Seconds()/bare.Seconds(), "x-bare-writes")
			}
		})
	}
}

// replayRecords writes e's records again with a bare client into a namespace of its own, as
// the controller wrote them (testenv.Replay), and returns the time and the control plane's CPU
// it took: the API server's floor for registering them.
func (e *env) replayRecords(tb testing.TB) (elapsed, cpu time.Duration) {
	var written []client.Object
	for _, br := range e.records(tb) {
		written = append(written, br)
	}
	return testenv.Replay{Config: e.cfg, Scheme: scheme, Namespace: e.ns + "-bare"}.Run(tb, nil, written, nil)
}

// saveHeapProfile fetches the process's heap profile (for go tool pprof).
func (p *controllerProcess) saveHeapProfile(tb testing.TB, path string) {
	if err := p.saveProfile("heap?gc=1", path); err != nil {
		tb.Fatal(err)
	}
}

// saveCPUProfile writes a CPU profile of the process's first seconds (from when its metrics
// server answers), for go tool pprof; errors leave no file.
func (p *controllerProcess) saveCPUProfile(path string, seconds int) {
	for i := 0; i < 100 && scrapeSum(p.metrics, "go_goroutines", "") < 0; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	_ = p.saveProfile(fmt.Sprintf("profile?seconds=%d", seconds), path)
}

// saveProfile writes the process's /debug/pprof/<name> to path.
func (p *controllerProcess) saveProfile(name, path string) error {
	rsp, err := http.Get(strings.TrimSuffix(p.metrics, "/metrics") + "/debug/pprof/" + name)
	if err != nil {
		return err
	}
	defer rsp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, rsp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cpuProfileSeconds is LBFED_BENCH_CPU_SECONDS, 10 by default.
func cpuProfileSeconds() int {
	if n, err := strconv.Atoi(os.Getenv("LBFED_BENCH_CPU_SECONDS")); err == nil && n > 0 {
		return n
	}
	return 10
}

// ownProcessEnv names the one benchmark a child process runs.
const ownProcessEnv = "LBFED_BENCH_OWN_PROCESS"

// inOwnProcess reports whether b is to run here. Otherwise it runs b in a new process of this
// test binary — on a test API server of its own, as the API server is shared by a process's
// tests and benchmarks and a controller process watches every namespace — reports the figures
// that process printed as b's, and returns false.
func inOwnProcess(b *testing.B) bool {
	b.Helper()
	if os.Getenv(ownProcessEnv) == b.Name() {
		return true
	}
	var pattern []string
	for _, part := range strings.Split(b.Name(), "/") {
		pattern = append(pattern, "^"+regexp.QuoteMeta(part)+"$")
	}
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench="+strings.Join(pattern, "/"), "-test.benchtime=1x", "-test.timeout=90m")
		cmd.Env = append(os.Environ(), ownProcessEnv+"="+b.Name())
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("%s in its own process: %v\n%s", b.Name(), err, out)
		}
		figures := 0
		for _, line := range strings.Split(string(out), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 4 || (fields[0] != b.Name() && !strings.HasPrefix(fields[0], b.Name()+"-")) {
				if testing.Verbose() && strings.HasPrefix(line, "    ") {
					b.Log(strings.TrimSpace(line)) // the benchmark's own log
				}
				continue
			}
			for j := 2; j+1 < len(fields); j += 2 {
				if fields[j+1] == "ns/op" {
					continue
				}
				v, err := strconv.ParseFloat(fields[j], 64)
				if err != nil {
					b.Fatalf("figure %q of %q: %v", fields[j], line, err)
				}
				b.ReportMetric(v, fields[j+1])
				figures++
			}
		}
		if figures == 0 {
			b.Fatalf("%s printed no figures:\n%s", b.Name(), out)
		}
	}
	return false
}
