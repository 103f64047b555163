package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lbfed/lbfed/federation"
	"github.com/lbfed/lbfed/frontdoor"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/watchdecode"
)

// federationComponent runs the federation controller against the Karmada API server named by
// --kubeconfig (or the in-cluster configuration): LoadBalancers, BackendRecords and driver calls
// for every member's backends.
type federationComponent struct {
	enabled                                     bool
	engine                                      controller.Options
	grace, resync                               time.Duration
	memberLossPolicy                            string
	memberPods                                  bool
	memberPodTTL                                time.Duration
	candidatesBudget                            int
	clientQPS                                   float64
	clientBurst                                 int
	leaderElect                                 bool
	leaderElectNamespace                        string
	leaseDuration, renewDeadline, retryPeriod   time.Duration
	releaseOnCancel                             bool
	metricsAddr, probeAddr                      string
	profiling                                   bool
	driverCA, driverClientCert, driverClientKey string
	frontDoors                                  frontDoorFlags
}

func (c *federationComponent) name() string { return "federation" }

func (c *federationComponent) addFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.enabled, "federation-enabled", true, "run the federation controller against the Karmada API server (--kubeconfig)")
	c.engine.AddFlags(fs, "federation-")
	fs.DurationVar(&c.grace, "federation-grace-period", time.Minute, "how long a member may be unobserved (Karmada Cluster NotReady or gone, the group's ResourceBinding missing or empty) before the member-loss policy applies; Karmada itself notices an unreachable member after about 30-40s")
	fs.StringVar(&c.memberLossPolicy, "federation-member-loss-policy", string(lbcfv1beta1.MemberLossFailStatic), "what happens to an unobserved member's backends after the grace period, unless a group's lbfed.io/member-loss-policy annotation says otherwise: FailStatic (withdrawn only while another member of the group serves; when every member is unobserved at once all are kept), Withdraw (always withdrawn), Keep (never withdrawn: the front end's health checks decide)")
	fs.BoolVar(&c.memberPods, "federation-member-pods", true, "send drivers (generateBackendAddr, judgePodDeregister) the member's real Pod, read through Karmada's cluster proxy (needs clusters/proxy in Karmada and get pods in the members, as the lbfed chart grants); when a member cannot be read, a pod rebuilt from its report annotated lbfed.io/pod-source: synthetic")
	fs.DurationVar(&c.memberPodTTL, "federation-member-pod-cache-ttl", 10*time.Second, "how long a member's pod (or a failure to read it) is reused; a member Karmada's cluster proxy cannot reach (timeout, 5xx) is not read again for as long")
	fs.IntVar(&c.candidatesBudget, "federation-candidates-budget-bytes", federation.DefaultCandidatesBudget, "candidate data one BackendGroup's ResourceBinding may carry over all its members (etcd refuses objects over 1.5 MiB); each member is told its share through the template's lbfed.io/candidates-budget annotation")
	fs.DurationVar(&c.resync, "federation-resync-period", 5*time.Minute, "every BackendGroup is reconciled at least this often")
	fs.Float64Var(&c.clientQPS, "federation-client-qps", 500, "queries per second to the Karmada API server")
	fs.IntVar(&c.clientBurst, "federation-client-burst", 1000, "burst of queries to the Karmada API server")
	fs.BoolVar(&c.leaderElect, "federation-leader-elect", true, "run only while holding the lbfed-controller lease, so that two replicas never call drivers twice")
	fs.StringVar(&c.leaderElectNamespace, "federation-leader-elect-namespace", "karmada-system", "namespace of the leader-election lease in the Karmada API server")
	fs.DurationVar(&c.leaseDuration, "federation-leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the leader's last renewal before it takes the lease: the failover time when the leader dies")
	fs.DurationVar(&c.renewDeadline, "federation-leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leading and exits (less than the lease duration)")
	fs.DurationVar(&c.retryPeriod, "federation-leader-elect-retry-period", 2*time.Second, "how often the leader renews and a standby tries to acquire the lease")
	fs.BoolVar(&c.releaseOnCancel, "federation-leader-elect-release-on-cancel", true, "on shutdown (SIGTERM), release the lease once the controllers have stopped, so that a standby takes over at once instead of after the lease duration")
	fs.StringVar(&c.metricsAddr, "federation-metrics-bind-address", ":8080", "address of the federation's /metrics (0 disables)")
	fs.StringVar(&c.probeAddr, "federation-health-probe-bind-address", ":8081", "address of the federation's /healthz and /readyz (0 disables)")
	fs.BoolVar(&c.profiling, "federation-profiling", false, "serve net/http/pprof under /debug/pprof/ on the federation's metrics address (troubleshooting only)")
	fs.StringVar(&c.driverCA, "federation-driver-ca-file", "", "CA bundle to verify HTTPS drivers (system roots when empty); re-read when it changes")
	fs.StringVar(&c.driverClientCert, "federation-driver-client-cert", "", "client certificate presented to drivers (mutual TLS; elb-driver --client-ca-file); re-read when it changes")
	fs.StringVar(&c.driverClientKey, "federation-driver-client-key", "", "key of the client certificate presented to drivers")
	c.frontDoors.addFlags(fs)
}

func (c *federationComponent) runnables(ctx context.Context, log logr.Logger) ([]runnable, error) {
	if !c.enabled {
		return nil, nil
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, lbcfv1beta1.AddToScheme, federation.AddToScheme, frontdoor.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of the Karmada API server: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(c.clientQPS), c.clientBurst
	policy, ok := lbcfv1beta1.ParseMemberLossPolicy(c.memberLossPolicy)
	if !ok {
		return nil, fmt.Errorf("--federation-member-loss-policy=%q: want FailStatic, Withdraw or Keep", c.memberLossPolicy)
	}
	build := func() (runnable, error) {
		metrics := metricsserver.Options{BindAddress: c.metricsAddr}
		if c.profiling {
			metrics.ExtraHandlers = controller.ProfilingHandlers()
		}
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:                  scheme,
			Metrics:                 metrics,
			HealthProbeBindAddress:  c.probeAddr,
			LeaderElection:          c.leaderElect,
			LeaderElectionID:        "lbfed-controller-federation",
			LeaderElectionNamespace: c.leaderElectNamespace,
			// Safe because run returns, and the process exits, as soon as the manager has stopped.
			LeaderElectionReleaseOnCancel: c.releaseOnCancel,
			LeaseDuration:                 &c.leaseDuration,
			RenewDeadline:                 &c.renewDeadline,
			RetryPeriod:                   &c.retryPeriod,
			Cache:                         federation.CacheOptions(),
			NewCache:                      watchdecode.NewCacheWithoutManagedFields,
			Client:                        controller.ClientOptions(),
		})
		if err != nil {
			return nil, fmt.Errorf("manager: %w", err)
		}
		// Re-read when the files change: rotating the driver CA or the client certificate needs no restart.
		driverTransport, err := driver.NewFilesTransport(driver.TLSFiles{CAFile: c.driverCA, CertFile: c.driverClientCert, KeyFile: c.driverClientKey})
		if err != nil {
			return nil, err
		}
		opts := federation.Options{Options: c.engine, Grace: c.grace, ResyncPeriod: c.resync, MemberLossPolicy: policy, CandidatesBudget: c.candidatesBudget,
			ClusterMetrics: federation.NewMetrics(ctrlmetrics.Registry)}
		if c.memberPods {
			pods, err := federation.NewClusterProxyPods(mgr.GetConfig(), c.memberPodTTL)
			if err != nil {
				return nil, fmt.Errorf("member pods through the cluster proxy: %w", err)
			}
			opts.MemberPods = pods
		}
		opts.Invoker = driver.NewClient(driver.ClientOptions{Transport: driverTransport, Metrics: driver.NewMetrics(ctrlmetrics.Registry)})
		opts.Recorder = mgr.GetEventRecorder("lbfed-controller")
		opts.Metrics = controller.NewMetrics(ctrlmetrics.Registry)
		if _, err := federation.Setup(ctx, mgr, opts); err != nil {
			return nil, err
		}
		if err := c.frontDoors.setup(mgr, log); err != nil {
			return nil, err
		}
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		log.Info("federation controller configured", "grace", c.grace, "memberLossPolicy", policy, "dryRun", c.engine.DryRun)
		return mgr, nil
	}
	return []runnable{&afterCRDs{cfg: cfg, log: log, build: build}}, nil
}
