package localup

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"time"
)

// pollInterval is short because every wait here is on a local process that becomes ready within
// seconds; a long interval would dominate start-up time.
const pollInterval = 100 * time.Millisecond

// waitFor polls check until it returns nil, the deadline passes, or one of the watched processes
// exits (then the error carries that process's log tail instead of a bare timeout).
func waitFor(ctx context.Context, timeout time.Duration, what string, watch []*Process, check func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var last error
	for {
		for _, p := range watch {
			if exited, _ := p.Exited(); exited {
				return fmt.Errorf("waiting for %s: %w", what, p.exitError())
			}
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), last)
		case <-ticker.C:
		}
	}
}

// httpClient returns a client trusting the run's CA and presenting the admin certificate.
func (p *PKI) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.ca.PEM) {
		return nil, fmt.Errorf("parse CA of %s", p.Dir)
	}
	cert, err := tls.X509KeyPair(p.adminCertPEM, p.adminKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("load admin certificate: %w", err)
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
			// Health checks run every 100 ms; keeping connections avoids a TLS handshake each time.
			MaxIdleConnsPerHost: 2,
		},
	}, nil
}

// httpOK returns a check that succeeds when url answers 2xx.
func httpOK(client *http.Client, url string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
		}
		return nil
	}
}
