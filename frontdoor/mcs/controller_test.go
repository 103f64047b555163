package mcs_test

import (
	"testing"

	networkingv1alpha1 "github.com/karmada-io/karmada/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/frontdoor"
	"github.com/lbfed/lbfed/frontdoor/internal/fdtest"
	"github.com/lbfed/lbfed/frontdoor/mcs"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

func TestMain(m *testing.M) { fdtest.Main(m) }

const wait = fdtest.Wait

// start runs the federation and the MultiClusterService front door in a new namespace.
func start(t *testing.T) *fdtest.Env {
	e := fdtest.New(t)
	e.Start(func(mgr ctrl.Manager) error {
		_, err := mcs.Setup(mgr, mcs.Options{Driver: fdtest.Driver, Recorder: mgr.GetEventRecorder("lbfed-frontdoor")})
		return err
	})
	return e
}

// newMCS creates a MultiClusterService of type LoadBalancer with the annotations.
func newMCS(e *fdtest.Env, name string, annotations map[string]string, mutate func(*networkingv1alpha1.MultiClusterService)) *networkingv1alpha1.MultiClusterService {
	m := &networkingv1alpha1.MultiClusterService{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: name, Annotations: annotations},
		Spec: networkingv1alpha1.MultiClusterServiceSpec{Types: []networkingv1alpha1.ExposureType{networkingv1alpha1.ExposureTypeLoadBalancer}}}
	if mutate != nil {
		mutate(m)
	}
	e.G.Expect(e.C.Create(e.Ctx, m)).To(Succeed())
	return m
}

func vip(ip string) map[string]string { return map[string]string{"lb.zdns.cn/vip": ip} }

// condition is the front door's condition on the MultiClusterService (nil when absent).
func condition(e *fdtest.Env, name string) func() *metav1.Condition {
	return func() *metav1.Condition {
		m := &networkingv1alpha1.MultiClusterService{}
		if err := e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: name}, m); err != nil {
			return nil
		}
		return meta.FindStatusCondition(m.Status.Conditions, frontdoor.ConditionLoadBalancer)
	}
}

func ingress(e *fdtest.Env, name string) func() []corev1.LoadBalancerIngress {
	return func() []corev1.LoadBalancerIngress {
		m := &networkingv1alpha1.MultiClusterService{}
		_ = e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: name}, m)
		return m.Status.LoadBalancer.Ingress
	}
}

func labelsOf(name string) map[string]string {
	return map[string]string{frontdoor.LabelFrontDoor: mcs.Kind, frontdoor.LabelFrontDoorName: name}
}

func policy(e *fdtest.Env, name string) func() *policyv1alpha1.PropagationPolicy {
	return func() *policyv1alpha1.PropagationPolicy {
		pp := &policyv1alpha1.PropagationPolicy{}
		if err := e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: frontdoor.PolicyName(mcs.Kind, name)}, pp); err != nil {
			return nil
		}
		return pp
	}
}

func placement(pp *policyv1alpha1.PropagationPolicy) []string {
	if pp == nil || pp.Spec.Placement.ClusterAffinity == nil {
		return nil
	}
	return pp.Spec.Placement.ClusterAffinity.ClusterNames
}

// TestMultiClusterServiceTranslation: one LoadBalancer and one BackendGroup per TCP/UDP port
// (SCTP reported, not dropped silently), placed on providerClusters or else where the Service is
// propagated (clusters ∪ requiredBy, following the binding), the VIP in status once the
// federation has created the LoadBalancers on the driver.
func TestMultiClusterServiceTranslation(t *testing.T) {
	for _, tt := range []struct {
		name             string
		vip              string
		providers        []string
		bound, required  []string
		want             []string
		rebound          []string // the binding changes to these clusters
		wantAfterRebound []string
	}{
		{name: "binding clusters and requiredBy", vip: "192.0.2.10", bound: []string{"m1"}, required: []string{"m3"}, want: []string{"m1", "m3"},
			rebound: []string{"m1", "m2"}, wantAfterRebound: []string{"m1", "m2", "m3"}},
		{name: "providerClusters win over the binding", vip: "192.0.2.11", providers: []string{"m2"}, bound: []string{"m1"}, want: []string{"m2"},
			rebound: []string{"m1", "m3"}, wantAfterRebound: []string{"m2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t)
			g := e.G
			e.Service("web", nil,
				fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 8080),
				fdtest.ServicePort("dns", 53, corev1.ProtocolUDP, 0),
				fdtest.ServicePort("sctp", 9, corev1.ProtocolSCTP, 0))
			rb := e.Binding("web", tt.bound, tt.required)
			m := newMCS(e, "web", map[string]string{"lb.zdns.cn/vip": tt.vip, "lb.zdns.cn/method": "lc"}, func(m *networkingv1alpha1.MultiClusterService) {
				for _, p := range tt.providers {
					m.Spec.ProviderClusters = append(m.Spec.ProviderClusters, networkingv1alpha1.ClusterSelector{Name: p})
				}
			})

			g.Eventually(condition(e, "web"), wait).Should(And(Not(BeNil()), HaveField("Status", metav1.ConditionTrue)))
			c := condition(e, "web")()
			g.Expect(c.Reason).To(Equal(frontdoor.ReasonPortsSkipped))
			g.Expect(c.Message).To(ContainSubstring("port 9/SCTP: only TCP and UDP are supported"))
			g.Expect(c.ObservedGeneration).To(Equal(m.Generation))
			g.Expect(ingress(e, "web")()).To(Equal([]corev1.LoadBalancerIngress{{IP: tt.vip}}))
			g.Expect(e.Events("MultiClusterService", "web", frontdoor.ReasonPortsSkipped)).NotTo(BeEmpty())

			lbs := e.LoadBalancers(labelsOf("web"))
			g.Expect(lbs).To(HaveLen(2))
			byName := map[string]lbcfv1beta1.LoadBalancer{}
			for _, lb := range lbs {
				byName[lb.Name] = lb
				g.Expect(lb.Spec.LBDriver).To(Equal(fdtest.Driver))
				g.Expect(metav1.GetControllerOf(&lb)).To(HaveField("UID", m.UID))
				g.Expect(lb.IsCreated()).To(BeTrue())
			}
			g.Expect(byName["mcs-web-tcp-80"].Spec.LBSpec).To(Equal(map[string]string{"vip": tt.vip, "port": "80", "protocol": "TCP", "method": "lc"}))
			g.Expect(byName["mcs-web-udp-53"].Spec.LBSpec).To(Equal(map[string]string{"vip": tt.vip, "port": "53", "protocol": "UDP", "method": "lc"}))
			g.Expect(e.Drv.LoadBalancers()).To(HaveLen(2), "the federation created both on the driver")

			bgs := e.BackendGroups(labelsOf("web"))
			g.Expect(bgs).To(HaveLen(2))
			for _, bg := range bgs {
				g.Expect(metav1.GetControllerOf(&bg)).To(HaveField("UID", m.UID))
				g.Expect(bg.Spec.LoadBalancers).To(Equal([]string{bg.Name}))
				g.Expect(bg.Spec.Pods.ByLabel.Selector).To(Equal(map[string]string{"app": "web"}))
				g.Expect(bg.Spec.Parameters).To(HaveKeyWithValue("weight", frontdoor.DefaultWeight))
				want := lbcfv1beta1.PortSelector{Port: 8080, Protocol: "TCP"}
				if bg.Name == "mcs-web-udp-53" {
					want = lbcfv1beta1.PortSelector{Port: 53, Protocol: "UDP"}
				}
				g.Expect(bg.Spec.Pods.Ports).To(Equal([]lbcfv1beta1.PortSelector{want}))
			}

			g.Eventually(func() []string { return placement(policy(e, "web")()) }, wait).Should(Equal(tt.want))
			pp := policy(e, "web")()
			g.Expect(metav1.GetControllerOf(pp)).To(HaveField("UID", m.UID))
			g.Expect(pp.Spec.ResourceSelectors).To(ConsistOf(
				policyv1alpha1.ResourceSelector{APIVersion: lbcfv1beta1.APIVersion, Kind: "BackendGroup", Namespace: e.NS, Name: "mcs-web-tcp-80"},
				policyv1alpha1.ResourceSelector{APIVersion: lbcfv1beta1.APIVersion, Kind: "BackendGroup", Namespace: e.NS, Name: "mcs-web-udp-53"}))

			// The binding moves: the placement follows unless providerClusters name it.
			g.Expect(e.C.Get(e.Ctx, client.ObjectKeyFromObject(rb), rb)).To(Succeed())
			rb.Spec.Clusters = nil
			for _, c := range tt.rebound {
				rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: c})
			}
			g.Expect(e.C.Update(e.Ctx, rb)).To(Succeed())
			if len(tt.providers) == 0 {
				g.Eventually(func() []string { return placement(policy(e, "web")()) }, wait).Should(Equal(tt.wantAfterRebound))
			} else {
				// Shown acting after the binding change: a new port appears, the placement stays.
				svc := &corev1.Service{}
				g.Expect(e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "web"}, svc)).To(Succeed())
				svc.Spec.Ports = append(svc.Spec.Ports, fdtest.ServicePort("alt", 81, corev1.ProtocolTCP, 8081))
				g.Expect(e.C.Update(e.Ctx, svc)).To(Succeed())
				g.Eventually(func() []lbcfv1beta1.LoadBalancer { return e.LoadBalancers(labelsOf("web")) }, wait).Should(HaveLen(3))
				g.Eventually(func() int { return len(policy(e, "web")().Spec.ResourceSelectors) }, wait).Should(Equal(3))
				g.Expect(placement(policy(e, "web")())).To(Equal(tt.wantAfterRebound))
			}
		})
	}
}

// TestMultiClusterServiceRefusals: input that cannot be served gets a False condition naming
// the problem and an event; nothing is generated. The condition itself shows the controller
// acted. Fixing the input programs it.
func TestMultiClusterServiceRefusals(t *testing.T) {
	web := func(e *fdtest.Env) { e.Service("web", nil, fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 8080)) }
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		service     func(e *fdtest.Env)
		reason      string
		message     string
		fix         func(e *fdtest.Env)
	}{
		{name: "no VIP", service: web, reason: frontdoor.ReasonInvalid, message: "annotation lb.zdns.cn/vip is required",
			fix: func(e *fdtest.Env) { annotate(e, "web", "lb.zdns.cn/vip", "192.0.2.20") }},
		{name: "bad VIP", annotations: vip("not-an-ip"), service: web, reason: frontdoor.ReasonInvalid, message: `"not-an-ip": must be an IPv4 address`},
		{name: "IPv6 VIP", annotations: vip("2001:db8::1"), service: web, reason: frontdoor.ReasonInvalid, message: "must be an IPv4 address"},
		{name: "bad method", annotations: map[string]string{"lb.zdns.cn/vip": "192.0.2.21", "lb.zdns.cn/method": "random"}, service: web,
			reason: frontdoor.ReasonInvalid, message: `lb.zdns.cn/method "random": must be rr, lc or hash`},
		{name: "no Service", annotations: vip("192.0.2.22"), reason: frontdoor.ReasonServiceNotFound, message: "not found on the Karmada API server", fix: web},
		{name: "SCTP only", annotations: vip("192.0.2.23"), reason: frontdoor.ReasonInvalid, message: "port 5000/SCTP: only TCP and UDP are supported",
			service: func(e *fdtest.Env) { e.Service("web", nil, fdtest.ServicePort("s", 5000, corev1.ProtocolSCTP, 0)) }},
		{name: "no selector", annotations: vip("192.0.2.24"), reason: frontdoor.ReasonInvalid, message: "has no selector",
			service: func(e *fdtest.Env) {
				e.Service("web", func(s *corev1.Service) { s.Spec.Selector = nil }, fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 0))
			}},
		{name: "named target port no workload names", annotations: vip("192.0.2.25"), reason: frontdoor.ReasonInvalid, message: `target port "web": no Deployment`,
			service: func(e *fdtest.Env) {
				sp := fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 0)
				sp.TargetPort = intstr.FromString("web")
				e.Service("web", nil, sp)
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t)
			g := e.G
			if tt.service != nil {
				tt.service(e)
			}
			e.Binding("web", []string{"m1"}, nil)
			newMCS(e, "web", tt.annotations, nil)
			g.Eventually(condition(e, "web"), wait).Should(And(Not(BeNil()), HaveField("Reason", tt.reason)))
			c := condition(e, "web")()
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring(tt.message))
			g.Eventually(func() []string { return e.Events("MultiClusterService", "web", tt.reason) }, wait).Should(ContainElement(ContainSubstring(tt.message)))
			g.Expect(e.LoadBalancers(labelsOf("web"))).To(BeEmpty())
			g.Expect(e.BackendGroups(labelsOf("web"))).To(BeEmpty())
			g.Expect(policy(e, "web")()).To(BeNil())
			g.Expect(ingress(e, "web")()).To(BeEmpty())
			if tt.fix != nil {
				tt.fix(e)
				g.Eventually(condition(e, "web"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonProgrammed)))
				g.Expect(e.LoadBalancers(labelsOf("web"))).To(HaveLen(1))
			}
		})
	}
}

func annotate(e *fdtest.Env, name, key, value string) {
	m := &networkingv1alpha1.MultiClusterService{}
	e.G.Expect(e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: name}, m)).To(Succeed())
	patch := client.MergeFrom(m.DeepCopy())
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[key] = value
	e.G.Expect(e.C.Patch(e.Ctx, m, patch)).To(Succeed())
}

// TestMultiClusterServiceConflicts: a second front door, or a user's own LoadBalancer, holding the
// VIP:port/protocol first wins; the newer front door is refused with a message naming the
// holder, generates nothing, and is programmed once the holder is gone. The user's object is
// never touched.
func TestMultiClusterServiceConflicts(t *testing.T) {
	e := start(t)
	g := e.G
	for _, n := range []string{"a", "b", "c"} {
		e.Service(n, nil, fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 8080))
		e.Binding(n, []string{"m1"}, nil)
	}
	user := &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "user-vip"},
		Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: fdtest.Driver, LBSpec: map[string]string{"vip": "192.0.2.31", "port": "80"}}}
	g.Expect(e.C.Create(e.Ctx, user)).To(Succeed())
	g.Eventually(func() bool { _ = e.C.Get(e.Ctx, client.ObjectKeyFromObject(user), user); return user.IsCreated() }, wait).Should(BeTrue())
	userRV := user.ResourceVersion

	newMCS(e, "a", vip("192.0.2.30"), nil)
	g.Eventually(condition(e, "a"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonProgrammed)))
	newMCS(e, "b", vip("192.0.2.30"), nil)
	newMCS(e, "c", vip("192.0.2.31"), nil)

	for _, tt := range []struct{ name, holder string }{
		{"b", "192.0.2.30:80/TCP is already served by LoadBalancer " + e.NS + "/mcs-a-tcp-80 (front door mcs " + e.NS + "/a)"},
		{"c", "192.0.2.31:80/TCP is already served by LoadBalancer " + e.NS + "/user-vip"},
	} {
		g.Eventually(condition(e, tt.name), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonConflict)), tt.name)
		g.Expect(condition(e, tt.name)().Message).To(Equal(tt.holder))
		g.Eventually(func() []string { return e.Events("MultiClusterService", tt.name, frontdoor.ReasonConflict) }, wait).Should(ContainElement(tt.holder))
		g.Expect(e.LoadBalancers(labelsOf(tt.name))).To(BeEmpty())
		g.Expect(e.BackendGroups(labelsOf(tt.name))).To(BeEmpty())
		g.Expect(ingress(e, tt.name)()).To(BeEmpty())
	}
	g.Expect(e.C.Get(e.Ctx, client.ObjectKeyFromObject(user), user)).To(Succeed())
	g.Expect(user.ResourceVersion).To(Equal(userRV), "the user's LoadBalancer is never touched")
	g.Expect(user.OwnerReferences).To(BeEmpty())

	// The holder goes (its LoadBalancer leaves the driver): the refused front door takes the VIP.
	g.Expect(e.C.Delete(e.Ctx, &networkingv1alpha1.MultiClusterService{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "a"}})).To(Succeed())
	g.Eventually(condition(e, "b"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonProgrammed)))
	g.Expect(ingress(e, "b")()).To(Equal([]corev1.LoadBalancerIngress{{IP: "192.0.2.30"}}))
	g.Expect(e.Drv.CountCalls(driver.DeleteLoadBalancer)).To(Equal(1))
}

// TestMultiClusterServiceForeignObjects: a name the front door needs, held by an object it did
// not generate, refuses the front door (condition naming it, event); the object is unchanged,
// and so are the namespace's other objects when the front door is released.
func TestMultiClusterServiceForeignObjects(t *testing.T) {
	e := start(t)
	g := e.G
	e.Service("web", nil, fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 8080), fdtest.ServicePort("alt", 81, corev1.ProtocolTCP, 8081))
	e.Binding("web", []string{"m1"}, nil)
	foreign := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "mcs-web-tcp-81"}, Spec: lbcfv1beta1.BackendGroupSpec{
		LoadBalancers: []string{"elsewhere"}, Static: []string{"192.0.2.99:80"}}}
	// Carries the labels but not the owner: someone copied them; still not ours.
	other := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "copied", Labels: labelsOf("web")}, Spec: lbcfv1beta1.BackendGroupSpec{
		LoadBalancers: []string{"elsewhere"}, Static: []string{"192.0.2.98:80"}}}
	g.Expect(e.C.Create(e.Ctx, foreign)).To(Succeed())
	g.Expect(e.C.Create(e.Ctx, other)).To(Succeed())

	newMCS(e, "web", vip("192.0.2.40"), nil)
	g.Eventually(condition(e, "web"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonNameTaken)))
	msg := "BackendGroup " + e.NS + "/mcs-web-tcp-81 exists and was not generated for this MultiClusterService: rename or remove it"
	g.Expect(condition(e, "web")().Message).To(Equal(msg))
	g.Eventually(func() []string { return e.Events("MultiClusterService", "web", frontdoor.ReasonNameTaken) }, wait).Should(ContainElement(msg))
	g.Expect(e.LoadBalancers(labelsOf("web"))).To(BeEmpty(), "nothing generated while refused")

	// The user renames the port: programmed, and the foreign groups are as they were.
	svc := &corev1.Service{}
	g.Expect(e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "web"}, svc)).To(Succeed())
	svc.Spec.Ports[1].Port = 82
	g.Expect(e.C.Update(e.Ctx, svc)).To(Succeed())
	g.Eventually(condition(e, "web"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonProgrammed)))
	g.Expect(e.LoadBalancers(labelsOf("web"))).To(HaveLen(2))

	// Released (LoadBalancer dropped from types): ours go, the foreign ones stay as they were.
	m := &networkingv1alpha1.MultiClusterService{}
	g.Expect(e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "web"}, m)).To(Succeed())
	m.Spec.Types = []networkingv1alpha1.ExposureType{networkingv1alpha1.ExposureTypeCrossCluster}
	g.Expect(e.C.Update(e.Ctx, m)).To(Succeed())
	g.Eventually(func() []lbcfv1beta1.LoadBalancer { return e.LoadBalancers(labelsOf("web")) }, wait).Should(BeEmpty())
	g.Eventually(func() []lbcfv1beta1.BackendGroup { return e.BackendGroups(labelsOf("web")) }, wait).Should(ConsistOf(HaveField("Name", "copied")))
	for _, bg := range []*lbcfv1beta1.BackendGroup{foreign, other} {
		got := &lbcfv1beta1.BackendGroup{}
		g.Expect(e.C.Get(e.Ctx, client.ObjectKeyFromObject(bg), got)).To(Succeed())
		// The federation writes the groups' status (a missing LoadBalancer): compare what a
		// front door could have changed.
		g.Expect(got.Spec).To(Equal(bg.Spec), bg.Name)
		g.Expect(got.Labels).To(Equal(bg.Labels), bg.Name)
		g.Expect(got.OwnerReferences).To(BeEmpty(), bg.Name)
		g.Expect(got.DeletionTimestamp).To(BeNil(), bg.Name)
	}
}

// TestMultiClusterServiceDeletion: deleting the MultiClusterService (garbage collection through
// the owner references) or dropping LoadBalancer from its types removes every generated object,
// and each LoadBalancer leaves the driver exactly once (LBCF's finalizer).
func TestMultiClusterServiceDeletion(t *testing.T) {
	for _, tt := range []struct {
		name   string
		remove func(e *fdtest.Env, m *networkingv1alpha1.MultiClusterService)
	}{
		{"delete the MultiClusterService", func(e *fdtest.Env, m *networkingv1alpha1.MultiClusterService) {
			e.G.Expect(e.C.Delete(e.Ctx, m)).To(Succeed())
		}},
		{"drop LoadBalancer from types", func(e *fdtest.Env, m *networkingv1alpha1.MultiClusterService) {
			e.G.Expect(e.C.Get(e.Ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
			m.Spec.Types = []networkingv1alpha1.ExposureType{networkingv1alpha1.ExposureTypeCrossCluster}
			e.G.Expect(e.C.Update(e.Ctx, m)).To(Succeed())
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t)
			g := e.G
			e.Service("web", nil, fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 8080), fdtest.ServicePort("dns", 53, corev1.ProtocolUDP, 0))
			e.Binding("web", []string{"m1"}, nil)
			m := newMCS(e, "web", vip("192.0.2.50"), nil)
			g.Eventually(condition(e, "web"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonProgrammed)))
			g.Expect(e.Drv.LoadBalancers()).To(HaveLen(2))

			tt.remove(e, m)
			g.Eventually(func() []lbcfv1beta1.LoadBalancer { return e.LoadBalancers(labelsOf("web")) }, wait).Should(BeEmpty())
			g.Eventually(func() []lbcfv1beta1.BackendGroup { return e.BackendGroups(labelsOf("web")) }, wait).Should(BeEmpty())
			g.Eventually(policy(e, "web"), wait).Should(BeNil())
			g.Expect(e.Drv.LoadBalancers()).To(BeEmpty())
			g.Expect(e.Drv.CountCalls(driver.DeleteLoadBalancer)).To(Equal(2), "each LoadBalancer deleted once on the device")
			if err := e.C.Get(e.Ctx, client.ObjectKeyFromObject(m), m); !apierrors.IsNotFound(err) {
				g.Expect(err).NotTo(HaveOccurred())
				g.Eventually(condition(e, "web"), wait).Should(BeNil())
				g.Expect(ingress(e, "web")()).To(BeEmpty())
			}
		})
	}
}

// TestMultiClusterServiceChanges: a typo in an annotation of a serving front door is refused and
// reported, but the VIP stays on the device and in status (a typo must not take it down); a new
// VIP replaces the LoadBalancer (lbSpec is immutable): the old one leaves the device once, the
// status follows.
func TestMultiClusterServiceChanges(t *testing.T) {
	e := start(t)
	g := e.G
	e.Service("web", nil, fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 8080))
	e.Binding("web", []string{"m1"}, nil)
	newMCS(e, "web", vip("192.0.2.110"), nil)
	g.Eventually(condition(e, "web"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonProgrammed)))
	lb := e.LoadBalancers(labelsOf("web"))[0]

	annotate(e, "web", "lb.zdns.cn/method", "bogus")
	g.Eventually(condition(e, "web"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonInvalid)))
	g.Expect(ingress(e, "web")()).To(Equal([]corev1.LoadBalancerIngress{{IP: "192.0.2.110"}}))
	g.Expect(e.LoadBalancers(labelsOf("web"))).To(ConsistOf(HaveField("UID", lb.UID)))
	g.Expect(e.Drv.LoadBalancers()).To(HaveLen(1))

	annotate(e, "web", "lb.zdns.cn/method", "rr")
	annotate(e, "web", "lb.zdns.cn/vip", "192.0.2.111")
	g.Eventually(ingress(e, "web"), wait).Should(Equal([]corev1.LoadBalancerIngress{{IP: "192.0.2.111"}}))
	g.Expect(condition(e, "web")().Reason).To(Equal(frontdoor.ReasonProgrammed))
	lbs := e.LoadBalancers(labelsOf("web"))
	g.Expect(lbs).To(HaveLen(1))
	g.Expect(lbs[0].UID).NotTo(Equal(lb.UID))
	g.Expect(lbs[0].Spec.LBSpec).To(HaveKeyWithValue("vip", "192.0.2.111"))
	g.Expect(e.Drv.CountCalls(driver.DeleteLoadBalancer)).To(Equal(1))
	g.Expect(e.Drv.LoadBalancers()).To(HaveLen(1))
}

// TestMultiClusterServiceNamedTargetPort: LBCF selects pod ports by number, so a named target port
// is resolved through the pod templates on Karmada that the Service selects; one number is used,
// two different numbers are reported (the port keeps what it had, the others are exposed).
func TestMultiClusterServiceNamedTargetPort(t *testing.T) {
	e := start(t)
	g := e.G
	deployment := func(name string, labels map[string]string, port int32) {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: name}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "web", Image: "registry.example/web:1", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: port}, {Name: "other", ContainerPort: 9999}}}}}},
		}}
		g.Expect(e.C.Create(e.Ctx, d)).To(Succeed())
	}
	deployment("web", map[string]string{"app": "web", "track": "stable"}, 8080)
	deployment("unrelated", map[string]string{"app": "other"}, 7000)
	named := func(svcPort int32, name string) corev1.ServicePort {
		sp := fdtest.ServicePort(name, svcPort, corev1.ProtocolTCP, 0)
		sp.TargetPort = intstr.FromString(name)
		return sp
	}
	e.Service("web", nil, named(80, "web"))
	e.Binding("web", []string{"m1"}, nil)
	newMCS(e, "web", vip("192.0.2.120"), nil)
	g.Eventually(condition(e, "web"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonProgrammed)))
	bgs := e.BackendGroups(labelsOf("web"))
	g.Expect(bgs).To(HaveLen(1))
	g.Expect(bgs[0].Spec.Pods.Ports).To(Equal([]lbcfv1beta1.PortSelector{{Port: 8080, Protocol: "TCP"}}))

	// A second workload selected by the Service names the port differently: reported.
	deployment("canary", map[string]string{"app": "web", "track": "canary"}, 8081)
	svc := &corev1.Service{}
	g.Expect(e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "web"}, svc)).To(Succeed())
	svc.Spec.Ports = append(svc.Spec.Ports, fdtest.ServicePort("plain", 81, corev1.ProtocolTCP, 8082))
	g.Expect(e.C.Update(e.Ctx, svc)).To(Succeed())
	g.Eventually(condition(e, "web"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonPortsSkipped)))
	g.Expect(condition(e, "web")().Message).To(ContainSubstring(`port 80/TCP: target port "web": the selected workloads give it different numbers`))
	// The ambiguous port keeps what it had (a serving port is not withdrawn for an input
	// problem), still placed; the new port is added.
	g.Expect(e.LoadBalancers(labelsOf("web"))).To(ConsistOf(HaveField("Name", "mcs-web-tcp-80"), HaveField("Name", "mcs-web-tcp-81")))
	g.Expect(e.BackendGroups(labelsOf("web"))).To(ContainElement(HaveField("Spec.Pods.Ports", Equal([]lbcfv1beta1.PortSelector{{Port: 8080, Protocol: "TCP"}}))))
	g.Eventually(func() int { return len(policy(e, "web")().Spec.ResourceSelectors) }, wait).Should(Equal(2))
}

// TestMultiClusterServiceOfOthers: a MultiClusterService without LoadBalancer in its types is
// not lbfed's: its status (written here as another provider would) is never changed, while a
// LoadBalancer one created after it is served (the controller was acting).
func TestMultiClusterServiceOfOthers(t *testing.T) {
	e := start(t)
	g := e.G
	e.Service("web", nil, fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 8080))
	e.Binding("web", []string{"m1"}, nil)
	other := newMCS(e, "other", vip("192.0.2.130"), func(m *networkingv1alpha1.MultiClusterService) {
		m.Spec.Types = []networkingv1alpha1.ExposureType{networkingv1alpha1.ExposureTypeCrossCluster}
	})
	other.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
	meta.SetStatusCondition(&other.Status.Conditions, metav1.Condition{Type: "ServiceApplied", Status: metav1.ConditionTrue, Reason: "ServiceAppliedSucceed"})
	g.Expect(e.C.Status().Update(e.Ctx, other)).To(Succeed())
	rv := other.ResourceVersion

	newMCS(e, "web", vip("192.0.2.131"), nil)
	g.Eventually(condition(e, "web"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonProgrammed)))
	// A change of the other one passes through the controller too.
	annotate(e, "other", "touched", "1")
	g.Eventually(func() string {
		m := &networkingv1alpha1.MultiClusterService{}
		_ = e.C.Get(e.Ctx, client.ObjectKeyFromObject(other), m)
		return m.Annotations["touched"]
	}, wait).Should(Equal("1"))
	annotate(e, "web", "lb.zdns.cn/method", "lc") // queued after "other": once served, "other" was too
	g.Eventually(func() string {
		lbs := e.LoadBalancers(labelsOf("web"))
		if len(lbs) != 1 {
			return ""
		}
		return lbs[0].Spec.LBSpec["method"]
	}, wait).Should(Equal("lc"))
	got := &networkingv1alpha1.MultiClusterService{}
	g.Expect(e.C.Get(e.Ctx, client.ObjectKeyFromObject(other), got)).To(Succeed())
	g.Expect(got.Status.LoadBalancer.Ingress).To(Equal([]corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}))
	g.Expect(got.Status.Conditions).To(HaveLen(1))
	g.Expect(got.ResourceVersion).NotTo(Equal(rv)) // only the annotation changed it
	g.Expect(e.LoadBalancers(labelsOf("other"))).To(BeEmpty())
}

// TestMultiClusterServiceConflictKeepsServingPorts: a port added on a VIP:port someone else holds
// is refused, but the ports the front door already serves stay on the device and in status; a
// LoadBalancer that lost a race for a VIP:port (created after the holder's) is removed.
func TestMultiClusterServiceConflictKeepsServingPorts(t *testing.T) {
	e := start(t)
	g := e.G
	user := &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "user-vip"},
		Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: fdtest.Driver, LBSpec: map[string]string{"vip": "192.0.2.140", "port": "443", "protocol": "TCP"}}}
	g.Expect(e.C.Create(e.Ctx, user)).To(Succeed())
	for _, n := range []string{"a", "b"} {
		e.Service(n, nil, fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 8080))
		e.Binding(n, []string{"m1"}, nil)
	}
	newMCS(e, "a", vip("192.0.2.140"), nil)
	g.Eventually(condition(e, "a"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonProgrammed)))
	served := e.LoadBalancers(labelsOf("a"))
	g.Expect(served).To(HaveLen(1))

	svc := &corev1.Service{}
	g.Expect(e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "a"}, svc)).To(Succeed())
	svc.Spec.Ports = append(svc.Spec.Ports, fdtest.ServicePort("https", 443, corev1.ProtocolTCP, 8443))
	g.Expect(e.C.Update(e.Ctx, svc)).To(Succeed())
	g.Eventually(condition(e, "a"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonConflict)))
	g.Expect(condition(e, "a")().Message).To(Equal("192.0.2.140:443/TCP is already served by LoadBalancer " + e.NS + "/user-vip"))
	g.Expect(e.LoadBalancers(labelsOf("a"))).To(ConsistOf(HaveField("UID", served[0].UID)), "port 80 still served")
	g.Expect(ingress(e, "a")()).To(Equal([]corev1.LoadBalancerIngress{{IP: "192.0.2.140"}}))
	g.Expect(e.Drv.CountCalls(driver.DeleteLoadBalancer)).To(BeZero())

	// b lost a race for 192.0.2.140:80: its LoadBalancer, created after a's, goes.
	b := newMCS(e, "b", nil, nil)
	g.Eventually(condition(e, "b"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonInvalid)))
	raced := &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "mcs-b-tcp-80", Labels: labelsOf("b"),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "networking.karmada.io/v1alpha1", Kind: "MultiClusterService", Name: "b", UID: b.UID, Controller: ptr.To(true)}}},
		Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: fdtest.Driver, LBSpec: map[string]string{"vip": "192.0.2.140", "port": "80", "protocol": "TCP", "method": "rr"}}}
	g.Expect(e.C.Create(e.Ctx, raced)).To(Succeed())
	annotate(e, "b", "lb.zdns.cn/vip", "192.0.2.140")
	g.Eventually(condition(e, "b"), wait).Should(And(Not(BeNil()), HaveField("Reason", frontdoor.ReasonConflict)))
	g.Eventually(func() []lbcfv1beta1.LoadBalancer { return e.LoadBalancers(labelsOf("b")) }, wait).Should(BeEmpty())
	g.Expect(ingress(e, "b")()).To(BeEmpty())
	g.Expect(e.LoadBalancers(labelsOf("a"))).To(ConsistOf(HaveField("UID", served[0].UID)))
}
