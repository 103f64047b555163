package service_test

import (
	"context"
	"sync"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/frontdoor"
	"github.com/lbfed/lbfed/frontdoor/internal/fdtest"
	"github.com/lbfed/lbfed/frontdoor/service"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

func TestMain(m *testing.M) { fdtest.Main(m) }

const wait = fdtest.Wait

// start runs the federation and the Service front door (Karmada side) and, with member, the
// member-side StatusReflector on the same API server.
func start(t *testing.T, karmada, member bool) *fdtest.Env {
	e := fdtest.New(t)
	e.Start(func(mgr ctrl.Manager) error {
		if karmada {
			if _, err := service.Setup(mgr, service.Options{ClaimUnclassed: true, Driver: fdtest.Driver, Recorder: mgr.GetEventRecorder("lbfed-frontdoor")}); err != nil {
				return err
			}
		}
		if member {
			return service.SetupMember(mgr, service.MemberOptions{ClaimUnclassed: true})
		}
		return nil
	})
	return e
}

func labelsOf(name string) map[string]string {
	return map[string]string{frontdoor.LabelFrontDoor: service.Kind, frontdoor.LabelFrontDoorName: name}
}

func lbService(class *string, annotations map[string]string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.LoadBalancerClass = class
		s.Annotations = annotations
	}
}

func annotation(e *fdtest.Env, name string) func() *string {
	return func() *string {
		s := &corev1.Service{}
		if err := e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: name}, s); err != nil {
			return nil
		}
		v, ok := s.Annotations[service.AnnotationIngress]
		if !ok {
			return nil
		}
		return &v
	}
}

// TestServiceLoadBalancerOnKarmada: a Service type=LoadBalancer of lbfed's class, or unclassed
// with lb.zdns.cn/vip (or spec.loadBalancerIP), becomes one LoadBalancer per port on one VIP with
// its pods as backends wherever the Service is propagated; once the device has the VIP, the
// template carries it in lbfed.io/load-balancer-ingress for the members. Services of another
// class are left alone. Deleting the Service removes everything, once.
func TestServiceLoadBalancerOnKarmada(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*corev1.Service)
		vip    string
	}{
		{"loadBalancerClass", lbService(ptr.To(service.DefaultLoadBalancerClass), map[string]string{"lb.zdns.cn/vip": "192.0.2.60"}), "192.0.2.60"},
		{"unclassed with the VIP annotation", lbService(nil, map[string]string{"lb.zdns.cn/vip": "192.0.2.61", "lb.zdns.cn/method": "hash"}), "192.0.2.61"},
		{"spec.loadBalancerIP", func(s *corev1.Service) {
			lbService(ptr.To(service.DefaultLoadBalancerClass), nil)(s)
			s.Spec.LoadBalancerIP = "192.0.2.62"
		}, "192.0.2.62"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t, true, false)
			g := e.G
			// Another controller's Service, created first.
			e.Service("other", lbService(ptr.To("example.com/other"), map[string]string{"lb.zdns.cn/vip": tt.vip}), fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 0))
			e.Binding("other", []string{"m1"}, nil)
			e.Binding("web", []string{"m1", "m2"}, nil)
			svc := e.Service("web", tt.mutate, fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 8080), fdtest.ServicePort("dns", 53, corev1.ProtocolUDP, 0))

			g.Eventually(annotation(e, "web"), wait).Should(HaveValue(Equal(tt.vip)))
			lbs := e.LoadBalancers(labelsOf("web"))
			g.Expect(lbs).To(HaveLen(2))
			for _, lb := range lbs {
				g.Expect(lb.IsCreated()).To(BeTrue())
				g.Expect(lb.Spec.LBSpec).To(HaveKeyWithValue("vip", tt.vip))
				g.Expect(metav1.GetControllerOf(&lb)).To(HaveField("UID", svc.UID))
			}
			g.Expect(e.BackendGroups(labelsOf("web"))).To(HaveLen(2))
			pp := &policyv1alpha1.PropagationPolicy{}
			g.Expect(e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: frontdoor.PolicyName(service.Kind, "web")}, pp)).To(Succeed())
			g.Expect(pp.Spec.Placement.ClusterAffinity.ClusterNames).To(Equal([]string{"m1", "m2"}))

			// Shown acting after "other" was created; "other" has nothing and no annotation.
			g.Expect(e.LoadBalancers(labelsOf("other"))).To(BeEmpty())
			g.Expect(annotation(e, "other")()).To(BeNil())

			g.Expect(e.C.Get(e.Ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
			g.Expect(svc.Status.LoadBalancer.Ingress).To(BeEmpty(), "the template's status is Karmada's to write")

			g.Expect(e.C.Delete(e.Ctx, svc)).To(Succeed())
			g.Eventually(func() []lbcfv1beta1.LoadBalancer { return e.LoadBalancers(labelsOf("web")) }, wait).Should(BeEmpty())
			g.Eventually(func() []lbcfv1beta1.BackendGroup { return e.BackendGroups(labelsOf("web")) }, wait).Should(BeEmpty())
			g.Expect(e.Drv.CountCalls(driver.DeleteLoadBalancer)).To(Equal(2))
		})
	}
}

// TestServiceRefusals: a claimed Service that cannot be served is reported in an event; nothing
// is generated and no VIP announced.
func TestServiceRefusals(t *testing.T) {
	class := ptr.To(service.DefaultLoadBalancerClass)
	for _, tt := range []struct {
		name, reason, message string
		mutate                func(*corev1.Service)
		ports                 []corev1.ServicePort
	}{
		{"no VIP", frontdoor.ReasonInvalid, "annotation lb.zdns.cn/vip is required", lbService(class, nil), nil},
		{"bad VIP", frontdoor.ReasonInvalid, "must be an IPv4 address", lbService(class, map[string]string{"lb.zdns.cn/vip": "300.1.1.1"}), nil},
		{"bad method", frontdoor.ReasonInvalid, "must be rr, lc or hash", lbService(class, map[string]string{"lb.zdns.cn/vip": "192.0.2.70", "lb.zdns.cn/method": "wrr"}), nil},
		{"SCTP only", frontdoor.ReasonInvalid, "port 7/SCTP: only TCP and UDP", lbService(class, map[string]string{"lb.zdns.cn/vip": "192.0.2.71"}),
			[]corev1.ServicePort{fdtest.ServicePort("s", 7, corev1.ProtocolSCTP, 0)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t, true, false)
			g := e.G
			ports := tt.ports
			if ports == nil {
				ports = []corev1.ServicePort{fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 0)}
			}
			e.Binding("web", []string{"m1"}, nil)
			e.Service("web", tt.mutate, ports...)
			g.Eventually(func() []string { return e.Events("Service", "web", tt.reason) }, wait).Should(ContainElement(ContainSubstring(tt.message)))
			g.Expect(e.LoadBalancers(labelsOf("web"))).To(BeEmpty())
			g.Expect(annotation(e, "web")()).To(BeNil())
		})
	}
}

// TestServiceStatusStays: the VIP reaches the member Service's status through the annotation (the
// member-side StatusReflector), which Karmada aggregates into the template; the Karmada side
// never writes a status. Here one API server plays both: while the Karmada side is shown acting
// (a port added: a new LoadBalancer, the placement updated), every status the Service ever had is
// recorded: it is set once to the VIP and stays. Emptying the annotation clears it; a Service of
// another class is never written.
func TestServiceStatusStays(t *testing.T) {
	e := start(t, true, true)
	g := e.G
	cs, err := kubernetes.NewForConfig(e.Cfg)
	g.Expect(err).NotTo(HaveOccurred())
	w, err := cs.CoreV1().Services(e.NS).Watch(e.Ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "web").String()})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	var (
		mu   sync.Mutex
		seen [][]corev1.LoadBalancerIngress
	)
	go func() {
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*corev1.Service); ok {
				mu.Lock()
				if n := len(seen); n == 0 || !equalIngress(seen[n-1], s.Status.LoadBalancer.Ingress) {
					seen = append(seen, s.Status.LoadBalancer.Ingress)
				}
				mu.Unlock()
			}
		}
	}()
	history := func() [][]corev1.LoadBalancerIngress {
		mu.Lock()
		defer mu.Unlock()
		return append([][]corev1.LoadBalancerIngress(nil), seen...)
	}

	// Another class's Service carrying the annotation (copied by hand): never written.
	other := e.Service("other", lbService(ptr.To("example.com/other"), map[string]string{service.AnnotationIngress: "192.0.2.80"}), fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 0))
	e.Binding("web", []string{"m1"}, nil)
	e.Service("web", lbService(ptr.To(service.DefaultLoadBalancerClass), map[string]string{"lb.zdns.cn/vip": "192.0.2.80"}), fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 8080))
	vip := service.Ingress("192.0.2.80")
	g.Eventually(func() []corev1.LoadBalancerIngress { return ingressOf(e, "web") }, wait).Should(Equal(vip))

	// The Karmada side acts: a second port.
	svc := &corev1.Service{}
	g.Expect(e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "web"}, svc)).To(Succeed())
	svc.Spec.Ports = append(svc.Spec.Ports, fdtest.ServicePort("alt", 81, corev1.ProtocolTCP, 8081))
	g.Expect(e.C.Update(e.Ctx, svc)).To(Succeed())
	g.Eventually(func() []lbcfv1beta1.LoadBalancer { return e.LoadBalancers(labelsOf("web")) }, wait).Should(HaveLen(2))
	g.Eventually(func() bool {
		for _, lb := range e.LoadBalancers(labelsOf("web")) {
			if !lb.IsCreated() {
				return false
			}
		}
		return true
	}, wait).Should(BeTrue())
	g.Eventually(func() int {
		pp := &policyv1alpha1.PropagationPolicy{}
		_ = e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: frontdoor.PolicyName(service.Kind, "web")}, pp)
		return len(pp.Spec.ResourceSelectors)
	}, wait).Should(Equal(2))
	// A marker write after the controller's work: once the watch has seen it, it has seen
	// everything before it.
	g.Expect(e.C.Patch(e.Ctx, svc, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"marker":"1"}}}`)))).To(Succeed())
	g.Eventually(func() bool {
		s := &corev1.Service{}
		_ = e.C.Get(e.Ctx, client.ObjectKeyFromObject(svc), s)
		return s.Labels["marker"] == "1"
	}, wait).Should(BeTrue())
	g.Eventually(func() [][]corev1.LoadBalancerIngress { return history() }, wait).Should(Equal([][]corev1.LoadBalancerIngress{nil, vip}),
		"the status went from nothing to the VIP once and stayed")

	g.Expect(e.C.Get(e.Ctx, client.ObjectKeyFromObject(other), other)).To(Succeed())
	g.Expect(other.Status.LoadBalancer.Ingress).To(BeEmpty())

	// The annotation emptied (as the Karmada side does when the VIP is withdrawn): cleared.
	g.Expect(e.C.Patch(e.Ctx, svc, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"lbfed.io/load-balancer-ingress":""}}}`)))).To(Succeed())
	// The Karmada side puts it back (the VIP is still served), the member follows.
	g.Eventually(func() []corev1.LoadBalancerIngress { return ingressOf(e, "web") }, wait).Should(Equal(vip))
}

func ingressOf(e *fdtest.Env, name string) []corev1.LoadBalancerIngress {
	s := &corev1.Service{}
	_ = e.C.Get(context.Background(), client.ObjectKey{Namespace: e.NS, Name: name}, s)
	return s.Status.LoadBalancer.Ingress
}

func equalIngress(a, b []corev1.LoadBalancerIngress) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].IP != b[i].IP || a[i].Hostname != b[i].Hostname {
			return false
		}
	}
	return true
}

// TestStatusReflector: the member side alone writes exactly the annotation's VIP into a Service of
// lbfed's class (or unclassed), clears it for "", and leaves every other Service alone.
func TestStatusReflector(t *testing.T) {
	e := start(t, false, true)
	g := e.G
	for _, tt := range []struct {
		name   string
		mutate func(*corev1.Service)
		want   []corev1.LoadBalancerIngress
	}{
		{"other-class", lbService(ptr.To("example.com/other"), map[string]string{service.AnnotationIngress: "192.0.2.90"}), nil},
		{"not-type-lb", func(s *corev1.Service) { s.Annotations = map[string]string{service.AnnotationIngress: "192.0.2.90"} }, nil},
		{"classed", lbService(ptr.To(service.DefaultLoadBalancerClass), map[string]string{service.AnnotationIngress: "192.0.2.90"}), service.Ingress("192.0.2.90")},
		{"unclassed", lbService(nil, map[string]string{service.AnnotationIngress: "192.0.2.91"}), service.Ingress("192.0.2.91")},
		{"empty", lbService(nil, map[string]string{service.AnnotationIngress: ""}), nil},
	} {
		e.Service(tt.name, tt.mutate, fdtest.ServicePort("http", 80, corev1.ProtocolTCP, 0))
	}
	// Evidence the reflector ran over the Services created before the last written one.
	g.Eventually(func() []corev1.LoadBalancerIngress { return ingressOf(e, "unclassed") }, wait).Should(Equal(service.Ingress("192.0.2.91")))
	g.Eventually(func() []corev1.LoadBalancerIngress { return ingressOf(e, "classed") }, wait).Should(Equal(service.Ingress("192.0.2.90")))
	for _, n := range []string{"other-class", "not-type-lb", "empty"} {
		g.Expect(ingressOf(e, n)).To(BeEmpty(), n)
	}
	s := &corev1.Service{}
	g.Expect(e.C.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "classed"}, s)).To(Succeed())
	g.Expect(e.C.Patch(e.Ctx, s, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"lbfed.io/load-balancer-ingress":""}}}`)))).To(Succeed())
	g.Eventually(func() []corev1.LoadBalancerIngress { return ingressOf(e, "classed") }, wait).Should(BeEmpty())
}
