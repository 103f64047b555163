package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/servingcert"
)

// TestDriverAcceptsOnlyTheControllersCertificate starts elb-driver --backend=radware as its main
// does, with --client-ca-file, against a simulated pair: calls without a certificate and with
// another CA's certificate are refused (401, 403) and leave the device untouched; the
// controller's certificate programs it.
func TestDriverAcceptsOnlyTheControllersCertificate(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	fast := alteonsim.Options{Password: "s3cret", ApplyDuration: time.Millisecond, SaveDuration: time.Millisecond, SyncDuration: time.Millisecond}
	sim := alteonsim.NewPair(fast, fast)
	ua, ub, err := sim.Start()
	g.Expect(err).NotTo(HaveOccurred())
	defer sim.Close()
	pw := filepath.Join(dir, "password")
	g.Expect(os.WriteFile(pw, []byte("s3cret\n"), 0o600)).To(Succeed())

	// The driver's serving certificate, the controllers' client CA with the controller's
	// certificate, and a stranger's CA.
	servingCA, err := servingcert.NewCA("driver-ca", 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(servingCA.WriteIssued(filepath.Join(dir, "serving"), "elb-driver", []string{"127.0.0.1"}, x509.ExtKeyUsageServerAuth)).To(Succeed())
	clientCA, err := servingcert.NewCA("lbfed-driver-client-ca", 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(clientCA.WriteIssued(filepath.Join(dir, "controller"), "lbfed-controller", nil, x509.ExtKeyUsageClientAuth)).To(Succeed())
	strangerCA, err := servingcert.NewCA("lbfed-driver-client-ca", 0) // same name, other key
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strangerCA.WriteIssued(filepath.Join(dir, "stranger"), "lbfed-controller", nil, x509.ExtKeyUsageClientAuth)).To(Succeed())

	fs := flag.NewFlagSet("elb-driver", flag.ContinueOnError)
	var serve driver.ServerFlags
	serve.Register(fs, ":8443")
	radwareOpts = radwareFlags{}
	radwareOpts.register(fs)
	g.Expect(fs.Parse([]string{"--listen=127.0.0.1:0",
		"--tls-cert-file=" + filepath.Join(dir, "serving", "tls.crt"), "--tls-key-file=" + filepath.Join(dir, "serving", "tls.key"),
		"--client-ca-file=" + filepath.Join(dir, "controller", "ca.crt"), "--client-allowed-names=lbfed-controller",
		"--alteon-urls=" + ua + "," + ub, "--alteon-password-file=" + pw, "--alteon-poll-interval=2ms", "--radware-commit-window=1ms",
	})).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	addrc, done := make(chan net.Addr, 1), make(chan error, 1)
	go func() { done <- run(ctx, "radware", "", "", serve, func(a net.Addr) { addrc <- a }) }()
	defer func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	}()
	var url string
	select {
	case a := <-addrc:
		url = "https://" + a.String()
	case err := <-done:
		t.Fatalf("elb-driver did not start: %v", err)
	}

	call := func(certDir string) (*driver.CreateLoadBalancerResponse, error) {
		files := driver.TLSFiles{CAFile: filepath.Join(dir, "serving", "ca.crt")}
		if certDir != "" {
			files.CertFile, files.KeyFile = filepath.Join(dir, certDir, "tls.crt"), filepath.Join(dir, certDir, "tls.key")
		}
		rt, err := driver.NewFilesTransport(files)
		g.Expect(err).NotTo(HaveOccurred())
		c := driver.NewClient(driver.ClientOptions{Transport: rt})
		return c.CreateLoadBalancer(ctx, driver.Endpoint{Name: "lbfed/radware", URL: url},
			&driver.CreateLoadBalancerRequest{LBSpec: map[string]string{"vip": "127.0.0.61", "port": "80"}, Attributes: map[string]string{}})
	}
	for certDir, code := range map[string]int{"": 401, "stranger": 403} {
		_, err := call(certDir)
		var ce *driver.CallError
		g.Expect(errors.As(err, &ce)).To(BeTrue(), "%v", err)
		g.Expect(ce.StatusCode).To(Equal(code), "%v", err)
	}
	g.Expect(sim.A.Applies()+sim.B.Applies()).To(BeZero(), "refused calls change nothing on the device")

	g.Eventually(func() (string, error) {
		rsp, err := call("controller")
		if err != nil {
			return "", err
		}
		return rsp.Status, nil
	}).WithTimeout(30 * time.Second).Should(Equal(driver.StatusSucc))
	g.Expect(sim.A.Applies()).To(BeNumerically(">", 0), "the controller's call programmed the master")
}
