//go:build e2e

package scale_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = lbcfv1beta1.AddToScheme(s)
	return s
}()

// EnvPodsPerMember scales BenchmarkCandidatesAcrossMembers (default 5,000 pods per member).
const EnvPodsPerMember = "LBFED_BENCH_PODS_PER_MEMBER"

// BenchmarkCandidatesAcrossMembers (issue 17): one BackendGroup, propagated to the four members,
// selects pods that kwok runs in each — 5,000 Ready pods per member, 20,000 candidates — and
// registers them on one load balancer of an in-memory driver served by this process.
//
//  1. Within the budget: s from the first pod created, and from the last pod Ready, to every
//     record Registered on Karmada; the candidates the federation sees (the template's
//     status.clusters), whether CandidatesTruncated is set (it must not be), the group's
//     ResourceBinding in KiB, and lbfed-controller's peak RSS.
//  2. Past the budget: pods are added in every member until their candidates need 15 % more
//     than the member's share of the budget. CandidatesTruncated turns True on the template
//     with its message, every candidate the members still report is registered.
//  3. Still reconciling: 10 reported pods of m1 are deleted; the member reports others in their
//     room, and those are registered.
//
// A phase that does not converge within its bound fails the benchmark with what it saw.
//
//	LBFED_REQUIRE_INTEGRATION=1 go test -tags e2e ./e2e/scale -run XXX -bench CandidatesAcrossMembers -benchtime 1x -timeout 40m
//	# a small run: LBFED_BENCH_PODS_PER_MEMBER=200 LBFED_BENCH_CANDIDATES_BUDGET=52000
func BenchmarkCandidatesAcrossMembers(b *testing.B) {
	perMember := 5000
	if v := os.Getenv(EnvPodsPerMember); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 20 {
			b.Fatalf("%s=%q: want a number of pods ≥ 20", EnvPodsPerMember, v)
		}
		perMember = n
	}
	s := newScale(b)
	defer s.stop()
	total := perMember * len(s.members)

	// 1. Within the budget.
	b.ResetTimer()
	created := time.Now()
	s.createPods(0, perMember)
	readyAt := s.waitReady(total, 10*time.Minute)
	registeredAt := s.waitRegistered(total, 15*time.Minute)
	b.StopTimer()
	b.ReportMetric(registeredAt.Sub(created).Seconds(), "s-created-to-registered")
	b.ReportMetric(max(0, registeredAt.Sub(readyAt).Seconds()), "s-to-registered")
	bg := s.template()
	b.ReportMetric(float64(candidatesSeen(bg)), "candidates")
	truncated := meta.IsStatusConditionTrue(bg.Status.Conditions, lbcfv1beta1.BackendGroupCandidatesTruncated)
	b.ReportMetric(boolMetric(truncated), "truncated")
	budget, itemBytes := s.memberBudget(), s.itemBytes("m1")
	b.Logf("%d candidates over %d members: truncated=%v; member budget %d bytes, %.1f bytes per candidate (room for %d per member); binding %.0f KiB",
		candidatesSeen(bg), len(s.members), truncated, budget, itemBytes, int(float64(budget)/itemBytes), s.bindingKiB())
	b.ReportMetric(s.bindingKiB(), "KiB-binding")
	b.ReportMetric(float64(budget), "member-budget-bytes")
	b.ReportMetric(itemBytes, "bytes/candidate")
	if truncated {
		b.Errorf("CandidatesTruncated at %d candidates (member budget %d bytes): %s", total, budget,
			meta.FindStatusCondition(bg.Status.Conditions, lbcfv1beta1.BackendGroupCandidatesTruncated).Message)
	}
	if n := candidatesSeen(bg); n != total {
		b.Errorf("the federation sees %d candidates, want %d", n, total)
	}

	// 2. Past the budget: 15 % more candidate bytes than a member's share.
	grown := int(1.15 * float64(budget) / itemBytes)
	if grown <= perMember {
		grown = perMember + perMember/10
	}
	if room := 2 * podsPerNode; grown > room {
		b.Fatalf("growing past the budget needs %d pods per member; the fake nodes hold %d", grown, room)
	}
	b.StartTimer()
	over := time.Now()
	s.createPods(perMember, grown)
	s.waitReady(grown*len(s.members), 10*time.Minute)
	cond := s.waitTruncated(5 * time.Minute)
	truncatedAt := time.Now()
	reported := s.waitReportedRegistered(10 * time.Minute)
	b.StopTimer()
	b.ReportMetric(truncatedAt.Sub(over).Seconds(), "s-over-budget-to-truncated")
	b.ReportMetric(time.Since(over).Seconds(), "s-over-budget-to-reported-registered")
	b.ReportMetric(float64(reported), "reported-over-budget")
	b.ReportMetric(float64(grown*len(s.members)), "pods-over-budget")
	b.ReportMetric(float64(s.registeredCount()), "registered-over-budget")
	b.Logf("over the budget: %d pods, %d reported and registered, %d records registered; CandidatesTruncated %s: %s",
		grown*len(s.members), reported, s.registeredCount(), cond.Reason, cond.Message)

	// 3. A later change is still applied: 10 reported pods of m1 go, others take their room.
	b.StartTimer()
	changed := time.Now()
	gone := s.deleteReported("m1", 10)
	s.waitReportChanged("m1", gone, 5*time.Minute)
	s.waitReportedRegistered(10 * time.Minute)
	b.StopTimer()
	b.ReportMetric(time.Since(changed).Seconds(), "s-change-to-registered")
	stale := s.registeredPods("m1", gone)
	b.ReportMetric(float64(stale), "deleted-still-registered")
	b.Logf("deleted %d reported pods of m1: the member reports others in their room, all registered; %d of the deleted pods' records still registered (a truncated report keeps unlisted records)",
		len(gone), stale)

	b.ReportMetric(s.controllerPeakRSS(), "MiB-peak-RSS")
	b.ReportMetric(float64(s.controllerRestarts()), "controller-restarts")
	if err := s.topo.CheckProcesses(); err != nil {
		b.Errorf("a process of the run died: %v", err)
	}
	for _, p := range lbfed.Processes {
		if n := errorLines(p); n > 0 {
			b.Logf("%s: %d error lines in %s", p.Name, n, p.LogPath)
		}
	}
}

// scale is the benchmark's world: clients and caches of Karmada and of every member, and the
// in-memory driver the group's load balancer is on.
type scale struct {
	b       *testing.B
	ctx     context.Context
	cancel  context.CancelFunc
	topo    *localup.Topology
	ns      string
	members []string
	karmada client.Client
	// records caches the namespace's BackendRecords on Karmada; pods each member's pods.
	records cache.Cache
	pods    map[string]cache.Cache
	mc      map[string]client.Client
	kube    map[string]kubernetes.Interface
	nodes   map[string][]string
	drv     *memdriver.Driver
	stopDrv func()
	// pids are the lbfed-controller processes seen (more than one: it restarted), peakRSS the
	// highest VmHWM among them, sampled every second.
	mu      sync.Mutex
	pids    map[int]bool
	peakRSS int64
}

func newScale(b *testing.B) *scale {
	topo := testenv.Topology(b)
	ctx, cancel := context.WithCancel(context.Background())
	s := &scale{b: b, ctx: ctx, cancel: cancel, topo: topo, ns: fmt.Sprintf("scale-%d", rand.IntN(1000000)),
		pods: map[string]cache.Cache{}, mc: map[string]client.Client{}, kube: map[string]kubernetes.Interface{}, nodes: map[string][]string{}}
	var err error
	if s.karmada, err = client.New(topo.KarmadaConfig(), client.Options{Scheme: scheme}); err != nil {
		b.Fatal(err)
	}
	for _, m := range topo.Members() {
		s.members = append(s.members, m.Name())
		cfg := fast(m.RESTConfig())
		if s.mc[m.Name()], err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			b.Fatal(err)
		}
		if s.kube[m.Name()], err = kubernetes.NewForConfig(cfg); err != nil {
			b.Fatal(err)
		}
		nodes, err := s.kube[m.Name()].CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) == 0 {
			b.Fatalf("nodes of %s: %v", m.Name(), err)
		}
		for _, n := range nodes.Items {
			s.nodes[m.Name()] = append(s.nodes[m.Name()], n.Name)
		}
	}
	if len(s.members) < 4 {
		b.Fatalf("%d members; the benchmark wants 4", len(s.members))
	}
	s.pids = map[int]bool{}
	s.sampleController()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				s.sampleController()
			}
		}
	}()

	s.drv = memdriver.New()
	var url string
	if url, s.stopDrv, err = lbfed.ServeDriver("scale-memdriver", s.drv.Handler(driver.HandlerOptions{})); err != nil {
		b.Fatal(err)
	}
	s.apply(url)
	s.records = s.startCache(fast(topo.KarmadaConfig()), &lbcfv1beta1.BackendRecord{})
	for _, m := range s.members {
		// The namespace reaches the members through Karmada.
		s.eventually(3*time.Minute, "namespace "+s.ns+" in "+m, func() error {
			return s.mc[m].Get(s.ctx, client.ObjectKey{Name: s.ns}, &corev1.Namespace{})
		})
		s.pods[m] = s.startCache(fast(topo.Member(m).RESTConfig()), &corev1.Pod{})
		s.eventually(3*time.Minute, "the group's first report from "+m, func() error {
			bg := &lbcfv1beta1.BackendGroup{}
			if err := s.mc[m].Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "web"}, bg); err != nil {
				return err
			}
			if bg.Status.Candidates == nil {
				return fmt.Errorf("no candidates reported yet")
			}
			return nil
		})
	}
	return s
}

func (s *scale) stop() {
	// The namespace goes first, while the driver still answers the deregistrations.
	_ = s.karmada.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}})
	s.cancel()
	s.stopDrv()
}

// fast lifts a test client's rate limits: the benchmark creates thousands of pods.
func fast(cfg *rest.Config) *rest.Config {
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg
}

// startCache starts an informer of obj's kind in the benchmark's namespace.
func (s *scale) startCache(cfg *rest.Config, obj client.Object) cache.Cache {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{s.ns: {}},
		DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		s.b.Fatal(err)
	}
	if _, err := c.GetInformer(s.ctx, obj); err != nil {
		s.b.Fatal(err)
	}
	go func() { _ = c.Start(s.ctx) }()
	if !c.WaitForCacheSync(s.ctx) {
		s.b.Fatal("cache did not sync")
	}
	return c
}

const objects = `
apiVersion: v1
kind: Namespace
metadata: {name: {{NS}}}
{{DRIVER}}---
apiVersion: lbcf.tkestack.io/v1beta1
kind: LoadBalancer
metadata: {name: vip, namespace: {{NS}}}
spec:
  lbDriver: mem
  lbSpec: {vip: "192.0.2.10", port: "80", protocol: TCP}
---
apiVersion: lbcf.tkestack.io/v1beta1
kind: BackendGroup
metadata: {name: web, namespace: {{NS}}}
spec:
  loadBalancers: [vip]
  pods:
    byLabel: {selector: {app: web}}
    ports: [{port: 8080, protocol: TCP}]
  parameters: {weight: "1"}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web, namespace: {{NS}}}
spec:
  resourceSelectors:
  - {apiVersion: lbcf.tkestack.io/v1beta1, kind: BackendGroup, name: web}
  placement:
    clusterAffinity:
      clusterNames: [{{MEMBERS}}]
`

// apply creates the group and its load balancer on Karmada, propagated to every member.
func (s *scale) apply(driverURL string) {
	text := strings.NewReplacer("{{NS}}", s.ns, "{{URL}}", driverURL, "{{MEMBERS}}", strings.Join(s.members, ", "), "{{DRIVER}}", deploy.DriverYAML(s.ns, "mem", driverURL, "")).Replace(objects)
	objs, err := localup.DecodeManifests([]byte(text))
	if err != nil {
		s.b.Fatal(err)
	}
	for _, obj := range objs {
		if err := deploy.Apply(s.ctx, s.karmada, obj); err != nil {
			s.b.Fatalf("apply %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// podName names pod i like a Deployment's pod ("web-<template hash>-<5 characters>"), so that
// the candidates take the room real ones take.
func podName(i int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	var suffix [5]byte
	for k := range suffix {
		suffix[k] = alphabet[i%len(alphabet)]
		i /= len(alphabet)
	}
	return "web-7c5d8f9b6d-" + string(suffix[:])
}

// createPods creates pods from..to-1 in every member, in parallel, spread over its nodes.
func (s *scale) createPods(from, to int) {
	var wg sync.WaitGroup
	errs := make(chan error, len(s.members))
	for _, m := range s.members {
		next := make(chan int)
		go func() {
			defer close(next)
			for i := from; i < to; i++ {
				next <- i
			}
		}()
		var once sync.Once
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					p := &corev1.Pod{
						ObjectMeta: metav1.ObjectMeta{Name: podName(i), Namespace: s.ns, Labels: map[string]string{"app": "web"}},
						Spec: corev1.PodSpec{NodeName: s.nodes[m][i%len(s.nodes[m])],
							Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
					}
					if _, err := s.kube[m].CoreV1().Pods(s.ns).Create(s.ctx, p, metav1.CreateOptions{}); err != nil {
						once.Do(func() { errs <- fmt.Errorf("create pod %s in %s: %w", p.Name, m, err) })
						for range next {
						}
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		s.b.Fatal(err)
	}
}

// waitReady waits until n pods are Ready over the members, and returns when that was seen.
func (s *scale) waitReady(n int, bound time.Duration) time.Time {
	s.eventually(bound, fmt.Sprintf("%d pods Ready", n), func() error {
		if got := s.readyCount(); got < n {
			return fmt.Errorf("%d Ready", got)
		}
		return nil
	})
	return time.Now()
}

func (s *scale) readyCount() int {
	n := 0
	for _, m := range s.members {
		list := &corev1.PodList{}
		if err := s.pods[m].List(s.ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			s.b.Fatal(err)
		}
		for i := range list.Items {
			if podReady(&list.Items[i]) {
				n++
			}
		}
	}
	return n
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil
		}
	}
	return false
}

// waitRegistered waits until n records are Registered on Karmada.
func (s *scale) waitRegistered(n int, bound time.Duration) time.Time {
	s.eventually(bound, fmt.Sprintf("%d records Registered", n), func() error {
		if got := s.registeredCount(); got < n {
			return fmt.Errorf("%d Registered of %d records", got, s.recordCount())
		}
		return nil
	})
	return time.Now()
}

func (s *scale) recordList() []lbcfv1beta1.BackendRecord {
	list := &lbcfv1beta1.BackendRecordList{}
	if err := s.records.List(s.ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		s.b.Fatal(err)
	}
	return list.Items
}

func (s *scale) recordCount() int { return len(s.recordList()) }

func (s *scale) registeredCount() int {
	n := 0
	for _, br := range s.recordList() {
		if br.IsRegistered() && br.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// registered returns, per member, the pods whose record is Registered.
func (s *scale) registered() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, br := range s.recordList() {
		if !br.IsRegistered() || br.DeletionTimestamp != nil || br.Spec.PodBackendInfo == nil {
			continue
		}
		m := br.Labels[lbcfv1beta1.LabelCluster]
		if out[m] == nil {
			out[m] = map[string]bool{}
		}
		out[m][br.Spec.PodBackendInfo.Name] = true
	}
	return out
}

// registeredPods counts the pods of names whose record is Registered for member.
func (s *scale) registeredPods(member string, names []string) int {
	reg, n := s.registered()[member], 0
	for _, name := range names {
		if reg[name] {
			n++
		}
	}
	return n
}

// template is the group on Karmada.
func (s *scale) template() *lbcfv1beta1.BackendGroup {
	bg := &lbcfv1beta1.BackendGroup{}
	if err := s.karmada.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "web"}, bg); err != nil {
		s.b.Fatal(err)
	}
	return bg
}

// candidatesSeen is the number of candidates the members reported, as the template's status
// aggregates them.
func candidatesSeen(bg *lbcfv1beta1.BackendGroup) int {
	n := 0
	for _, c := range bg.Status.Clusters {
		n += int(c.Candidates)
	}
	return n
}

// memberBudget is each member's share of the budget, as the federation tells the members.
func (s *scale) memberBudget() int {
	v, err := strconv.Atoi(s.template().Annotations[lbcfv1beta1.AnnotationCandidatesBudget])
	if err != nil {
		s.b.Fatalf("the template's %s: %v", lbcfv1beta1.AnnotationCandidatesBudget, err)
	}
	return v
}

// memberReport is the group's candidates as member reports them.
func (s *scale) memberReport(member string) *lbcfv1beta1.BackendGroup {
	bg := &lbcfv1beta1.BackendGroup{}
	if err := s.mc[member].Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "web"}, bg); err != nil {
		s.b.Fatal(err)
	}
	if bg.Status.Candidates == nil {
		s.b.Fatalf("%s reports no candidates", member)
	}
	return bg
}

// itemBytes is what one candidate takes of a member's budget (its entry, quoted, with a comma).
func (s *scale) itemBytes(member string) float64 {
	items := s.memberReport(member).Status.Candidates.Items
	n := 0
	for _, it := range items {
		n += len(it) + 3
	}
	return float64(n) / float64(len(items))
}

// reportedPods is the pods a member's report lists.
func (s *scale) reportedPods(member string) []string {
	cands, err := s.memberReport(member).Status.Candidates.Decode()
	if err != nil {
		s.b.Fatalf("%s's report: %v", member, err)
	}
	var out []string
	for _, c := range cands {
		if c.Kind == lbcfv1beta1.CandidatePod {
			out = append(out, c.Name)
		}
	}
	return out
}

// bindingKiB is the size of the group's ResourceBinding as stored (JSON).
func (s *scale) bindingKiB() float64 {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "work.karmada.io", Version: "v1alpha2", Kind: "ResourceBindingList"})
	if err := s.karmada.List(s.ctx, list, client.InNamespace(s.ns)); err != nil {
		s.b.Fatal(err)
	}
	for _, rb := range list.Items {
		if kind, _, _ := unstructured.NestedString(rb.Object, "spec", "resource", "kind"); kind == lbcfv1beta1.KindBackendGroup {
			js, err := json.Marshal(rb.Object)
			if err != nil {
				s.b.Fatal(err)
			}
			return float64(len(js)) / 1024
		}
	}
	s.b.Fatal("no ResourceBinding of the group")
	return 0
}

// waitTruncated waits for CandidatesTruncated on the template and returns it.
func (s *scale) waitTruncated(bound time.Duration) metav1.Condition {
	var cond metav1.Condition
	// Every member is over its share; the Pull members' reports come later than the others'.
	s.eventually(bound, "CandidatesTruncated on the template, naming every member", func() error {
		bg := s.template()
		c := meta.FindStatusCondition(bg.Status.Conditions, lbcfv1beta1.BackendGroupCandidatesTruncated)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("condition %+v; clusters %+v", c, bg.Status.Clusters)
		}
		for _, m := range s.members {
			if !strings.Contains(c.Message, m) {
				return fmt.Errorf("the condition does not name member %s: %s", m, c.Message)
			}
		}
		cond = *c
		return nil
	})
	if !strings.Contains(cond.Message, "Split the BackendGroup") {
		s.b.Errorf("CandidatesTruncated does not say what to do: %s", cond.Message)
	}
	return cond
}

// waitReportedRegistered waits until every pod the members report has a Registered record, and
// returns how many they report.
func (s *scale) waitReportedRegistered(bound time.Duration) int {
	n := 0
	s.eventually(bound, "every reported candidate Registered", func() error {
		reg := s.registered()
		n = 0
		missing := map[string]int{}
		for _, m := range s.members {
			for _, p := range s.reportedPods(m) {
				n++
				if !reg[m][p] {
					missing[m]++
				}
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("reported but not Registered: %v", missing)
		}
		return nil
	})
	return n
}

// deleteReported deletes k pods a member reports (the last ones of its list) and returns them.
func (s *scale) deleteReported(member string, k int) []string {
	pods := s.reportedPods(member)
	sort.Strings(pods)
	gone := pods[len(pods)-k:]
	for _, name := range gone {
		if err := s.kube[member].CoreV1().Pods(s.ns).Delete(s.ctx, name, metav1.DeleteOptions{}); err != nil {
			s.b.Fatal(err)
		}
	}
	return gone
}

// waitReportChanged waits until the member's report lists none of gone, and as many pods as
// before (others in their room).
func (s *scale) waitReportChanged(member string, gone []string, bound time.Duration) {
	before := len(s.reportedPods(member))
	s.eventually(bound, member+" reports others in the deleted pods' room", func() error {
		pods := s.reportedPods(member)
		set := map[string]bool{}
		for _, p := range pods {
			set[p] = true
		}
		for _, p := range gone {
			if set[p] {
				return fmt.Errorf("still reports %s", p)
			}
		}
		if len(pods) < before-len(gone)/2 {
			return fmt.Errorf("reports %d pods, %d before", len(pods), before)
		}
		return nil
	})
}

// sampleController notes lbfed-controller's process and its peak resident memory (VmHWM): a
// restarted process starts again from nothing.
func (s *scale) sampleController() {
	for _, p := range lbfed.Processes {
		if p.Name != "lbfed-controller" {
			continue
		}
		hwm := localup.MemoryOf(p.PID(), "VmHWM")
		s.mu.Lock()
		s.pids[p.PID()] = true
		s.peakRSS = max(s.peakRSS, hwm)
		s.mu.Unlock()
	}
}

// controllerPeakRSS is the highest peak resident memory of lbfed-controller's processes, in MiB.
func (s *scale) controllerPeakRSS() float64 {
	s.sampleController()
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.peakRSS) / (1 << 20)
}

// controllerRestarts is how many times lbfed-controller started again during the benchmark.
func (s *scale) controllerRestarts() int {
	s.sampleController()
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pids) - 1
}

// klogError starts a klog error line ("E0102 15:04:05.000000 …").
var klogError = regexp.MustCompile(`^E\d{4} `)

// errorLines counts a process log's error-level lines.
func errorLines(p *localup.Process) int {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if klogError.MatchString(sc.Text()) {
			n++
		}
	}
	return n
}

// eventually polls f every second until it succeeds, failing the benchmark with f's last error
// after bound.
func (s *scale) eventually(bound time.Duration, what string, f func() error) {
	deadline := time.Now().Add(bound)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.b.Fatalf("%s: not within %s: %v", what, bound, err)
		}
		if perr := s.topo.CheckProcesses(); perr != nil {
			s.b.Fatalf("%s: %v", what, perr)
		}
		time.Sleep(time.Second)
	}
}

func boolMetric(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
