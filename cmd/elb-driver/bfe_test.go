package main

import (
	"context"
	"flag"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbfed/lbfed/elb/bfe/fakebfe"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/conformance"
)

// TestBFEBackend builds the BFE driver from command-line flags, as --backend=bfe does, serves it
// against a fake BFE monitor, and checks it with the LBCF driver conformance suite and its metrics.
func TestBFEBackend(t *testing.T) {
	g := NewWithT(t)
	fake := fakebfe.New()
	defer fake.Close()
	var f bfeFlags
	fs := flag.NewFlagSet("elb-driver", flag.ContinueOnError)
	f.register(fs)
	g.Expect(fs.Parse([]string{"--bfe-data-dir=" + t.TempDir(), "--bfe-monitor-url=" + fake.URL})).To(Succeed())
	reg := prometheus.NewRegistry()
	d, err := f.newDriver(context.Background(), logr.Discard(), reg)
	g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(driver.NewHandler(d, driver.HandlerOptions{}))
	defer srv.Close()

	conformance.Run(t, conformance.Config{
		BaseURL:    srv.URL,
		LBSpec:     map[string]string{"host": "app.example.test", "path": "/api/*"},
		Parameters: map[string]string{"weight": "3", "lbfed.io/cluster": "member1", "lbfed.io/cluster-weight": "50"},
	})
	g.Expect(fake.Reloads()).NotTo(BeEmpty())
	g.Expect(fake.Unsafe()).To(BeEmpty())

	mfs, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	g.Expect(names).To(HaveKey("lbfed_bfe_reloads_total"))
	g.Expect(names).To(HaveKey("lbfed_bfe_config_version"))
	g.Expect(names).To(HaveKey("lbfed_bfe_commit_batch_size"))
	g.Expect(backends).To(HaveKey("bfe"))
}

func TestBFEBackendNeedsDataDir(t *testing.T) {
	var f bfeFlags
	fs := flag.NewFlagSet("elb-driver", flag.ContinueOnError)
	f.register(fs)
	NewWithT(t).Expect(fs.Parse(nil)).To(Succeed())
	_, err := f.newDriver(context.Background(), logr.Discard(), prometheus.NewRegistry())
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("--bfe-data-dir is required")))
}
