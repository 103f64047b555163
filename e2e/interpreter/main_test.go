//go:build e2e

// Package interpreter_test runs lbfed's resource interpreter end to end: the lbfed-controller
// binary (interpreter only, self-signed certificate, generated webhook configuration) registered
// with a real Karmada control plane and two member clusters started by testinfra/localup — m1 joined
// in Push mode, m2 in Pull mode, so that m2's objects are interpreted (InterpretStatus,
// InterpretHealth, Retain) by its karmada-agent and m1's by karmada-controller-manager; then the
// same suite once more with Karmada's Lua ResourceInterpreterCustomizations instead of the
// webhook. Member BackendGroup statuses are written directly, as lbcf-controller --mode=member
// writes them.
//
// Run with `go test -tags e2e ./e2e/interpreter/` (the topology binaries come from `make tools`;
// without them the tests are skipped unless LBFED_REQUIRE_INTEGRATION=1).
package interpreter_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lbfed/lbfed/lbcf/api/crd"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/binaries"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// interpreterURL is the base URL of the lbfed-controller started by startInterpreter, and
// interpreterCA the CA of its self-signed certificate.
var (
	interpreterURL     string
	interpreterCA      []byte
	interpreterProcess *localup.Process
)

func TestMain(m *testing.M) {
	crds, err := crd.CRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lbfed CRDs:", err)
		os.Exit(1)
	}
	testenv.MainTopology(m, localup.TopologyOptions{
		CRDs: crds,
		// m1 in Push mode, m2 in Pull mode: both callers of the interpreter.
		Members:     1,
		PullMembers: 1,
		AfterReady:  []func(context.Context, *localup.Topology) error{startInterpreter},
	})
}

// startInterpreter builds cmd/lbfed-controller, runs it with only the interpreter enabled and a
// self-signed certificate, and registers the webhook configuration it generates with Karmada.
func startInterpreter(ctx context.Context, t *localup.Topology) error {
	root, err := binaries.RepoRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(t.Dir(), "lbfed-controller")
	// go test puts its own GOROOT/bin first in PATH.
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/lbfed-controller")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build lbfed-controller: %v\n%s", err, out)
	}
	addr, err := freeAddress()
	if err != nil {
		return err
	}
	certDir := filepath.Join(t.Dir(), "interpreter-certs")
	configPath := filepath.Join(t.Dir(), "interpreter-webhook.yaml")
	p, err := t.StartProcess(localup.ProcessSpec{
		Name: "lbfed-controller",
		Path: bin,
		Args: []string{
			"--federation-enabled=false",
			"--interpreter-bind-address=" + addr,
			"--interpreter-self-signed",
			"--interpreter-self-signed-hosts=127.0.0.1",
			"--interpreter-cert-dir=" + certDir,
			"--interpreter-write-config=" + configPath,
			"-v=2",
		},
	})
	if err != nil {
		return err
	}
	interpreterURL, interpreterProcess = "https://"+addr, p
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := ready(certDir)
		if err == nil {
			break
		}
		if exited, _ := p.Exited(); exited {
			return fmt.Errorf("lbfed-controller exited: %s", p.LogTail(30))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lbfed-controller not ready: %w\n%s", err, p.LogTail(30))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}

	data, err := os.ReadFile(configPath)
	if err != nil {
		return fmt.Errorf("generated webhook configuration: %w", err)
	}
	cfg := &configv1alpha1.ResourceInterpreterWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return fmt.Errorf("generated webhook configuration: %w", err)
	}
	c, err := client.New(t.KarmadaConfig(), client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	// karmada-webhook validates the configuration on create.
	return c.Create(ctx, cfg)
}

// stopInterpreter stops lbfed-controller, so that nothing but Lua can interpret.
func stopInterpreter(t *testing.T) {
	t.Helper()
	if interpreterProcess == nil {
		t.Fatal("lbfed-controller was not started")
	}
	_ = syscall.Kill(interpreterProcess.PID(), syscall.SIGTERM)
	select {
	case <-interpreterProcess.Done():
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(interpreterProcess.PID(), syscall.SIGKILL)
		<-interpreterProcess.Done()
	}
}

// ready checks /readyz with the CA the interpreter wrote.
func ready(certDir string) error {
	ca, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
	if err != nil {
		return err
	}
	resp, err := caClient(ca).Get(interpreterURL + "/readyz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	interpreterCA = ca
	return nil
}

func caClient(ca []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func freeAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// interpreterMetrics returns the interpreter's /metrics page.
func interpreterMetrics() (string, error) {
	resp, err := caClient(interpreterCA).Get(interpreterURL + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return b.String(), err
}
