package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// parse builds the components from command-line arguments, as main does, with every component
// but the interpreter disabled (they need a Karmada API server).
func parse(t *testing.T, args ...string) []component {
	t.Helper()
	fs := flag.NewFlagSet("lbfed-controller", flag.ContinueOnError)
	comps := components()
	var others []string
	for _, c := range comps {
		c.addFlags(fs)
		if c.name() != "interpreter" {
			others = append(others, "--"+c.name()+"-enabled=false")
		}
	}
	if err := fs.Parse(append(others, args...)); err != nil {
		t.Fatal(err)
	}
	return comps
}

func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestRunServesInterpreterWithSelfSignedCertificate(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	addr := freeAddress(t)
	configPath := filepath.Join(dir, "riwc.yaml")
	comps := parse(t,
		"--interpreter-bind-address="+addr,
		"--interpreter-self-signed",
		"--interpreter-cert-dir="+filepath.Join(dir, "certs"),
		"--interpreter-write-config="+configPath,
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, logr.Discard(), comps, true) }()
	defer func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	}()

	// The generated configuration points at the server and carries the CA that signed it.
	var cfg configv1alpha1.ResourceInterpreterWebhookConfiguration
	g.Eventually(func() error {
		data, err := os.ReadFile(configPath)
		if err != nil {
			return err
		}
		return yaml.UnmarshalStrict(data, &cfg)
	}).WithTimeout(10 * time.Second).Should(Succeed())
	hook := cfg.Webhooks[0]
	g.Expect(*hook.ClientConfig.URL).To(Equal("https://" + addr + "/interpret"))
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(hook.ClientConfig.CABundle)).To(BeTrue())
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	g.Eventually(func() (int, error) {
		resp, err := client.Get("https://" + addr + "/readyz")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}).WithTimeout(10 * time.Second).Should(Equal(http.StatusOK))

	resp, err := client.Post(*hook.ClientConfig.URL, "application/json", strings.NewReader(
		`{"request":{"uid":"u1","kind":{"group":"lbcf.tkestack.io","version":"v1beta1","kind":"BackendGroup"},"operation":"InterpretReplica","object":{}}}`))
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
}

func TestRunRejectsBadInterpreterConfiguration(t *testing.T) {
	dir := t.TempDir()
	for name, args := range map[string][]string{
		"no certificate":         {"--interpreter-bind-address=127.0.0.1:0"},
		"missing certificate":    {"--interpreter-bind-address=127.0.0.1:0", "--interpreter-cert-dir=" + dir},
		"small body limit":       {"--interpreter-bind-address=127.0.0.1:0", "--interpreter-self-signed", "--interpreter-max-request-bytes=1048576"},
		"bad service":            {"--interpreter-bind-address=127.0.0.1:0", "--interpreter-self-signed", "--interpreter-write-config=" + filepath.Join(dir, "x"), "--interpreter-webhook-service=lbfed"},
		"timeout out of range":   {"--interpreter-bind-address=127.0.0.1:0", "--interpreter-self-signed", "--interpreter-write-config=" + filepath.Join(dir, "x"), "--interpreter-timeout-seconds=60"},
		"nothing enabled":        {"--interpreter-enabled=false"},
		"self-signed, odd names": {"--interpreter-self-signed", "--interpreter-cert-dir=" + dir, "--interpreter-cert-name=a.pem"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := run(ctx, logr.Discard(), parse(t, args...), false)
			if err == nil {
				t.Fatal("run succeeded")
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatal("run served instead of failing")
			}
		})
	}
}

func TestParseService(t *testing.T) {
	g := NewWithT(t)
	ref, err := parseService("lbfed-system/lbfed-interpreter:9443")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ref.Namespace).To(Equal("lbfed-system"))
	g.Expect(ref.Name).To(Equal("lbfed-interpreter"))
	g.Expect(*ref.Port).To(BeEquivalentTo(9443))
	g.Expect(*ref.Path).To(Equal("/interpret"))
	ref, err = parseService("ns/name")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ref.Port).To(BeNil())
	for _, bad := range []string{"", "name", "/name", "ns/", "ns/name:0", "ns/name:x"} {
		_, err := parseService(bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
}

// failing fails at start; runAll must stop the others and report it.
type failing struct{}

func (failing) Start(context.Context) error { return errors.New("boom") }

type blocking struct{ stopped chan struct{} }

func (b blocking) Start(ctx context.Context) error {
	<-ctx.Done()
	close(b.stopped)
	return nil
}

func TestRunAllStopsEverythingOnFirstFailure(t *testing.T) {
	b := blocking{stopped: make(chan struct{})}
	err := runAll(context.Background(), []runnable{b, failing{}})
	if err == nil || err.Error() != "boom" {
		t.Fatalf("runAll = %v, want boom", err)
	}
	select {
	case <-b.stopped:
	default:
		t.Fatal("the other runnable was not stopped")
	}
}

// TestMCIRequiresBFEAddress: the MultiClusterIngress front door refuses to start without the
// address it publishes in status.
func TestMCIRequiresBFEAddress(t *testing.T) {
	g := NewWithT(t)
	comps := parse(t, "--interpreter-enabled=false", "--mci-enabled")
	err := run(context.Background(), logr.Discard(), comps, false)
	g.Expect(err).To(MatchError(ContainSubstring("--mci-bfe-address is required")))
}
