//go:build kind

package kind_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lbfed/lbfed/elb/radware/alteon"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/devicestate"
	"github.com/lbfed/lbfed/testinfra/traffic"
)

// What hack/kind/lbfed-up.sh installs (kept equal to hack/kind/lib.sh and lbfed-up.sh).
const (
	demoVIP       = "10.20.0.100"
	lbfedRelease  = "lbfed"
	lbfedNS       = "karmada-system"
	driverRelease = "lbcf"
	driverNS      = "lbfed-driver"
	demoNS        = "demo"
	simServerName = "alteon-sim.lbfed-driver.svc"
	hostNode      = "lbfed-karmada-host-control-plane"
)

type env struct {
	t       *testing.T
	ctx     context.Context
	root    string // the repository
	dir     string // .localup/kind
	helm    string
	host    client.Client
	karmada client.Client
	members map[string]client.Client
	// nodeIP is each cluster's node address on the kind network (karmada-host, m1, m2).
	nodeIP map[string]string
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = lbcfv1beta1.AddToScheme(s)
	return s
}()

func newEnv(t *testing.T) *env {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("LBFED_KIND_DIR")
	if dir == "" {
		dir = filepath.Join(root, ".localup", "kind")
	}
	e := &env{t: t, ctx: context.Background(), root: root, dir: dir, helm: os.Getenv("HELM"), members: map[string]client.Client{}, nodeIP: map[string]string{}}
	if e.helm == "" {
		t.Fatal("HELM is not set (make test-kind sets it)")
	}
	connect := func(name, kubeconfig string) client.Client {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatalf("no kind topology (make up-kind): %v", err)
		}
		if u, err := url.Parse(cfg.Host); err == nil && name != "" {
			e.nodeIP[name] = u.Hostname() // the kubeconfigs address each API server by its node
		}
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	e.host = connect("karmada-host", filepath.Join(dir, "karmada-host.kubeconfig"))
	e.karmada = connect("", filepath.Join(dir, "karmada", "karmada-apiserver.config"))
	for _, m := range []string{"m1", "m2"} {
		e.members[m] = connect(m, filepath.Join(dir, m+".kubeconfig"))
	}
	return e
}

// helmCmd runs helm against the host cluster and returns its output.
func (e *env) helmCmd(args ...string) (string, error) {
	cmd := exec.CommandContext(e.ctx, e.helm, append([]string{"--kubeconfig", filepath.Join(e.dir, "karmada-host.kubeconfig")}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// node runs a command in a kind node (docker exec).
func node(name string, args ...string) (string, error) {
	out, err := exec.Command("docker", append([]string{"exec", name}, args...)...).CombinedOutput()
	return string(out), err
}

// apply server-side applies multi-document YAML to c.
func (e *env) apply(c client.Client, docs string) error {
	objs, err := decodeDocs(docs)
	if err != nil {
		return err
	}
	return e.applyObjects(c, objs)
}

func (e *env) applyObjects(c client.Client, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		if err := c.Apply(e.ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("e2e-kind"), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// decodeDocs decodes multi-document YAML.
func decodeDocs(docs string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, fmt.Errorf("decode %q: %w", doc, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

// example is an application on Karmada like the demo: a Deployment of the responder divided
// between m1 and m2, its BackendGroup, and a LoadBalancer on its own VIP.
type example struct {
	NS, VIP  string
	Replicas int
	Gated    bool
	PreStop  int
	// restartedAt is the template annotation of the last restart.
	restartedAt string
}

// Grace is the pods' terminationGracePeriodSeconds: the preStop sleep and the process's own
// shutdown (the responder ends in-flight requests).
func (ex *example) Grace() int { return ex.PreStop + 20 }

// demo reads a file of examples/kind-demo, the demo hack/kind/lbfed-up.sh applies, as ex's
// objects: in ex's namespace, on its VIP, with its replicas, gate and preStop sleep.
func (e *env) demo(ex *example, file string) []*unstructured.Unstructured {
	e.t.Helper()
	g := NewWithT(e.t)
	b, err := os.ReadFile(filepath.Join(e.root, "examples", "kind-demo", file))
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := decodeDocs(string(b))
	g.Expect(err).NotTo(HaveOccurred())
	for _, u := range objs {
		switch u.GetKind() {
		case "Namespace":
			u.SetName(ex.NS)
			if !ex.Gated {
				u.SetLabels(nil)
			}
			continue
		case "LoadBalancer":
			g.Expect(unstructured.SetNestedField(u.Object, ex.VIP, "spec", "lbSpec", "vip")).To(Succeed())
		case "Deployment":
			dep := &appsv1.Deployment{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, dep)).To(Succeed())
			dep.Spec.Replicas = ptr(int32(ex.Replicas))
			dep.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr(int64(ex.Grace()))
			c := &dep.Spec.Template.Spec.Containers[0]
			c.Lifecycle = nil
			if ex.PreStop > 0 {
				c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: int64(ex.PreStop)}}}
			}
			u.Object, err = runtime.DefaultUnstructuredConverter.ToUnstructured(dep)
			g.Expect(err).NotTo(HaveOccurred())
			u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
		}
		u.SetNamespace(ex.NS)
	}
	return objs
}

func ptr[T any](v T) *T { return &v }

// create puts the example on Karmada: its group first, so that the members' webhook gives the
// pods lbfed's readiness gate (it gates only pods a BackendGroup there selects).
func (e *env) create(ex *example) {
	e.t.Helper()
	g := NewWithT(e.t)
	g.Expect(e.applyObjects(e.karmada, e.demo(ex, "backendgroup.yaml"))).To(Succeed())
	for m, c := range e.members {
		g.Eventually(func() error {
			return c.Get(e.ctx, client.ObjectKey{Namespace: ex.NS, Name: "web"}, &lbcfv1beta1.BackendGroup{})
		}, 2*time.Minute, time.Second).Should(Succeed(), "BackendGroup %s/web in %s", ex.NS, m)
	}
	g.Expect(e.applyObjects(e.karmada, e.demo(ex, "deployment.yaml"))).To(Succeed())
}

func (e *env) pods(g Gomega, ns, member string) []corev1.Pod {
	list := &corev1.PodList{}
	g.Expect(e.members[member].List(e.ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": "web"})).To(Succeed())
	return list.Items
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasGate(p *corev1.Pod) bool {
	for _, g := range p.Spec.ReadinessGates {
		if string(g.ConditionType) == lbcfv1beta1.PodConditionBackendRegistered {
			return true
		}
	}
	return false
}

// readyPods returns "ip:8080" of a member's Ready pods of ns, sorted.
func (e *env) readyPods(ns, member string) []string {
	out, err := deploy.ReadyBackends(e.ctx, e.members[member], ns)
	if err != nil {
		return nil
	}
	return out
}

// registered returns the backend addresses registered for a member in ns (its Registered
// records on Karmada), sorted.
func (e *env) registered(ns, member string) []string {
	list := &lbcfv1beta1.BackendRecordList{}
	if err := e.karmada.List(e.ctx, list, client.InNamespace(ns), client.MatchingLabels{lbcfv1beta1.LabelCluster: member}); err != nil {
		return nil
	}
	out := []string{}
	for _, br := range list.Items {
		if br.IsRegistered() && br.DeletionTimestamp == nil {
			out = append(out, br.Status.BackendAddr)
		}
	}
	sort.Strings(out)
	return out
}

// settledAt waits until every member runs want[member] Ready pods of the Deployment's current
// template and nothing else, each registered (and only those), gated as gated says (nil: either).
func (e *env) settledAt(ex *example, want map[string]int, gated *bool) {
	e.t.Helper()
	NewWithT(e.t).Eventually(func(g Gomega) {
		for member, n := range want {
			dep := &appsv1.Deployment{}
			g.Expect(e.members[member].Get(e.ctx, client.ObjectKey{Namespace: ex.NS, Name: "web"}, dep)).To(Succeed())
			g.Expect(dep.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"]).To(Equal(ex.restartedAt), member+": the restart reached it")
			g.Expect(dep.Status.ObservedGeneration).To(Equal(dep.Generation), member)
			g.Expect(dep.Status.UpdatedReplicas).To(BeEquivalentTo(n), member)
			g.Expect(dep.Status.AvailableReplicas).To(BeEquivalentTo(n), member)
			pods := e.pods(g, ex.NS, member)
			g.Expect(pods).To(HaveLen(n), member+": no pod left terminating")
			for _, p := range pods {
				if gated != nil {
					g.Expect(hasGate(&p)).To(Equal(*gated), "%s/%s readiness gate", member, p.Name)
				}
			}
			g.Expect(e.registered(ex.NS, member)).To(Equal(e.readyPods(ex.NS, member)), member)
		}
	}, 5*time.Minute, time.Second).Should(Succeed())
}

// restart rolls the Deployment on Karmada as `kubectl rollout restart` does.
func (e *env) restart(ex *example) {
	e.t.Helper()
	ex.restartedAt = time.Now().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, ex.restartedAt)
	dep := &appsv1.Deployment{}
	dep.Namespace, dep.Name = ex.NS, "web"
	NewWithT(e.t).Expect(e.karmada.Patch(e.ctx, dep, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// scale sets the Deployment's replicas on Karmada and the members' weights of its placement.
func (e *env) scale(ex *example, replicas int, weights map[string]int) {
	e.t.Helper()
	g := NewWithT(e.t)
	pp := &unstructured.Unstructured{}
	pp.SetAPIVersion("policy.karmada.io/v1alpha1")
	pp.SetKind("PropagationPolicy")
	g.Expect(e.karmada.Get(e.ctx, client.ObjectKey{Namespace: ex.NS, Name: "web-app"}, pp)).To(Succeed())
	var list []any
	for _, m := range []string{"m1", "m2"} {
		list = append(list, map[string]any{"targetCluster": map[string]any{"clusterNames": []any{m}}, "weight": int64(weights[m])})
	}
	g.Expect(unstructured.SetNestedSlice(pp.Object, list, "spec", "placement", "replicaScheduling", "weightPreference", "staticWeightList")).To(Succeed())
	g.Expect(e.karmada.Update(e.ctx, pp)).To(Succeed())
	dep := &appsv1.Deployment{}
	dep.Namespace, dep.Name = ex.NS, "web"
	g.Expect(e.karmada.Patch(e.ctx, dep, client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))))).To(Succeed())
}

// underLoad runs f with load through the example's VIP and returns what the load saw and f's
// duration; the load starts 2 s before f and runs 2 s after it.
func (e *env) underLoad(vip string, f func()) (traffic.Result, time.Duration) {
	l := traffic.Start("http://"+vip+"/", traffic.Interval, 15*time.Minute)
	defer l.Stop()
	time.Sleep(2 * time.Second)
	start := time.Now()
	f()
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	r := l.Stop()
	g := NewWithT(e.t)
	g.Expect(r.Sent).To(BeNumerically(">", 100), "the load ran")
	g.Expect(r.ByMember).To(And(HaveKey("m1"), HaveKey("m2")), "both members served")
	return r, took
}

// unit is a client of one unit of the simulated Alteon pair (host network on the host cluster's
// node), verifying the management certificate lbfed-up.sh made.
func (e *env) unit(port int) *alteon.Client {
	e.t.Helper()
	g := NewWithT(e.t)
	ca, err := os.ReadFile(filepath.Join(e.dir, "pki-lbfed", "alteon-ca.crt"))
	g.Expect(err).NotTo(HaveOccurred())
	password, err := os.ReadFile(filepath.Join(e.dir, "pki-lbfed", "alteon-password"))
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: simServerName, MinVersion: tls.VersionTLS12}}}
	c, err := alteon.NewClient(alteon.Config{URL: fmt.Sprintf("https://%s:%d", e.nodeIP["karmada-host"], port), User: "admin",
		Password: strings.TrimSpace(string(password)), HTTPClient: hc, Attempts: 1})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// master is the client of the pair's master unit (the simulator's control API names the roles).
func (e *env) master() (*alteon.Client, error) {
	rsp, err := http.Get(fmt.Sprintf("http://%s:8440/roles", e.nodeIP["karmada-host"]))
	if err != nil {
		return nil, err
	}
	defer rsp.Body.Close()
	roles := map[string]string{}
	if err := json.NewDecoder(rsp.Body).Decode(&roles); err != nil {
		return nil, err
	}
	for name, role := range roles {
		if role == "master" {
			if strings.HasSuffix(name, "-b") {
				return e.unit(8444), nil
			}
			return e.unit(8443), nil
		}
	}
	return nil, fmt.Errorf("no master unit: %v", roles)
}

// realServers returns the IPs of a unit's real servers.
// inRotation returns the IPs the master unit may choose for a new connection.
func (e *env) inRotation(ctx context.Context) (map[string]bool, error) {
	c, err := e.master()
	if err != nil {
		return nil, err
	}
	return devicestate.InRotation(ctx, c)
}
