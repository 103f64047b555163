package federation_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/interpreter"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// Leader election of the test replicas: short, so that failover is seconds, with the ratios of
// the defaults (15 s / 10 s / 2 s).
const (
	testLeaseDuration = 4 * time.Second
	testRenewDeadline = 3 * time.Second
	testRetryPeriod   = time.Second
	// leaseName is the federation's LeaderElectionID.
	leaseName = "lbfed-controller-federation"
)

// TestLeaderFailoverUnderLoad: two lbfed-controller replicas elect a leader; the leader is
// killed with SIGKILL in the middle of 1,000 backend changes (500 of 1,000 pods replaced by new
// ones, in two members) programmed through the Radware driver on a simulated Alteon HA pair.
// The standby must take the lease and finish: every expected backend a real server on both
// units, no real server left for a removed pod, one Registered record per pod. Before the kill
// the standby made no driver call; both replicas serve the interpreter and their probes (webhooks
// are not leader-only). The same 1,000 changes without a failover are the logged baseline.
func TestLeaderFailoverUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lbfed-controller and runs two replicas against a kube-apiserver")
	}
	e := newEnvWithoutController(t)
	g := e.g
	calls := &callLog{}
	url, sim := recordedRadwareDriver(t, calls)
	e.url = url
	bin := buildLbfedController(t)
	kubeconfig := testenv.Cluster(t).KubeconfigPath()
	replicas := []*replica{startReplica(t, bin, kubeconfig, e.ns, "r1"), startReplica(t, bin, kubeconfig, e.ns, "r2")}
	electedReplicas(t, g, replicas)

	e.worldSpec("m1", "m2")(map[string]string{"vip": "127.0.0.51", "port": "80", "protocol": "TCP"})
	first := failoverPods(0, 0)
	e.setFailoverReports(first)
	e.expectProgrammed(g, sim, first)

	// Baseline: 1,000 changes (in every member half the pods replaced by new ones) with no failover.
	second := replaceHalf(first, 1)
	g.Expect(changeSet(first, second)).To(HaveLen(1000))
	start := time.Now()
	e.setFailoverReports(second)
	e.expectProgrammed(g, sim, second)
	baseline := time.Since(start)
	t.Logf("baseline: 1,000 changes in %s; replicas restarted so far (leader election lost): r1 %d, r2 %d", baseline.Round(time.Millisecond), replicas[0].restarted(), replicas[1].restarted())

	// Only the leader calls drivers; both replicas serve the interpreter and are ready.
	leader, standby := electedReplicas(t, g, replicas)
	lease := e.lease()
	t.Logf("%s leads (%s), %s stands by", leader.name, *lease.Spec.HolderIdentity, standby.name)
	g.Expect(leader.metric("webhook_calls", "")).To(BeNumerically(">", 0), "the leader programmed the backends")
	g.Expect(standby.metric("webhook_calls", "")).To(BeZero(), "the standby called no driver")
	for _, r := range replicas {
		r.expectServing(g)
	}

	// 1,000 more changes; the leader is killed once some but not all are on the device.
	next := replaceHalf(second, 2)
	changes := changeSet(second, next)
	g.Expect(changes).To(HaveLen(1000))
	start = time.Now()
	e.setFailoverReports(next)
	g.Eventually(func() int { return changesDone(sim, changes) }, time.Minute, 10*time.Millisecond).Should(BeNumerically(">=", len(changes)/10), "the leader works on the changes")
	// Under load a leader may have lost its lease (and exited) meanwhile: kill the current one.
	leader, standby = electedReplicas(t, g, replicas)
	lease = e.lease()
	killAt := time.Now()
	<-leader.stop(syscall.SIGKILL)
	done := changesDone(sim, changes)
	t.Logf("killed %s with %d of %d changes on the device", leader.name, done, len(changes))
	g.Expect(done).To(BeNumerically("<", len(changes)), "the leader was killed in the middle of the work")

	// The standby takes the lease and finishes.
	g.Eventually(func() string { return *e.lease().Spec.HolderIdentity }, 4*testLeaseDuration, 50*time.Millisecond).ShouldNot(Equal(*lease.Spec.HolderIdentity))
	taken := e.lease()
	acquired := taken.Spec.AcquireTime.Time
	g.Eventually(func() float64 { return standby.metric("leader_election_master_status", leaseName) }, 10*time.Second, 50*time.Millisecond).Should(Equal(1.0))
	e.expectProgrammed(g, sim, next)
	completed := time.Now()
	g.Expect(standby.metric("webhook_calls", "")).To(BeNumerically(">", 0), "the new leader programmed the rest")
	standby.expectServing(g)

	firstCall, ok := calls.firstAfter(acquired)
	g.Expect(ok).To(BeTrue(), "the new leader called the driver")
	t.Logf("replicas restarted after exiting by themselves (leader election lost): r1 %d, r2 %d", replicas[0].restarted(), replicas[1].restarted())
	t.Logf("lease %s; kill -> lease taken by %s %s (transitions %d), -> first driver call %s, -> all %d changes programmed %s",
		testLeaseDuration, standby.name, acquired.Sub(killAt).Round(time.Millisecond), ptrInt32(taken.Spec.LeaseTransitions),
		firstCall.Sub(killAt).Round(time.Millisecond), len(changes), completed.Sub(killAt).Round(time.Millisecond))
	failover := completed.Sub(start)
	t.Logf("1,000 changes programmed in %s with the failover, %s without (baseline, same run): ratio %.2f",
		failover.Round(time.Millisecond), baseline.Round(time.Millisecond), failover.Seconds()/baseline.Seconds())
}

// TestLeaderReleasesLeaseOnSIGTERM: a leader stopped with SIGTERM (a rolling update, a drain)
// releases its lease once its controllers have stopped, so that the standby takes over without
// waiting for the lease to run out. The lease is long (30 s): without the release, the protocol
// forbids the standby to acquire it before 30 s after the last renewal.
func TestLeaderReleasesLeaseOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lbfed-controller and runs two replicas against a kube-apiserver")
	}
	e := newEnvWithoutController(t)
	g := e.g
	bin := buildLbfedController(t)
	kubeconfig := testenv.Cluster(t).KubeconfigPath()
	const lease = 30 * time.Second
	long := []string{"--federation-leader-elect-lease-duration=" + lease.String(), "--federation-leader-elect-renew-deadline=20s", "--federation-leader-elect-retry-period=1s"}
	replicas := []*replica{startReplica(t, bin, kubeconfig, e.ns, "r1", long...), startReplica(t, bin, kubeconfig, e.ns, "r2", long...)}
	leader, standby := electedReplicas(t, g, replicas)
	held := e.lease()
	g.Expect(held.Spec.LeaseDurationSeconds).To(HaveValue(BeEquivalentTo(lease.Seconds())), "the flag sets the lease")

	<-leader.stop(syscall.SIGTERM)
	g.Expect(leader.exitCode()).To(BeZero(), "a clean shutdown")
	g.Eventually(func() float64 { return standby.metric("leader_election_master_status", leaseName) }, lease, 50*time.Millisecond).Should(Equal(1.0))
	taken := e.lease()
	g.Expect(*taken.Spec.HolderIdentity).NotTo(Equal(*held.Spec.HolderIdentity))
	g.Expect(taken.Spec.AcquireTime.Sub(held.Spec.RenewTime.Time)).To(BeNumerically("<", lease), "taken before the lease could have expired: it was released")
	t.Logf("SIGTERM -> standby leads %s after the leader's last renewal we saw (lease %s)", taken.Spec.AcquireTime.Sub(held.Spec.RenewTime.Time).Round(time.Millisecond), lease)
	standby.expectServing(g)
}

// replaceHalf keeps the first half of each member's pods and adds as many new ones of generation
// gen.
func replaceHalf(cur map[string][]pod, gen int) map[string][]pod {
	out := map[string][]pod{}
	for c, ps := range cur {
		out[c] = append(out[c], ps[:len(ps)/2]...)
	}
	for c, ps := range failoverPods(gen, gen*1000) {
		out[c] = append(out[c], ps[:len(ps)/2]...)
	}
	return out
}

// failoverPods are 1,000 pods spread over members m1 and m2, numbered from offset.
func failoverPods(gen, offset int) map[string][]pod {
	out := map[string][]pod{}
	for j := 0; j < 1000; j++ {
		c := fmt.Sprintf("m%d", j%2+1)
		n := offset + j
		out[c] = append(out[c], pod{fmt.Sprintf("p%d-%d", gen, n), fmt.Sprintf("10.%d.%d.%d", 70+j%2, n/250, n%250+1), true})
	}
	return out
}

func (e *env) setFailoverReports(pods map[string][]pod) {
	items := map[string]*runtime.RawExtension{}
	for c, ps := range pods {
		items[c] = report(nil, 1, 1, false, ps...)
	}
	e.setReports(items)
}

// change is one backend change: ip must be a real server (add) or must not (remove).
type change struct {
	ip  string
	add bool
}

func changeSet(before, after map[string][]pod) []change {
	was, is := podIPs(before), podIPs(after)
	var out []change
	for ip := range is {
		if !was[ip] {
			out = append(out, change{ip, true})
		}
	}
	for ip := range was {
		if !is[ip] {
			out = append(out, change{ip, false})
		}
	}
	return out
}

func podIPs(pods map[string][]pod) map[string]bool {
	out := map[string]bool{}
	for _, ps := range pods {
		for _, p := range ps {
			out[p.ip] = true
		}
	}
	return out
}

// changesDone counts the changes the master unit runs.
func changesDone(sim *alteonsim.Pair, changes []change) int {
	have := map[string]bool{}
	for _, ip := range realServerIPs(sim.Master().Snapshot(alteonsim.Running)) {
		have[ip] = true
	}
	n := 0
	for _, c := range changes {
		if have[c.ip] == c.add {
			n++
		}
	}
	return n
}

func realServerIPs(s alteonsim.Snapshot) []string {
	var out []string
	for _, idx := range s.RealServers() {
		ip, _ := s.RealServer(idx)["IpAddr"].(string)
		out = append(out, ip)
	}
	sort.Strings(out)
	return out
}

// expectProgrammed waits until exactly the pods are real servers on both units and each has a
// Registered record.
func (e *env) expectProgrammed(g Gomega, sim *alteonsim.Pair, pods map[string][]pod) {
	var ips, names []string
	for _, ps := range pods {
		for _, p := range ps {
			ips = append(ips, p.ip)
			names = append(names, p.name+"@"+p.ip+":80")
		}
	}
	sort.Strings(ips)
	sort.Strings(names)
	g.Eventually(func(g Gomega) {
		run := sim.Master().Snapshot(alteonsim.Running)
		g.Expect(realServerIPs(run)).To(Equal(ips), "every pod a real server, no orphan")
		g.Expect(sim.Backup().Snapshot(alteonsim.Running).Equal(run)).To(BeTrue(), "the backup unit is in sync")
		recs := &lbcfv1beta1.BackendRecordList{}
		g.Expect(e.c.List(e.ctx, recs, client.InNamespace(e.ns))).To(Succeed())
		var got []string
		for i := range recs.Items {
			r := &recs.Items[i]
			g.Expect(r.IsRegistered()).To(BeTrue(), "record %s is registered", r.Name)
			got = append(got, r.Spec.PodBackendInfo.Name+"@"+r.Status.BackendAddr)
		}
		sort.Strings(got)
		g.Expect(got).To(Equal(names), "one record per pod, none for a removed pod")
		bg := &lbcfv1beta1.BackendGroup{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(e.bg), bg)).To(Succeed())
		g.Expect(bg.Status.RegisteredBackends).To(Equal(int32(len(ips))))
	}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())
}

func (e *env) lease() *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: leaseName}, l)).To(Succeed())
	e.g.Expect(l.Spec.HolderIdentity).NotTo(BeNil())
	return l
}

func ptrInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// electedReplicas waits until exactly one replica leads and returns it and the other.
func electedReplicas(t *testing.T, g Gomega, rs []*replica) (leader, standby *replica) {
	t.Helper()
	g.Eventually(func() []float64 {
		var out []float64
		for _, r := range rs {
			out = append(out, r.metric("leader_election_master_status", leaseName))
		}
		return out
	}, time.Minute, 100*time.Millisecond).Should(ConsistOf(1.0, 0.0), "one leader, one standby")
	if rs[0].metric("leader_election_master_status", leaseName) == 1 {
		return rs[0], rs[1]
	}
	return rs[1], rs[0]
}

// replica is one lbfed-controller process of a two-replica deployment, as the lbfed chart runs
// it: the interpreter and the federation with leader election. Like the kubelet, the test
// restarts a replica that exits by itself (a leader that could not renew its lease exits).
type replica struct {
	t       *testing.T
	name    string
	bin     string
	args    []string
	logPath string
	metrics string // federation /metrics
	probes  string // federation /healthz and /readyz
	interp  string // interpreter base URL
	certDir string

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the current process has exited
	killed   bool          // by the test: not restarted
	restarts int
}

// startReplica starts a replica with the test's lease timings; extra flags override them.
func startReplica(t *testing.T, bin, kubeconfig, ns, name string, extra ...string) *replica {
	t.Helper()
	dir := t.TempDir()
	ports := []int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)}
	r := &replica{t: t, name: name, bin: bin, logPath: filepath.Join(dir, name+".log"), certDir: filepath.Join(dir, "certs"),
		metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0]),
		probes:  fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		interp:  fmt.Sprintf("https://127.0.0.1:%d", ports[2])}
	r.args = []string{"--kubeconfig=" + kubeconfig,
		"--interpreter-bind-address=127.0.0.1:" + strconv.Itoa(ports[2]), "--interpreter-self-signed", "--interpreter-cert-dir=" + r.certDir,
		"--federation-leader-elect", "--federation-leader-elect-namespace=" + ns,
		"--federation-leader-elect-lease-duration=" + testLeaseDuration.String(),
		"--federation-leader-elect-renew-deadline=" + testRenewDeadline.String(),
		"--federation-leader-elect-retry-period=" + testRetryPeriod.String(),
		"--federation-metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--federation-health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--federation-min-retry-delay=200ms", "--federation-retry-delay-step=200ms", "--federation-max-retry-delay=2s"}
	r.args = append(r.args, extra...)
	r.mu.Lock()
	err := r.startLocked()
	r.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		<-r.stop(syscall.SIGKILL)
		if keep := os.Getenv("LBFED_KEEP_LOGS"); keep != "" {
			_ = exec.Command("cp", r.logPath, filepath.Join(keep, t.Name()+"-"+name+".log")).Run()
		}
		if t.Failed() {
			out, _ := os.ReadFile(r.logPath)
			if len(out) > 6000 {
				out = out[len(out)-6000:]
			}
			t.Logf("%s log tail:\n%s", name, out)
		}
	})
	return r
}

func (r *replica) startLocked() error {
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.bin, r.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", r.name, err)
	}
	exited := make(chan struct{})
	r.cmd, r.exited = cmd, exited
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.killed {
			return
		}
		r.restarts++
		r.t.Logf("%s exited by itself (%v); restarting it", r.name, cmd.ProcessState)
		if err := r.startLocked(); err != nil {
			r.t.Error(err)
		}
	}()
	return nil
}

// stop signals the replica, which is not restarted, and returns a channel closed once it exited.
func (r *replica) stop(sig os.Signal) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killed = true
	_ = r.cmd.Process.Signal(sig)
	return r.exited
}

// exitCode is the exit code of the replica's last process (-1 if killed by a signal).
func (r *replica) exitCode() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd.ProcessState.ExitCode()
}

func (r *replica) restarted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.restarts
}

// metric returns the sum of a metric's samples whose line contains match.
func (r *replica) metric(name, match string) float64 { return scrapeSum(r.metrics, name, match) }

// expectServing checks the replica's probes and that its interpreter answers Karmada's calls.
func (r *replica) expectServing(g Gomega) {
	for _, path := range []string{"/healthz", "/readyz"} {
		rsp, err := http.Get(r.probes + path)
		g.Expect(err).NotTo(HaveOccurred())
		rsp.Body.Close()
		g.Expect(rsp.StatusCode).To(Equal(http.StatusOK), "%s federation %s", r.name, path)
	}
	ca, err := os.ReadFile(filepath.Join(r.certDir, interpreter.DefaultCAName))
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer c.CloseIdleConnections()
	for _, path := range []string{interpreter.HealthzPath, interpreter.ReadyzPath} {
		rsp, err := c.Get(r.interp + path)
		g.Expect(err).NotTo(HaveOccurred())
		rsp.Body.Close()
		g.Expect(rsp.StatusCode).To(Equal(http.StatusOK), "%s interpreter %s", r.name, path)
	}
	rsp, err := c.Post(r.interp+interpreter.InterpretPath, "application/json", strings.NewReader(
		`{"apiVersion":"config.karmada.io/v1alpha1","kind":"ResourceInterpreterContext","request":{"uid":"u1","kind":{"group":"lbcf.tkestack.io","version":"v1beta1","kind":"BackendGroup"},"operation":"InterpretReplica","object":{}}}`))
	g.Expect(err).NotTo(HaveOccurred())
	defer rsp.Body.Close()
	var answer struct {
		Response struct {
			UID        string `json:"uid"`
			Successful bool   `json:"successful"`
		} `json:"response"`
	}
	g.Expect(json.NewDecoder(rsp.Body).Decode(&answer)).To(Succeed())
	g.Expect(answer.Response.UID).To(Equal("u1"))
	g.Expect(answer.Response.Successful).To(BeTrue(), "%s interpreter answers", r.name)
}

// callLog records when the driver received each call.
type callLog struct {
	mu    sync.Mutex
	times []time.Time
}

func (l *callLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.times = append(l.times, time.Now())
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// firstAfter returns the first call received after t.
func (l *callLog) firstAfter(t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.times {
		if c.After(t) {
			return c, true
		}
	}
	return time.Time{}, false
}

// recordedRadwareDriver serves the Radware driver over a simulated HA pair whose applies take
// long enough (as on a device, if shorter) that 1,000 changes need several commits, and records
// the calls.
func recordedRadwareDriver(tb testing.TB, calls *callLog) (url string, sim *alteonsim.Pair) {
	o := alteonsim.Options{ApplyDuration: 200 * time.Millisecond, SaveDuration: 20 * time.Millisecond, SyncDuration: 50 * time.Millisecond}
	return radwareDriverWith(tb, o, 10*time.Millisecond, calls.wrap)
}
