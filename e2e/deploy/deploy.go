// Package deploy runs lbfed on a localup topology as local processes, the way the lbfed Helm
// chart runs it in clusters: lbfed-controller (Karmada resource interpreter + federation) next to
// the Karmada API server, lbcf-controller --mode=member in every member, and, as the shared front
// end, a simulated Radware Alteon HA pair with elb-driver. It is used by `make up` (the demo) and
// by the end-to-end suites.
package deploy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/e2e/localup"
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
	// Bin is the folder holding Binaries.
	Bin string
	// Grace is the federation's NotReady grace period (default 20s: short, for demos and tests).
	Grace time.Duration
	// DrainPeriod is how long the Radware driver drains a removed backend (default 1s).
	DrainPeriod time.Duration
}

// Deployment is a running lbfed.
type Deployment struct {
	// DriverURL is elb-driver's webhook URL (a LoadBalancerDriver's spec.url).
	DriverURL string
	// AlteonURLs are the REST URLs of the simulated units; AlteonControl is the simulator's
	// control API (failover, faults).
	AlteonURLs    []string
	AlteonControl string
	// FederationMetrics is lbfed-controller's federation /metrics URL.
	FederationMetrics string
}

// Start starts lbfed's processes into the topology (they are stopped with it) and registers its
// interpreter with Karmada and its admission webhooks with each member.
func Start(ctx context.Context, t *localup.Topology, opts Options) (*Deployment, error) {
	if opts.Grace <= 0 {
		opts.Grace = 20 * time.Second
	}
	if opts.DrainPeriod <= 0 {
		opts.DrainPeriod = time.Second
	}
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(opts.Bin, b)); err != nil {
			return nil, fmt.Errorf("lbfed binary %s: %w (run deploy.Build or make build)", b, err)
		}
	}
	dir := filepath.Join(t.Dir(), "lbfed")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	certs, err := certDir(t.PKI(), filepath.Join(dir, "certs"))
	if err != nil {
		return nil, err
	}
	members := t.Members()
	ports, err := localup.FreePorts(9 + 3*len(members))
	if err != nil {
		return nil, err
	}
	next := func() string { p := ports[0]; ports = ports[1:]; return "127.0.0.1:" + strconv.Itoa(p) }
	d := &Deployment{}
	bin := func(name string) string { return filepath.Join(opts.Bin, name) }

	// The shared front end: a simulated Alteon HA pair and the Radware driver.
	unitA, unitB, control := next(), next(), next()
	d.AlteonURLs, d.AlteonControl = []string{"http://" + unitA, "http://" + unitB}, "http://"+control
	if _, err := t.StartProcess(localup.ProcessSpec{Name: "alteon-sim", Path: bin("alteon-sim"), Tier: localup.TierClient, Args: []string{
		"--listen-a=" + unitA, "--listen-b=" + unitB, "--control=" + control, "--apply-duration=50ms", "--save-duration=10ms", "--sync-duration=20ms",
	}}); err != nil {
		return nil, err
	}
	driverAddr, driverMetrics := next(), next()
	d.DriverURL = "http://" + driverAddr
	if _, err := t.StartProcess(localup.ProcessSpec{Name: "elb-driver", Path: bin("elb-driver"), Tier: localup.TierClient,
		Env: []string{"ALTEON_PASSWORD=admin"},
		Args: []string{"--backend=radware", "--alteon-urls=" + d.AlteonURLs[0] + "," + d.AlteonURLs[1], "--listen=" + driverAddr,
			"--metrics-listen=" + driverMetrics, "--radware-drain-period=" + opts.DrainPeriod.String()}}); err != nil {
		return nil, err
	}

	// The control plane: interpreter and federation against the Karmada API server.
	interp, fedMetrics, fedProbe := next(), next(), next()
	d.FederationMetrics = "http://" + fedMetrics + "/metrics"
	interpConfig := filepath.Join(dir, "interpreter-webhook.yaml")
	if _, err := t.StartProcess(localup.ProcessSpec{Name: "lbfed-controller", Path: bin("lbfed-controller"), Tier: localup.TierClient, Args: []string{
		"--kubeconfig=" + t.Karmada().KubeconfigPath(),
		"--interpreter-bind-address=" + interp, "--interpreter-cert-dir=" + certs, "--interpreter-write-config=" + interpConfig,
		"--federation-leader-elect=false", "--federation-metrics-bind-address=" + fedMetrics, "--federation-health-probe-bind-address=" + fedProbe,
		"--federation-grace-period=" + opts.Grace.String(), "--federation-min-retry-delay=1s", "--federation-retry-delay-step=1s", "--federation-max-retry-delay=10s",
	}}); err != nil {
		return nil, err
	}

	// Every member: lbcf-controller in member mode, with its admission webhooks.
	for _, m := range members {
		hook, metrics, probe := next(), next(), next()
		_, port, _ := splitPort(hook)
		if _, err := t.StartProcess(localup.ProcessSpec{Name: "lbcf-controller-" + m.Name(), Path: bin("lbcf-controller"), Tier: localup.TierClient, Args: []string{
			"--kubeconfig=" + m.KubeconfigPath(), "--mode=member", "--leader-elect=false",
			"--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + probe,
			"--webhook-host=127.0.0.1", "--webhook-port=" + port, "--cert-dir=" + certs, "--webhook-config-url=https://" + hook,
		}}); err != nil {
			return nil, err
		}
		if err := waitHTTP(ctx, "http://"+probe+"/readyz", nil); err != nil {
			return nil, fmt.Errorf("lbcf-controller in %s: %w", m.Name(), err)
		}
	}

	pool := t.PKI().CAPEM()
	if err := waitHTTP(ctx, "https://"+interp+"/readyz", pool); err != nil {
		return nil, fmt.Errorf("interpreter: %w", err)
	}
	if err := waitHTTP(ctx, "http://"+fedProbe+"/readyz", nil); err != nil {
		return nil, fmt.Errorf("federation: %w", err)
	}
	if err := waitHTTP(ctx, "http://"+driverMetrics+"/healthz", nil); err != nil {
		return nil, fmt.Errorf("elb-driver: %w", err)
	}
	kc, err := client.New(t.KarmadaConfig(), client.Options{})
	if err != nil {
		return nil, err
	}
	if err := ApplyFile(ctx, kc, interpConfig); err != nil {
		return nil, fmt.Errorf("register the interpreter with Karmada: %w", err)
	}
	return d, nil
}

// certDir puts the run's serving certificate, key and CA where lbfed's servers look for them.
func certDir(p *localup.PKI, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for from, to := range map[string]string{p.ServingCert: "tls.crt", p.ServingKey: "tls.key", p.CACert: "ca.crt"} {
		data, err := os.ReadFile(from)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, to), data, 0o600); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func splitPort(addr string) (string, string, error) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:], nil
		}
	}
	return "", "", errors.New("no port in " + addr)
}

// waitHTTP polls url until it answers 200 (2 minutes at most).
func waitHTTP(ctx context.Context, url string, caPEM []byte) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	if caPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	}
	deadline := time.Now().Add(2 * time.Minute)
	var last error
	for time.Now().Before(deadline) {
		rsp, err := hc.Get(url)
		if err == nil {
			rsp.Body.Close()
			if rsp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %d", rsp.StatusCode)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready: %w", url, last)
}

// ApplyFile creates or updates every object of a YAML file.
func ApplyFile(ctx context.Context, c client.Client, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := Apply(ctx, c, obj); err != nil {
			return err
		}
	}
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
	case client.IgnoreNotFound(err) == nil:
		return c.Create(ctx, obj)
	}
	return err
}
