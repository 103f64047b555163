package bfe_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/elb/bfe"
	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
	"github.com/lbfed/lbfed/elb/bfe/fakebfe"
	"github.com/lbfed/lbfed/lbcf/driver"
)

type routeProbe struct {
	host, path     string
	cookie, header string // "name=value" cookie, "Key:value" header
	want           string // LoadBalancer (cluster) that answers, or "500"
}

// routingScenarios are LoadBalancers with the requests the README says each one receives: the most
// specific route wins (exact host, then the longer "*.suffix", then "*"; exact path, then the
// longer prefix; then cookie+header, cookie, header, none), and a request that does not meet a
// route's conditions falls through to the next matching route. "*.suffix" matches one label.
var routingScenarios = []struct {
	name   string
	lbs    []map[string]string
	probes []routeProbe
}{
	{
		name: "a cookie-only path falls through to the host's broader route (issue 14, item 9)",
		lbs: []map[string]string{
			{"name": "shop", "host": "shop.example.test"},
			{"name": "checkout-beta", "host": "shop.example.test", "path": "/checkout/*", "cookie": "beta:1"},
		},
		probes: []routeProbe{
			{host: "shop.example.test", path: "/checkout/pay", want: "shop"},
			{host: "shop.example.test", path: "/checkout/pay", cookie: "beta=1", want: "checkout-beta"},
			{host: "shop.example.test", path: "/checkout", cookie: "beta=2", want: "shop"},
			{host: "shop.example.test", path: "/other", cookie: "beta=1", want: "shop"},
		},
	},
	{
		name: "a header-only host falls through to * routes",
		lbs: []map[string]string{
			{"name": "any", "host": "*"},
			{"name": "api-canary", "host": "shop.example.test", "path": "/api/*", "header": "X-Canary:yes"},
		},
		probes: []routeProbe{
			{host: "shop.example.test", path: "/api/x", want: "any"},
			{host: "shop.example.test", path: "/api/x", header: "X-Canary:yes", want: "api-canary"},
			{host: "shop.example.test", path: "/other", want: "any"},
			{host: "elsewhere.test", path: "/api/x", header: "X-Canary:yes", want: "any"},
		},
	},
	{
		name: "conditions on several levels fall through in order",
		lbs: []map[string]string{
			{"name": "shop", "host": "shop.example.test"},
			{"name": "shop-v2", "host": "shop.example.test", "header": "X-V:2"},
			{"name": "checkout-beta", "host": "shop.example.test", "path": "/checkout/*", "cookie": "beta:1"},
			{"name": "checkout-exact", "host": "shop.example.test", "path": "/checkout", "header": "X-V:3"},
		},
		probes: []routeProbe{
			{host: "shop.example.test", path: "/checkout/pay", cookie: "beta=1", header: "X-V:2", want: "checkout-beta"},
			{host: "shop.example.test", path: "/checkout/pay", header: "X-V:2", want: "shop-v2"},
			{host: "shop.example.test", path: "/checkout/pay", want: "shop"},
			{host: "shop.example.test", path: "/checkout", header: "X-V:3", cookie: "beta=1", want: "checkout-exact"},
			{host: "shop.example.test", path: "/checkout", cookie: "beta=1", want: "checkout-beta"},
			{host: "shop.example.test", path: "/checkout", want: "shop"},
		},
	},
	{
		name: "an exact host falls back to *.suffix, then * on a path miss (issue 14, item 11)",
		lbs: []map[string]string{
			{"name": "api", "host": "shop.example.test", "path": "/api/*"},
			{"name": "wild", "host": "*.example.test"},
			{"name": "static", "host": "*", "path": "/static/*"},
		},
		probes: []routeProbe{
			{host: "shop.example.test", path: "/api/x", want: "api"},
			{host: "shop.example.test", path: "/static/x", want: "wild"},
			{host: "shop.example.test", path: "/x", want: "wild"},
			{host: "a.example.test", path: "/static/x", want: "wild"},
			{host: "other.test", path: "/static/x", want: "static"},
			{host: "a.b.example.test", path: "/static/x", want: "static"},
			{host: "a.b.example.test", path: "/x", want: "500"},
			{host: "SHOP.example.test:8080", path: "/api/x", want: "api"},
		},
	},
	{
		name: "an exact host without a route for the path falls back to *",
		lbs: []map[string]string{
			{"name": "api", "host": "shop.example.test", "path": "/api/*"},
			{"name": "any", "host": "*"},
		},
		probes: []routeProbe{
			{host: "shop.example.test", path: "/api/x", want: "api"},
			{host: "shop.example.test", path: "/", want: "any"},
			{host: "x.test", path: "/api/x", want: "any"},
		},
	},
	{
		name: "a *.suffix path miss falls back to *",
		lbs: []map[string]string{
			{"name": "wild-api", "host": "*.example.test", "path": "/api/*"},
			{"name": "deep-wild", "host": "*.b.example.test", "path": "/x"},
			{"name": "any", "host": "*", "path": "/*"},
			{"name": "any-canary", "host": "*", "cookie": "canary:yes"},
		},
		probes: []routeProbe{
			{host: "a.example.test", path: "/api/x", want: "wild-api"},
			{host: "a.example.test", path: "/web", want: "any"},
			{host: "a.example.test", path: "/web", cookie: "canary=yes", want: "any-canary"},
			{host: "a.example.test", path: "/api/x", cookie: "canary=yes", want: "wild-api"},
			{host: "a.b.example.test", path: "/x", want: "deep-wild"},
			{host: "a.b.example.test", path: "/api/x", want: "any"},
		},
	},
}

// loadIntoFake renders the model, reloads it into the fake BFE like the driver does and fails the
// test unless the fake (as BFE) accepts it.
func loadIntoFake(t *testing.T, f *fakebfe.BFE, m *bfe.Model) *bfe.Generation {
	t.Helper()
	gen := bfe.Generate(m, bfe.Versions{ServerData: "1", GslbData: "1"}, bfe.GenerateOptions{})
	if err := gen.Set.Validate(); err != nil {
		t.Fatalf("generated configuration is invalid: %v", err)
	}
	files, err := gen.Set.Render()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFiles(t, dir, files)
	for _, g := range []bfeconf.Group{bfeconf.GslbData, bfeconf.ServerData} {
		if b := httpBody(t, f.URL+"/reload/"+string(g)+"?path="+filepath.Join(dir, g.Dir())); b != `{"error":null}` {
			t.Fatalf("reload %s: %s", g, b)
		}
	}
	return gen
}

func fakeRequest(p routeProbe) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://"+p.host+p.path, nil)
	r.Host = p.host
	if p.cookie != "" {
		r.Header.Set("Cookie", p.cookie)
	}
	if p.header != "" {
		k, v, _ := strings.Cut(p.header, ":")
		r.Header.Set(k, v)
	}
	return r
}

// TestGeneratedRouting sends requests through the fake BFE's copy of BFE's route lookup and checks
// that each reaches the LoadBalancer the README promises.
func TestGeneratedRouting(t *testing.T) {
	for _, sc := range routingScenarios {
		t.Run(sc.name, func(t *testing.T) {
			g := NewWithT(t)
			m := bfe.NewModel()
			for i, spec := range sc.lbs {
				lb, err := bfe.ParseLoadBalancer(spec)
				g.Expect(err).NotTo(HaveOccurred())
				addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 8080)
				g.Expect(m.PutBackend(lb, bfe.Backend{Cluster: "m1", Addr: addr, Weight: 1})).To(Succeed())
			}
			f := fakebfe.New()
			defer f.Close()
			loadIntoFake(t, f, m)
			for _, p := range sc.probes {
				a, err := f.Route(fakeRequest(p))
				g.Expect(err).NotTo(HaveOccurred())
				if p.want == "500" {
					g.Expect(a.Status).To(Equal(http.StatusInternalServerError), "%+v went to %s", p, a.Cluster)
					continue
				}
				g.Expect([]any{a.Status, a.Cluster}).To(Equal([]any{http.StatusOK, p.want}), "%+v: %s", p, a.Reason)
			}
		})
	}
}

// TestGeneratedIPv6Backend: an IPv6 backend is written so that BFE can dial it (issue 14, item 10).
func TestGeneratedIPv6Backend(t *testing.T) {
	g := NewWithT(t)
	m := bfe.NewModel()
	lb, err := bfe.ParseLoadBalancer(map[string]string{"name": "v6", "host": "shop.example.test"})
	g.Expect(err).NotTo(HaveOccurred())
	b, err := bfe.ParseBackend("[fd00::1]:8080", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.PutBackend(lb, b)).To(Succeed())
	f := fakebfe.New()
	defer f.Close()
	loadIntoFake(t, f, m)
	a, err := f.Route(fakeRequest(routeProbe{host: "shop.example.test", path: "/"}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Status).To(Equal(http.StatusOK), a.Reason)
	g.Expect(a.Addr).To(Equal("[fd00::1]:8080"))
	g.Expect(f.Policy()).To(BeEmpty())
}

// TestRealBFERouting creates the routing scenarios through the driver on a real BFE (BFE_BIN,
// v1.8.4+) and checks which LoadBalancer answers each request, with and without its conditions;
// then an IPv6 backend on ::1 (issue 14, items 9–11).
func TestRealBFERouting(t *testing.T) {
	bin := os.Getenv("BFE_BIN")
	if bin == "" {
		t.Skip("BFE_BIN is not set: the real-BFE test needs a BFE binary")
	}
	b := startBFE(t, bin)
	ctx := context.Background()
	fe, err := bfe.NewFrontend(bfe.FrontendOptions{Store: b.store, Reloader: &bfe.Monitor{BaseURL: b.monitorURL}})
	if err != nil {
		t.Fatal(err)
	}
	d := bfe.NewDriver(bfe.DriverOptions{Frontend: fe})
	client := &http.Client{Timeout: 10 * time.Second}
	send := func(p routeProbe) (int, string) {
		req, err := http.NewRequest(http.MethodGet, b.httpURL+p.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := fakeRequest(p)
		req.Host, req.Header = r.Host, r.Header
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	create := func(g Gomega, spec map[string]string, addr string) map[string]string {
		c, err := d.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{LBSpec: spec})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Status).To(Equal(driver.StatusSucc), c.Msg)
		r, err := d.EnsureBackend(ctx, &driver.BackendOperationRequest{LBInfo: c.LBInfo, BackendAddr: addr})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Status).To(Equal(driver.StatusSucc), r.Msg)
		return c.LBInfo
	}
	for _, sc := range routingScenarios {
		t.Run(sc.name, func(t *testing.T) {
			g := NewWithT(t)
			var infos []map[string]string
			for _, spec := range sc.lbs {
				infos = append(infos, create(g, spec, backendServer(t, spec["name"])))
			}
			for _, p := range sc.probes {
				status, who := send(p)
				if p.want == "500" {
					g.Expect(status).To(Equal(http.StatusInternalServerError), "%+v answered by %s", p, who)
				} else {
					g.Expect([]any{status, who}).To(Equal([]any{http.StatusOK, p.want}), "%+v", p)
				}
			}
			for _, info := range infos {
				del, err := d.DeleteLoadBalancer(ctx, &driver.DeleteLoadBalancerRequest{LBInfo: info})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(del.Status).To(Equal(driver.StatusSucc), del.Msg)
			}
		})
	}
	t.Run("an IPv6 backend on ::1", func(t *testing.T) {
		g := NewWithT(t)
		l, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback: %v", err)
		}
		srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "v6")
		})}}
		srv.Start()
		defer srv.Close()
		create(g, map[string]string{"name": "v6", "host": "v6.example.test"}, l.Addr().String())
		for i := 0; i < 5; i++ {
			status, who := send(routeProbe{host: "v6.example.test", path: "/"})
			g.Expect([]any{status, who}).To(Equal([]any{http.StatusOK, "v6"}))
		}
	})
}

// TestGenerateProductRulesOnlyWhenNeeded: routes are repeated as product rules only when a request
// that BFE sends to the product rules may be meant for them, so plain configurations stay basic.
func TestGenerateProductRulesOnlyWhenNeeded(t *testing.T) {
	cases := []struct {
		name string
		lbs  []map[string]string
		want []string // product rules' clusters, in order
	}{
		{"exact hosts without conditions", []map[string]string{
			{"name": "a", "host": "a.test"}, {"name": "b", "host": "b.test", "path": "/api/*"}}, []string{}},
		{"a * route behind hosts that always match", []map[string]string{
			{"name": "a", "host": "a.test"}, {"name": "any", "host": "*"}}, []string{}},
		{"a * route behind a host that can miss", []map[string]string{
			{"name": "b", "host": "b.test", "path": "/api/*"}, {"name": "any", "host": "*"}}, []string{"any"}},
		{"a condition on another path leaves unrelated routes out", []map[string]string{
			{"name": "web", "host": "a.test", "path": "/web/*"}, {"name": "api", "host": "a.test", "path": "/api/*"},
			{"name": "api-beta", "host": "a.test", "path": "/api/v2/*", "cookie": "beta:1"}}, []string{"api-beta", "api"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			m := bfe.NewModel()
			for i, spec := range tc.lbs {
				lb, err := bfe.ParseLoadBalancer(spec)
				g.Expect(err).NotTo(HaveOccurred())
				addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 8080)
				g.Expect(m.PutBackend(lb, bfe.Backend{Cluster: "m1", Addr: addr, Weight: 1})).To(Succeed())
			}
			set := bfe.Generate(m, bfe.Versions{ServerData: "1", GslbData: "1"}, bfe.GenerateOptions{}).Set
			got := []string{}
			for _, r := range set.RouteRule.ProductRule["lbfed"] {
				got = append(got, r.ClusterName)
			}
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
