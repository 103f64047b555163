package mci

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	networkingv1alpha1 "github.com/karmada-io/karmada/pkg/apis/networking/v1alpha1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/lbfed/lbfed/elb/bfe"
	"github.com/lbfed/lbfed/elb/bfe/fakebfe"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// probe is a request and the Services that may answer it.
type probe struct {
	host, path, cookie, header string // cookie "name=value", header "Key:value"
	want                       []string
	split                      map[string]int // expected traffic share per Service, when several answer
}

func (p probe) request(base string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, base+p.path, nil)
	r.RequestURI = ""
	r.Host = p.host
	if p.cookie != "" {
		r.Header.Set("Cookie", p.cookie)
	}
	if k, v, ok := strings.Cut(p.header, ":"); ok {
		r.Header.Set(k, v)
	}
	return r
}

// TestRoutesThroughBFE feeds the LoadBalancers and BackendGroups generated for a set of
// MultiClusterIngresses, with one backend per Service and member, through the BFE driver (its
// createLoadBalancer and ensureBackend, as the federation calls them) into the fake BFE — and
// into a real BFE when BFE_BIN is set — and checks that requests with each rule's host, path,
// cookie and header reach the right Service, split across Services as balance.weight says.
func TestRoutesThroughBFE(t *testing.T) {
	in := inputs{driver: "lbcf-bfe", services: map[string]*corev1.Service{}, placements: map[string][]string{}}
	for svc, members := range map[string][]string{"web": {"m1", "m2"}, "api": {"m1", "m2"}, "api-v2": {"m2"}, "canary": {"m1"}, "fallback": {"m2"}} {
		in.services[svc] = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc, Namespace: "shop"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": svc}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		in.placements[svc] = members
	}
	const host = "shop.example.test"
	backend := func(svc string) networkingv1.IngressBackend {
		return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}
	}
	path := func(p string, typ networkingv1.PathType, svc string) networkingv1.HTTPIngressPath {
		return networkingv1.HTTPIngressPath{Path: p, PathType: &typ, Backend: backend(svc)}
	}
	rules := func(paths ...networkingv1.HTTPIngressPath) []networkingv1.IngressRule {
		return []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}}
	}
	mcis := []*networkingv1alpha1.MultiClusterIngress{
		{ObjectMeta: metav1.ObjectMeta{Name: "shop", Annotations: map[string]string{AnnotationBalanceWeight: `{"api": {"api": 3, "api-v2": 1}}`}},
			Spec: networkingv1.IngressSpec{Rules: rules(path("/", networkingv1.PathTypePrefix, "web"), path("/api", networkingv1.PathTypePrefix, "api"),
				path("/healthz", networkingv1.PathTypeExact, "web"))}},
		{ObjectMeta: metav1.ObjectMeta{Name: "beta", Annotations: map[string]string{AnnotationRouterCookie: "beta:1"}},
			Spec: networkingv1.IngressSpec{Rules: rules(path("/", networkingv1.PathTypePrefix, "canary"))}},
		{ObjectMeta: metav1.ObjectMeta{Name: "canary", Annotations: map[string]string{AnnotationRouterHeader: "X-Canary:yes"}},
			Spec: networkingv1.IngressSpec{Rules: rules(path("/api", networkingv1.PathTypeExact, "canary"))}},
		{ObjectMeta: metav1.ObjectMeta{Name: "fallback"}, Spec: networkingv1.IngressSpec{DefaultBackend: ptr.To(backend("fallback"))}},
		// Across members: web's pods in m2 get three times the traffic of those in m1.
		{ObjectMeta: metav1.ObjectMeta{Name: "members", Annotations: map[string]string{AnnotationBalanceWeight: `{"web": {"web@m1": 1, "web@m2": 3}}`}},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "members.example.test", IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{path("/", networkingv1.PathTypePrefix, "web")}}}}}}},
	}
	apiSplit := map[string]int{"api": 3, "api-v2": 1}
	probes := []probe{
		{host: host, path: "/", want: []string{"web"}},
		{host: "SHOP.example.test:8080", path: "/a/b", want: []string{"web"}},
		{host: host, path: "/apix", want: []string{"web"}},
		{host: host, path: "/api", want: []string{"api", "api-v2"}, split: apiSplit},
		{host: host, path: "/api/v1/items", want: []string{"api", "api-v2"}, split: apiSplit},
		{host: host, path: "/healthz", want: []string{"web"}},
		{host: host, path: "/", cookie: "beta=1", want: []string{"canary"}},
		{host: host, path: "/cart", cookie: "beta=2", want: []string{"web"}},
		{host: host, path: "/api", header: "X-Canary:yes", want: []string{"canary"}},
		{host: host, path: "/api/v1", header: "X-Canary:yes", want: []string{"api", "api-v2"}, split: apiSplit},
		// The longer path wins over the cookie route of "/" (the BFE driver's order).
		{host: host, path: "/api/v1", cookie: "beta=1", want: []string{"api", "api-v2"}, split: apiSplit},
		{host: "other.test", path: "/", want: []string{"fallback"}},
		// Baseline: web without member weights splits like one flat pool (one pod per member).
		{host: host, path: "/x", want: []string{"web@m1", "web@m2"}, split: map[string]int{"web@m1": 1, "web@m2": 1}},
		{host: "members.example.test", path: "/x", want: []string{"web@m1", "web@m2"}, split: map[string]int{"web@m1": 1, "web@m2": 3}},
	}

	// One HTTP backend per Service and member, answering "<service>@<member>".
	addrs := map[string]string{} // "ip:port" → "<service>@<member>"
	backendOf := map[string]string{}
	for svc, members := range in.placements {
		for _, m := range members {
			name := svc + "@" + m
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) }))
			t.Cleanup(srv.Close)
			a := strings.TrimPrefix(srv.URL, "http://")
			addrs[a], backendOf[name] = name, a
		}
	}

	program := func(t *testing.T, d *bfe.Driver) {
		g := NewWithT(t)
		ctx := context.Background()
		for _, m := range mcis {
			m.Namespace = "shop"
			tr := translate(m, in)
			g.Expect(tr.problems).To(BeEmpty())
			infos := map[string]map[string]string{}
			for _, lb := range tr.lbs {
				c, err := d.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{LBSpec: lb.Spec.LBSpec})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(c.Status).To(Equal(driver.StatusSucc), c.Msg)
				infos[lb.Name] = c.LBInfo
			}
			for _, bg := range tr.bgs {
				svc := bg.Spec.Pods.ByLabel.Selector["app"]
				for _, member := range placementOfGroup(tr, bg) {
					// As the federation sends them: the group's parameters plus the member.
					params := maps.Clone(bg.Spec.Parameters)
					if params == nil {
						params = map[string]string{}
					}
					params[lbcfv1beta1.ParamCluster] = member
					r, err := d.EnsureBackend(ctx, &driver.BackendOperationRequest{LBInfo: infos[bg.Spec.LoadBalancers[0]],
						BackendAddr: backendOf[svc+"@"+member], Parameters: params})
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(r.Status).To(Equal(driver.StatusSucc), r.Msg)
				}
			}
		}
	}
	// who names an answer as the probe wants it: the Service, or "<service>@<member>".
	who := func(p probe, answer string) string {
		if strings.Contains(p.want[0], "@") {
			return answer
		}
		s, _, _ := strings.Cut(answer, "@")
		return s
	}

	t.Run("fake BFE", func(t *testing.T) {
		g := NewWithT(t)
		f := fakebfe.New()
		defer f.Close()
		store, err := bfe.OpenStore(t.TempDir())
		g.Expect(err).NotTo(HaveOccurred())
		fe, err := bfe.NewFrontend(bfe.FrontendOptions{Store: store, Reloader: &bfe.Monitor{BaseURL: f.URL}})
		g.Expect(err).NotTo(HaveOccurred())
		program(t, bfe.NewDriver(bfe.DriverOptions{Frontend: fe}))
		_, gslb := f.Active()
		for _, p := range probes {
			a, err := f.Route(p.request("http://" + p.host))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.Status).To(Equal(http.StatusOK), "%+v: %s", p, a.Reason)
			// Every instance the route may pick belongs to a wanted Service; the GSLB weights
			// split the route across Services as wanted.
			share := map[string]int{}
			for _, sub := range a.SubClusters {
				for _, inst := range gslb.ClusterTable.Config[a.Cluster][sub] {
					svc := who(p, addrs[fmt.Sprintf("%s:%d", inst.Addr, inst.Port)])
					g.Expect(p.want).To(ContainElement(svc), "%+v reached %s", p, svc)
				}
				first := gslb.ClusterTable.Config[a.Cluster][sub][0]
				svc := who(p, addrs[first.Addr+":"+strconv.Itoa(first.Port)])
				share[svc] += gslb.Gslb.Clusters[a.Cluster][sub]
			}
			g.Expect(sortedKeys(share)).To(ConsistOf(p.want), "%+v", p)
			if p.split != nil {
				a, b := p.want[0], p.want[1]
				g.Expect(share[a]*p.split[b]).To(Equal(share[b]*p.split[a]), "%+v: GSLB weights %v", p, share)
			}
		}
	})

	t.Run("real BFE", func(t *testing.T) {
		bin := os.Getenv("BFE_BIN")
		if bin == "" {
			t.Skip("BFE_BIN is not set: the real-BFE run needs a BFE binary")
		}
		g := NewWithT(t)
		base, d := startBFE(t, bin)
		program(t, d)
		client := &http.Client{Timeout: 5 * time.Second}
		for _, p := range probes {
			n := 8
			if p.split != nil {
				n = 400
			}
			seen := map[string]int{}
			for i := 0; i < n; i++ {
				resp, err := client.Do(p.request(base))
				g.Expect(err).NotTo(HaveOccurred())
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%+v: %s", p, body)
				seen[who(p, string(body))]++
			}
			g.Expect(sortedKeys(seen)).To(ConsistOf(p.want), "%+v: %v", p, seen)
			if p.split != nil {
				t.Logf("%s%s: %v of %d", p.host, p.path, seen, n)
				a, b := p.want[0], p.want[1]
				g.Expect(seen[a]).To(BeNumerically("~", n*p.split[a]/(p.split[a]+p.split[b]), n/8), "%+v: %v", p, seen)
			}
		}
	})
}

// placementOfGroup is the member clusters of a generated group's PropagationPolicy.
func placementOfGroup(tr *translation, bg *lbcfv1beta1.BackendGroup) []string {
	for _, pp := range tr.pps {
		if pp.Name == bg.Name {
			return pp.Spec.Placement.ClusterAffinity.ClusterNames
		}
	}
	return nil
}

// startBFE runs a real BFE (v1.8.4+, bound to 127.0.0.1) on a fresh store, as elb/bfe's tests do,
// and returns its HTTP base URL and a driver programming it.
func startBFE(t *testing.T, bin string) (string, *bfe.Driver) {
	t.Helper()
	out, err := exec.Command(bin, "-v").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -v: %v: %s", bin, err, out)
	}
	if m := regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)`).FindStringSubmatch(string(out)); m != nil {
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		patch, _ := strconv.Atoi(m[3])
		if major < 1 || major == 1 && (minor < 8 || minor == 8 && patch < 4) {
			t.Skipf("BFE %s binds every interface; this test needs v1.8.4+", m[0])
		}
	}
	root := t.TempDir()
	store, err := bfe.OpenStore(filepath.Join(root, "lbfed"))
	if err != nil {
		t.Fatal(err)
	}
	var ports [3]int
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	if err := bfe.WriteLoopbackRoot(root, ports[0], ports[1], ports[2], "lbfed"); err != nil {
		t.Fatal(err)
	}
	monitor := fmt.Sprintf("http://127.0.0.1:%d", ports[2])
	// The store's first version must exist before BFE starts.
	if _, err := bfe.NewFrontend(bfe.FrontendOptions{Store: store, Reloader: &bfe.Monitor{BaseURL: "http://127.0.0.1:1"}}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", root, "-l", t.TempDir())
	cmd.Dir = root
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("bfe output:\n%s", logs.String())
		}
	})
	NewWithT(t).Eventually(func() error {
		select {
		case <-exited:
			return StopTrying("bfe exited during startup:\n" + logs.String())
		default:
		}
		resp, err := http.Get(monitor + "/monitor/host_table_version")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	fe, err := bfe.NewFrontend(bfe.FrontendOptions{Store: store, Reloader: &bfe.Monitor{BaseURL: monitor}})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", ports[0]), bfe.NewDriver(bfe.DriverOptions{Frontend: fe})
}
