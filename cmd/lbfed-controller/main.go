// Command lbfed-controller runs lbfed's control-plane components next to Karmada. Each component
// has its own flag group (flags prefixed with its name) and contributes runnables — things with
// Start(ctx) error, like controller-runtime's manager.Runnable — that run together until a signal
// or the first failure:
//
//   - interpreter: the Karmada resource interpreter webhook for the LBCF kinds (HTTPS, with
//     /healthz, /readyz and /metrics on the same port). It needs no Kubernetes API access.
//   - admission: LBCF's admission webhooks (package lbcf/admission) for the templates in the
//     Karmada API server, calling the drivers' validate webhooks (HTTPS; off by default, the
//     lbfed chart turns it on and registers it).
//   - federation: the federation controller, a controller-runtime manager against the Karmada
//     API server.
//   - mci: the MultiClusterIngress front door on BFE (package frontdoor/mci; off by default), a
//     manager of its own against the Karmada API server.
//
// A component is a file implementing component, listed in components; a component that builds a
// controller-runtime manager returns the manager as its runnable.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os/signal"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lbfed/lbfed/idlegc"
)

// component is one part of lbfed-controller.
type component interface {
	// name prefixes the component's flags and names it in logs.
	name() string
	// addFlags registers the component's flags.
	addFlags(fs *flag.FlagSet)
	// runnables builds the component from its parsed flags; none when it is disabled.
	runnables(ctx context.Context, log logr.Logger) ([]runnable, error)
}

// runnable is controller-runtime's manager.Runnable.
type runnable interface {
	Start(ctx context.Context) error
}

// components lists every component, in start order.
func components() []component {
	return []component{&interpreterComponent{}, &admissionComponent{}, &federationComponent{}, &mciComponent{}}
}

func main() {
	fs := flag.CommandLine
	klog.InitFlags(fs)
	comps := components()
	for _, c := range comps {
		c.addFlags(fs)
	}
	suspendIdleGC := fs.Bool("suspend-idle-gc", true, idlegc.FlagUsage)
	flag.Parse()
	log := klog.Background()
	// controller-runtime packages (the certificate watcher) log through this.
	ctrllog.SetLogger(log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, comps, *suspendIdleGC); err != nil {
		klog.ErrorS(err, "lbfed-controller failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

// run builds every component and runs their runnables (and, with suspendIdleGC, an idle-GC
// suspender for the whole process) until ctx is done or one fails; it returns once all have
// stopped.
func run(ctx context.Context, log logr.Logger, comps []component, suspendIdleGC bool) error {
	var all []runnable
	for _, c := range comps {
		rs, err := c.runnables(ctx, log.WithName(c.name()))
		if err != nil {
			return fmt.Errorf("%s: %w", c.name(), err)
		}
		all = append(all, rs...)
	}
	if len(all) == 0 {
		return errors.New("no component enabled")
	}
	if suspendIdleGC {
		all = append(all, idlegc.New(idlegc.Options{Log: log.WithName("idlegc"), Suspended: idlegc.NewGauge(ctrlmetrics.Registry)}))
	}
	return runAll(ctx, all)
}

// runAll starts rs concurrently; the first to fail (or return early) stops the others.
func runAll(ctx context.Context, rs []runnable) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := r.Start(ctx)
			if err == nil && ctx.Err() == nil {
				err = fmt.Errorf("%T stopped unexpectedly", r)
			}
			if err != nil {
				once.Do(func() { firstErr = err })
			}
			cancel()
		}()
	}
	wg.Wait()
	return firstErr
}
