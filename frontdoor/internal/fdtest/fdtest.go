// Package fdtest is the front doors' integration-test environment: a real kube-apiserver (package
// testenv) with lbfed's and Karmada's CRDs, the federation controller programming a memdriver,
// and helpers to build Karmada objects by hand (no Karmada runs: bindings are written by the
// test, as Karmada's scheduler would).
package fdtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/federation"
	"github.com/lbfed/lbfed/frontdoor"
	"github.com/lbfed/lbfed/lbcf/api/crd"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/testinfra/lbenv"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// Wait bounds every Eventually: a loaded 2-core machine, not a speed claim.
const Wait = 30 * time.Second

// karmadaCRDs are the pinned Karmada's CRDs the front doors use, as testinfra/localup installs them
// (testenv.KarmadaCRDs).
var karmadaCRDs = []string{
	"networking/networking.karmada.io_multiclusterservices.yaml",
	"policy/policy.karmada.io_propagationpolicies.yaml",
	"work/work.karmada.io_resourcebindings.yaml",
}

// Main runs the package's tests on a shared cluster with kube-controller-manager (the garbage
// collector deletes generated objects with their front door) and the CRDs.
func Main(m *testing.M) {
	crds, err := CRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fdtest:", err)
		os.Exit(1)
	}
	testenv.Main(m, localup.ClusterOptions{Name: "frontdoor", ControllerManager: true, CRDs: crds})
}

// CRDs returns lbfed's CRDs, the pinned Karmada's MultiClusterService, PropagationPolicy and
// ResourceBinding CRDs, and a stand-in for Cluster.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	out, err := crd.CRDs()
	if err != nil {
		return nil, err
	}
	karmada, err := testenv.KarmadaCRDs(karmadaCRDs...)
	if err != nil {
		return nil, err
	}
	cluster, err := testenv.KarmadaStandIns("clusters.cluster.karmada.io")
	if err != nil {
		return nil, err
	}
	return append(append(out, karmada...), cluster...), nil
}

// Scheme has the kinds the front doors and the federation use.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, lbcfv1beta1.AddToScheme, federation.AddToScheme, frontdoor.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// Env is one test's namespace, a memdriver behind the LoadBalancerDriver Driver in it, and a
// client.
type Env struct {
	*lbenv.Env
}

// Driver is the name of the test namespace's LoadBalancerDriver.
const Driver = "mem"

// New creates the namespace, the memdriver and its LoadBalancerDriver.
func New(t testing.TB) *Env {
	e := &Env{lbenv.New(t, lbenv.Options{Scheme: Scheme, Namespace: fmt.Sprintf("fd-%d", time.Now().UnixNano()%100000000)})}
	c := e.C
	e.G.Expect(c.Create(e.Ctx, &lbcfv1beta1.LoadBalancerDriver{ObjectMeta: metav1.ObjectMeta{Name: Driver, Namespace: e.NS},
		Spec: lbcfv1beta1.LoadBalancerDriverSpec{DriverType: "Webhook", URL: e.URL}})).To(gomega.Succeed())
	// Tests share the cluster and conflicts are cluster-wide: free this test's VIPs when it ends
	// (LoadBalancers being deleted hold none; with the controllers stopped they stay so).
	t.Cleanup(func() {
		_ = c.DeleteAllOf(context.Background(), &lbcfv1beta1.LoadBalancer{}, client.InNamespace(e.NS))
	})
	return e
}

// Start runs the federation controller and the front door that setup registers until the test ends.
func (e *Env) Start(setup func(mgr ctrl.Manager) error) {
	// As cmd/lbfed-controller caches, but only this test's namespace: the controllers of a later
	// test must not act on an earlier test's objects in the shared cluster.
	cache := federation.CacheOptions()
	cache.DefaultNamespaces = map[string]ctrlcache.Config{e.NS: {}}
	mgr, err := ctrl.NewManager(e.Cfg, lbenv.ManagerOptions(Scheme, cache))
	e.G.Expect(err).NotTo(gomega.HaveOccurred())
	mgr = testenv.ClassicQueues(e.T, mgr)
	_, err = federation.Setup(e.Ctx, mgr, federation.Options{Grace: time.Minute, ResyncPeriod: time.Minute, Options: controller.Options{
		Invoker: driver.NewClient(driver.ClientOptions{}), Recorder: mgr.GetEventRecorder("lbfed-test"),
		MinRetryDelay: 200 * time.Millisecond, RetryDelayStep: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second,
	}})
	e.G.Expect(err).NotTo(gomega.HaveOccurred())
	e.G.Expect(setup(mgr)).To(gomega.Succeed())
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(e.Ctx)
	go func() { done <- mgr.Start(ctx) }()
	e.T.Cleanup(func() { cancel(); testenv.WaitStopped(e.T, done) })
}

// ServicePort is a shorthand for a Service port with a numeric target port (0: same as port).
func ServicePort(name string, port int32, proto corev1.Protocol, target int32) corev1.ServicePort {
	sp := corev1.ServicePort{Name: name, Port: port, Protocol: proto}
	if target != 0 {
		sp.TargetPort = intstr.FromInt32(target)
	}
	return sp
}

// Service creates a ClusterIP Service selecting app=<name>, changed by mutate.
func (e *Env) Service(name string, mutate func(*corev1.Service), ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: ports}}
	if mutate != nil {
		mutate(s)
	}
	e.G.Expect(e.C.Create(e.Ctx, s)).To(gomega.Succeed())
	return s
}

// Binding creates the Service's ResourceBinding placing it on clusters, and on requiredBy as a
// dependency of another binding.
func (e *Env) Binding(svc string, clusters []string, requiredBy []string) *workv1alpha2.ResourceBinding {
	rb := &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: svc + "-service"},
		Spec: workv1alpha2.ResourceBindingSpec{Resource: workv1alpha2.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: e.NS, Name: svc}}}
	for _, c := range clusters {
		rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: c})
	}
	if len(requiredBy) > 0 {
		snap := workv1alpha2.BindingSnapshot{Namespace: e.NS, Name: "other-deployment"}
		for _, c := range requiredBy {
			snap.Clusters = append(snap.Clusters, workv1alpha2.TargetCluster{Name: c})
		}
		rb.Spec.RequiredBy = []workv1alpha2.BindingSnapshot{snap}
	}
	e.G.Expect(e.C.Create(e.Ctx, rb)).To(gomega.Succeed())
	return rb
}

// Cluster creates a Ready Karmada Cluster (removed when the test ends).
func (e *Env) Cluster(name string) {
	c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	e.G.Expect(client.IgnoreAlreadyExists(e.C.Create(e.Ctx, c))).To(gomega.Succeed())
	e.T.Cleanup(func() { _ = e.C.Delete(context.Background(), c) })
}

// Events returns the notes of the events about the object of that kind and name with that reason.
func (e *Env) Events(kind, name, reason string) []string {
	list := &eventsv1.EventList{}
	e.G.Expect(e.C.List(e.Ctx, list, client.InNamespace(e.NS))).To(gomega.Succeed())
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.Kind == kind && ev.Regarding.Name == name && ev.Reason == reason {
			out = append(out, ev.Note)
		}
	}
	return out
}

// LoadBalancers returns the namespace's LoadBalancers carrying the labels.
func (e *Env) LoadBalancers(labels map[string]string) []lbcfv1beta1.LoadBalancer {
	list := &lbcfv1beta1.LoadBalancerList{}
	e.G.Expect(e.C.List(e.Ctx, list, client.InNamespace(e.NS), client.MatchingLabels(labels))).To(gomega.Succeed())
	return list.Items
}

// BackendGroups returns the namespace's BackendGroups carrying the labels.
func (e *Env) BackendGroups(labels map[string]string) []lbcfv1beta1.BackendGroup {
	list := &lbcfv1beta1.BackendGroupList{}
	e.G.Expect(e.C.List(e.Ctx, list, client.InNamespace(e.NS), client.MatchingLabels(labels))).To(gomega.Succeed())
	return list.Items
}
