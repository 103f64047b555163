package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbfed/lbfed/elb/bfe"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// bfeFlags registers the BFE backend's flags. The driver must run on the BFE host: BFE accepts
// reloads only from loopback, and reads the files the driver writes.
func bfeFlags(fs *flag.FlagSet) newDriver {
	var (
		monitor  = fs.String("bfe-monitor-url", "http://127.0.0.1:8421", "BFE monitor port URL (reloads are accepted from loopback only)")
		dataDir  = fs.String("bfe-data-dir", "", "absolute directory for versioned configuration; bfe.conf must name its files through <dir>/current (required)")
		product  = fs.String("bfe-product", "lbfed", "BFE product holding every host and route")
		keep     = fs.Int("bfe-keep-versions", 5, "version directories kept besides the current one")
		linger   = fs.Duration("bfe-commit-linger", 0, "wait this long before each commit to coalesce more calls")
		timeout  = fs.Duration("bfe-commit-timeout", 30*time.Second, "bound of one write+reload cycle")
		noVerify = fs.Bool("bfe-skip-verify", false, "do not check /monitor/*_version after each reload")
		noResync = fs.Bool("bfe-skip-resync", false, "do not reload the current version in full on the first commit after start")
	)
	return func(_ context.Context, reg prometheus.Registerer, log logr.Logger) (driver.Driver, func(), error) {
		if *dataDir == "" {
			return nil, nil, fmt.Errorf("--bfe-data-dir is required")
		}
		store, err := bfe.OpenStore(*dataDir)
		if err != nil {
			return nil, nil, err
		}
		metrics := bfe.NewMetrics(reg)
		fe, err := bfe.NewFrontend(bfe.FrontendOptions{
			Store:             store,
			Reloader:          &bfe.Monitor{BaseURL: *monitor},
			Generate:          bfe.GenerateOptions{Product: *product},
			KeepVersions:      *keep,
			SkipVerify:        *noVerify,
			SkipResyncOnStart: *noResync,
			Metrics:           metrics,
			Log:               log,
		})
		if err != nil {
			return nil, nil, err
		}
		log.Info("BFE configuration store opened", "dir", store.Dir(), "version", fe.Version(), "model", fe.Model().String())
		d := bfe.NewDriver(bfe.DriverOptions{Frontend: fe, Metrics: metrics, Log: log, Linger: *linger, CommitTimeout: *timeout})
		return d, func() {}, nil
	}
}
