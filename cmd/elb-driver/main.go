// Command elb-driver serves the LBCF driver webhooks for one external front end. The front end is
// chosen with --backend; each backend registers its own flags (see backends).
package main

import (
	"context"
	"crypto/tls"
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
		listen      = fs.String("listen", ":8443", "address of the webhook server")
		prefix      = fs.String("path-prefix", "", "URL path prefix of the webhooks (the LoadBalancerDriver's spec.url path)")
		certFile    = fs.String("tls-cert-file", "", "serving certificate (PEM); empty serves plain HTTP")
		keyFile     = fs.String("tls-key-file", "", "serving key (PEM)")
		metricsAddr = fs.String("metrics-listen", ":9090", "address of /metrics and /healthz (empty: off)")
	)
	for _, b := range backends {
		b.register(fs)
	}
	flag.Parse()
	if err := run(*kind, *listen, *prefix, *certFile, *keyFile, *metricsAddr); err != nil {
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

func run(kind, listen, prefix, certFile, keyFile, metricsAddr string) error {
	b, ok := backends[kind]
	if !ok {
		return fmt.Errorf("unknown --backend %q (known: %s)", kind, strings.Join(backendNames(), ", "))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := klog.Background().WithValues("backend", kind)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d, err := b.new(ctx, log, reg)
	if err != nil {
		return fmt.Errorf("set up %s driver: %w", kind, err)
	}

	srv := &http.Server{Addr: listen, Handler: driver.NewHandler(d, driver.HandlerOptions{Prefix: prefix}), ReadHeaderTimeout: 10 * time.Second}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return fmt.Errorf("load serving certificate: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", listen, err)
	}
	errc := make(chan error, 2)
	go func() {
		log.Info("serving LBCF driver webhooks", "addr", l.Addr().String(), "tls", srv.TLSConfig != nil, "prefix", prefix)
		if srv.TLSConfig != nil {
			errc <- srv.ServeTLS(l, "", "")
		} else {
			errc <- srv.Serve(l)
		}
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
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	log.Info("shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if msrv != nil {
		_ = msrv.Shutdown(shutdown)
	}
	return srv.Shutdown(shutdown)
}
