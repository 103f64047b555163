// Package lbenv is one test's world on the shared test API server (package testenv): a client,
// a namespace, a memdriver served over HTTP, and the manager options of a controller under test.
// The integration tests of the engine (lbcf/controller), the federation and the front doors
// build their environments on it instead of each writing it out.
package lbenv

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// Options says how New builds an Env.
type Options struct {
	// Scheme is the client's.
	Scheme *runtime.Scheme
	// Namespace is the name of the test's namespace, created by New.
	Namespace string
	// QPS and Burst limit the client (0: the test API server config's).
	QPS   float32
	Burst int
}

// Env is one test's world.
type Env struct {
	T testing.TB
	G gomega.Gomega
	// Ctx is cancelled when the test ends.
	Ctx context.Context
	Cfg *rest.Config
	C   client.Client
	NS  string
	// Drv is a memdriver served at URL until the test ends.
	Drv *memdriver.Driver
	URL string
}

// New creates the test's client, namespace and memdriver.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	cfg := testenv.Config(t)
	if o.QPS != 0 {
		cfg.QPS = o.QPS
	}
	if o.Burst != 0 {
		cfg.Burst = o.Burst
	}
	c, err := client.New(cfg, client.Options{Scheme: o.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &Env{T: t, G: gomega.NewWithT(t), Ctx: ctx, Cfg: cfg, C: c, NS: o.Namespace, Drv: memdriver.New()}
	e.G.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.NS}})).To(gomega.Succeed())
	srv := httptest.NewServer(e.Drv.Handler(driver.HandlerOptions{}))
	t.Cleanup(srv.Close)
	e.URL = srv.URL
	return e
}

// ManagerOptions are the manager options of a controller under test: no metrics or health-probe
// listener, the same controller names allowed again (every test starts its own), and cache.
func ManagerOptions(scheme *runtime.Scheme, cache cache.Options) ctrl.Options {
	skip := true
	return ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: &skip}, Cache: cache,
	}
}
