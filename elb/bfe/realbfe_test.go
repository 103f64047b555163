package bfe_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbfed/lbfed/elb/bfe"
	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// realBFE is a BFE process on loopback ports, configured from a store the test's driver manages.
type realBFE struct {
	httpURL, monitorURL string
	store               *bfe.Store
	logDir              string
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// bfeVersion returns the (major, minor, patch) of `bfe -v` ("bfe version: v1.8.5").
func bfeVersion(t *testing.T, bin string) [3]int {
	out, err := exec.Command(bin, "-v").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -v: %v: %s", bin, err, out)
	}
	m := regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("cannot read the version in %q", out)
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return v
}

// startBFE writes a configuration root with the minimal runnable configuration of BFE (TLS files
// are mandatory even for HTTP), points the routing files at a fresh store, and starts BFE bound to
// 127.0.0.1 (v1.8.4+ options; older versions would listen on all interfaces).
func startBFE(t *testing.T, bin string) *realBFE {
	t.Helper()
	if v := bfeVersion(t, bin); v[0] < 1 || v[0] == 1 && (v[1] < 8 || v[1] == 8 && v[2] < 4) {
		t.Skipf("BFE %d.%d.%d binds every interface; this test needs v1.8.4+ (HttpAddr/HttpsAddr/MonitorAddr)", v[0], v[1], v[2])
	}
	root := t.TempDir()
	store, err := bfe.OpenStore(filepath.Join(root, "lbfed"))
	if err != nil {
		t.Fatal(err)
	}
	httpPort, httpsPort, monitorPort := freePort(t), freePort(t), freePort(t)
	if err := bfe.WriteLoopbackRoot(root, httpPort, httpsPort, monitorPort, "lbfed"); err != nil {
		t.Fatal(err)
	}
	// The store needs its first version before BFE starts.
	if _, err := bfe.NewFrontend(bfe.FrontendOptions{Store: store, Reloader: &bfe.Monitor{BaseURL: "http://127.0.0.1:1"}}); err != nil {
		t.Fatal(err)
	}
	logDir := t.TempDir()
	cmd := exec.Command(bin, "-c", root, "-l", logDir)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT) // graceful shutdown
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			for _, f := range []string{"bfe.log", "bfe.wf.log"} {
				b, _ := os.ReadFile(filepath.Join(logDir, f))
				t.Logf("%s:\n%s", f, tail(b, 4000))
			}
			t.Logf("bfe output:\n%s", out.String())
		}
	})
	r := &realBFE{httpURL: fmt.Sprintf("http://127.0.0.1:%d", httpPort), monitorURL: fmt.Sprintf("http://127.0.0.1:%d", monitorPort),
		store: store, logDir: logDir}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(r.monitorURL + "/monitor/host_table_version")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		select {
		case <-exited:
			t.Fatalf("bfe exited during startup:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("bfe monitor not ready after 30s:\n%s", out.String())
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// backendServer answers every request with its name.
func backendServer(t *testing.T, name string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) }))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

type trafficClient struct {
	base string
	c    *http.Client
}

// get sends one request for host with an optional cookie and returns the answering backend.
func (tc trafficClient) get(host, path, cookie string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, tc.base+path, nil)
	if err != nil {
		return "", err
	}
	req.Host = host
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := tc.c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), nil
}

func (tc trafficClient) split(g Gomega, n int, host, path, cookie string) map[string]int {
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		who, err := tc.get(host, path, cookie)
		g.Expect(err).NotTo(HaveOccurred())
		counts[who]++
	}
	return counts
}

// TestRealBFE drives a real BFE (BFE_BIN, v1.8.4+) through the driver: routes with cookie
// conditions, per-request splits across member sub-clusters and instances, weight and backend
// changes, and no failed request while 40 consecutive reloads happen under traffic.
func TestRealBFE(t *testing.T) {
	bin := os.Getenv("BFE_BIN")
	if bin == "" {
		t.Skip("BFE_BIN is not set: the real-BFE end-to-end test needs a BFE binary")
	}
	g := NewWithT(t)
	b := startBFE(t, bin)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	metrics := bfe.NewMetrics(reg)
	fe, err := bfe.NewFrontend(bfe.FrontendOptions{Store: b.store, Reloader: &bfe.Monitor{BaseURL: b.monitorURL}, Metrics: metrics})
	g.Expect(err).NotTo(HaveOccurred())
	d := bfe.NewDriver(bfe.DriverOptions{Frontend: fe, Metrics: metrics})
	traffic := trafficClient{base: b.httpURL, c: &http.Client{Timeout: 10 * time.Second}}

	a1, a2, b1 := backendServer(t, "m1-a"), backendServer(t, "m1-b"), backendServer(t, "m2-a")
	canary := backendServer(t, "canary")
	created, err := d.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{LBSpec: map[string]string{"host": "app.example.test", "name": "web"}})
	g.Expect(err).NotTo(HaveOccurred())
	info := created.LBInfo
	ensure := func(info map[string]string, addr string, params map[string]string) {
		r, err := d.EnsureBackend(ctx, &driver.BackendOperationRequest{LBInfo: info, BackendAddr: addr, Parameters: params})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Status).To(Equal(driver.StatusSucc), r.Msg)
	}
	m1 := func(cw int) map[string]string {
		return map[string]string{"lbfed.io/cluster": "m1", "lbfed.io/cluster-weight": strconv.Itoa(cw)}
	}
	m2 := func(cw int) map[string]string {
		return map[string]string{"lbfed.io/cluster": "m2", "lbfed.io/cluster-weight": strconv.Itoa(cw)}
	}
	ensure(info, a1, m1(3))
	ensure(info, a2, m1(3))
	ensure(info, b1, m2(1))

	// Sub-cluster weights 3:1 per request (one client), instances 1:1 inside m1.
	counts := traffic.split(g, 400, "app.example.test", "/", "")
	t.Logf("split at m1:m2 = 3:1: %v", counts)
	g.Expect(counts["m1-a"] + counts["m1-b"]).To(BeNumerically("~", 300, 45))
	g.Expect(counts["m1-a"]).To(BeNumerically("~", counts["m1-b"], 40))
	g.Expect(counts["m2-a"]).To(BeNumerically("~", 100, 45))

	// Change sub-cluster weights to 1:3.
	ensure(info, a1, m1(1))
	ensure(info, a2, m1(1))
	ensure(info, b1, m2(3))
	counts = traffic.split(g, 400, "app.example.test", "/", "")
	t.Logf("split at m1:m2 = 1:3: %v", counts)
	g.Expect(counts["m2-a"]).To(BeNumerically("~", 300, 45))

	// A canary route on the same host and path, selected by cookie.
	cr, err := d.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{LBSpec: map[string]string{"host": "app.example.test", "cookie": "canary:yes|true", "name": "web-canary"}})
	g.Expect(err).NotTo(HaveOccurred())
	ensure(cr.LBInfo, canary, nil)
	g.Expect(traffic.split(g, 20, "app.example.test", "/x", "canary=yes")).To(Equal(map[string]int{"canary": 20}))
	g.Expect(traffic.split(g, 5, "app.example.test", "/x", "canary=true")).To(Equal(map[string]int{"canary": 5}))
	g.Expect(traffic.split(g, 50, "app.example.test", "/x", "canary=no")).NotTo(HaveKey("canary"))

	// More route shapes: wildcard host, header condition with a plain route on the same path, a
	// path-only route for any host with an exact path.
	shapes := []struct {
		spec    map[string]string
		backend string
	}{
		{map[string]string{"host": "*.wild.example.test", "name": "wild"}, backendServer(t, "wild")},
		{map[string]string{"host": "app.example.test", "path": "/api/*", "name": "api"}, backendServer(t, "api")},
		{map[string]string{"host": "app.example.test", "path": "/api/*", "header": "X-Canary:yes", "name": "api-hdr"}, backendServer(t, "api-hdr")},
		{map[string]string{"host": "*", "path": "/healthz", "name": "any"}, backendServer(t, "any")},
	}
	for _, sh := range shapes {
		c, err := d.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{LBSpec: sh.spec})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Status).To(Equal(driver.StatusSucc), c.Msg)
		ensure(c.LBInfo, sh.backend, nil)
	}
	for _, probe := range []struct{ host, path, header, want string }{
		{"a.wild.example.test", "/", "", "wild"},
		{"app.example.test", "/api/v1", "", "api"},
		{"app.example.test", "/api", "yes", "api-hdr"},
		{"app.example.test", "/apix", "", "m1-a|m1-b|m2-a"},
		{"elsewhere.test", "/healthz", "", "any"},
	} {
		req, err := http.NewRequest(http.MethodGet, b.httpURL+probe.path, nil)
		g.Expect(err).NotTo(HaveOccurred())
		req.Host = probe.host
		if probe.header != "" {
			req.Header.Set("X-Canary", probe.header)
		}
		resp, err := traffic.c.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%+v", probe)
		g.Expect(string(body)).To(MatchRegexp("^("+probe.want+")$"), "%+v", probe)
	}

	// Deregistering m2's only backend moves all traffic to m1.
	r, err := d.DeregisterBackend(ctx, &driver.BackendOperationRequest{LBInfo: info, BackendAddr: b1, Parameters: m2(3)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Status).To(Equal(driver.StatusSucc), r.Msg)
	counts = traffic.split(g, 100, "app.example.test", "/", "")
	g.Expect(counts["m1-a"] + counts["m1-b"]).To(Equal(100))
	ensure(info, b1, m2(1))

	// 40 consecutive reloads under continuous traffic: weight changes (gslb), and an extra
	// LoadBalancer added and removed (gslb + server data in both orders). No request may fail.
	stop := make(chan struct{})
	var sent, failed atomic.Int64
	var failures sync.Map
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := traffic.get("app.example.test", "/", ""); err != nil {
					failed.Add(1)
					failures.Store(err.Error(), true)
				}
				sent.Add(1)
			}
		}()
	}
	extra := map[string]string{"host": "extra.example.test", "name": "extra"}
	startVersion := fe.Version()
	reloadsBefore := reloadCount(t, reg)
	for i := 0; i < 40; i++ {
		switch i % 4 {
		case 0:
			p := m1(1)
			p["weight"] = strconv.Itoa(i + 1)
			ensure(info, a1, p)
		case 1:
			ensure(extra, canary, nil)
		case 2:
			ensure(info, b1, m2(i))
		case 3:
			del, err := d.DeleteLoadBalancer(ctx, &driver.DeleteLoadBalancerRequest{LBInfo: extra})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(del.Status).To(Equal(driver.StatusSucc), del.Msg)
		}
		if i%4 == 1 {
			g.Expect(traffic.get("extra.example.test", "/", "")).To(Equal("canary"))
		}
	}
	close(stop)
	wg.Wait()
	var msgs []string
	failures.Range(func(k, _ any) bool { msgs = append(msgs, k.(string)); return true })
	reloads := reloadCount(t, reg) - reloadsBefore
	t.Logf("%d versions, %d reloads, %d requests during the reloads, %d failed %v", fe.Version()-startVersion, reloads, sent.Load(), failed.Load(), msgs)
	g.Expect(fe.Version() - startVersion).To(BeNumerically(">=", 40))
	g.Expect(reloads).To(BeNumerically(">=", 40))
	g.Expect(failed.Load()).To(BeZero())
	g.Expect(sent.Load()).To(BeNumerically(">", 100))

	// BFE reports the version the store calls current.
	active, err := (&bfe.Monitor{BaseURL: b.monitorURL}).Versions(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	cur, err := b.store.Current()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(active.GslbTs).To(Equal(cur.Versions.GslbData))
	g.Expect(active.RouteRule).To(Equal(cur.Versions.ServerData))

	// Negative control: the reload order matters. Routes to a cluster that GSLB does not know yet
	// are accepted by BFE and then answer 500 — which is what the driver's ordering prevents.
	unsafe := fe.Model()
	g.Expect(unsafe.PutBackend(bfe.LoadBalancer{Name: "late", Host: "late.example.test", Path: "/*"},
		bfe.Backend{Cluster: "m1", Addr: netip.MustParseAddrPort(canary), Weight: 1})).To(Succeed())
	files, err := bfe.Generate(unsafe, bfe.Versions{ServerData: "unsafe", GslbData: "unsafe"}, bfe.GenerateOptions{}).Set.Render()
	g.Expect(err).NotTo(HaveOccurred())
	unsafeDir := t.TempDir()
	for rel, content := range files {
		g.Expect(os.MkdirAll(filepath.Join(unsafeDir, filepath.Dir(rel)), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(unsafeDir, rel), content, 0o644)).To(Succeed())
	}
	mon := &bfe.Monitor{BaseURL: b.monitorURL}
	g.Expect(mon.Reload(ctx, bfeconf.ServerData, filepath.Join(unsafeDir, "server_data_conf"))).To(Succeed())
	_, err = traffic.get("late.example.test", "/", "")
	g.Expect(err).To(MatchError(ContainSubstring("status 500")))
	g.Expect(mon.Reload(ctx, bfeconf.ServerData, filepath.Join(b.store.VersionDir(cur.Version), "server_data_conf"))).To(Succeed())

	// A reload BFE refuses is reported with BFE's own message and leaves BFE on the current version.
	bad := b.store.VersionDir(cur.Version)
	err = mon.Reload(ctx, bfeconf.ServerData, filepath.Join(bad, "missing"))
	g.Expect(err).To(MatchError(ContainSubstring("no such file or directory")))

	// BFE accepts every construct of the golden files (IPv6 instances, weight-0 sub-clusters, exact
	// paths, header and cookie conditions, wildcard and path-only routes).
	golden, err := filepath.Abs(filepath.Join("testdata", "golden", "federated"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mon.Reload(ctx, bfeconf.GslbData, filepath.Join(golden, "cluster_conf"))).To(Succeed())
	g.Expect(mon.Reload(ctx, bfeconf.ServerData, filepath.Join(golden, "server_data_conf"))).To(Succeed())
	active, err = mon.Versions(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{active.RouteRule, active.GslbTs}).To(Equal([]string{"7", "9"}))
}

// reloadCount sums lbfed_bfe_reloads_total over reload groups.
func reloadCount(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() == "lbfed_bfe_reloads_total" {
			for _, m := range mf.GetMetric() {
				n += int(m.GetCounter().GetValue())
			}
		}
	}
	return n
}
