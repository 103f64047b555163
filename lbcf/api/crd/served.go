package crd

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// GroupVersion and Resources are what the CRDs serve.
const GroupVersion = "lbcf.tkestack.io/v1beta1"

// Resources are the LBCF resources the controllers watch.
var Resources = []string{"loadbalancerdrivers", "loadbalancers", "backendgroups", "backendrecords"}

// WaitServed returns once the API server of cfg serves every LBCF resource, polling discovery
// every interval (2 s when 0) and logging what it waits for at the start and every minute. An
// installer may create the CRDs after the controllers (the lbfed chart's apply Job, Karmada
// propagating them to a member beside lbcf-controller): a controller waits for them instead of
// exiting and crash-looping meanwhile.
func WaitServed(ctx context.Context, cfg *rest.Config, log logr.Logger, interval time.Duration) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	if interval <= 0 {
		interval = 2 * time.Second
	}
	var logged time.Time
	for {
		missing := slices.Clone(Resources)
		list, err := dc.ServerResourcesForGroupVersion(GroupVersion)
		if err == nil {
			for _, r := range list.APIResources {
				missing = slices.DeleteFunc(missing, func(n string) bool { return n == r.Name })
			}
		}
		if len(missing) == 0 {
			if !logged.IsZero() {
				log.Info("LBCF resources served", "groupVersion", GroupVersion)
			}
			return nil
		}
		if time.Since(logged) >= time.Minute {
			log.Info("waiting for the API server to serve the LBCF resources (their CRDs)", "groupVersion", GroupVersion, "missing", missing, "lastError", err)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
