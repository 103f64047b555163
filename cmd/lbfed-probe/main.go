// Command lbfed-probe checks that an installed lbfed answers, for `helm test` (charts/lbfed): it
// sends lbfed-controller's resource interpreter one request as Karmada does (InterpretHealth of a
// LoadBalancer, interpreter.Probe) and exits 0 only when the answer is successful. kubectl cannot
// stand in: its raw POST sends no Content-Type, which the interpreter refuses in its answer while
// still replying HTTP 200. It writes nothing and needs no Kubernetes API access.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/lbfed/lbfed/interpreter"
)

func main() {
	url := flag.String("interpreter-url", "", "https URL of the interpreter, as registered with Karmada (required)")
	caFile := flag.String("ca-file", "", "PEM CA bundle verifying the interpreter: the registration's caBundle (empty: the system roots)")
	timeout := flag.Duration("timeout", 30*time.Second, "longest wait for the answer")
	flag.Parse()
	if err := run(*url, *caFile, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "lbfed-probe:", err)
		os.Exit(1)
	}
}

func run(url, caFile string, timeout time.Duration) error {
	if url == "" {
		return errors.New("--interpreter-url is required")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return fmt.Errorf("read --ca-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--ca-file %s holds no PEM certificate", caFile)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	healthy, err := interpreter.Probe(ctx, &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}, url)
	if err != nil {
		return err
	}
	fmt.Printf("%s answered InterpretHealth of a LoadBalancer: successful (healthy: %t)\n", url, healthy)
	return nil
}
