// Command elb-driver serves the LBCF driver webhooks for one external front end. The front end is
// chosen with --backend; each backend registers its own flags (see backends).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/lbfed/lbfed/lbcf/driver"
)

// backend builds the driver of one kind of front end. Register adds the backend's flags; New is
// called only for the selected backend.
type backend struct {
	register func(fs *flag.FlagSet)
	new      func(ctx context.Context, log logr.Logger, reg prometheus.Registerer) (driver.Driver, error)
}

// backends maps --backend values to their implementation (radware.go, and one file per other
// front end).
var backends = map[string]backend{}

func main() {
	fs := flag.CommandLine
	klog.InitFlags(fs)
	var (
		kind        = fs.String("backend", "radware", "front end to drive: "+strings.Join(backendNames(), ", "))
		prefix      = fs.String("path-prefix", "", "URL path prefix of the webhooks (the LoadBalancerDriver's spec.url path)")
		metricsAddr = fs.String("metrics-listen", ":9090", "address of /metrics and /healthz (plain HTTP; empty: off)")
		serve       driver.ServerFlags
	)
	serve.Register(fs, ":8443")
	for _, b := range backends {
		b.register(fs)
	}
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kind, *prefix, *metricsAddr, serve, nil); err != nil {
		klog.ErrorS(err, "elb-driver failed")
		os.Exit(1)
	}
}

func backendNames() []string {
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// run serves until ctx is done; started, when not nil, is told the webhook address once listening.
func run(ctx context.Context, kind, prefix, metricsAddr string, serve driver.ServerFlags, started func(net.Addr)) error {
	b, ok := backends[kind]
	if !ok {
		return fmt.Errorf("unknown --backend %q (known: %s)", kind, strings.Join(backendNames(), ", "))
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	log := klog.Background().WithValues("backend", kind)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Caller authentication is checked before the front end is touched.
	srv, err := driver.NewServer(nil, serve.Options(reg, log))
	if err != nil {
		return err
	}
	d, err := b.new(ctx, log, reg)
	if err != nil {
		return fmt.Errorf("set up %s driver: %w", kind, err)
	}
	srv.SetHandler(driver.NewHandler(d, driver.HandlerOptions{Prefix: prefix}))
	l, err := net.Listen("tcp", serve.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", serve.Addr, err)
	}
	if started != nil {
		started(l.Addr())
	}
	errc, served := make(chan error, 1), make(chan error, 1)
	go func() {
		log.Info("serving LBCF driver webhooks", "addr", l.Addr().String(), "tls", srv.TLS(), "clientAuth", srv.Authenticated(), "prefix", prefix)
		served <- srv.Serve(ctx, l, 15*time.Second)
	}()
	var msrv *http.Server
	if metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
			h, err := d.Healthz(r.Context(), &driver.HealthzRequest{})
			if err != nil || !h.Healthy {
				http.Error(w, "front end unhealthy", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		msrv = &http.Server{Addr: metricsAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- msrv.ListenAndServe() }()
	}
	err = nil
	select {
	case <-ctx.Done():
	case err = <-errc: // the metrics server failed
	case err = <-served:
	}
	log.Info("shutting down")
	stop() // the webhook server shuts down gracefully
	shutdown, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if msrv != nil {
		_ = msrv.Shutdown(shutdown)
	}
	if err == nil {
		err = <-served
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
