package mci_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	networkingv1alpha1 "github.com/karmada-io/karmada/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/frontdoor"
	"github.com/lbfed/lbfed/frontdoor/mci"
	"github.com/lbfed/lbfed/lbcf/api/crd"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/lbenv"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

const (
	wait    = 30 * time.Second
	poll    = 100 * time.Millisecond
	address = "192.0.2.10"
	driver  = "lbcf-bfe"
)

// karmadaCRDs are Karmada's own CRDs the front door reads and writes, from the pinned Karmada
// release: their schemas check the generated objects as Karmada will.
var karmadaCRDs = []string{
	"networking/networking.karmada.io_multiclusteringresses.yaml",
	"policy/policy.karmada.io_propagationpolicies.yaml",
	"work/work.karmada.io_resourcebindings.yaml",
}

func TestMain(m *testing.M) {
	ctrl.SetLogger(testenv.ControllerLogger())
	crds, err := crd.CRDs()
	if err != nil {
		panic(err)
	}
	karmada, err := testenv.KarmadaCRDs(karmadaCRDs...)
	if err != nil {
		panic(err)
	}
	crds = append(crds, karmada...)
	testenv.Main(m, localup.ClusterOptions{Name: "mci", CRDs: crds})
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = mci.AddToScheme(s)
	return s
}()

type env struct {
	t   *testing.T
	g   Gomega
	ctx context.Context
	c   client.Client
	ns  string
}

var nsSeq int

// newEnv starts the front door in-process (as cmd/lbfed-controller runs it) and makes a namespace.
func newEnv(t *testing.T) *env {
	cfg := testenv.Config(t)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &env{t: t, g: NewWithT(t), ctx: ctx, c: c}
	e.ns = e.namespace()
	mgr, err := ctrl.NewManager(cfg, lbenv.ManagerOptions(scheme, testenv.UnchangedCache(t, frontdoor.CacheOptions())))
	e.g.Expect(err).NotTo(HaveOccurred())
	mgr = testenv.ClassicQueues(t, mgr)
	_, err = mci.Setup(mgr, mci.Options{Driver: driver, Address: address, Recorder: mgr.GetEventRecorder("lbfed-mci-test"), RetryAfter: 200 * time.Millisecond})
	e.g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	mctx, mcancel := context.WithCancel(ctx)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() { mcancel(); testenv.WaitStopped(t, done) })
	return e
}

func (e *env) namespace() string {
	nsSeq++
	ns := fmt.Sprintf("mci-%d-%d", time.Now().UnixNano()%1000000, nsSeq)
	e.g.Expect(e.c.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}

func (e *env) service(ns, name string, port, target int32, selector map[string]string) {
	e.g.Expect(e.c.Create(e.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromInt32(target)}}}})).To(Succeed())
}

// binding stands for the ResourceBinding Karmada keeps for a propagated Service.
func (e *env) binding(ns, svc string, clusters []string, requiredBy ...string) {
	rb := &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: svc + "-service", Namespace: ns},
		Spec: workv1alpha2.ResourceBindingSpec{Resource: workv1alpha2.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: ns, Name: svc}}}
	for _, c := range clusters {
		rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: c})
	}
	for _, c := range requiredBy {
		rb.Spec.RequiredBy = append(rb.Spec.RequiredBy, workv1alpha2.BindingSnapshot{Namespace: ns, Name: "dependent-" + c, Clusters: []workv1alpha2.TargetCluster{{Name: c}}})
	}
	e.g.Expect(e.c.Create(e.ctx, rb)).To(Succeed())
}

func prefix(path, svc string) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: path, PathType: ptr(networkingv1.PathTypePrefix),
		Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}}
}

func exact(path, svc string) networkingv1.HTTPIngressPath {
	p := prefix(path, svc)
	p.PathType = ptr(networkingv1.PathTypeExact)
	return p
}

func ptr[T any](v T) *T { return &v }

func rule(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
}

func (e *env) mci(ns, name string, ann map[string]string, rules ...networkingv1.IngressRule) *networkingv1alpha1.MultiClusterIngress {
	m := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr(mci.DefaultIngressClass), Rules: rules}}
	e.g.Expect(e.c.Create(e.ctx, m)).To(Succeed())
	return m
}

func (e *env) get(ns, name string) *networkingv1alpha1.MultiClusterIngress {
	m := &networkingv1alpha1.MultiClusterIngress{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, m)).To(Succeed())
	return m
}

// condition reads one condition of lbfed.io/conditions.
func condition(m *networkingv1alpha1.MultiClusterIngress, typ string) metav1.Condition {
	var cs []metav1.Condition
	_ = json.Unmarshal([]byte(m.Annotations[mci.AnnotationConditions]), &cs)
	for _, c := range cs {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

func (e *env) conditionOf(ns, name, typ string) func() metav1.Condition {
	return func() metav1.Condition { return condition(e.get(ns, name), typ) }
}

// generated lists the objects of one MultiClusterIngress by the front door's labels (and a
// controller reference: the test's look-alike foreign objects have none).
type generated struct {
	lbs []lbcfv1beta1.LoadBalancer
	bgs []lbcfv1beta1.BackendGroup
	pps []policyv1alpha1.PropagationPolicy
}

func (e *env) generated(ns, name string) generated {
	sel := client.MatchingLabels{frontdoor.LabelFrontDoor: mci.Kind, frontdoor.LabelFrontDoorName: name}
	var lbs lbcfv1beta1.LoadBalancerList
	var bgs lbcfv1beta1.BackendGroupList
	var pps policyv1alpha1.PropagationPolicyList
	e.g.Expect(e.c.List(e.ctx, &lbs, client.InNamespace(ns), sel)).To(Succeed())
	e.g.Expect(e.c.List(e.ctx, &bgs, client.InNamespace(ns), sel)).To(Succeed())
	e.g.Expect(e.c.List(e.ctx, &pps, client.InNamespace(ns), sel)).To(Succeed())
	var out generated
	for _, o := range lbs.Items {
		if metav1.GetControllerOf(&o) != nil {
			out.lbs = append(out.lbs, o)
		}
	}
	for _, o := range bgs.Items {
		if metav1.GetControllerOf(&o) != nil {
			out.bgs = append(out.bgs, o)
		}
	}
	for _, o := range pps.Items {
		if metav1.GetControllerOf(&o) != nil {
			out.pps = append(out.pps, o)
		}
	}
	return out
}

// routes summarizes the generated objects: per LoadBalancer lbSpec, its groups as
// "service-selector:port params → clusters".
func (g generated) routes() map[string][]string {
	lbSpec := map[string]string{}
	out := map[string][]string{}
	for _, lb := range g.lbs {
		var kv []string
		for _, k := range []string{"host", "path", "cookie", "header"} {
			if v, ok := lb.Spec.LBSpec[k]; ok {
				kv = append(kv, k+"="+v)
			}
		}
		lbSpec[lb.Name] = strings.Join(kv, " ")
		out[lbSpec[lb.Name]] = nil
	}
	placement := map[string]string{}
	for _, pp := range g.pps {
		placement[pp.Spec.ResourceSelectors[0].Name] = strings.Join(pp.Spec.Placement.ClusterAffinity.ClusterNames, ",")
	}
	for _, bg := range g.bgs {
		s := fmt.Sprintf("app=%s:%d", bg.Spec.Pods.ByLabel.Selector["app"], bg.Spec.Pods.Ports[0].Port)
		if w := bg.Spec.Parameters[mci.ParamSubsetWeight]; w != "" {
			s += " weight=" + w
		}
		s += " → " + placement[bg.Name]
		k := lbSpec[bg.Spec.LoadBalancers[0]]
		out[k] = append(out[k], s)
		sort.Strings(out[k])
	}
	return out
}

// markCreated does what the federation does once the BFE driver created a LoadBalancer.
func (e *env) markCreated(lbs []lbcfv1beta1.LoadBalancer) {
	for i := range lbs {
		lb := &lbs[i]
		lb.Status.Conditions = []lbcfv1beta1.LoadBalancerCondition{{Type: lbcfv1beta1.LBCreated, Status: lbcfv1beta1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		e.g.Expect(e.c.Status().Update(e.ctx, lb)).To(Succeed())
	}
}

// events are the notes of the events on a MultiClusterIngress, as "Type Reason: note".
func (e *env) events(ns, name string) []string {
	var l eventsv1.EventList
	e.g.Expect(e.c.List(e.ctx, &l, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, ev := range l.Items {
		if ev.Regarding.Kind == "MultiClusterIngress" && ev.Regarding.Name == name {
			out = append(out, fmt.Sprintf("%s %s: %s", ev.Type, ev.Reason, ev.Note))
		}
	}
	return out
}

// TestGeneratedObjects: rules become LoadBalancers, backends BackendGroups placed by
// PropagationPolicies on the Services' placement (clusters ∪ requiredBy); the annotations become
// lbSpec and parameters; the BFE address reaches the status once the LoadBalancers are created;
// changes follow the Services' placement and the spec; foreign objects are never touched; deletion
// removes everything generated.
func TestGeneratedObjects(t *testing.T) {
	e := newEnv(t)
	g, ns := e.g, e.ns
	host := ns + ".example.test"
	e.service(ns, "web", 80, 8080, map[string]string{"app": "web"})
	e.service(ns, "api", 80, 8081, map[string]string{"app": "api"})
	e.service(ns, "api-v2", 80, 8082, map[string]string{"app": "api-v2"})
	e.binding(ns, "web", []string{"m1"}, "m3")
	e.binding(ns, "api", []string{"m1", "m2"})
	e.binding(ns, "api-v2", []string{"m2"})
	// Foreign objects in the namespace, one of them with the front door's label value look-alike
	// owner but no owner reference: never touched.
	foreignLB := &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: "user-lb", Namespace: ns},
		Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: driver, LBSpec: map[string]string{"host": "user." + host}}}
	foreignBG := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: "user-bg", Namespace: ns,
		Labels: map[string]string{frontdoor.LabelFrontDoor: mci.Kind, frontdoor.LabelFrontDoorName: "shop"}},
		Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"user-lb"}, Pods: &lbcfv1beta1.PodBackend{
			ByLabel: &lbcfv1beta1.SelectPodByLabel{Selector: map[string]string{"app": "web"}}, Ports: []lbcfv1beta1.PortSelector{{Port: 8080}}}}}
	g.Expect(e.c.Create(e.ctx, foreignLB)).To(Succeed())
	g.Expect(e.c.Create(e.ctx, foreignBG)).To(Succeed())

	e.mci(ns, "shop", map[string]string{
		mci.AnnotationRouterCookie:  "beta:1",
		mci.AnnotationBalanceWeight: `{"api": {"api": 3, "api-v2": 1}}`,
	}, rule(host, prefix("/", "web"), prefix("/api", "api"), exact("/healthz", "web")))

	want := map[string][]string{
		"host=" + host + " path=/* cookie=beta:1":       {"app=web:8080 → m1,m3"},
		"host=" + host + " path=/api/* cookie=beta:1":   {"app=api-v2:8082 weight=1 → m2", "app=api:8081 weight=3 → m1,m2"},
		"host=" + host + " path=/healthz cookie=beta:1": {"app=web:8080 → m1,m3"},
	}
	g.Eventually(func() map[string][]string { return e.generated(ns, "shop").routes() }, wait, poll).Should(Equal(want))
	gen := e.generated(ns, "shop")
	for _, lb := range gen.lbs {
		g.Expect(lb.Spec.LBDriver).To(Equal(driver))
		g.Expect(metav1.IsControlledBy(&lb, e.get(ns, "shop"))).To(BeTrue())
	}
	g.Eventually(e.conditionOf(ns, "shop", mci.ConditionAccepted), wait, poll).Should(HaveField("Status", metav1.ConditionTrue))
	g.Expect(condition(e.get(ns, "shop"), mci.ConditionProgrammed)).To(HaveField("Reason", "Creating"))
	g.Expect(e.get(ns, "shop").Status.LoadBalancer.Ingress).To(BeEmpty(), "no address before the LoadBalancers are created")

	// Two of three created: still no address; all three: BFE's address.
	e.markCreated(gen.lbs[:2])
	g.Eventually(e.conditionOf(ns, "shop", mci.ConditionProgrammed), wait, poll).Should(HaveField("Message", ContainSubstring("2 of 3")))
	g.Expect(e.get(ns, "shop").Status.LoadBalancer.Ingress).To(BeEmpty())
	e.markCreated(gen.lbs[2:])
	g.Eventually(func() []networkingv1.IngressLoadBalancerIngress { return e.get(ns, "shop").Status.LoadBalancer.Ingress }, wait, poll).
		Should(Equal([]networkingv1.IngressLoadBalancerIngress{{IP: address}}))
	g.Eventually(e.conditionOf(ns, "shop", mci.ConditionProgrammed), wait, poll).Should(HaveField("Status", metav1.ConditionTrue))

	// The Service's placement changes: the policy follows.
	rb := &workv1alpha2.ResourceBinding{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "web-service"}, rb)).To(Succeed())
	rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: "m2"})
	g.Expect(e.c.Update(e.ctx, rb)).To(Succeed())
	want["host="+host+" path=/* cookie=beta:1"] = []string{"app=web:8080 → m1,m2,m3"}
	want["host="+host+" path=/healthz cookie=beta:1"] = []string{"app=web:8080 → m1,m2,m3"}
	g.Eventually(func() map[string][]string { return e.generated(ns, "shop").routes() }, wait, poll).Should(Equal(want))

	// Karmada's admission fills in what the front door leaves empty (the selectors' namespace,
	// default tolerations): that is no difference to undo, or the two would write in turn forever.
	var karmadaMutated []policyv1alpha1.PropagationPolicy
	for _, pp := range e.generated(ns, "shop").pps {
		pp.Spec.ResourceSelectors[0].Namespace = ns
		pp.Spec.Placement.ClusterTolerations = []corev1.Toleration{{Key: "cluster.karmada.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))}}
		pp.Finalizers = append(pp.Finalizers, "karmada.io/propagation-policy-controller")
		g.Expect(e.c.Update(e.ctx, &pp)).To(Succeed())
		karmadaMutated = append(karmadaMutated, pp)
	}

	// The spec loses a path and the split: the path's objects go, the group of api is replaced
	// (no longer a subset), the address stays.
	m := e.get(ns, "shop")
	delete(m.Annotations, mci.AnnotationBalanceWeight)
	m.Spec.Rules = []networkingv1.IngressRule{rule(host, prefix("/", "web"), prefix("/api", "api"))}
	g.Expect(e.c.Update(e.ctx, m)).To(Succeed())
	delete(want, "host="+host+" path=/healthz cookie=beta:1")
	want["host="+host+" path=/api/* cookie=beta:1"] = []string{"app=api:8081 → m1,m2"}
	g.Eventually(func() map[string][]string { return e.generated(ns, "shop").routes() }, wait, poll).Should(Equal(want))
	g.Expect(e.get(ns, "shop").Status.LoadBalancer.Ingress).To(Equal([]networkingv1.IngressLoadBalancerIngress{{IP: address}}))
	// The controller acted on the change above; the policy of "/" kept Karmada's additions.
	for _, pp := range karmadaMutated {
		if pp.Spec.ResourceSelectors[0].Name != e.generated(ns, "shop").bgs[0].Name && pp.Spec.ResourceSelectors[0].Name != e.generated(ns, "shop").bgs[1].Name {
			continue // its group went with the change
		}
		cur := &policyv1alpha1.PropagationPolicy{}
		g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(&pp), cur)).To(Succeed())
		g.Expect(cur.ResourceVersion).To(Equal(pp.ResourceVersion), "%s rewritten", pp.Name)
	}

	// Deleted: everything generated goes (Karmada's finalizer on the policies aside); the foreign
	// objects stay as they were.
	g.Expect(e.c.Delete(e.ctx, m)).To(Succeed())
	g.Eventually(func() int {
		gen := e.generated(ns, "shop")
		n := len(gen.lbs) + len(gen.bgs)
		for _, pp := range gen.pps {
			if pp.DeletionTimestamp == nil {
				n++
			} else {
				// What Karmada's policy controller does once the policy is no longer used.
				pp.Finalizers = nil
				_ = e.c.Update(e.ctx, &pp)
			}
		}
		return n
	}, wait, poll).Should(BeZero())
	for _, o := range []client.Object{foreignLB, foreignBG} {
		cur := o.DeepCopyObject().(client.Object)
		g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(o), cur)).To(Succeed())
		g.Expect(cur.GetResourceVersion()).To(Equal(o.GetResourceVersion()), "%s untouched", o.GetName())
		g.Expect(cur.GetDeletionTimestamp()).To(BeNil())
	}
}

// TestRefusals: bad and unsupported annotations and inexpressible rules are refused: condition
// Accepted=False and a Warning event naming the annotation, and nothing generated. An accepted
// MultiClusterIngress whose update is refused keeps the objects of its last accepted spec.
func TestRefusals(t *testing.T) {
	e := newEnv(t)
	ns := e.ns
	e.service(ns, "web", 80, 8080, map[string]string{"app": "web"})
	e.binding(ns, "web", []string{"m1"})
	cases := []struct {
		name    string
		ann     map[string]string
		path    networkingv1.HTTPIngressPath
		reason  string
		message string // in the condition and the event
	}{
		{"float weight", map[string]string{mci.AnnotationBalanceWeight: `{"web": {"web": 0.5}}`}, prefix("/", "web"), mci.ReasonInvalidAnnotation, mci.AnnotationBalanceWeight},
		{"negative weight", map[string]string{mci.AnnotationBalanceWeight: `{"web": {"web": -1}}`}, prefix("/", "web"), mci.ReasonInvalidAnnotation, mci.AnnotationBalanceWeight},
		{"zero weights", map[string]string{mci.AnnotationBalanceWeight: `{"web": {"web": 0}}`}, prefix("/", "web"), mci.ReasonInvalidAnnotation, mci.AnnotationBalanceWeight},
		{"bad cookie", map[string]string{mci.AnnotationRouterCookie: "beta"}, prefix("/", "web"), mci.ReasonInvalidAnnotation, mci.AnnotationRouterCookie},
		{"bad header", map[string]string{mci.AnnotationRouterHeader: ":x"}, prefix("/", "web"), mci.ReasonInvalidAnnotation, mci.AnnotationRouterHeader},
		{"unsupported annotation", map[string]string{mci.AnnotationPrefix + "rewrite-url.path": `[{"params": "/x"}]`}, prefix("/", "web"), mci.ReasonUnsupportedAnnotation, mci.AnnotationPrefix + "rewrite-url.path"},
		{"a path with *", nil, prefix("/a*", "web"), mci.ReasonInvalidRule, "cannot be expressed"},
		{"a named port the Service lacks", nil, networkingv1.HTTPIngressPath{Path: "/", PathType: ptr(networkingv1.PathTypePrefix),
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Name: "grpc"}}}}, mci.ReasonInvalidBackend, `no port "grpc"`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			name := fmt.Sprintf("bad-%d", i)
			e.mci(ns, name, tc.ann, rule(fmt.Sprintf("bad-%d.%s.test", i, ns), tc.path))
			g.Eventually(e.conditionOf(ns, name, mci.ConditionAccepted), wait, poll).Should(And(
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", tc.reason), HaveField("Message", ContainSubstring(tc.message))))
			g.Expect(condition(e.get(ns, name), mci.ConditionProgrammed)).To(HaveField("Status", metav1.ConditionFalse))
			g.Eventually(func() []string { return e.events(ns, name) }, wait, poll).Should(ContainElement(And(
				HavePrefix("Warning "+tc.reason+":"), ContainSubstring(tc.message))))
			gen := e.generated(ns, name)
			g.Expect(gen.lbs).To(BeEmpty())
			g.Expect(gen.bgs).To(BeEmpty())
		})
	}

	t.Run("a refused update keeps the last accepted objects", func(t *testing.T) {
		g := NewWithT(t)
		e.mci(ns, "good", nil, rule("good."+ns+".test", prefix("/", "web")))
		g.Eventually(func() int { return len(e.generated(ns, "good").bgs) }, wait, poll).Should(Equal(1))
		before := e.generated(ns, "good")
		m := e.get(ns, "good")
		m.Annotations = map[string]string{mci.AnnotationRouterCookie: "no-value"}
		m.Spec.Rules = append(m.Spec.Rules, rule("more."+ns+".test", prefix("/", "web")))
		g.Expect(e.c.Update(e.ctx, m)).To(Succeed())
		g.Eventually(e.conditionOf(ns, "good", mci.ConditionAccepted), wait, poll).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Message", ContainSubstring(mci.AnnotationRouterCookie))))
		after := e.generated(ns, "good")
		g.Expect(after.lbs).To(HaveLen(1))
		g.Expect(after.lbs[0].UID).To(Equal(before.lbs[0].UID))
		g.Expect(after.bgs[0].ResourceVersion).To(Equal(before.bgs[0].ResourceVersion))
	})
}

// TestConflicts: of two claims on one route of the same driver the newer is refused with
// Conflict — a MultiClusterIngress (in any namespace) claiming a route another one or a user's
// LoadBalancer serves, or, when none serves it yet, the younger MultiClusterIngress — and keeps
// the objects of its last accepted spec; when the holder goes, the waiting one gets the route. A
// MultiClusterIngress of another class is not touched.
func TestConflicts(t *testing.T) {
	e := newEnv(t)
	g := e.g
	ns1, ns2 := e.ns, e.namespace()
	host := ns1 + ".conflict.test"
	for _, ns := range []string{ns1, ns2} {
		e.service(ns, "web", 80, 8080, map[string]string{"app": "web"})
		e.binding(ns, "web", []string{"m1"})
	}
	e.mci(ns1, "first", nil, rule(host, prefix("/", "web")))
	e.mci(ns1, "early", nil, rule("early."+host, prefix("/", "web")))
	g.Eventually(func() int { return len(e.generated(ns1, "first").pps) + len(e.generated(ns1, "early").pps) }, wait, poll).Should(Equal(2))
	e.mci(ns2, "second", nil, rule(host, prefix("/", "web"), prefix("/own", "web")))
	g.Eventually(e.conditionOf(ns2, "second", mci.ConditionAccepted), wait, poll).Should(And(HaveField("Reason", mci.ReasonConflict),
		HaveField("Message", ContainSubstring("already claimed by MultiClusterIngress "+ns1+"/first"))))
	g.Eventually(func() []string { return e.events(ns2, "second") }, wait, poll).Should(ContainElement(HavePrefix("Warning Conflict:")))
	g.Expect(e.generated(ns2, "second").lbs).To(BeEmpty())
	g.Expect(condition(e.get(ns1, "first"), mci.ConditionAccepted).Status).To(Equal(metav1.ConditionTrue))

	// A user's LoadBalancer of the same driver, older than the MultiClusterIngress.
	userHost := "user." + host
	user := &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: "user-route", Namespace: ns2},
		Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: driver, LBSpec: map[string]string{"host": userHost, "path": "/*"}}}
	g.Expect(e.c.Create(e.ctx, user)).To(Succeed())
	e.mci(ns1, "third", nil, rule(strings.ToUpper(userHost), prefix("/", "web")))
	g.Eventually(e.conditionOf(ns1, "third", mci.ConditionAccepted), wait, poll).Should(And(HaveField("Reason", mci.ReasonConflict),
		HaveField("Message", ContainSubstring("LoadBalancer "+ns2+"/user-route"))))
	g.Expect(e.generated(ns1, "third").lbs).To(BeEmpty())

	// Another class: never claimed, nothing written on it.
	other := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns1},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr("nginx"), Rules: []networkingv1.IngressRule{rule("other."+host, prefix("/", "web"))}}}
	g.Expect(e.c.Create(e.ctx, other)).To(Succeed())

	// The older one goes, its LoadBalancer held by the federation's finalizer until BFE forgot
	// the route: the newer one waits for it, then gets the route (and the controller was alive
	// all along: it acts on "second" after "other" was created).
	firstLB := e.generated(ns1, "first").lbs[0]
	firstLB.Finalizers = append(firstLB.Finalizers, lbcfv1beta1.FinalizerDeleteLB)
	g.Expect(e.c.Update(e.ctx, &firstLB)).To(Succeed())
	g.Expect(e.c.Delete(e.ctx, e.get(ns1, "first"))).To(Succeed())
	g.Eventually(e.conditionOf(ns2, "second", mci.ConditionProgrammed), wait, poll).Should(And(HaveField("Reason", mci.ReasonRouteHeld),
		HaveField("Message", ContainSubstring("waits for another MultiClusterIngress's LoadBalancer to go"))))
	g.Expect(condition(e.get(ns2, "second"), mci.ConditionAccepted).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(e.generated(ns2, "second").routes()).To(Equal(map[string][]string{"host=" + host + " path=/own/*": {"app=web:8080 → m1"}}),
		"the routes nobody else holds are served meanwhile")
	g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(&firstLB), &firstLB)).To(Succeed())
	firstLB.Finalizers = nil
	g.Expect(e.c.Update(e.ctx, &firstLB)).To(Succeed())
	g.Eventually(func() map[string][]string { return e.generated(ns2, "second").routes() }, wait, poll).Should(Equal(map[string][]string{
		"host=" + host + " path=/*":     {"app=web:8080 → m1"},
		"host=" + host + " path=/own/*": {"app=web:8080 → m1"},
	}))
	g.Eventually(e.conditionOf(ns2, "second", mci.ConditionAccepted), wait, poll).Should(HaveField("Status", metav1.ConditionTrue))
	g.Expect(e.get(ns1, "other").Annotations).NotTo(HaveKey(mci.AnnotationConditions))
	g.Expect(e.generated(ns1, "other").lbs).To(BeEmpty())

	// An older MultiClusterIngress edited to claim the route "second" now serves is the newer
	// claim: refused, its own route kept; "second" keeps serving.
	early := e.generated(ns1, "early")
	secondBefore := e.generated(ns2, "second")
	m := e.get(ns1, "early")
	m.Spec.Rules = append(m.Spec.Rules, rule(host, prefix("/", "web")))
	g.Expect(e.c.Update(e.ctx, m)).To(Succeed())
	g.Eventually(e.conditionOf(ns1, "early", mci.ConditionAccepted), wait, poll).Should(And(HaveField("Reason", mci.ReasonConflict),
		HaveField("Message", ContainSubstring("already claimed by MultiClusterIngress "+ns2+"/second"))))
	g.Expect(e.generated(ns1, "early").lbs).To(ConsistOf(HaveField("UID", early.lbs[0].UID)))
	g.Expect(e.generated(ns2, "second").lbs).To(ConsistOf(HaveField("UID", secondBefore.lbs[0].UID), HaveField("UID", secondBefore.lbs[1].UID)))
	g.Expect(condition(e.get(ns2, "second"), mci.ConditionAccepted).Status).To(Equal(metav1.ConditionTrue))

	// A class change releases: the generated objects and lbfed's conditions go.
	m = e.get(ns2, "second")
	m.Spec.IngressClassName = ptr("nginx")
	g.Expect(e.c.Update(e.ctx, m)).To(Succeed())
	g.Eventually(func() int { gen := e.generated(ns2, "second"); return len(gen.lbs) + len(gen.bgs) + len(gen.pps) }, wait, poll).Should(BeZero())
	g.Eventually(func() map[string]string { return e.get(ns2, "second").Annotations }, wait, poll).ShouldNot(HaveKey(mci.AnnotationConditions))
}

// TestPlacementKeptWhileServiceUnobserved: a Service whose ResourceBinding goes missing or places
// it nowhere is unobserved, not gone (as in the front-door kit and the federation's member plan):
// the groups' PropagationPolicies stay as they were, so Karmada keeps the groups in the members
// and the federation keeps their backends; the policy follows the binding again once it is back.
// A "svc@member" backend whose member a present binding no longer names is gone: its policy goes.
func TestPlacementKeptWhileServiceUnobserved(t *testing.T) {
	e := newEnv(t)
	g, ns := e.g, e.ns
	host := ns + ".example.test"
	e.service(ns, "web", 80, 8080, map[string]string{"app": "web"})
	e.service(ns, "api", 80, 8081, map[string]string{"app": "api"})
	e.binding(ns, "web", []string{"m1", "m2"})
	e.binding(ns, "api", []string{"m1", "m2"})
	e.mci(ns, "shop", map[string]string{mci.AnnotationBalanceWeight: `{"api": {"api@m1": 1, "api@m2": 3}}`},
		rule(host, prefix("/", "web"), prefix("/api", "api")))
	want := map[string][]string{
		"host=" + host + " path=/*":     {"app=web:8080 → m1,m2"},
		"host=" + host + " path=/api/*": {"app=api:8081 weight=1 → m1", "app=api:8081 weight=3 → m2"},
	}
	g.Eventually(func() map[string][]string { return e.generated(ns, "shop").routes() }, wait, poll).Should(Equal(want))
	policies := map[string]string{}
	for _, pp := range e.generated(ns, "shop").pps {
		policies[pp.Name] = pp.ResourceVersion
	}

	// web's binding is deleted, api's emptied. Evidence the front door saw it: the problem is in
	// its conditions; the policies are untouched.
	rb := &workv1alpha2.ResourceBinding{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "web-service"}, rb)).To(Succeed())
	g.Expect(e.c.Delete(e.ctx, rb)).To(Succeed())
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "api-service"}, rb)).To(Succeed())
	rb.Spec.Clusters = nil
	g.Expect(e.c.Update(e.ctx, rb)).To(Succeed())
	g.Eventually(e.conditionOf(ns, "shop", mci.ConditionProgrammed), wait, poll).Should(HaveField("Message", And(
		ContainSubstring("Service "+ns+"/web is not propagated"), ContainSubstring("Service "+ns+"/api is not propagated"))))
	g.Consistently(func() map[string]string {
		out := map[string]string{}
		for _, pp := range e.generated(ns, "shop").pps {
			out[pp.Name] = pp.ResourceVersion
		}
		return out
	}, 2*time.Second, poll).Should(Equal(policies), "every policy stays as it was while the Services are unobserved")
	g.Expect(e.generated(ns, "shop").routes()).To(Equal(want))

	// The bindings come back, elsewhere: the policies follow.
	e.binding(ns, "web", []string{"m2"})
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "api-service"}, rb)).To(Succeed())
	rb.Spec.Clusters = []workv1alpha2.TargetCluster{{Name: "m1"}}
	g.Expect(e.c.Update(e.ctx, rb)).To(Succeed())
	// api is known to be placed on m1 only now: api@m2's policy goes (its group stays, unplaced,
	// as for a Service not yet propagated to a member).
	want = map[string][]string{
		"host=" + host + " path=/*":     {"app=web:8080 → m2"},
		"host=" + host + " path=/api/*": {"app=api:8081 weight=1 → m1", "app=api:8081 weight=3 → "},
	}
	g.Eventually(func() map[string][]string { return e.generated(ns, "shop").routes() }, wait, poll).Should(Equal(want))
}
