// Package deploy runs lbfed on a localup topology as local processes, installed from the lbfed
// Helm chart's rendered manifests as a platform team would install it: the chart's objects go
// to the Karmada API server (CRDs, RBAC, the resource interpreter registration, and a
// ClusterPropagationPolicy that brings the CRDs and lbcf-controller --mode=member to every
// member, Push or Pull), and where a kubelet would run the chart's Deployments, their containers run as
// processes with the same arguments, certificates and service-account permissions. The shared
// front end is a simulated Radware Alteon HA pair with elb-driver, outside the Karmada host
// cluster as a production driver usually is, wired as the lbfed chart documents: it serves HTTPS
// and accepts only lbfed-controller's client certificate (the chart's <release>-driver-client-tls
// CA, copied to its --client-ca-file), and lbfed-controller verifies it with the driver's CA
// (controller.federation.driverTLS.caSecret). Used by `make up` (the demo) and the end-to-end
// suites.
package deploy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/charts/manifests"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/servingcert"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/binaries"
)

// Binaries are lbfed's own commands.
var Binaries = []string{"lbfed-controller", "lbcf-controller", "elb-driver", "alteon-sim"}

// Build compiles lbfed's commands into dir (the Go build cache makes repeats quick).
func Build(ctx context.Context, repoRoot, dir string) error {
	args := []string{"build", "-o", dir + "/"}
	for _, b := range Binaries {
		args = append(args, "./cmd/"+b)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build lbfed commands: %v\n%s", err, out)
	}
	return nil
}

// Options configure Start.
type Options struct {
	// RepoRoot is the repository (for the chart and the pinned helm).
	RepoRoot string
	// Bin is the folder holding Binaries.
	Bin string
	// Grace is the federation's NotReady grace period (default 20s: short, for demos and tests).
	Grace time.Duration
	// DrainPeriod is how long the Radware driver drains a removed backend (default 1s).
	DrainPeriod time.Duration
	// BFEAddress, when set, turns on lbfed-controller's MultiClusterIngress front door
	// (controller.multiClusterIngress): ingress class MCIIngressClass, generated LoadBalancers of
	// the driver MCIDriver, and this address in the status of the MultiClusterIngresses it serves.
	// The BFE and its driver are the caller's: they are not part of this deployment.
	BFEAddress string
	// Set are more values of the lbfed chart, as helm --set takes them (e.g.
	// controller.federation.candidatesBudgetBytes=65536); they win over deploy's own.
	Set []string
	// ControllerReplicas is the number of lbfed-controller processes (default 1; the chart's
	// default is 2). With more than one, the interpreter and admission URLs Karmada calls are a
	// Service-like proxy in this process that forwards each connection to a replica that
	// accepts it, and the replicas elect a federation leader as the chart's Deployment does.
	ControllerReplicas int
}

// The MultiClusterIngress front door's settings when Options.BFEAddress is set: the chart's
// defaults, spelt out so that tests name them.
const (
	MCIIngressClass = "lbfed-bfe"
	MCIDriver       = "lbcf-bfe"
)

// Deployment is a running lbfed.
type Deployment struct {
	// DriverURL is elb-driver's webhook URL (a LoadBalancerDriver's spec.url).
	DriverURL string
	// AlteonURLs are the REST URLs of the simulated units; AlteonControl is the simulator's
	// control API (failover, faults). AlteonPassword is the units' administrator password, given
	// to elb-driver as a file (as the chart mounts its Secret); random, so that a scan of logs and
	// events can look for it.
	AlteonURLs     []string
	AlteonControl  string
	AlteonPassword string
	// FederationMetrics is lbfed-controller's federation /metrics URL (the first replica's).
	FederationMetrics string
	// ControllerMetrics is each lbfed-controller replica's federation /metrics URL, in the order
	// of their process names: lbfed-controller, lbfed-controller-2, …
	ControllerMetrics []string
	// DriverMetrics is elb-driver's /metrics URL.
	DriverMetrics string
	// DriverCA is the CA that signs drivers' serving certificates (lbfed-controller trusts it);
	// DriverClientCA is the CA of lbfed-controller's driver client certificate, from the chart.
	DriverCA       *servingcert.CA
	DriverClientCA string
	// ClientName is the subject of lbfed-controller's driver client certificate.
	ClientName string
	// certs is where driver certificates are written.
	certs string
	// Processes are lbfed's processes (the chart's workloads and the front end); one that exits
	// on its own is started again and replaced here.
	Processes []*localup.Process

	mu sync.Mutex
}

// Namespaces of the chart's workloads.
const (
	ControlPlaneNamespace = "karmada-system"
	MemberNamespace       = "lbfed-system"
)

// Scheme knows the kinds deploy reads.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	return s
}()

// Start installs lbfed and starts the front end; everything runs until the topology stops.
func Start(ctx context.Context, t *localup.Topology, opts Options) (*Deployment, error) {
	if opts.Grace <= 0 {
		opts.Grace = 20 * time.Second
	}
	if opts.DrainPeriod <= 0 {
		opts.DrainPeriod = time.Second
	}
	if err := haveBinaries(opts.Bin, Binaries...); err != nil {
		return nil, err
	}
	d := &Deployment{}
	// lbfed first: the driver accepts the client CA the chart made for lbfed-controller.
	if err := d.installLbfed(ctx, t, opts); err != nil {
		return nil, err
	}
	if err := d.startFrontEnd(t, opts); err != nil {
		return nil, err
	}
	return d, nil
}

// BuildAndStart builds lbfed's binaries from this repository into the topology's folder and
// Starts them (opts.RepoRoot and opts.Bin are set here).
func BuildAndStart(ctx context.Context, t *localup.Topology, opts Options) (*Deployment, error) {
	root, err := binaries.RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(t.Dir(), "lbfed-bin")
	if err := Build(ctx, root, bin); err != nil {
		return nil, err
	}
	opts.RepoRoot, opts.Bin = root, bin
	return Start(ctx, t, opts)
}

// InstallLbfed installs lbfed alone (no front end): the chart on Karmada and its workloads as
// processes. It needs lbfed-controller and lbcf-controller in opts.Bin.
func InstallLbfed(ctx context.Context, t *localup.Topology, opts Options) (*Deployment, error) {
	if err := haveBinaries(opts.Bin, "lbfed-controller", "lbcf-controller"); err != nil {
		return nil, err
	}
	d := &Deployment{}
	return d, d.installLbfed(ctx, t, opts)
}

func haveBinaries(dir string, names ...string) error {
	for _, b := range names {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("lbfed binary %s: %w (run deploy.Build or make build)", b, err)
		}
	}
	return nil
}

func (d *Deployment) start(t *localup.Topology, spec localup.ProcessSpec) error {
	spec.Tier = localup.TierClient
	p, err := t.StartProcess(spec)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.Processes = append(d.Processes, p)
	d.mu.Unlock()
	go d.restartOnExit(t, spec, p)
	return nil
}

// restartOnExit starts a controller again when it exits on its own, as the kubelet restarts a
// Deployment's pod. Controllers exit by design when they lose their leader lease — e.g. a member's
// lbcf-controller while a test pauses that member's API server — and a member that stays without
// its controller would never report again.
func (d *Deployment) restartOnExit(t *localup.Topology, spec localup.ProcessSpec, p *localup.Process) {
	for {
		<-p.Done()
		if p.StopRequested() {
			return
		}
		time.Sleep(time.Second)
		if p.StopRequested() {
			return
		}
		next, err := t.StartProcess(spec)
		if err != nil {
			return // the run is stopping
		}
		p.MarkReplaced()
		d.mu.Lock()
		for i := range d.Processes {
			if d.Processes[i] == p {
				d.Processes[i] = next
			}
		}
		d.mu.Unlock()
		p = next
	}
}

// Process returns the running process called name (the latest one started in its place after
// an exit), or nil.
func (d *Deployment) Process(name string) *localup.Process {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.Processes {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// ControllerNames are the process names of the lbfed-controller replicas.
func ControllerNames(replicas int) []string {
	out := []string{"lbfed-controller"}
	for i := 2; i <= replicas; i++ {
		out = append(out, "lbfed-controller-"+strconv.Itoa(i))
	}
	return out
}

func loopbackPorts(n int) ([]string, error) {
	ports, err := localup.FreePorts(n)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i, p := range ports {
		out[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	return out, nil
}

// startFrontEnd starts the simulated Alteon pair and the Radware driver.
func (d *Deployment) startFrontEnd(t *localup.Topology, opts Options) error {
	a, err := loopbackPorts(5)
	if err != nil {
		return err
	}
	unitA, unitB, control, driverAddr, driverMetrics := a[0], a[1], a[2], a[3], a[4]
	d.AlteonURLs, d.AlteonControl = []string{"http://" + unitA, "http://" + unitB}, "http://"+control
	d.AlteonPassword = "alteon-" + rand.Text()
	passwordFile := filepath.Join(t.Dir(), "lbfed", "alteon-password")
	if err := os.WriteFile(passwordFile, []byte(d.AlteonPassword+"\n"), 0o600); err != nil {
		return err
	}
	if err := d.start(t, localup.ProcessSpec{Name: "alteon-sim", Path: filepath.Join(opts.Bin, "alteon-sim"), Args: []string{
		"--listen-a=" + unitA, "--listen-b=" + unitB, "--control=" + control, "--apply-duration=50ms", "--save-duration=10ms", "--sync-duration=20ms",
		"--password-file=" + passwordFile,
	}}); err != nil {
		return err
	}
	d.DriverURL = "https://" + driverAddr
	d.DriverMetrics = "http://" + driverMetrics + "/metrics"
	auth, err := d.DriverServerArgs("elb-driver")
	if err != nil {
		return err
	}
	if err := d.start(t, localup.ProcessSpec{Name: "elb-driver", Path: filepath.Join(opts.Bin, "elb-driver"),
		Args: append([]string{"--backend=radware", "--alteon-urls=" + d.AlteonURLs[0] + "," + d.AlteonURLs[1], "--alteon-password-file=" + passwordFile, "--listen=" + driverAddr,
			"--metrics-listen=" + driverMetrics, "--radware-drain-period=" + opts.DrainPeriod.String()}, auth...)}); err != nil {
		return err
	}
	return waitHTTP(context.Background(), "http://"+driverMetrics+"/healthz", nil)
}

// SecretMaterial returns what must never appear in logs or events: the Alteon password and the
// body of every private key this deployment gave a process (lbfed-controller's serving and
// driver client keys, the members' webhook keys, the drivers' serving keys).
func (d *Deployment) SecretMaterial(t *localup.Topology) ([]string, error) {
	out := []string{d.AlteonPassword}
	err := filepath.WalkDir(filepath.Join(t.Dir(), "lbfed"), func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || filepath.Base(path) != "tls.key" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		block, _ := pem.Decode(data)
		if block == nil {
			return fmt.Errorf("%s: no PEM key", path)
		}
		// The key's base64 body, and its first line as a log line would wrap it.
		body := base64.StdEncoding.EncodeToString(block.Bytes)
		out = append(out, body, body[:64])
		return nil
	})
	return out, err
}

// DriverServerArgs returns the flags that make a driver named name (elb-driver and any driver
// served with the lbcf/driver server kit) serve as lbfed expects: HTTPS with a certificate for
// 127.0.0.1 from DriverCA, accepting only lbfed-controller's client certificate.
func (d *Deployment) DriverServerArgs(name string) ([]string, error) {
	dir := filepath.Join(d.certs, name)
	if err := d.DriverCA.WriteIssued(dir, name, []string{"127.0.0.1", "localhost"}, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	return []string{"--tls-cert-file=" + filepath.Join(dir, "tls.crt"), "--tls-key-file=" + filepath.Join(dir, "tls.key"),
		"--client-ca-file=" + d.DriverClientCA, "--client-allowed-names=" + d.ClientName}, nil
}

// ServeDriver serves h, a driver's webhooks, from this process as DriverServerArgs configures a
// driver binary. It returns the driver's URL and a function that stops it (connections still
// open, e.g. hanging calls, are closed).
func (d *Deployment) ServeDriver(name string, h http.Handler) (url string, stop func(), err error) {
	args, err := d.DriverServerArgs(name)
	if err != nil {
		return "", nil, err
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var f driver.ServerFlags
	f.Register(fs, "127.0.0.1:0")
	if err := fs.Parse(args); err != nil {
		return "", nil, err
	}
	srv, err := driver.NewServer(h, f.Options(nil, logr.Discard()))
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln, time.Second); close(done) }()
	return "https://" + ln.Addr().String(), sync.OnceFunc(func() { cancel(); <-done }), nil
}

// installLbfed renders the lbfed chart for local processes, applies it to the Karmada API
// server and runs its workloads.
func (d *Deployment) installLbfed(ctx context.Context, t *localup.Topology, opts Options) error {
	helm, err := manifests.HelmPath(opts.RepoRoot)
	if err != nil {
		return err
	}
	if _, err := os.Stat(helm); err != nil {
		return fmt.Errorf("helm not built (%v): run `make helm-lint`", err)
	}
	members := t.Members()
	a, err := loopbackPorts(4 + 3*len(members))
	if err != nil {
		return err
	}
	interp, fedMetrics, fedProbe, adm := a[0], a[1], a[2], a[len(a)-1]
	d.FederationMetrics = "http://" + fedMetrics + "/metrics"
	set := []string{
		"karmada.apply=manifests",
		"controller.interpreter.url=https://" + interp + "/interpret",
		"controller.admission.url=https://" + adm,
		"controller.interpreter.extraIPs={127.0.0.1}",
		"member.webhook.extraIPs={127.0.0.1}",
		"controller.federation.gracePeriod=" + opts.Grace.String(),
		// The drivers' serving CA, as an operator copies it next to lbfed-controller.
		"controller.federation.driverTLS.caSecret=lbfed-driver-ca",
	}
	if opts.BFEAddress != "" {
		set = append(set, "controller.multiClusterIngress.enabled=true",
			"controller.multiClusterIngress.bfeAddress="+opts.BFEAddress,
			"controller.multiClusterIngress.ingressClass="+MCIIngressClass,
			"controller.multiClusterIngress.driver="+MCIDriver)
	}
	set = append(set, opts.Set...)
	for i, m := range members {
		set = append(set, fmt.Sprintf("member.webhook.clusterURLs.%s=https://%s", m.Name(), a[3+3*i]))
	}
	objs, err := manifests.Render(ctx, manifests.Options{Helm: helm, Chart: filepath.Join(opts.RepoRoot, "charts", "lbfed"),
		Release: "lbfed", Namespace: ControlPlaneNamespace, Set: set})
	if err != nil {
		return err
	}
	split, err := manifests.SplitLBFed(objs)
	if err != nil {
		return err
	}
	kc, err := client.New(t.KarmadaConfig(), client.Options{Scheme: Scheme})
	if err != nil {
		return err
	}
	if err := kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ControlPlaneNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// As the chart's apply Job: CRDs (until Established), the other objects, then — once the
	// interpreter answers — its registration and lbfed-controller's admission.
	var riwc *unstructured.Unstructured
	var registrations []*unstructured.Unstructured
	for _, o := range split.Karmada {
		switch {
		case o.GetKind() == "ResourceInterpreterWebhookConfiguration":
			riwc = o
		case o.GetLabels()["app.kubernetes.io/component"] == "admission":
			registrations = append(registrations, o)
		case o.GetKind() == "CustomResourceDefinition":
			if err := ServerSideApply(ctx, kc, o); err != nil {
				return err
			}
			if err := waitEstablished(ctx, kc, o.GetName()); err != nil {
				return err
			}
		default:
			if err := ServerSideApply(ctx, kc, o); err != nil {
				return err
			}
		}
	}
	if riwc == nil {
		return errors.New("the lbfed chart rendered no ResourceInterpreterWebhookConfiguration")
	}

	// lbfed-controller: the host Deployment's arguments, its certificate Secret, and only the
	// chart's RBAC in the Karmada API server.
	run := filepath.Join(t.Dir(), "lbfed")
	certDir := filepath.Join(run, "interpreter-tls")
	if err := manifests.WriteSecretFiles(manifests.Find(split.Host, "Secret", ControlPlaneNamespace, "lbfed-interpreter-tls"), certDir); err != nil {
		return err
	}
	// Mutual TLS towards drivers: the chart's client certificate, and a CA for the drivers'
	// serving certificates (the Secret named in driverTLS.caSecret).
	clientDir := filepath.Join(run, "driver-client")
	if err := manifests.WriteSecretFiles(manifests.Find(split.Host, "Secret", ControlPlaneNamespace, "lbfed-driver-client-tls"), clientDir); err != nil {
		return err
	}
	d.certs = filepath.Join(run, "drivers")
	d.DriverClientCA, d.ClientName = filepath.Join(clientDir, "ca.crt"), "lbfed-controller"
	if d.DriverCA, err = servingcert.NewCA("lbfed-e2e-driver-ca", 0); err != nil {
		return err
	}
	driverCA := filepath.Join(d.certs, "ca.crt")
	if err := os.MkdirAll(d.certs, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(driverCA, d.DriverCA.PEM, 0o600); err != nil {
		return err
	}
	args, err := manifests.ContainerArgs(manifests.Find(split.Host, "Deployment", ControlPlaneNamespace, "lbfed-controller"), "lbfed-controller")
	if err != nil {
		return err
	}
	if err := checkDriverTLSArgs(args); err != nil {
		return err
	}
	if err := WaitRBAC(ctx, kc, split.Karmada, ControlPlaneNamespace, "lbfed-controller"); err != nil {
		return fmt.Errorf("karmada-apiserver: %w", err)
	}
	kubeconfig, err := ImpersonatingKubeconfig(t.Karmada(), ControlPlaneNamespace, "lbfed-controller", run)
	if err != nil {
		return err
	}
	args = manifests.SetFlags(args, map[string]string{
		"kubeconfig": kubeconfig, "interpreter-cert-dir": certDir, "interpreter-bind-address": interp,
		"admission-cert-dir": certDir, "admission-bind-address": adm,
		"federation-metrics-bind-address": fedMetrics, "federation-health-probe-bind-address": fedProbe,
		"federation-driver-client-cert": filepath.Join(clientDir, "tls.crt"), "federation-driver-client-key": filepath.Join(clientDir, "tls.key"),
		"admission-driver-client-cert": filepath.Join(clientDir, "tls.crt"), "admission-driver-client-key": filepath.Join(clientDir, "tls.key"),
		"federation-driver-ca-file": driverCA, "admission-driver-ca-file": driverCA,
		// Quick retries for demos and tests.
		"federation-min-retry-delay": "1s", "federation-retry-delay-step": "1s", "federation-max-retry-delay": "10s",
	})
	replicas := max(opts.ControllerReplicas, 1)
	type replica struct{ interp, adm, metrics, probe string }
	reps := []replica{{interp, adm, fedMetrics, fedProbe}}
	if replicas > 1 {
		// Each replica listens on ports of its own; Karmada's URLs reach the proxy, as a Service.
		more, err := loopbackPorts(4*replicas - 2)
		if err != nil {
			return err
		}
		reps[0].interp, reps[0].adm = more[0], more[1]
		for i := 1; i < replicas; i++ {
			r := more[2+4*(i-1):]
			reps = append(reps, replica{r[0], r[1], r[2], r[3]})
		}
		var interps, adms []string
		for _, r := range reps {
			interps, adms = append(interps, r.interp), append(adms, r.adm)
		}
		for _, svc := range []struct {
			addr     string
			backends []string
		}{{interp, interps}, {adm, adms}} {
			if err := serveTCPService(svc.addr, svc.backends); err != nil {
				return err
			}
		}
	}
	for i, name := range ControllerNames(replicas) {
		r := reps[i]
		rargs := manifests.SetFlags(args, map[string]string{"interpreter-bind-address": r.interp, "admission-bind-address": r.adm,
			"federation-metrics-bind-address": r.metrics, "federation-health-probe-bind-address": r.probe})
		d.ControllerMetrics = append(d.ControllerMetrics, "http://"+r.metrics+"/metrics")
		if err := d.start(t, localup.ProcessSpec{Name: name, Path: filepath.Join(opts.Bin, "lbfed-controller"), Args: rargs}); err != nil {
			return err
		}
		if err := waitHTTP(ctx, "https://"+r.interp+"/readyz", t.PKI().CAPEM(), caOf(certDir)); err != nil {
			return fmt.Errorf("%s: interpreter: %w", name, err)
		}
		if err := waitHTTP(ctx, "http://"+r.probe+"/readyz", nil); err != nil {
			return fmt.Errorf("%s: federation: %w", name, err)
		}
		if err := waitTLS(ctx, r.adm, caOf(certDir)); err != nil {
			return fmt.Errorf("%s: admission: %w", name, err)
		}
	}
	for _, o := range append(registrations, riwc) {
		if err := ServerSideApply(ctx, kc, o); err != nil {
			return err
		}
	}

	// Every member: what the propagation policy put there, run as lbcf-controller --mode=member.
	// A Pull member is no different here: its karmada-agent applied the same objects, and its
	// lbcf-controller runs in the host network namespace, where the agent also calls the
	// interpreter URL above.
	for i, m := range members {
		hook, metrics, probe := a[3+3*i], a[4+3*i], a[5+3*i]
		// A member in its own network namespace (localup.ClusterOptions.NetNS) runs its
		// lbcf-controller inside, as its pod would be: it keeps its API server, and the API
		// server its webhook (on the namespace's own 127.0.0.1), when Karmada is cut off.
		// Metrics and probes listen on the member's address, reachable from here too.
		metrics, probe = onAddress(metrics, m.Address()), onAddress(probe, m.Address())
		mc, err := client.New(m.RESTConfig(), client.Options{Scheme: Scheme})
		if err != nil {
			return err
		}
		dep, secret := &unstructured.Unstructured{}, &unstructured.Unstructured{}
		dep.SetAPIVersion("apps/v1")
		dep.SetKind("Deployment")
		secret.SetAPIVersion("v1")
		secret.SetKind("Secret")
		if err := poll(ctx, 4*time.Minute, func() error {
			for _, crd := range []string{"backendgroups", "backendrecords", "loadbalancerdrivers", "loadbalancers"} {
				if err := mc.Get(ctx, client.ObjectKey{Name: crd + ".lbcf.tkestack.io"}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
					return err
				}
			}
			if err := mc.Get(ctx, client.ObjectKey{Namespace: MemberNamespace, Name: "lbcf-controller"}, dep); err != nil {
				return err
			}
			return mc.Get(ctx, client.ObjectKey{Namespace: MemberNamespace, Name: "lbcf-controller-webhook-tls"}, secret)
		}); err != nil {
			return fmt.Errorf("member %s did not receive lbfed's member components: %w", m.Name(), err)
		}
		dir := filepath.Join(run, m.Name()+"-tls")
		if err := manifests.WriteSecretFiles(secret, dir); err != nil {
			return err
		}
		args, err := manifests.ContainerArgs(dep, "lbcf-controller")
		if err != nil {
			return err
		}
		if err := WaitRBAC(ctx, mc, split.Karmada, MemberNamespace, "lbcf-controller"); err != nil {
			return fmt.Errorf("member %s: %w", m.Name(), err)
		}
		kubeconfig, err := ImpersonatingKubeconfig(m, MemberNamespace, "lbcf-controller", run)
		if err != nil {
			return err
		}
		_, port, _ := cutPort(hook)
		args = manifests.SetFlags(args, map[string]string{
			"kubeconfig": kubeconfig, "cert-dir": dir, "webhook-host": "127.0.0.1", "webhook-port": port,
			"metrics-bind-address": metrics, "health-probe-bind-address": probe,
		})
		if err := d.start(t, localup.ProcessSpec{Name: "lbcf-controller-" + m.Name(), Path: filepath.Join(opts.Bin, "lbcf-controller"), Args: args, NetNS: m.NetNS()}); err != nil {
			return err
		}
		if err := waitHTTP(ctx, "http://"+probe+"/readyz", nil); err != nil {
			return fmt.Errorf("lbcf-controller in %s: %w", m.Name(), err)
		}
		if err := poll(ctx, 4*time.Minute, func() error { return lbcfEnabled(ctx, kc, m.Name()) }); err != nil {
			return fmt.Errorf("member %s: %w", m.Name(), err)
		}
	}
	return nil
}

// lbcfEnabled reports whether Karmada's Cluster object of member lists the LBCF kinds in its
// API enablements. Until it does, the scheduler fails a binding of those kinds ("did not have
// the API resource") and does not try again until the cluster changes for another reason: CI
// once saw the first test's BackendGroup wait 3 minutes for that after the member received its
// CRDs.
func lbcfEnabled(ctx context.Context, kc client.Client, member string) error {
	cl := &unstructured.Unstructured{}
	cl.SetAPIVersion("cluster.karmada.io/v1alpha1")
	cl.SetKind("Cluster")
	if err := kc.Get(ctx, client.ObjectKey{Name: member}, cl); err != nil {
		return err
	}
	want := map[string]bool{lbcfv1beta1.KindBackendGroup: true, lbcfv1beta1.KindBackendRecord: true,
		lbcfv1beta1.KindLoadBalancer: true, lbcfv1beta1.KindLoadBalancerDriver: true}
	enablements, _, _ := unstructured.NestedSlice(cl.Object, "status", "apiEnablements")
	for _, e := range enablements {
		e, _ := e.(map[string]any)
		if e["groupVersion"] != lbcfv1beta1.SchemeGroupVersion.String() {
			continue
		}
		resources, _, _ := unstructured.NestedSlice(e, "resources")
		for _, r := range resources {
			if r, ok := r.(map[string]any); ok {
				kind, _ := r["kind"].(string)
				delete(want, kind)
			}
		}
	}
	if len(want) > 0 {
		return fmt.Errorf("cluster %s does not list the API resources %v of %s yet", member, slices.Sorted(maps.Keys(want)), lbcfv1beta1.SchemeGroupVersion)
	}
	return nil
}

// checkDriverTLSArgs checks that the chart wires lbfed-controller's driver calls for mutual TLS:
// the paths are replaced by local ones, the flags must be there.
func checkDriverTLSArgs(args []string) error {
	want := map[string]bool{}
	for _, c := range []string{"federation", "admission"} {
		for _, f := range []string{"driver-client-cert", "driver-client-key", "driver-ca-file"} {
			want["--"+c+"-"+f] = true
		}
	}
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		delete(want, name)
	}
	if len(want) > 0 {
		return fmt.Errorf("the lbfed chart does not wire lbfed-controller's driver TLS: missing %v", want)
	}
	return nil
}

// ImpersonatingKubeconfig writes, into dir, a kubeconfig for c acting as a ServiceAccount, so
// a process runs with exactly the permissions the chart grants.
func ImpersonatingKubeconfig(c *localup.Cluster, namespace, sa, dir string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath())
	if err != nil {
		return "", err
	}
	user := cfg.Contexts[cfg.CurrentContext].AuthInfo
	cfg.AuthInfos[user].Impersonate = "system:serviceaccount:" + namespace + ":" + sa
	cfg.AuthInfos[user].ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, c.Name()+"-"+sa+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// ServerSideApply applies o as the chart's installer does.
func ServerSideApply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	u := o.DeepCopy()
	js, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, u, client.RawPatch(types.ApplyPatchType, js), client.ForceOwnership,
		client.FieldOwner("lbfed-chart"), client.FieldValidation("Strict")); err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	return poll(ctx, 2*time.Minute, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("CRD %s not Established", name)
	})
}

func poll(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// onAddress moves host:port to ip:port.
func onAddress(hostPort, ip string) string {
	_, port, _ := cutPort(hostPort)
	return net.JoinHostPort(ip, port)
}

func cutPort(addr string) (string, string, bool) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:], true
		}
	}
	return addr, "", false
}

func caOf(dir string) []byte {
	b, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	return b
}

// waitHTTP polls url until it answers 200 (2 minutes at most), trusting the given CAs.
func waitHTTP(ctx context.Context, url string, cas ...[]byte) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AppendCertsFromPEM(ca)
	}
	hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	return poll(ctx, 2*time.Minute, func() error {
		rsp, err := hc.Get(url)
		if err != nil {
			return err
		}
		rsp.Body.Close()
		if rsp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d", url, rsp.StatusCode)
		}
		return nil
	})
}

// waitTLS polls addr until it completes a TLS handshake with a certificate of ca (2 minutes at
// most): a webhook server that has no health endpoint is serving.
func waitTLS(ctx context.Context, addr string, ca []byte) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	d := &tls.Dialer{Config: &tls.Config{RootCAs: pool}}
	return poll(ctx, 2*time.Minute, func() error {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// Apply creates obj, or updates it when it exists.
func Apply(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(obj.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur)
	switch {
	case err == nil:
		obj.SetResourceVersion(cur.GetResourceVersion())
		return c.Update(ctx, obj)
	case apierrors.IsNotFound(err):
		return c.Create(ctx, obj)
	}
	return err
}
