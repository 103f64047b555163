//go:build e2e

package interpreter_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/interpreter"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// Karmada reacts within a second or two; the margin is for a loaded 2-core machine.
const (
	timeout = 2 * time.Minute
	poll    = 250 * time.Millisecond
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, policyv1alpha1.Install, workv1alpha2.Install, configv1alpha1.Install, lbcfv1beta1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

func clients(t *testing.T) (client.Client, map[string]client.Client) {
	t.Helper()
	topo := testenv.Topology(t)
	newClient := func(c client.Client, err error) client.Client {
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	members := map[string]client.Client{}
	for _, m := range topo.Members() {
		members[m.Name()] = newClient(client.New(m.RESTConfig(), client.Options{Scheme: scheme}))
	}
	return newClient(client.New(topo.KarmadaConfig(), client.Options{Scheme: scheme})), members
}

// candidates is a member-mode report of n Ready pods (every tenth not Ready) on n/25 nodes.
func candidates(cluster string, n int) *lbcfv1beta1.Candidates {
	list := make([]lbcfv1beta1.Candidate, n)
	for i := range list {
		node := fmt.Sprintf("%s-node-%03d", cluster, i/25)
		list[i] = lbcfv1beta1.Candidate{
			Kind: lbcfv1beta1.CandidatePod, Name: fmt.Sprintf("web-6f7d9c-%05d", i), UID: fmt.Sprintf("%08x", 0xa0000000+i),
			IPs: []string{fmt.Sprintf("10.%d.%d.%d", 100+i/62500, i/250%250, i%250+1)}, Port: 8080, Protocol: corev1.ProtocolTCP,
			NodeName: node, NodeAddresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.0.%d", i/25+1)}},
			Phase: corev1.PodRunning, Ready: i%10 != 0,
		}
	}
	out, truncated := lbcfv1beta1.EncodeCandidates(map[string]string{"weight": "10"}, list, 0)
	if truncated {
		panic("no budget, no truncation")
	}
	return out
}

// report writes a member BackendGroup's status as lbcf-controller --mode=member does.
func report(t *testing.T, c client.Client, key types.NamespacedName, cands *lbcfv1beta1.Candidates, ready metav1.ConditionStatus) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		bg := &lbcfv1beta1.BackendGroup{}
		if err := c.Get(t.Context(), key, bg); err != nil {
			return err
		}
		bg.Status.Candidates = cands
		bg.Status.Backends = cands.Ready
		bg.Status.ObservedGeneration = bg.Generation
		reason := "Reported"
		if ready != metav1.ConditionTrue {
			reason = "ListFailed"
		}
		bg.Status.Conditions = []metav1.Condition{{
			Type: lbcfv1beta1.BackendGroupReady, Status: ready, Reason: reason, Message: "e2e",
			ObservedGeneration: bg.Generation, LastTransitionTime: metav1.Now(),
		}}
		return c.Status().Update(t.Context(), bg)
	})
	if err != nil {
		t.Fatalf("report status of %s: %v", key, err)
	}
}

// memberReport is the part of an InterpretStatus answer the test reads from the binding.
type memberReport struct {
	Generation                 int64                   `json:"generation"`
	ResourceTemplateGeneration int64                   `json:"resourceTemplateGeneration"`
	ObservedGeneration         int64                   `json:"observedGeneration"`
	Candidates                 *lbcfv1beta1.Candidates `json:"candidates"`
	Conditions                 []metav1.Condition      `json:"conditions"`
}

// TestBackendGroupAcrossTwoMembers propagates two BackendGroups to m1 and m2 with the
// interpreter webhook registered, and follows them through Karmada: every member's 1,000 compact
// candidates in the ResourceBinding, the per-member summary on the template, health per cluster,
// Retain of admission defaults without an update loop, and the Service of a service backend
// brought along by propagateDeps.
func TestBackendGroupAcrossTwoMembers(t *testing.T) {
	backendGroupAcrossTwoMembers(t, "interp-e2e")

	t.Log("the webhook answered, and never failed")
	metrics, err := interpreterMetrics()
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	for _, op := range []string{"InterpretStatus", "InterpretHealth", "AggregateStatus", "Retain", "InterpretDependency"} {
		g.Expect(counter(metrics, op, "BackendGroup", "answered")).To(BeNumerically(">", 0), op)
	}
	g.Expect(metrics).NotTo(MatchRegexp(`lbfed_interpreter_requests_total\{[^}]*outcome="(failed|bad_request)"`))
}

// TestBackendGroupAcrossTwoMembersWithLua runs the same suite with Karmada's Lua
// ResourceInterpreterCustomizations (interpreter/customizations.yaml, as the lbfed chart ships them
// with luaInterpreter.enabled) instead of the webhook: the webhook registration is deleted and
// lbfed-controller stopped, so every interpretation comes from the Lua scripts. It runs after
// TestBackendGroupAcrossTwoMembers (source order), which needs the webhook.
func TestBackendGroupAcrossTwoMembersWithLua(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	karmada, _ := clients(t)
	g.Expect(client.IgnoreNotFound(karmada.Delete(ctx, &configv1alpha1.ResourceInterpreterWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: interpreter.DefaultConfigName}}))).To(Succeed())
	stopInterpreter(t)
	rics, err := interpreter.Customizations()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rics).To(HaveLen(2))
	for _, ric := range rics {
		// karmada-webhook validates the customizations (Lua syntax included) on create.
		g.Expect(karmada.Create(ctx, ric)).To(Succeed(), ric.Name)
	}
	backendGroupAcrossTwoMembers(t, "interp-e2e-lua")
}

// backendGroupAcrossTwoMembers is the suite, in namespace ns, with whatever interpreter is
// registered.
func backendGroupAcrossTwoMembers(t *testing.T, ns string) {
	g := NewWithT(t)
	ctx := t.Context()
	karmada, members := clients(t)
	g.Expect(karmada.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

	// A pod backend and a service backend; neither sets deregisterPolicy, which LBCF admission
	// would default in a member.
	web := &lbcfv1beta1.BackendGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: lbcfv1beta1.BackendGroupSpec{
			LoadBalancers: []string{"lb-a"},
			Pods: &lbcfv1beta1.PodBackend{
				Ports:   []lbcfv1beta1.PortSelector{{Port: 8080}},
				ByLabel: &lbcfv1beta1.SelectPodByLabel{Selector: map[string]string{"app": "web"}},
			},
			Parameters: map[string]string{"weight": "10"},
		},
	}
	svcBG := &lbcfv1beta1.BackendGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: ns},
		Spec: lbcfv1beta1.BackendGroupSpec{
			LoadBalancers: []string{"lb-a"},
			Service:       &lbcfv1beta1.ServiceBackend{Name: "web-nodeport", Port: lbcfv1beta1.PortSelector{Port: 80, Protocol: "TCP"}},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-nodeport", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	pp := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "lbcf", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{
				{APIVersion: lbcfv1beta1.APIVersion, Kind: lbcfv1beta1.KindBackendGroup, Name: "web"},
				{APIVersion: lbcfv1beta1.APIVersion, Kind: lbcfv1beta1.KindBackendGroup, Name: "svc"},
			},
			PropagateDeps: true,
			Placement:     policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"m1", "m2"}}},
		},
	}
	for _, obj := range []client.Object{svc, pp, web, svcBG} {
		g.Expect(karmada.Create(ctx, obj)).To(Succeed(), "create %T", obj)
	}
	webKey := client.ObjectKeyFromObject(web)

	t.Log("BackendGroups reach both members, and propagateDeps brings the Service of the service backend")
	for name, m := range members {
		for _, key := range []client.ObjectKey{webKey, client.ObjectKeyFromObject(svcBG)} {
			g.Eventually(func() error { return m.Get(ctx, key, &lbcfv1beta1.BackendGroup{}) }).
				WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "BackendGroup %s in %s", key, name)
		}
		g.Eventually(func() error { return m.Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{}) }).
			WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "Service in %s (propagateDeps)", name)
	}

	t.Log("each member reports 1,000 candidates; the binding carries them, the template the summary")
	reports := map[string]*lbcfv1beta1.Candidates{}
	for name, m := range members {
		reports[name] = candidates(name, 1000)
		report(t, m, webKey, reports[name], metav1.ConditionTrue)
	}
	rbKey := client.ObjectKey{Namespace: ns, Name: "web-backendgroup"}
	g.Eventually(func(g Gomega) {
		rb := &workv1alpha2.ResourceBinding{}
		g.Expect(karmada.Get(ctx, rbKey, rb)).To(Succeed())
		g.Expect(rb.Spec.Replicas).To(BeZero(), "not a workload")
		g.Expect(rb.Status.AggregatedStatus).To(HaveLen(2))
		for _, item := range rb.Status.AggregatedStatus {
			g.Expect(item.Health).To(Equal(workv1alpha2.ResourceHealthy), item.ClusterName)
			g.Expect(item.Status).NotTo(BeNil(), item.ClusterName)
			var r memberReport
			g.Expect(json.Unmarshal(item.Status.Raw, &r)).To(Succeed())
			g.Expect(r.Candidates).NotTo(BeNil(), item.ClusterName)
			g.Expect(r.Candidates.Items).To(Equal(reports[item.ClusterName].Items), "compact candidates of %s, byte for byte", item.ClusterName)
			g.Expect(r.Candidates.Total).To(BeEquivalentTo(1000))
			g.Expect(r.Generation).To(BeNumerically(">", 0))
			g.Expect(r.ObservedGeneration).To(Equal(r.Generation))
			g.Expect(r.ResourceTemplateGeneration).To(BeNumerically(">", 0))
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		tmpl := &lbcfv1beta1.BackendGroup{}
		g.Expect(karmada.Get(ctx, webKey, tmpl)).To(Succeed())
		g.Expect(tmpl.Status.Candidates).To(BeNil(), "candidate lists stay in the binding")
		g.Expect(tmpl.Status.Clusters).To(HaveLen(2))
		for i, name := range []string{"m1", "m2"} { // sorted by name
			s := tmpl.Status.Clusters[i]
			g.Expect(s.Name).To(Equal(name))
			g.Expect(s.Candidates).To(BeEquivalentTo(1000))
			g.Expect(s.Ready).To(BeEquivalentTo(900))
			g.Expect(s.Health).To(Equal("Healthy"))
			g.Expect(s.Stale).To(BeFalse())
		}
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	t.Log("health is per cluster: m2 reports Ready=False")
	report(t, members["m2"], webKey, reports["m2"], metav1.ConditionFalse)
	g.Eventually(func(g Gomega) {
		rb := &workv1alpha2.ResourceBinding{}
		g.Expect(karmada.Get(ctx, rbKey, rb)).To(Succeed())
		health := map[string]workv1alpha2.ResourceHealth{}
		for _, item := range rb.Status.AggregatedStatus {
			health[item.ClusterName] = item.Health
		}
		g.Expect(health).To(Equal(map[string]workv1alpha2.ResourceHealth{"m1": workv1alpha2.ResourceHealthy, "m2": workv1alpha2.ResourceUnhealthy}))
		tmpl := &lbcfv1beta1.BackendGroup{}
		g.Expect(karmada.Get(ctx, webKey, tmpl)).To(Succeed())
		g.Expect(tmpl.Status.Clusters).To(HaveLen(2))
		g.Expect(tmpl.Status.Clusters[1].Health).To(Equal("Unhealthy"))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	report(t, members["m2"], webKey, reports["m2"], metav1.ConditionTrue)

	t.Log("Retain: m1's admission defaults deregisterPolicy and the port protocol; Karmada keeps them")
	m1 := members["m1"]
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		bg := &lbcfv1beta1.BackendGroup{}
		if err := m1.Get(ctx, webKey, bg); err != nil {
			return err
		}
		bg.Spec.DeregisterPolicy = ptr.To(lbcfv1beta1.DeregisterIfNotReady)
		bg.Spec.Pods.Ports[0].Protocol = "TCP"
		return m1.Update(ctx, bg)
	})).To(Succeed())
	keepsDefaults := func(g Gomega, bg *lbcfv1beta1.BackendGroup) {
		g.Expect(bg.Spec.DeregisterPolicy).To(HaveValue(Equal(lbcfv1beta1.DeregisterIfNotReady)))
		g.Expect(bg.Spec.Pods.Ports).To(Equal([]lbcfv1beta1.PortSelector{{Port: 8080, Protocol: "TCP"}}))
	}
	// Karmada sees the member drift (a new generation) and reconciles it through Retain.
	g.Consistently(func(g Gomega) {
		bg := &lbcfv1beta1.BackendGroup{}
		g.Expect(m1.Get(ctx, webKey, bg)).To(Succeed())
		keepsDefaults(g, bg)
	}).WithTimeout(10 * time.Second).WithPolling(poll).Should(Succeed())

	t.Log("a template update reaches the members and keeps m1's defaults")
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tmpl := &lbcfv1beta1.BackendGroup{}
		if err := karmada.Get(ctx, webKey, tmpl); err != nil {
			return err
		}
		tmpl.Spec.Parameters["weight"] = "20"
		return karmada.Update(ctx, tmpl)
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		bg := &lbcfv1beta1.BackendGroup{}
		g.Expect(m1.Get(ctx, webKey, bg)).To(Succeed())
		g.Expect(bg.Spec.Parameters).To(HaveKeyWithValue("weight", "20"))
		keepsDefaults(g, bg)
		bg2 := &lbcfv1beta1.BackendGroup{}
		g.Expect(members["m2"].Get(ctx, webKey, bg2)).To(Succeed())
		g.Expect(bg2.Spec.Parameters).To(HaveKeyWithValue("weight", "20"))
		g.Expect(bg2.Spec.DeregisterPolicy).To(BeNil(), "m2 has no admission here")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

	t.Log("no update loop: with nothing changing, the member objects keep their resourceVersion")
	for name, m := range members {
		report(t, m, webKey, reports[name], metav1.ConditionTrue) // caught up with the new generation
	}
	versions := func() map[string]string {
		out := map[string]string{}
		for name, m := range members {
			bg := &lbcfv1beta1.BackendGroup{}
			g.Expect(m.Get(ctx, webKey, bg)).To(Succeed())
			out[name] = bg.ResourceVersion
		}
		return out
	}
	time.Sleep(3 * time.Second) // let Karmada process the status writes above
	before := versions()
	g.Consistently(versions).WithTimeout(15 * time.Second).WithPolling(time.Second).Should(Equal(before))
}

// counter reads lbfed_interpreter_requests_total for the labels from a /metrics page.
func counter(metrics, op, kind, outcome string) float64 {
	re := regexp.MustCompile(`lbfed_interpreter_requests_total\{kind="` + kind + `",operation="` + op + `",outcome="` + outcome + `"\} (\S+)`)
	m := re.FindStringSubmatch(metrics)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}
