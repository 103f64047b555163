package controller_test

import (
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
)

// The whole life of a load balancer and its pod backends, through every driver webhook.
func TestLifecycleCallsEveryWebhook(t *testing.T) {
	e := newEnv(t)
	e.start(fastOptions())
	e.driverObj("mem", func(d *lbcfv1beta1.LoadBalancerDriver) {
		d.Spec.Webhooks = []lbcfv1beta1.WebhookConfig{{Name: driver.Healthz, Timeout: metav1.Duration{Duration: time.Second}}}
	})
	e.lb("lb1", "mem", func(lb *lbcfv1beta1.LoadBalancer) { lb.Spec.Attributes = map[string]string{"a": "1"} })
	id := e.lbID("lb1")
	e.pod("web-0", "web", "10.1.0.1")
	e.pod("web-1", "web", "10.1.0.2")
	e.podGroup("web", []string{"lb1"}, []int32{80, 443})

	e.g.Eventually(e.backends(id), wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.1:443", "10.1.0.2:80", "10.1.0.2:443"))
	e.g.Eventually(func(g Gomega) {
		bg := e.group("web")
		g.Expect(bg.Status.Backends).To(Equal(int32(4)))
		g.Expect(bg.Status.RegisteredBackends).To(Equal(int32(4)))
		g.Expect(bg.Status.ObservedGeneration).To(Equal(bg.Generation))
		g.Expect(bg.Status.Conditions).To(ContainElement(HaveField("Type", lbcfv1beta1.BackendGroupReady)))
	}, wait).Should(Succeed())
	lb, _ := e.drv.LoadBalancer(id)
	g := e.g
	g.Expect(lb.Backends["10.1.0.1:80"]).To(Equal(map[string]string{"weight": "1"}))
	for _, br := range e.records("web") {
		g.Expect(br.Finalizers).To(ContainElement(lbcfv1beta1.FinalizerDeregisterBackend))
		g.Expect(br.Status.InjectedInfo).To(HaveKey("backendID"), "injectedInfo is persisted")
		g.Expect(br.Labels).To(HaveKeyWithValue(lbcfv1beta1.LabelLBName, "lb1"))
		g.Expect(br.OwnerReferences).To(HaveLen(1))
	}
	// Record names are the original's.
	pod := &corev1.Pod{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "web-0"}, pod)).To(Succeed())
	g.Expect(e.records("web")).To(ContainElement(HaveField("Name", lbcfv1beta1.PodRecordName("lb1", "web", string(pod.UID), 80, "TCP"))))

	// injectedInfo is sent back on later calls: change parameters → ensureBackend again with it.
	bg := e.group("web")
	e.update(bg, func() { bg.Spec.Parameters = map[string]string{"weight": "5"} })
	g.Eventually(func() map[string]string { lb, _ := e.drv.LoadBalancer(id); return lb.Backends["10.1.0.2:443"] }, wait).Should(Equal(map[string]string{"weight": "5"}))
	last := e.drv.Calls(driver.EnsureBackend)
	g.Expect(last[len(last)-1].Request.(*driver.BackendOperationRequest).InjectedInfo).To(HaveKey("backendID"))

	// Attributes change → ensureLoadBalancer (the original skipped it).
	cur := &lbcfv1beta1.LoadBalancer{}
	cur.Namespace, cur.Name = e.ns, "lb1"
	e.update(cur, func() { cur.Spec.Attributes = map[string]string{"a": "2"} })
	g.Eventually(func() map[string]string { lb, _ := e.drv.LoadBalancer(id); return lb.Attributes }, wait).Should(Equal(map[string]string{"a": "2"}))
	ens := e.drv.Calls(driver.EnsureLoadBalancer)
	g.Expect(ens[len(ens)-1].Request.(*driver.EnsureLoadBalancerRequest).LBInfo).To(HaveKeyWithValue(memdriver.LBIDKey, id), "ensureLoadBalancer sends lbInfo")

	// Pod deleted → deregistered.
	g.Expect(e.c.Delete(e.ctx, pod)).To(Succeed())
	g.Eventually(e.backends(id), wait).Should(ConsistOf("10.1.0.2:80", "10.1.0.2:443"))

	// Healthz polled into a condition.
	g.Eventually(func() lbcfv1beta1.ConditionStatus {
		d := &lbcfv1beta1.LoadBalancerDriver{}
		_ = e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "mem"}, d)
		if c := d.Status.DriverCondition(lbcfv1beta1.DriverHealthy); c != nil {
			return c.Status
		}
		return ""
	}, wait).Should(Equal(lbcfv1beta1.ConditionTrue))
	e.drv.SetHealthy(false)
	g.Eventually(func() lbcfv1beta1.ConditionStatus {
		d := &lbcfv1beta1.LoadBalancerDriver{}
		_ = e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "mem"}, d)
		return d.Status.DriverCondition(lbcfv1beta1.DriverHealthy).Status
	}, wait).Should(Equal(lbcfv1beta1.ConditionFalse))

	// LoadBalancer deleted while backends exist: backends go first, then the load balancer, once.
	g.Expect(e.c.Delete(e.ctx, cur)).To(Succeed())
	g.Eventually(func() int { return len(e.drv.LoadBalancers()) }, wait).Should(BeZero())
	g.Eventually(func() []lbcfv1beta1.BackendRecord { return e.records("web") }, wait).Should(BeEmpty())
	g.Expect(e.drv.CountCalls(driver.DeleteLoadBalancer)).To(Equal(1))
	calls := e.drv.Calls(driver.DeregisterBackend, driver.DeleteLoadBalancer)
	g.Expect(calls[len(calls)-1].Webhook).To(Equal(driver.DeleteLoadBalancer), "deleteLoadBalancer comes after every deregistration")
	g.Eventually(func() bool {
		return e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "lb1"}, &lbcfv1beta1.LoadBalancer{}) != nil
	}, wait).Should(BeTrue(), "the finalizer is removed")
}

func TestFailAndRunningAreRetried(t *testing.T) {
	e := newEnv(t)
	e.start(fastOptions())
	e.drv.Inject(driver.CreateLoadBalancer, memdriver.Fault{Fail: 2, RetryDelay: 1, Msg: "quota exceeded"})
	e.drv.Inject(driver.EnsureBackend, memdriver.Fault{Running: 2, RetryDelay: 1})
	e.drv.Inject(driver.GenerateBackendAddr, memdriver.Fault{HTTPStatus: 500, HTTPStatusTimes: 1, BadJSON: 1})
	e.driverObj("mem")
	e.lb("lb1", "mem")
	g := e.g
	// The condition and an event carry the driver's message while it fails.
	g.Eventually(e.events("FailedCreateLoadBalancer"), wait).Should(ContainElement("quota exceeded"))
	id := e.lbID("lb1")
	g.Expect(e.drv.CountCalls(driver.CreateLoadBalancer)).To(Equal(3))
	calls := e.drv.Calls(driver.CreateLoadBalancer)
	g.Expect(calls[1].At.Sub(calls[0].At)).To(BeNumerically(">=", time.Second), "minRetryDelayInSeconds is honoured")
	rid := func(i int) string { return calls[i].Request.(*driver.CreateLoadBalancerRequest).RecordID }
	g.Expect(rid(0)).To(Equal(rid(2)), "recordID is stable across retries")
	g.Expect(calls[0].Request.(*driver.CreateLoadBalancerRequest).RetryID).NotTo(Equal(calls[2].Request.(*driver.CreateLoadBalancerRequest).RetryID))

	e.pod("web-0", "web", "10.1.0.1")
	e.podGroup("web", []string{"lb1"}, []int32{80})
	g.Eventually(e.backends(id), wait).Should(ConsistOf("10.1.0.1:80"))
	g.Expect(e.events("RunningEnsureBackend")()).NotTo(BeEmpty())
	g.Expect(e.events("InvalidGenerateAddr")()).NotTo(BeEmpty(), "bad JSON is reported as an invalid answer")
	var statuses []string
	for _, c := range e.drv.Calls(driver.EnsureBackend) {
		statuses = append(statuses, c.Status)
	}
	g.Expect(statuses).To(Equal([]string{"Running", "Running", "Succ"}))
}

func TestPeriodicEnsure(t *testing.T) {
	e := newEnv(t)
	e.start(fastOptions())
	e.driverObj("mem")
	e.lb("lb1", "mem", func(lb *lbcfv1beta1.LoadBalancer) {
		lb.Spec.EnsurePolicy = &lbcfv1beta1.EnsurePolicyConfig{Policy: lbcfv1beta1.PolicyAlways, MinPeriod: &metav1.Duration{Duration: time.Second}}
	})
	id := e.lbID("lb1")
	e.pod("web-0", "web", "10.1.0.1")
	e.podGroup("web", []string{"lb1"}, []int32{80}, func(bg *lbcfv1beta1.BackendGroup) {
		bg.Spec.EnsurePolicy = &lbcfv1beta1.EnsurePolicyConfig{Policy: lbcfv1beta1.PolicyAlways, MinPeriod: &metav1.Duration{Duration: time.Second}}
	})
	e.g.Eventually(e.backends(id), wait).Should(HaveLen(1))
	start := e.drv.CountCalls(driver.EnsureBackend)
	startLB := e.drv.CountCalls(driver.EnsureLoadBalancer)
	time.Sleep(3500 * time.Millisecond)
	e.g.Expect(e.drv.CountCalls(driver.EnsureBackend)-start).To(BeNumerically(">=", 2), "ensureBackend repeats every minPeriod")
	e.g.Expect(e.drv.CountCalls(driver.EnsureLoadBalancer)-startLB).To(BeNumerically(">=", 2), "ensureLoadBalancer repeats every minPeriod")
	e.g.Expect(e.drv.CountCalls(driver.EnsureBackend)-start).To(BeNumerically("<=", 6), "but not more often")
}

func TestDeregisterPolicies(t *testing.T) {
	cases := []struct {
		name     string
		policy   lbcfv1beta1.DeregPolicy
		failure  lbcfv1beta1.DeregFailurePolicy
		judge    memdriver.Fault
		notReady func(e *env, p *corev1.Pod) // how web-0 becomes not ready
		kept     bool
	}{
		{"IfNotReady drops a not-ready pod", lbcfv1beta1.DeregisterIfNotReady, "", memdriver.Fault{},
			func(e *env, p *corev1.Pod) { e.setPod(p, corev1.PodRunning, false, "10.1.0.1") }, false},
		{"IfNotRunning keeps a running not-ready pod", lbcfv1beta1.DeregisterIfNotRunning, "", memdriver.Fault{},
			func(e *env, p *corev1.Pod) { e.setPod(p, corev1.PodRunning, false, "10.1.0.1") }, true},
		{"IfNotRunning drops a failed pod", lbcfv1beta1.DeregisterIfNotRunning, "", memdriver.Fault{},
			func(e *env, p *corev1.Pod) { e.setPod(p, corev1.PodFailed, false, "10.1.0.1") }, false},
		{"Webhook keeps what the driver keeps", lbcfv1beta1.DeregisterWebhook, "", memdriver.Fault{},
			func(e *env, p *corev1.Pod) {
				cur := &corev1.Pod{}
				e.g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(p), cur)).To(Succeed())
				cur.Labels[memdriver.KeepLabel] = "true"
				e.g.Expect(e.c.Update(e.ctx, cur)).To(Succeed())
				e.setPod(p, corev1.PodRunning, false, "10.1.0.1")
			}, true},
		{"Webhook drops what the driver drops", lbcfv1beta1.DeregisterWebhook, "", memdriver.Fault{},
			func(e *env, p *corev1.Pod) { e.setPod(p, corev1.PodRunning, false, "10.1.0.1") }, false},
		{"Webhook failure with DoNothing keeps", lbcfv1beta1.DeregisterWebhook, lbcfv1beta1.FailurePolicyDoNothing, memdriver.Fault{Fail: 1000},
			func(e *env, p *corev1.Pod) { e.setPod(p, corev1.PodRunning, false, "10.1.0.1") }, true},
		{"Webhook failure with IfNotReady drops", lbcfv1beta1.DeregisterWebhook, lbcfv1beta1.FailurePolicyIfNotReady, memdriver.Fault{Fail: 1000},
			func(e *env, p *corev1.Pod) { e.setPod(p, corev1.PodRunning, false, "10.1.0.1") }, false},
		{"Webhook failure with IfNotRunning keeps running", lbcfv1beta1.DeregisterWebhook, lbcfv1beta1.FailurePolicyIfNotRunning, memdriver.Fault{HTTPStatus: 503, HTTPStatusTimes: 1000},
			func(e *env, p *corev1.Pod) { e.setPod(p, corev1.PodRunning, false, "10.1.0.1") }, true},
		{"Webhook failure with IfNotRunning drops pending", lbcfv1beta1.DeregisterWebhook, lbcfv1beta1.FailurePolicyIfNotRunning, memdriver.Fault{Fail: 1000},
			func(e *env, p *corev1.Pod) { e.setPod(p, corev1.PodPending, false, "10.1.0.1") }, false},
		{"a deleted pod is always dropped", lbcfv1beta1.DeregisterIfNotRunning, "", memdriver.Fault{},
			func(e *env, p *corev1.Pod) { e.g.Expect(e.c.Delete(e.ctx, p)).To(Succeed()) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.start(fastOptions())
			e.driverObj("mem")
			e.lb("lb1", "mem")
			id := e.lbID("lb1")
			p := e.pod("web-0", "web", "10.1.0.1")
			e.pod("web-1", "web", "10.1.0.2")
			e.podGroup("web", []string{"lb1"}, []int32{80}, func(bg *lbcfv1beta1.BackendGroup) {
				policy := tc.policy
				bg.Spec.DeregisterPolicy = &policy
				if policy == lbcfv1beta1.DeregisterWebhook {
					fp := tc.failure
					bg.Spec.DeregisterWebhook = &lbcfv1beta1.DeregisterWebhookSpec{DriverName: "mem"}
					if fp != "" {
						bg.Spec.DeregisterWebhook.FailurePolicy = &fp
					}
				}
			})
			e.g.Eventually(e.backends(id), wait).Should(ConsistOf("10.1.0.1:80", "10.1.0.2:80"))
			e.drv.Inject(driver.JudgePodDeregister, tc.judge)
			tc.notReady(e, p)
			if tc.kept {
				e.g.Consistently(e.backends(id), 2*time.Second).Should(ConsistOf("10.1.0.1:80", "10.1.0.2:80"))
				e.g.Eventually(func() int32 { return e.group("web").Status.Backends }, wait).Should(Equal(int32(1)), "a kept backend is not an expected one")
			} else {
				e.g.Eventually(e.backends(id), wait).Should(ConsistOf("10.1.0.2:80"))
			}
			if tc.judge.Fail > 0 || tc.judge.HTTPStatusTimes > 0 {
				e.g.Eventually(e.events("WebhookFailed"), wait).ShouldNot(BeEmpty())
			}
			// Registration always needs Ready again.
			if tc.kept {
				e.setPod(p, corev1.PodRunning, true, "10.1.0.1")
				e.g.Eventually(func() int32 { return e.group("web").Status.Backends }, wait).Should(Equal(int32(2)))
			}
		})
	}
}

func TestSharedLoadBalancerAcrossNamespaces(t *testing.T) {
	e := newEnv(t)
	e.start(fastOptions())
	g := e.g
	sys := "kube-system"
	drvName, lbName := "lbcf-mem-"+e.ns, "lbcf-shared-"+e.ns
	d := &lbcfv1beta1.LoadBalancerDriver{ObjectMeta: metav1.ObjectMeta{Name: drvName, Namespace: sys}, Spec: lbcfv1beta1.LoadBalancerDriverSpec{DriverType: "Webhook", URL: e.url}}
	g.Expect(e.c.Create(e.ctx, d)).To(Succeed())
	lb := &lbcfv1beta1.LoadBalancer{ObjectMeta: metav1.ObjectMeta{Name: lbName, Namespace: sys},
		Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: drvName, LBSpec: map[string]string{"vip": "shared"}, Scope: []string{e.ns}}}
	g.Expect(e.c.Create(e.ctx, lb)).To(Succeed())
	t.Cleanup(func() { _ = e.c.Delete(e.ctx, lb); _ = e.c.Delete(e.ctx, d) })
	var id string
	g.Eventually(func() string {
		cur := &lbcfv1beta1.LoadBalancer{}
		_ = e.c.Get(e.ctx, client.ObjectKey{Namespace: sys, Name: lbName}, cur)
		id = cur.Status.LBInfo[memdriver.LBIDKey]
		return id
	}, wait).ShouldNot(BeEmpty())

	e.pod("web-0", "web", "10.2.0.1")
	e.podGroup("web", []string{lbName}, []int32{8080})
	g.Eventually(e.backends(id), wait).Should(ConsistOf("10.2.0.1:8080"))

	// Out of scope: the backends go.
	cur := &lbcfv1beta1.LoadBalancer{}
	cur.Namespace, cur.Name = sys, lbName
	e.update(cur, func() { cur.Spec.Scope = []string{"somewhere-else"} })
	g.Eventually(e.backends(id), wait).Should(BeEmpty(), "a scope change reaches groups in other namespaces at once, not on resync")
}

func TestServiceAndStaticBackends(t *testing.T) {
	e := newEnv(t)
	e.start(fastOptions())
	g := e.g
	e.driverObj("mem")
	e.lb("lb1", "mem")
	id := e.lbID("lb1")
	nodes := []string{e.ns + "-n1", e.ns + "-n2", e.ns + "-n3"}
	for i, n := range nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"pool": e.ns}}}
		if i == 2 {
			node.Labels[controller.LabelExcludeFromLB] = ""
		}
		g.Expect(e.c.Create(e.ctx, node)).To(Succeed())
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.9.0." + string(rune('1'+i))}}
		g.Expect(e.c.Status().Update(e.ctx, node)).To(Succeed())
		t.Cleanup(func() { _ = e.c.Delete(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}) })
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80, Protocol: "TCP"}}}}
	g.Expect(e.c.Create(e.ctx, svc)).To(Succeed())
	g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
	nodePort := svc.Spec.Ports[0].NodePort
	bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: e.ns}, Spec: lbcfv1beta1.BackendGroupSpec{
		LoadBalancers: []string{"lb1"},
		Service:       &lbcfv1beta1.ServiceBackend{Name: "web", Port: lbcfv1beta1.PortSelector{Port: 80, Protocol: "TCP"}, NodeSelector: map[string]string{"pool": e.ns}},
	}}
	g.Expect(e.c.Create(e.ctx, bg)).To(Succeed())
	addr := func(i int) string { return "10.9.0." + string(rune('1'+i)) + ":" + itoa(nodePort) }
	g.Eventually(e.backends(id), wait).Should(ConsistOf(addr(0), addr(1)), "excluded nodes are left out")
	g.Expect(e.records("svc")).To(ContainElement(HaveField("Name", lbcfv1beta1.ServiceRecordName("lb1", "svc", "web", 80, "TCP", nodes[0]))))

	// A node leaving the selector is deregistered right away (the original waited for resync).
	n1 := &corev1.Node{}
	g.Expect(e.c.Get(e.ctx, client.ObjectKey{Name: nodes[1]}, n1)).To(Succeed())
	n1.Labels["pool"] = "other"
	g.Expect(e.c.Update(e.ctx, n1)).To(Succeed())
	g.Eventually(e.backends(id), wait).Should(ConsistOf(addr(0)))

	static := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: "static", Namespace: e.ns}, Spec: lbcfv1beta1.BackendGroupSpec{
		LoadBalancers: []string{"lb1"}, Static: []string{"192.0.2.1:80", "opaque value"},
	}}
	g.Expect(e.c.Create(e.ctx, static)).To(Succeed())
	g.Eventually(e.backends(id), wait).Should(ConsistOf(addr(0), "192.0.2.1:80", "opaque value"))
	g.Expect(e.drv.CountCalls(driver.GenerateBackendAddr)).To(Equal(2), "static addresses need no generateBackendAddr")
	for _, br := range e.records("static") {
		g.Expect(br.Labels).To(HaveKey(lbcfv1beta1.LabelStaticAddr))
	}
	// Deleting a group deregisters its backends (no garbage collector runs here: the records
	// notice their owner is gone).
	g.Expect(e.c.Delete(e.ctx, static)).To(Succeed())
	g.Eventually(e.backends(id), wait).Should(ConsistOf(addr(0)))
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// TestServiceTypeChangeReachesTheGroup: a Service-backend group follows its Service's updates. A
// Service's metadata.generation never moves, so a watch filtering on it dropped every update: a
// ClusterIP Service turned NodePort got no backends until the periodic resync (5 minutes).
func TestServiceTypeChangeReachesTheGroup(t *testing.T) {
	e := newEnv(t)
	e.start(fastOptions())
	g := e.g
	e.driverObj("mem")
	e.lb("lb1", "mem")
	id := e.lbID("lb1")
	n := e.ns + "-n1"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"pool": e.ns}}}
	g.Expect(e.c.Create(e.ctx, node)).To(Succeed())
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.9.1.1"}}
	g.Expect(e.c.Status().Update(e.ctx, node)).To(Succeed())
	t.Cleanup(func() { _ = e.c.Delete(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}) })
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 80, Protocol: "TCP"}}}}
	g.Expect(e.c.Create(e.ctx, svc)).To(Succeed())
	g.Expect(e.c.Create(e.ctx, &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: e.ns}, Spec: lbcfv1beta1.BackendGroupSpec{
		LoadBalancers: []string{"lb1"},
		Service:       &lbcfv1beta1.ServiceBackend{Name: "web", Port: lbcfv1beta1.PortSelector{Port: 80, Protocol: "TCP"}, NodeSelector: map[string]string{"pool": e.ns}},
	}})).To(Succeed())
	// The group is reconciled (its LoadBalancer is there) and a ClusterIP Service has no node backends.
	g.Eventually(func() []metav1.Condition { return e.group("svc").Status.Conditions }, wait).ShouldNot(BeEmpty())
	g.Expect(e.group("svc").Status.Backends).To(BeZero())
	g.Expect(e.backends(id)()).To(BeEmpty())

	g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
	svc.Spec.Type = corev1.ServiceTypeNodePort
	g.Expect(e.c.Update(e.ctx, svc)).To(Succeed())
	g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
	g.Eventually(e.backends(id), wait).Should(ConsistOf("10.9.1.1:"+itoa(svc.Spec.Ports[0].NodePort)), "the node is registered on the new nodePort")
}
