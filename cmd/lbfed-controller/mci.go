package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lbfed/lbfed/frontdoor"
	"github.com/lbfed/lbfed/frontdoor/mci"
	"github.com/lbfed/lbfed/watchdecode"
)

// mciComponent runs the MultiClusterIngress front door (package frontdoor/mci) against the Karmada
// API server named by --kubeconfig: MultiClusterIngresses of its ingress class become LBCF
// LoadBalancers, BackendGroups and PropagationPolicies that the federation programs on BFE. It has
// its own manager and lease, so it runs beside the federation or alone.
type mciComponent struct {
	enabled                                   bool
	opts                                      mci.Options
	clientQPS                                 float64
	clientBurst                               int
	leaderElect                               bool
	leaderElectNamespace                      string
	leaseDuration, renewDeadline, retryPeriod time.Duration
	metricsAddr, probeAddr                    string
}

func (c *mciComponent) name() string { return "mci" }

func (c *mciComponent) addFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.enabled, "mci-enabled", false, "run the MultiClusterIngress front door against the Karmada API server (--kubeconfig): MultiClusterIngresses of --mci-ingress-class become LBCF objects that the federation programs on BFE")
	fs.StringVar(&c.opts.IngressClass, "mci-ingress-class", mci.DefaultIngressClass, "ingress class (spec.ingressClassName, else the kubernetes.io/ingress.class annotation) of the MultiClusterIngresses lbfed's BFE serves")
	fs.StringVar(&c.opts.Driver, "mci-driver", "lbcf-bfe", "LoadBalancerDriver of the generated LoadBalancers: the BFE driver (\"lbcf-*\" drivers live in kube-system and serve every namespace; another name is looked up in each MultiClusterIngress's namespace)")
	fs.StringVar(&c.opts.Address, "mci-bfe-address", "", "BFE's address (IP or hostname) written into a MultiClusterIngress's status.loadBalancer.ingress once its LoadBalancers are created on BFE (required with --mci-enabled)")
	fs.Float64Var(&c.clientQPS, "mci-client-qps", 50, "queries per second to the Karmada API server")
	fs.IntVar(&c.clientBurst, "mci-client-burst", 100, "burst of queries to the Karmada API server")
	fs.BoolVar(&c.leaderElect, "mci-leader-elect", true, "run only while holding the lbfed-controller-mci lease, so that two replicas never write the same objects")
	fs.StringVar(&c.leaderElectNamespace, "mci-leader-elect-namespace", "karmada-system", "namespace of the leader-election lease in the Karmada API server")
	fs.DurationVar(&c.leaseDuration, "mci-leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the leader's last renewal before it takes the lease")
	fs.DurationVar(&c.renewDeadline, "mci-leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leading")
	fs.DurationVar(&c.retryPeriod, "mci-leader-elect-retry-period", 2*time.Second, "how often the leader renews and a standby tries to acquire the lease")
	fs.StringVar(&c.metricsAddr, "mci-metrics-bind-address", "0", "address of the front door's /metrics (0 disables)")
	fs.StringVar(&c.probeAddr, "mci-health-probe-bind-address", "0", "address of the front door's /healthz and /readyz (0 disables)")
}

func (c *mciComponent) runnables(ctx context.Context, log logr.Logger) ([]runnable, error) {
	if !c.enabled {
		return nil, nil
	}
	if c.opts.Address == "" {
		return nil, errors.New("--mci-bfe-address is required: it is the address MultiClusterIngress status shows")
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, mci.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of the Karmada API server: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(c.clientQPS), c.clientBurst
	build := func() (runnable, error) {
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:                        scheme,
			Metrics:                       metricsserver.Options{BindAddress: c.metricsAddr},
			HealthProbeBindAddress:        c.probeAddr,
			LeaderElection:                c.leaderElect,
			LeaderElectionID:              "lbfed-controller-mci",
			LeaderElectionNamespace:       c.leaderElectNamespace,
			LeaderElectionReleaseOnCancel: true,
			LeaseDuration:                 &c.leaseDuration,
			RenewDeadline:                 &c.renewDeadline,
			RetryPeriod:                   &c.retryPeriod,
			Cache:                         frontdoor.CacheOptions(),
			NewCache:                      watchdecode.NewCacheWithoutManagedFields,
		})
		if err != nil {
			return nil, fmt.Errorf("manager: %w", err)
		}
		opts := c.opts
		opts.Recorder = mgr.GetEventRecorder("lbfed-controller-mci")
		if _, err := mci.Setup(mgr, opts); err != nil {
			return nil, err
		}
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		log.Info("MultiClusterIngress front door configured", "ingressClass", opts.IngressClass, "driver", opts.Driver, "address", opts.Address)
		return mgr, nil
	}
	return []runnable{&afterCRDs{cfg: cfg, log: log, build: build}}, nil
}
