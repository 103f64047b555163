package main

import (
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/go-logr/logr"

	"github.com/lbfed/lbfed/elb/bfe/fakebfe"
	"github.com/lbfed/lbfed/lbcf/driver/conformance"
)

// TestBFEBackend runs the BFE driver as the command would, against a fake BFE monitor, and checks
// it with the LBCF driver conformance suite and its metrics endpoint.
func TestBFEBackend(t *testing.T) {
	g := NewWithT(t)
	fake := fakebfe.New()
	defer fake.Close()
	fs := flag.NewFlagSet("elb-driver", flag.ContinueOnError)
	factory := bfeFlags(fs)
	g.Expect(fs.Parse([]string{"--bfe-data-dir=" + t.TempDir(), "--bfe-monitor-url=" + fake.URL})).To(Succeed())

	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, factory, "bfe", l, "", "") }()
	defer func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	}()
	base := "http://" + l.Addr().String()

	conformance.Run(t, conformance.Config{
		BaseURL:    base,
		LBSpec:     map[string]string{"host": "app.example.test", "path": "/api/*"},
		Parameters: map[string]string{"weight": "3", "lbfed.io/cluster": "member1", "lbfed.io/cluster-weight": "50"},
	})
	g.Expect(fake.Reloads()).NotTo(BeEmpty())
	g.Expect(fake.Unsafe()).To(BeEmpty())

	var metrics string
	g.Eventually(func() error {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		metrics = string(b)
		return err
	}, 5*time.Second).Should(Succeed())
	for _, name := range []string{"lbfed_bfe_reloads_total", "lbfed_bfe_config_version", "lbfed_bfe_commit_batch_size"} {
		g.Expect(metrics).To(ContainSubstring(name))
	}
	g.Expect(strings.Contains(metrics, `lbfed_bfe_reloads_total{group="gslb_data_conf"}`)).To(BeTrue())
}

func TestBFEBackendNeedsDataDir(t *testing.T) {
	g := NewWithT(t)
	fs := flag.NewFlagSet("elb-driver", flag.ContinueOnError)
	factory := bfeFlags(fs)
	g.Expect(fs.Parse(nil)).To(Succeed())
	_, _, err := factory(context.Background(), nil, logr.Discard())
	g.Expect(err).To(MatchError(ContainSubstring("--bfe-data-dir is required")))
}
