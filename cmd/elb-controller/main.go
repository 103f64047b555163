// Command elb-controller programs a Radware Alteon pair for the Services of type LoadBalancer of
// one cluster (see package servicelb).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lbfed/lbfed/elb/radware"
	"github.com/lbfed/lbfed/elb/servicelb"
	"github.com/lbfed/lbfed/lbspec"
)

type options struct {
	alteon         radware.Flags
	cluster        string
	class          string
	claimUnclassed bool
	maxRetries     int
	resync         time.Duration
	concurrency    int
	metricsAddr    string
	probeAddr      string
	leaderElect    bool
	leaderNS       string
	releaseLease   bool
}

func (o *options) register(fs *flag.FlagSet) {
	o.alteon.Register(fs)
	fs.StringVar(&o.cluster, "cluster-name", "kubernetes", "cluster name in the owner mark of the Alteon objects (elb/<cluster>/<namespace>/<service>); must differ between clusters sharing a pair")
	fs.StringVar(&o.class, "load-balancer-class", servicelb.DefaultLoadBalancerClass, "spec.loadBalancerClass this controller serves")
	fs.BoolVar(&o.claimUnclassed, "claim-unclassed", true, "also serve Services without loadBalancerClass that carry the "+lbspec.AnnotationVIP+" annotation")
	fs.IntVar(&o.maxRetries, "max-retries", 5, "consecutive refusals of a Service's change by the Alteon (rejected write, failed apply) retried with backoff before giving up until it changes or the next resync; an unavailable Alteon is retried until it is back")
	fs.DurationVar(&o.resync, "resync-period", 10*time.Minute, "how often every Service is checked against the Alteon")
	fs.IntVar(&o.concurrency, "concurrency", 4, "Services reconciled at once (their changes share Alteon transactions)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of /metrics (0: off)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (0: off)")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader so that only one replica programs the Alteon")
	fs.StringVar(&o.leaderNS, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's namespace)")
	fs.BoolVar(&o.releaseLease, "leader-elect-release-on-cancel", true, "on shutdown (SIGTERM), release the lease once the controller has stopped, so that a standby leads at once instead of after the lease duration")
}

func main() {
	var o options
	klog.InitFlags(flag.CommandLine)
	o.register(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(klog.Background())
	cfg, err := ctrl.GetConfig()
	if err != nil {
		klog.ErrorS(err, "no Kubernetes configuration")
		os.Exit(1)
	}
	if err := run(ctrl.SetupSignalHandler(), cfg, &o); err != nil {
		klog.ErrorS(err, "elb-controller failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg *rest.Config, o *options) error {
	log := klog.Background()
	fe, err := o.alteon.Frontend(log, ctrlmetrics.Registry)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "elb-controller.lb.zdns.cn",
		LeaderElectionNamespace: o.leaderNS,
		// Safe because run returns, and the process exits, as soon as the manager has stopped.
		LeaderElectionReleaseOnCancel: o.releaseLease,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if _, err := servicelb.SetupWithManager(mgr, servicelb.Options{
		Frontend: fe, ClusterName: o.cluster, LoadBalancerClass: o.class, ClaimUnclassed: o.claimUnclassed,
		MaxRetries: o.maxRetries, ResyncPeriod: o.resync, MaxConcurrentReconciles: o.concurrency,
	}); err != nil {
		return fmt.Errorf("set up controller: %w", err)
	}
	// The leader finishes owed saves and syncs (a runnable that needs leader election: a save
	// from another replica would be a second writer).
	if err := mgr.Add(manager.RunnableFunc(fe.Run)); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready while a unit answers as master: without one nothing can be programmed.
	if err := mgr.AddReadyzCheck("alteon-master", func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		return fe.Healthy(ctx)
	}); err != nil {
		return err
	}
	log.Info("starting", "cluster", o.cluster, "loadBalancerClass", o.class, "claimUnclassed", o.claimUnclassed)
	return mgr.Start(ctx)
}
