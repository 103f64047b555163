package federation_test

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// BenchmarkTwentyMembers: one BackendGroup placed on 20 members that report 1,000 Ready pods
// each (20,000 candidates, one LoadBalancer on the memdriver), against the same 20,000
// candidates from 4 members × 5,000 — the baseline: same candidates, same records, same byte
// budget in total, so any difference is the number of members. Members are simulated at the
// binding: each report is encoded as lbcf-controller --mode=member encodes it, with the byte
// budget the federation wrote on the template (so the cut, if any, is the members' own), and all
// reports land in one status write of the ResourceBinding. lbfed-controller runs as a process,
// each variant in a test process (and on a test API server) of its own. Measured:
//
//   - KiB-binding: the ResourceBinding as the API server returns it (its JSON, as stored in
//     etcd), against etcd's 1.5 MiB request limit (1536 KiB; the test etcd runs with etcd's
//     default limit, so a binding over it could not be written at all);
//   - candidates-truncated: candidates the members cut to their budget (then also the template's
//     CandidatesTruncated condition is awaited);
//   - s-to-registered: from the binding's status write to every reported candidate's record
//     Registered (read from the template's status, then checked on the records);
//   - cpu-s: the controller process's CPU time (utime+stime) over that period;
//   - MiB-peak-RSS: the controller process's peak RSS;
//   - api-writes/backend and group-reconciles: the controller's API writes per registered
//     candidate, and its reconciles of the group (what more members could multiply).
//
// LBFED_BENCH_MEMBER_PODS sets the candidates per member of the 20-member variant (default
// 1000; the baseline reports the same total from 4 members); LBFED_BENCH_MEMBER_APP the
// Deployment name in the pod names (default "web": ≈ 59 bytes per candidate, within the
// design's 60; longer names make the members cut).
//
//	go test ./federation -run XXX -bench TwentyMembers -benchtime 1x -timeout 60m
func BenchmarkTwentyMembers(b *testing.B) {
	perMember := 1000
	if n, err := strconv.Atoi(os.Getenv("LBFED_BENCH_MEMBER_PODS")); err == nil && n > 0 {
		perMember = n
	}
	app := "web"
	if a := os.Getenv("LBFED_BENCH_MEMBER_APP"); a != "" {
		app = a
	}
	total := 20 * perMember
	for _, v := range []struct {
		name    string
		members int
	}{{"20-members", 20}, {"4-members", 4}} {
		b.Run(v.name, func(b *testing.B) {
			b.StopTimer()
			if !inOwnProcess(b) {
				return
			}
			for i := 0; i < b.N; i++ {
				membersRun(b, app, v.members, total)
			}
		})
	}
}

// membersRun is one run of BenchmarkTwentyMembers: total candidates spread over members.
func membersRun(b *testing.B, app string, members, total int) {
	e := newEnvWithoutController(b)
	g := e.g
	bin := buildLbfedController(b)
	kc := testenv.Cluster(b).KubeconfigPath()
	clusters := make([]string, members)
	for m := range clusters {
		clusters[m] = fmt.Sprintf("m%02d", m+1)
	}
	long := metav1.Duration{Duration: time.Minute}
	g.Expect(e.c.Create(e.ctx, &lbcfv1beta1.LoadBalancerDriver{ObjectMeta: metav1.ObjectMeta{Name: "mem", Namespace: e.ns},
		Spec: lbcfv1beta1.LoadBalancerDriverSpec{DriverType: "Webhook", URL: e.url, Webhooks: []lbcfv1beta1.WebhookConfig{
			{Name: driver.EnsureBackend, Timeout: long}, {Name: driver.DeregisterBackend, Timeout: long}}}})).To(Succeed())
	g.Expect(e.c.Create(e.ctx, &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: "vip", Namespace: e.ns},
		Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: "mem", LBSpec: map[string]string{"vip": "10.250.0.1"}}})).To(Succeed())
	e.bg = &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: e.ns}, Spec: lbcfv1beta1.BackendGroupSpec{
		LoadBalancers: []string{"vip"}, Parameters: map[string]string{"weight": "1"},
		Pods: &lbcfv1beta1.PodBackend{Ports: []lbcfv1beta1.PortSelector{{Port: 80, Protocol: "TCP"}}, ByLabel: &lbcfv1beta1.SelectPodByLabel{Selector: map[string]string{"app": app}}},
	}}
	g.Expect(e.c.Create(e.ctx, e.bg)).To(Succeed())
	for _, c := range clusters {
		e.cluster(c, true)
	}
	e.rb = &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: app + "-backendgroup", Namespace: e.ns}, Spec: workv1alpha2.ResourceBindingSpec{
		Resource: workv1alpha2.ObjectReference{APIVersion: lbcfv1beta1.APIVersion, Kind: "BackendGroup", Namespace: e.ns, Name: app, UID: e.bg.UID}}}
	for _, c := range clusters {
		e.rb.Spec.Clusters = append(e.rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: e.ns + "-" + c})
	}
	g.Expect(e.c.Create(e.ctx, e.rb)).To(Succeed())

	p := startLbfedController(b, bin, kc)
	// The members report with the share of the budget the federation tells them.
	budget := 0
	g.Eventually(func() int {
		bg := &lbcfv1beta1.BackendGroup{}
		_ = e.c.Get(e.ctx, client.ObjectKeyFromObject(e.bg), bg)
		budget, _ = strconv.Atoi(bg.Annotations[lbcfv1beta1.AnnotationCandidatesBudget])
		lb := &lbcfv1beta1.LoadBalancer{}
		if e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "vip"}, lb) != nil || !lb.IsCreated() {
			return 0
		}
		return budget
	}, 2*time.Minute, 200*time.Millisecond).Should(BeNumerically(">", 0))

	perMember := total / members
	reported, truncated := 0, false
	rb := &workv1alpha2.ResourceBinding{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(e.rb), rb)).To(Succeed())
	for m, c := range clusters {
		raw, items, cut := memberReport(app, m*perMember, perMember, budget)
		reported += items
		truncated = truncated || cut
		rb.Status.AggregatedStatus = append(rb.Status.AggregatedStatus, workv1alpha2.AggregatedStatusItem{
			ClusterName: e.ns + "-" + c, Status: raw, Applied: true, Health: workv1alpha2.ResourceHealthy})
	}

	cpu0 := p.cpuTime()
	start := time.Now()
	b.StartTimer()
	g.Expect(e.c.Status().Update(e.ctx, rb)).To(Succeed(), "the binding with every member's report")
	// The template's status first (one small read), then every record.
	g.Eventually(func(g Gomega) {
		if !p.alive() {
			StopTrying("lbfed-controller exited; see its log").Now()
		}
		bg := &lbcfv1beta1.BackendGroup{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(e.bg), bg)).To(Succeed())
		g.Expect(bg.Status.Backends).To(BeEquivalentTo(reported))
		g.Expect(bg.Status.RegisteredBackends).To(BeEquivalentTo(reported))
		g.Expect(meta.IsStatusConditionTrue(bg.Status.Conditions, lbcfv1beta1.BackendGroupCandidatesTruncated)).To(Equal(truncated))
	}, 30*time.Minute, 250*time.Millisecond).Should(Succeed())
	b.StopTimer()
	elapsed, cpu := time.Since(start), (p.cpuTime() - cpu0).Seconds()
	g.Expect(e.registeredRecords()).To(Equal(reported), "every reported candidate's record is Registered")

	size := bindingBytes(b, e.cfg, e.ns, e.rb.Name)
	b.ReportMetric(float64(size)/1024, "KiB-binding")
	b.ReportMetric(float64(total-reported), "candidates-truncated")
	b.ReportMetric(elapsed.Seconds(), "s-to-registered")
	b.ReportMetric(cpu, "cpu-s")
	b.ReportMetric(p.peakRSS(), "MiB-peak-RSS")
	// Where member count could cost: the API writes (records, template status and annotations)
	// and the group's reconciles, per candidate registered.
	b.ReportMetric(p.metric("k8s_operation_latency_count", "")/float64(reported), "api-writes/backend")
	b.ReportMetric(p.metric("key_process_latency_count", `crd="BackendGroup"`), "group-reconciles")
	for _, op := range []string{"Create", "UpdateStatus", "Update", "Delete", "Patch"} {
		for _, kind := range []string{"BackendRecord", "BackendGroup"} {
			if n := p.metric("k8s_operation_latency_count", fmt.Sprintf(`k8s_op_obj=%q,k8s_op_type=%q`, kind, op)); n > 0 {
				b.Logf("API writes: %s %s %.0f", op, kind, n)
			}
		}
	}
	b.Logf("%d members × %d candidates: budget %d bytes per member, %d reported, binding %d bytes (etcd limit %d)",
		members, perMember, budget, reported, size, 3<<19)
}

// memberReport is what Karmada's InterpretStatus delivers of a member's BackendGroup status when
// lbcf-controller --mode=member reports pods first..first+n-1 of a Deployment's fleet (20 pods
// per node) with the given byte budget; items is the number of candidates it lists, cut whether
// it had to cut.
func memberReport(app string, first, n, budget int) (raw *runtime.RawExtension, items int, cut bool) {
	const podsPerNode = 20
	cands := make([]lbcfv1beta1.Candidate, 0, n)
	for k := first; k < first+n; k++ {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d", k)
		sum := fmt.Sprintf("%016x", h.Sum64())
		// As a Deployment names its pods: <name>-<pod-template-hash>-<5 characters>.
		name := fmt.Sprintf("%s-%s-%s", app, sum[:10], sum[11:16])
		node := fmt.Sprintf("node-%04d", k/podsPerNode)
		cands = append(cands, lbcfv1beta1.Candidate{Kind: lbcfv1beta1.CandidatePod, Name: name, UID: lbcfv1beta1.ShortUID(types.UID(name + "-uid")),
			IPs: []string{fmt.Sprintf("10.200.%d.%d", k/250, k%250+1)}, Port: 80, Protocol: corev1.ProtocolTCP, Phase: corev1.PodRunning, Ready: true,
			NodeName: node, NodeAddresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.%d.%d", k/podsPerNode/250, k/podsPerNode%250+1)}}})
	}
	return encodeMemberReport(cands, budget)
}

// encodeMemberReport is a member's report of cands, encoded as lbcf-controller --mode=member
// encodes it with the given byte budget, as InterpretStatus delivers it.
func encodeMemberReport(cands []lbcfv1beta1.Candidate, budget int) (raw *runtime.RawExtension, items int, cut bool) {
	enc, cut := lbcfv1beta1.EncodeCandidates(map[string]string{"weight": "1"}, cands, budget)
	tc := metav1.Condition{Type: lbcfv1beta1.BackendGroupCandidatesTruncated, Status: metav1.ConditionFalse, Reason: "WithinBudget", ObservedGeneration: 1, LastTransitionTime: metav1.Now()}
	if cut {
		tc.Status, tc.Reason = metav1.ConditionTrue, "OverBudget"
		tc.Message = fmt.Sprintf("%d candidates need more than %d bytes; %d reported, Ready ones first. Split the BackendGroup.", enc.Total, budget, len(enc.Items))
	}
	status := map[string]any{
		"generation": 1, "resourceTemplateGeneration": 1, "observedGeneration": 1, "backends": enc.Ready,
		"conditions": []metav1.Condition{{Type: lbcfv1beta1.BackendGroupReady, Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: metav1.Now(),
			Reason: "CandidatesReported", Message: fmt.Sprintf("%d candidates, %d ready", enc.Total, enc.Ready)}, tc},
		"candidates": enc,
	}
	data, err := json.Marshal(status)
	if err != nil {
		panic(err)
	}
	return &runtime.RawExtension{Raw: data}, len(enc.Items), cut
}

// bindingBytes is the size of a ResourceBinding's JSON as the API server returns it.
func bindingBytes(tb testing.TB, cfg *rest.Config, ns, name string) int {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	rsp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + "/apis/work.karmada.io/v1alpha2/namespaces/" + ns + "/resourcebindings/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	defer rsp.Body.Close()
	data, err := io.ReadAll(rsp.Body)
	if err != nil || rsp.StatusCode != 200 {
		tb.Fatalf("get binding: %v %d %s", err, rsp.StatusCode, data)
	}
	return len(data)
}

// alive reports whether the process is still running (not exited, not a zombie).
func (p *controllerProcess) alive() bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
