// Command lbcf-controller is LBCF for one cluster (--mode=standalone: calls drivers, keeps
// BackendRecords) or the member-side reporter of an lbfed federation (--mode=member: writes each
// BackendGroup's candidate backends into its status, never calls a driver). Both modes serve the
// LBCF admission webhooks.
package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/lbfed/lbfed/frontdoor/service"
	"github.com/lbfed/lbfed/idlegc"
	lbcfadmission "github.com/lbfed/lbfed/lbcf/admission"
	"github.com/lbfed/lbfed/lbcf/api/crd"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/member"
	"github.com/lbfed/lbfed/servingcert"
	"github.com/lbfed/lbfed/watchdecode"
)

type flags struct {
	mode                                        string
	engine                                      controller.Options
	resyncPeriod                                time.Duration
	clientQPS                                   float64
	clientBurst                                 int
	candidatesBudget                            int
	leaderElect                                 bool
	leaderElectNamespace                        string
	releaseOnCancel                             bool
	metricsAddr, probeAddr                      string
	profiling                                   bool
	webhookHost                                 string
	webhookPort                                 int
	certDir, serverCrt, serverKey               string
	selfSignedHosts                             string
	webhookConfigURL, webhookConfigName         string
	gateGroupOptIn                              bool
	driverCA, driverClientCert, driverClientKey string
	serviceStatus                               bool
	serviceClass                                string
	serviceClaimUnclassed                       bool
	suspendIdleGC                               bool
}

func main() {
	f := flags{}
	fs := flag.CommandLine
	fs.StringVar(&f.mode, "mode", "standalone", "standalone: the complete LBCF for this cluster (calls drivers). member: report BackendGroup candidates for an lbfed federation (never calls drivers).")
	f.engine.BackendSuccessEvents = true // as the original LBCF
	f.engine.AddFlags(fs, "")
	fs.DurationVar(&f.engine.Readiness.UnobservedGrace, "unobserved-readiness-grace", controller.DefaultUnobservedGrace, "Standalone mode: how long a registered pod that is not Ready on control-plane evidence alone (its node unreachable or NotReady, or Ready cleared by the node lifecycle controller while its containers are ready) stays registered; then it is deregistered only while another backend of its BackendGroup is eligible (a group's lbfed.io/member-loss-policy annotation, Keep or Withdraw, says otherwise).")
	fs.DurationVar(&f.resyncPeriod, "resync-period", 5*time.Minute, "Every BackendGroup is reconciled at least this often (drift guard).")
	fs.Float64Var(&f.clientQPS, "client-qps", 500, "Queries per second to the API server (the original defaulted to 200; each registered backend costs two writes: the record, created with its address, and Registered).")
	fs.IntVar(&f.clientBurst, "client-burst", 1000, "Burst of queries to the API server.")
	fs.IntVar(&f.candidatesBudget, "candidates-budget-bytes", member.DefaultCandidatesBudget, "Member mode: bytes of candidate entries one BackendGroup may report; over it the list is cut (Ready first) and CandidatesTruncated is set.")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "Run only while holding the lbcf-controller lease, so that two replicas never call drivers twice.")
	fs.StringVar(&f.leaderElectNamespace, "leader-elect-namespace", "kube-system", "Namespace of the leader-election lease.")
	fs.BoolVar(&f.releaseOnCancel, "leader-elect-release-on-cancel", true, "On shutdown (SIGTERM), release the lease once the controllers have stopped, so that a standby or the replacement pod leads at once instead of after the lease duration.")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":11029", "Address of /metrics.")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":11030", "Address of /healthz and /readyz.")
	fs.BoolVar(&f.profiling, "profiling", false, "Serve net/http/pprof under /debug/pprof/ on the metrics address (troubleshooting only; the original exposed it on the admission port).")
	fs.StringVar(&f.webhookHost, "webhook-host", "", "Address the admission webhooks listen on (all when empty).")
	fs.IntVar(&f.webhookPort, "webhook-port", 9443, "Port of the admission webhooks (HTTPS).")
	fs.StringVar(&f.certDir, "cert-dir", "/etc/lbcf", "Folder with the serving certificate (tls.crt, tls.key); reloaded when it changes.")
	fs.StringVar(&f.serverCrt, "server-crt", "", "Serving certificate file (the original's flag; overrides --cert-dir's tls.crt).")
	fs.StringVar(&f.serverKey, "server-key", "", "Serving key file (the original's flag; overrides --cert-dir's tls.key).")
	fs.StringVar(&f.selfSignedHosts, "self-signed-cert-hosts", "", "Comma-separated hosts/IPs: when the certificate folder is empty, write a self-signed CA and certificate for them (local use) and print the caBundle.")
	fs.StringVar(&f.webhookConfigURL, "webhook-config-url", "", "When set (e.g. https://127.0.0.1:9443), create or update the webhook configurations pointing at this URL with the serving CA (local use; charts render them otherwise).")
	fs.StringVar(&f.webhookConfigName, "webhook-config-name", "lbcf-controller", "Name of the webhook configurations written by --webhook-config-url.")
	fs.BoolVar(&f.gateGroupOptIn, "readiness-gate-group-opt-in", false, "With --webhook-config-url: also send pod creations of namespaces not labelled lbfed.io/readiness-gate-inject to the readiness-gate injection webhook, for BackendGroups annotated lbfed.io/readiness-gate=true (every pod creation then calls it).")
	fs.BoolVar(&f.serviceStatus, "service-load-balancer-status", true, "Member mode: set the status.loadBalancer.ingress of Services type=LoadBalancer of --service-load-balancer-class from the annotation lbfed.io/load-balancer-ingress that lbfed-controller puts on their Karmada template (Karmada then aggregates the members' status into the template's).")
	fs.StringVar(&f.serviceClass, "service-load-balancer-class", service.DefaultLoadBalancerClass, "Member mode: the loadBalancerClass of the Services whose status --service-load-balancer-status sets (lbfed-controller's --federation-service-load-balancer-class).")
	fs.BoolVar(&f.serviceClaimUnclassed, "service-claim-unclassed", false, "Member mode: --service-load-balancer-status also sets the status of Services without a loadBalancerClass (lbfed-controller's --federation-service-claim-unclassed; never with an elb-controller claiming unclassed Services in this member).")
	fs.StringVar(&f.driverCA, "driver-ca-file", "", "CA bundle to verify HTTPS drivers (system roots when empty); re-read when it changes.")
	fs.StringVar(&f.driverClientCert, "driver-client-cert", "", "Client certificate presented to drivers (mutual TLS; elb-driver --client-ca-file); re-read when it changes.")
	fs.StringVar(&f.driverClientKey, "driver-client-key", "", "Key of the client certificate presented to drivers.")
	fs.BoolVar(&f.suspendIdleGC, "suspend-idle-gc", true, idlegc.FlagUsage)
	klog.InitFlags(fs)
	flag.Parse()
	ctrl.SetLogger(klog.NewKlogr())
	if err := run(ctrl.SetupSignalHandler(), f); err != nil {
		klog.ErrorS(err, "lbcf-controller failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, f flags) error {
	if f.mode != "standalone" && f.mode != "member" {
		return fmt.Errorf("--mode must be standalone or member, not %q", f.mode)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := lbcfv1beta1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(f.clientQPS), f.clientBurst

	certDir, certName, keyName := f.certDir, servingcert.CertFile, servingcert.KeyFile
	if f.serverCrt != "" {
		certDir, certName = filepath.Dir(f.serverCrt), filepath.Base(f.serverCrt)
	}
	if f.serverKey != "" {
		keyName = filepath.Base(f.serverKey)
	}
	var caBundle []byte
	if f.selfSignedHosts != "" {
		if caBundle, err = servingcert.Ensure(certDir, strings.Split(f.selfSignedHosts, ","), 0); err != nil {
			return fmt.Errorf("self-signed certificate: %w", err)
		}
		fmt.Printf("caBundle: %s\n", base64.StdEncoding.EncodeToString(caBundle))
	}

	// In a member, Karmada may bring this Deployment before the CRDs (the lbfed chart propagates
	// both): wait for them rather than exit and crash-loop.
	if err := crd.WaitServed(ctx, cfg, ctrl.Log.WithName("crds"), 0); err != nil {
		return err
	}
	metrics := metricsserver.Options{BindAddress: f.metricsAddr}
	if f.profiling {
		metrics.ExtraHandlers = controller.ProfilingHandlers()
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metrics,
		HealthProbeBindAddress:  f.probeAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "lbcf-controller-" + f.mode,
		LeaderElectionNamespace: f.leaderElectNamespace,
		// Safe because run returns, and the process exits, as soon as the manager has stopped.
		LeaderElectionReleaseOnCancel: f.releaseOnCancel,
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: f.webhookHost, Port: f.webhookPort, CertDir: certDir, CertName: certName, KeyName: keyName,
		}),
		Cache: controller.CacheOptions(), NewCache: watchdecode.NewCacheWithoutManagedFields, Client: controller.ClientOptions(),
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}

	// Re-read when the files change: rotating the driver CA or the client certificate needs no restart.
	driverTransport, err := driver.NewFilesTransport(driver.TLSFiles{CAFile: f.driverCA, CertFile: f.driverClientCert, KeyFile: f.driverClientKey})
	if err != nil {
		return err
	}
	invoker := driver.NewClient(driver.ClientOptions{Transport: driverTransport, Metrics: driver.NewMetrics(ctrlmetrics.Registry)})
	opts := f.engine
	opts.Invoker, opts.Recorder, opts.Metrics = invoker, mgr.GetEventRecorder("lbcf-controller"), controller.NewMetrics(ctrlmetrics.Registry)
	if f.mode == "member" {
		err = member.Setup(ctx, mgr, opts, f.candidatesBudget)
		if err == nil && f.serviceStatus {
			err = service.SetupMember(mgr, service.MemberOptions{LoadBalancerClass: f.serviceClass, ClaimUnclassed: f.serviceClaimUnclassed})
		}
	} else {
		err = controller.SetupStandalone(ctx, mgr, opts, f.resyncPeriod)
	}
	if err != nil {
		return err
	}
	hooks := &lbcfadmission.Webhooks{Client: mgr.GetClient(), Invoker: invoker, Decoder: admission.NewDecoder(scheme), DryRun: f.engine.DryRun, Member: f.mode == "member"}
	hooks.Register(mgr.GetWebhookServer())
	// Pods that a BackendGroup selects get lbfed's readiness gate, in both modes.
	(&lbcfadmission.ReadinessGateWebhooks{Client: mgr.GetClient(), Decoder: admission.NewDecoder(scheme)}).Register(mgr.GetWebhookServer())
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhooks", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	if f.suspendIdleGC {
		if err := mgr.Add(idlegc.New(idlegc.Options{Log: ctrl.Log.WithName("idlegc"), Suspended: idlegc.NewGauge(ctrlmetrics.Registry)})); err != nil {
			return err
		}
	}
	if f.webhookConfigURL != "" {
		if caBundle == nil {
			if caBundle, err = os.ReadFile(filepath.Join(certDir, servingcert.CAFile)); err != nil {
				return fmt.Errorf("--webhook-config-url needs the serving CA in %s: %w", certDir, err)
			}
		}
		cl, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return err
		}
		cc := lbcfadmission.URLClientConfig(f.webhookConfigURL, caBundle)
		if err := lbcfadmission.Apply(ctx, cl, f.webhookConfigName, cc); err != nil {
			return fmt.Errorf("write webhook configurations: %w", err)
		}
		if err := lbcfadmission.ApplyReadinessGate(ctx, cl, f.webhookConfigName+"-readiness-gate", cc, f.gateGroupOptIn); err != nil {
			return fmt.Errorf("write readiness-gate webhook configuration: %w", err)
		}
	}
	klog.InfoS("starting lbcf-controller", "mode", f.mode, "dryRun", f.engine.DryRun)
	return mgr.Start(ctx)
}
