// Command elb-driver serves the LBCF driver webhooks for lbfed's external front ends. The front end
// is chosen with --backend; each backend has its own flags (prefixed with its name).
package main

import (
	"context"
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

// newDriver builds a backend's driver once flags are parsed; the returned function releases it.
type newDriver func(ctx context.Context, reg prometheus.Registerer, log logr.Logger) (driver.Driver, func(), error)

// backends maps --backend values to functions that register the backend's flags.
var backends = map[string]func(fs *flag.FlagSet) newDriver{
	"bfe": bfeFlags,
}

func main() {
	fs := flag.CommandLine
	names := make([]string, 0, len(backends))
	for name := range backends {
		names = append(names, name)
	}
	sort.Strings(names)
	var (
		backend  = fs.String("backend", "", "front end to drive: "+strings.Join(names, "|"))
		listen   = fs.String("listen", ":8443", "address of the webhook server (webhooks at /<name>, metrics at /metrics)")
		certFile = fs.String("tls-cert-file", "", "serve HTTPS with this certificate (and --tls-key-file); plain HTTP when empty")
		keyFile  = fs.String("tls-key-file", "", "private key of --tls-cert-file")
	)
	factories := map[string]newDriver{}
	for _, name := range names {
		factories[name] = backends[name](fs)
	}
	klog.InitFlags(fs)
	flag.Parse()
	factory, ok := factories[*backend]
	if !ok {
		klog.ErrorS(nil, "Unknown or missing --backend", "backend", *backend, "available", names)
		os.Exit(2)
	}
	if err := run(factory, *backend, *listen, *certFile, *keyFile); err != nil {
		klog.ErrorS(err, "elb-driver failed")
		os.Exit(1)
	}
}

func run(factory newDriver, backend, listen, certFile, keyFile string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", listen, err)
	}
	return serve(ctx, factory, backend, l, certFile, keyFile)
}

// serve runs the webhook server on l until ctx ends.
func serve(ctx context.Context, factory newDriver, backend string, l net.Listener, certFile, keyFile string) error {
	log := klog.Background().WithValues("backend", backend)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d, release, err := factory(ctx, reg, log)
	if err != nil {
		l.Close()
		return fmt.Errorf("start %s driver: %w", backend, err)
	}
	defer release()

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", driver.NewHandler(d, driver.HandlerOptions{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() {
		if certFile != "" {
			errc <- srv.ServeTLS(l, certFile, keyFile)
		} else {
			errc <- srv.Serve(l)
		}
	}()
	log.Info("Serving LBCF driver webhooks", "address", l.Addr().String(), "tls", certFile != "")
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
