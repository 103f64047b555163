package main

import (
	"context"
	"errors"
	"flag"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbfed/lbfed/elb/bfe"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// bfeFlags are the BFE backend's flags. The driver must run on the BFE host: BFE accepts reloads
// only from loopback, and reads the files the driver writes.
type bfeFlags struct {
	monitor  string
	dataDir  string
	product  string
	keep     int
	linger   time.Duration
	timeout  time.Duration
	noVerify bool
	noResync bool
}

var bfeOpts bfeFlags

func init() {
	backends["bfe"] = backend{
		register: bfeOpts.register,
		new:      bfeOpts.newDriver,
	}
}

func (f *bfeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.monitor, "bfe-monitor-url", "http://127.0.0.1:8421", "BFE monitor port URL (BFE accepts reloads from loopback only)")
	fs.StringVar(&f.dataDir, "bfe-data-dir", "", "absolute directory for versioned configuration; bfe.conf names its files through <dir>/current (required)")
	fs.StringVar(&f.product, "bfe-product", "lbfed", "BFE product holding every host and route")
	fs.IntVar(&f.keep, "bfe-keep-versions", 5, "version directories kept besides the current one")
	fs.DurationVar(&f.linger, "bfe-commit-linger", 0, "wait this long before each commit to coalesce more calls")
	fs.DurationVar(&f.timeout, "bfe-commit-timeout", 30*time.Second, "bound of one write+reload cycle")
	fs.BoolVar(&f.noVerify, "bfe-skip-verify", false, "do not check /monitor/*_version after each reload")
	fs.BoolVar(&f.noResync, "bfe-skip-resync", false, "do not reload the current version in full on the first commit after start")
}

func (f *bfeFlags) newDriver(_ context.Context, log logr.Logger, reg prometheus.Registerer) (driver.Driver, error) {
	if f.dataDir == "" {
		return nil, errors.New("--bfe-data-dir is required")
	}
	store, err := bfe.OpenStore(f.dataDir)
	if err != nil {
		return nil, err
	}
	metrics := bfe.NewMetrics(reg)
	fe, err := bfe.NewFrontend(bfe.FrontendOptions{
		Store:             store,
		Reloader:          &bfe.Monitor{BaseURL: f.monitor},
		Generate:          bfe.GenerateOptions{Product: f.product},
		KeepVersions:      f.keep,
		SkipVerify:        f.noVerify,
		SkipResyncOnStart: f.noResync,
		Metrics:           metrics,
		Log:               log,
	})
	if err != nil {
		return nil, err
	}
	log.Info("BFE configuration store opened", "dir", store.Dir(), "version", fe.Version(), "model", fe.Model().String())
	return bfe.NewDriver(bfe.DriverOptions{Frontend: fe, Metrics: metrics, Log: log, Linger: f.linger, CommitTimeout: f.timeout}), nil
}
