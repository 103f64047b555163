package bfe

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
	"github.com/lbfed/lbfed/elb/bfe/fakebfe"
)

type testEnv struct {
	t       *testing.T
	store   *Store
	fake    *fakebfe.BFE
	fe      *Frontend
	metrics *Metrics
	reg     *prometheus.Registry
}

// newTestEnv opens a store in a temporary directory and starts a fake BFE that loads the store's
// current version at startup, as a real BFE started with BFEConfServerSection would.
func newTestEnv(t *testing.T, mutate func(*FrontendOptions)) *testEnv {
	t.Helper()
	store, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := &testEnv{t: t, store: store, fake: fakebfe.New(), reg: prometheus.NewRegistry()}
	t.Cleanup(env.fake.Close)
	env.metrics = NewMetrics(env.reg)
	env.open(mutate)
	if err := env.fake.Load(filepath.Join(store.Dir(), currentLink)); err != nil {
		t.Fatal(err)
	}
	return env
}

func (e *testEnv) open(mutate func(*FrontendOptions)) {
	e.t.Helper()
	opts := FrontendOptions{Store: e.store, Reloader: &Monitor{BaseURL: e.fake.URL}, Metrics: e.metrics, SkipResyncOnStart: true}
	if mutate != nil {
		mutate(&opts)
	}
	fe, err := NewFrontend(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.fe = fe
}

// apply applies m and returns the reload groups performed, in order.
func (e *testEnv) apply(m *Model) ([]string, error) {
	before := len(e.fake.Reloads())
	_, err := e.fe.Apply(context.Background(), m)
	var groups []string
	for _, r := range e.fake.Reloads()[before:] {
		groups = append(groups, string(r.Group))
	}
	return groups, err
}

// expectServing checks that the fake BFE serves exactly the store's current version, and that no
// route ever pointed at an unbalanced cluster.
func (e *testEnv) expectServing(g Gomega) {
	cur, err := e.store.Current()
	g.Expect(err).NotTo(HaveOccurred())
	want, err := bfeconf.Parse(cur.Files)
	g.Expect(err).NotTo(HaveOccurred())
	server, gslb := e.fake.Active()
	g.Expect(server.RouteRule).To(Equal(want.RouteRule))
	// BFE (and so the fake) gives an absent CheckConf.Uri its default; the driver omits it for tcp checks.
	for name, c := range want.ClusterConf.Config {
		if c.CheckConf.Uri == "" {
			c.CheckConf.Uri = "/health_check"
			want.ClusterConf.Config[name] = c
		}
	}
	g.Expect(server.ClusterConf).To(Equal(want.ClusterConf))
	g.Expect(server.HostRule).To(Equal(want.HostRule))
	g.Expect(gslb.Gslb).To(Equal(want.Gslb))
	g.Expect(gslb.ClusterTable).To(Equal(want.ClusterTable))
	g.Expect(e.fake.Unsafe()).To(BeEmpty())
	g.Expect(e.fe.Version()).To(Equal(cur.Version))
	g.Expect(testutil.ToFloat64(e.metrics.version)).To(Equal(float64(cur.Version)))
}

func lbSpec(name, host, path string) LoadBalancer {
	return LoadBalancer{Name: name, Host: host, Path: path}
}

func TestFrontendReloadOrder(t *testing.T) {
	g := NewWithT(t)
	env := newTestEnv(t, nil)
	env.expectServing(g)
	g.Expect(env.fe.Version()).To(Equal(uint64(1)))

	m := NewModel()
	web := lbSpec("web", "app.test", "/*")
	g.Expect(m.PutBackend(web, backend("m1", "10.0.0.1:80", 10, nil))).To(Succeed())

	steps := []struct {
		name   string
		change func(m *Model)
		want   []string
	}{
		{"add a cluster: gslb first, then routes", func(*Model) {}, []string{"gslb_data_conf", "server_data_conf"}},
		{"nothing changed: nothing reloaded", func(*Model) {}, nil},
		{"backends and weights only: gslb only", func(m *Model) {
			_ = m.PutBackend(web, backend("m2", "10.0.0.2:80", 10, intp(3)))
		}, []string{"gslb_data_conf"}},
		{"route only: server data only", func(m *Model) {
			w := web
			w.Path = "/web/*"
			_ = m.PutLoadBalancer(w)
		}, []string{"server_data_conf"}},
		{"add a second cluster", func(m *Model) {
			_ = m.PutBackend(lbSpec("api", "api.test", "/*"), backend("m1", "10.0.1.1:80", 10, nil))
		}, []string{"gslb_data_conf", "server_data_conf"}},
		{"replace a cluster: union gslb, routes, final gslb", func(m *Model) {
			m.DeleteLoadBalancer("api")
			_ = m.PutBackend(lbSpec("api2", "api.test", "/*"), backend("m1", "10.0.1.1:80", 10, nil))
		}, []string{"gslb_data_conf", "server_data_conf", "gslb_data_conf"}},
		{"remove a cluster: routes first, then gslb", func(m *Model) {
			m.DeleteLoadBalancer("api2")
		}, []string{"server_data_conf", "gslb_data_conf"}},
		{"add a third cluster", func(m *Model) {
			_ = m.PutBackend(lbSpec("api3", "api.test", "/*"), backend("m1", "10.0.1.1:80", 10, nil))
		}, []string{"gslb_data_conf", "server_data_conf"}},
		{"remove a cluster and change another's backends: union gslb, routes, final gslb", func(m *Model) {
			m.DeleteLoadBalancer("api3")
			_ = m.PutBackend(web, backend("m2", "10.0.0.3:80", 10, intp(3)))
		}, []string{"gslb_data_conf", "server_data_conf", "gslb_data_conf"}},
		{"last backend gone: route and cluster removed", func(m *Model) {
			m.DeleteBackend("web", "m1/10.0.0.1:80")
			m.DeleteBackend("web", "m2/10.0.0.2:80")
			m.DeleteBackend("web", "m2/10.0.0.3:80")
		}, []string{"server_data_conf", "gslb_data_conf"}},
	}
	for _, s := range steps {
		s.change(m)
		before := env.fe.Version()
		got, err := env.apply(m.Clone())
		g.Expect(err).NotTo(HaveOccurred(), s.name)
		g.Expect(got).To(Equal(s.want), s.name)
		env.expectServing(g)
		if s.want == nil {
			g.Expect(env.fe.Version()).To(Equal(before), s.name)
		} else {
			g.Expect(env.fe.Version()).To(Equal(before+1), s.name)
		}
	}
	// Removal with other changes: the first gslb reload kept the old cluster (union), the second
	// dropped it.
	reloads := env.fake.Reloads()
	g.Expect(reloads[len(reloads)-5].Dir).To(HaveSuffix(filepath.Join(stepsDir, "pre", "cluster_conf")))
	g.Expect(reloads[len(reloads)-3].Dir).To(Equal(filepath.Join(env.store.VersionDir(env.fe.Version()-1), "cluster_conf")))
	g.Expect(reloads[len(reloads)-1].Dir).To(Equal(filepath.Join(env.store.VersionDir(env.fe.Version()), "cluster_conf")))
	g.Expect(testutil.ToFloat64(env.metrics.reloads.WithLabelValues("gslb_data_conf"))).To(BeNumerically("==", 10))
	g.Expect(testutil.ToFloat64(env.metrics.reloadFailures.WithLabelValues("gslb_data_conf"))).To(BeZero())
}

func TestFrontendServerDataFailureRollsBack(t *testing.T) {
	g := NewWithT(t)
	env := newTestEnv(t, nil)
	m := NewModel()
	g.Expect(m.PutBackend(lbSpec("web", "app.test", "/*"), backend("m1", "10.0.0.1:80", 10, nil))).To(Succeed())
	_, err := env.apply(m.Clone())
	g.Expect(err).NotTo(HaveOccurred())
	good := env.fe.Version()

	// Adding a cluster: gslb is reloaded first, then server data fails → gslb goes back.
	g.Expect(m.PutBackend(lbSpec("api", "api.test", "/*"), backend("m1", "10.0.1.1:80", 10, nil))).To(Succeed())
	body := `hostTableLoad Error error build [req_host_in("x"] [1:16 syntax error]`
	env.fake.FailNext(bfeconf.ServerData, body)
	groups, err := env.apply(m.Clone())
	g.Expect(err).To(MatchError(ContainSubstring(body)))
	var re *ReloadError
	g.Expect(errors.As(err, &re)).To(BeTrue())
	g.Expect(groups).To(Equal([]string{"gslb_data_conf", "server_data_conf", "gslb_data_conf"}))
	g.Expect(env.fe.Version()).To(Equal(good), "the current version stays")
	g.Expect(env.fe.LastError()).To(HaveOccurred())
	g.Expect(env.fe.Model().LoadBalancers).NotTo(HaveKey("api"))
	env.expectServing(g)
	g.Expect(testutil.ToFloat64(env.metrics.reloadFailures.WithLabelValues("server_data_conf"))).To(BeNumerically("==", 1))

	// The next attempt succeeds with a version number never used before.
	groups, err = env.apply(m.Clone())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups).To(Equal([]string{"gslb_data_conf", "server_data_conf"}))
	g.Expect(env.fe.Version()).To(Equal(good + 2))
	g.Expect(env.fe.LastError()).NotTo(HaveOccurred())
	env.expectServing(g)
}

func TestFrontendGslbPartialFailureRollsBack(t *testing.T) {
	g := NewWithT(t)
	env := newTestEnv(t, nil)
	m := NewModel()
	web := lbSpec("web", "app.test", "/*")
	g.Expect(m.PutBackend(web, backend("m1", "10.0.0.1:80", 10, nil))).To(Succeed())
	_, err := env.apply(m.Clone())
	g.Expect(err).NotTo(HaveOccurred())

	// A failed gslb reload may have applied the new data; the driver reloads the current one.
	g.Expect(m.PutBackend(web, backend("m1", "10.0.0.2:80", 10, nil))).To(Succeed())
	env.fake.FailNext(bfeconf.GslbData, "error in BalTableReload() for [web]")
	groups, err := env.apply(m.Clone())
	g.Expect(err).To(MatchError(ContainSubstring("error in BalTableReload() for [web]")))
	g.Expect(groups).To(Equal([]string{"gslb_data_conf", "gslb_data_conf"}))
	env.expectServing(g)
	_, gslb := env.fake.Active()
	g.Expect(gslb.ClusterTable.Config["web"]["web.m1"]).To(HaveLen(1))
}

func TestFrontendFailedRollbackForcesResync(t *testing.T) {
	g := NewWithT(t)
	env := newTestEnv(t, nil)
	m := NewModel()
	web := lbSpec("web", "app.test", "/*")
	g.Expect(m.PutBackend(web, backend("m1", "10.0.0.1:80", 10, nil))).To(Succeed())
	_, err := env.apply(m.Clone())
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(m.PutBackend(web, backend("m1", "10.0.0.2:80", 10, nil))).To(Succeed())
	env.fake.FailNext(bfeconf.GslbData, "first")
	env.fake.FailNext(bfeconf.GslbData, "rollback fails too")
	_, err = env.apply(m.Clone())
	g.Expect(err).To(MatchError(ContainSubstring("first")))

	// BFE's state is unknown now: the same model is pushed in full, although it did not change
	// relative to what the driver last wrote.
	groups, err := env.apply(m.Clone())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups).To(Equal([]string{"gslb_data_conf", "server_data_conf"}))
	env.expectServing(g)
	groups, err = env.apply(m.Clone())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups).To(BeEmpty())
}

// silentReloader answers success without reloading anything, like a BFE reading another directory.
type silentReloader struct{ *Monitor }

func (silentReloader) Reload(context.Context, bfeconf.Group, string) error { return nil }

func TestFrontendVerifiesActiveVersions(t *testing.T) {
	g := NewWithT(t)
	var mon *Monitor
	env := newTestEnv(t, func(o *FrontendOptions) {
		mon = o.Reloader.(*Monitor)
		o.Reloader = silentReloader{mon}
	})
	m := NewModel()
	g.Expect(m.PutBackend(lbSpec("web", "app.test", "/*"), backend("m1", "10.0.0.1:80", 10, nil))).To(Succeed())
	_, err := env.fe.Apply(context.Background(), m)
	g.Expect(err).To(MatchError(ContainSubstring(`bfe serves cluster_table="1", gslb="1" instead of version "2"`)))
	g.Expect(env.fe.Version()).To(Equal(uint64(1)))
	g.Expect(testutil.ToFloat64(env.metrics.reloadFailures.WithLabelValues("gslb_data_conf"))).To(BeNumerically(">=", 1))
}

func TestFrontendRefusesInvalidConfiguration(t *testing.T) {
	g := NewWithT(t)
	bad := DefaultClusterSettings()
	bad.BackendConf.Protocol = "grpc"
	env := newTestEnv(t, func(o *FrontendOptions) { o.Generate.Cluster = &bad })
	m := NewModel()
	g.Expect(m.PutBackend(lbSpec("web", "app.test", "/*"), backend("m1", "10.0.0.1:80", 10, nil))).To(Succeed())
	groups, err := env.apply(m)
	g.Expect(err).To(MatchError(And(ContainSubstring("nothing written"), ContainSubstring("protocol only support"))))
	g.Expect(groups).To(BeEmpty())
	latest, _ := env.store.LatestVersion()
	g.Expect(latest).To(Equal(uint64(1)))
	g.Expect(testutil.ToFloat64(env.metrics.invalid)).To(BeNumerically("==", 1))
}

func TestFrontendRestart(t *testing.T) {
	g := NewWithT(t)
	env := newTestEnv(t, nil)
	m := NewModel()
	g.Expect(m.PutBackend(lbSpec("web", "app.test", "/*"), backend("m1", "10.0.0.1:80", 10, intp(2)))).To(Succeed())
	// A LoadBalancer without backends changes no file but is part of the model.
	g.Expect(m.PutLoadBalancer(lbSpec("later", "later.test", "/*"))).To(Succeed())
	_, err := env.apply(m.Clone())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.PutLoadBalancer(lbSpec("later2", "later2.test", "/*"))).To(Succeed())
	groups, err := env.apply(m.Clone())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups).To(BeEmpty())

	// A new driver process on the same store: same model; by default its first apply reloads the
	// current version in full, since BFE may have been changed or restarted meanwhile.
	env.open(func(o *FrontendOptions) { o.SkipResyncOnStart = false })
	g.Expect(env.fe.Model()).To(Equal(m))
	groups, err = env.apply(m.Clone())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(groups).To(Equal([]string{"gslb_data_conf", "server_data_conf"}))
	env.expectServing(g)
}

func TestStoreGC(t *testing.T) {
	g := NewWithT(t)
	env := newTestEnv(t, func(o *FrontendOptions) { o.KeepVersions = 3 })
	web := lbSpec("web", "app.test", "/*")
	for i := 1; i <= 10; i++ {
		m := NewModel()
		g.Expect(m.PutBackend(web, backend("m1", "10.0.0."+strconv.Itoa(i)+":80", 10, nil))).To(Succeed())
		_, err := env.apply(m)
		g.Expect(err).NotTo(HaveOccurred())
	}
	// A leftover of an interrupted write is removed too.
	g.Expect(os.Mkdir(filepath.Join(env.store.Dir(), ".tmp-123"), 0o755)).To(Succeed())
	g.Expect(env.store.GC(3)).To(Succeed())
	entries, err := os.ReadDir(env.store.Dir())
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	g.Expect(names).To(ConsistOf("current", "v00000009", "v00000010", "v00000011"))
	target, err := os.Readlink(filepath.Join(env.store.Dir(), "current"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(target).To(Equal("v00000011"))
}

// TestFrontendRandomChanges applies random sequences of LoadBalancer and backend changes and checks
// after each one that BFE serves exactly the current version and that no route ever pointed at a
// cluster without balancing data.
func TestFrontendRandomChanges(t *testing.T) {
	g := NewWithT(t)
	env := newTestEnv(t, nil)
	rng := rand.New(rand.NewSource(42))
	m := NewModel()
	for i := 0; i < 150; i++ {
		n := rng.Intn(3) + 1
		for j := 0; j < n; j++ {
			lbIdx := rng.Intn(6)
			lb := lbSpec(fmt.Sprintf("lb%d", lbIdx), fmt.Sprintf("h%d.test", lbIdx%3), fmt.Sprintf("/p%d/*", lbIdx))
			if lbIdx%2 == 1 {
				lb.Cookie = &Match{Key: "v", Value: strconv.Itoa(lbIdx)}
			}
			switch op := rng.Intn(10); {
			case op < 5:
				cw := (*int)(nil)
				if rng.Intn(2) == 0 {
					cw = intp(rng.Intn(3))
				}
				g.Expect(m.PutBackend(lb, backend(fmt.Sprintf("m%d", rng.Intn(3)), fmt.Sprintf("10.0.%d.%d:80", lbIdx, rng.Intn(4)), rng.Intn(3), cw))).To(Succeed())
			case op < 8:
				m.DeleteBackend(lb.Name, fmt.Sprintf("m%d/10.0.%d.%d:80", rng.Intn(3), lbIdx, rng.Intn(4)))
			default:
				m.DeleteLoadBalancer(lb.Name)
			}
		}
		_, err := env.apply(m.Clone())
		g.Expect(err).NotTo(HaveOccurred(), "step %d", i)
		env.expectServing(g)
	}
}
