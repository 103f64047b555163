package bfe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/lbfed/lbfed/lbcf/driver"
)

// DriverOptions configure a Driver.
type DriverOptions struct {
	Frontend *Frontend
	Metrics  *Metrics
	Log      logr.Logger
	// Linger delays each commit to gather more concurrent calls (default 0).
	Linger time.Duration
	// CommitTimeout bounds one write+reload cycle (default 30s).
	CommitTimeout time.Duration
	// RetryDelaySeconds is the minRetryDelayInSeconds of Fail answers caused by BFE (default 5).
	RetryDelaySeconds int32
}

// Driver serves the LBCF driver webhooks for one BFE instance. lbSpec keys: host (required), path
// (default "/*"), cookie and header ("key:value" conditions), name (optional cluster name). Backend
// parameters: weight, lbfed.io/cluster (member cluster → sub-cluster) and lbfed.io/cluster-weight.
type Driver struct {
	opts DriverOptions
	fe   *Frontend
	c    *committer
}

var _ driver.Driver = (*Driver)(nil)

// NewDriver returns a driver over fe.
func NewDriver(opts DriverOptions) *Driver {
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = 30 * time.Second
	}
	if opts.RetryDelaySeconds <= 0 {
		opts.RetryDelaySeconds = 5
	}
	return &Driver{opts: opts, fe: opts.Frontend,
		c: &committer{fe: opts.Frontend, metrics: opts.Metrics, linger: opts.Linger, timeout: opts.CommitTimeout}}
}

// Healthz is healthy when BFE's monitor answers and the last commit succeeded.
func (d *Driver) Healthz(ctx context.Context, _ *driver.HealthzRequest) (*driver.HealthzResponse, error) {
	if err := d.fe.LastError(); err != nil {
		return &driver.HealthzResponse{Healthy: false}, nil
	}
	_, err := d.fe.opts.Reloader.Versions(ctx)
	return &driver.HealthzResponse{Healthy: err == nil}, nil
}

// ValidateLoadBalancer checks the lbSpec and that its route is free. The driver has no attributes,
// so any attribute is refused (most likely a misspelled lbSpec key put in the wrong place).
func (d *Driver) ValidateLoadBalancer(_ context.Context, r *driver.ValidateLoadBalancerRequest) (*driver.ValidateLoadBalancerResponse, error) {
	lb, err := ParseLoadBalancer(r.LBSpec)
	if err == nil {
		err = checkAttributes(r.Attributes)
	}
	if err == nil {
		err = d.fe.Model().PutLoadBalancer(lb)
	}
	if err != nil {
		return &driver.ValidateLoadBalancerResponse{ResponseForNoRetryHooks: driver.Deny(err.Error())}, nil
	}
	return &driver.ValidateLoadBalancerResponse{ResponseForNoRetryHooks: driver.Allow()}, nil
}

func checkAttributes(attrs map[string]string) error {
	if len(attrs) == 0 {
		return nil
	}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return fmt.Errorf("the BFE driver has no attributes, got %s (lbSpec keys: %s)", strings.Join(keys, ", "), strings.Join(specKeys, ", "))
}

// CreateLoadBalancer records the LoadBalancer. Its route is installed with its first backend; lbInfo
// is the lbSpec plus the cluster name.
func (d *Driver) CreateLoadBalancer(ctx context.Context, r *driver.CreateLoadBalancerRequest) (*driver.CreateLoadBalancerResponse, error) {
	lb, err := ParseLoadBalancer(r.LBSpec)
	if err == nil {
		err = checkAttributes(r.Attributes)
	}
	if err != nil {
		return &driver.CreateLoadBalancerResponse{ResponseForFailRetryHooks: driver.Fail(err.Error(), 0)}, nil
	}
	if r.DryRun {
		return &driver.CreateLoadBalancerResponse{ResponseForFailRetryHooks: dryRunSucc(), LBInfo: lb.Info()}, nil
	}
	resp, err := d.commit(ctx, lb.Name, func(m *Model) error { return m.PutLoadBalancer(lb) })
	if err != nil {
		return nil, err
	}
	return &driver.CreateLoadBalancerResponse{ResponseForFailRetryHooks: resp, LBInfo: lb.Info()}, nil
}

// EnsureLoadBalancer re-records the LoadBalancer and reports how BFE serves it.
func (d *Driver) EnsureLoadBalancer(ctx context.Context, r *driver.EnsureLoadBalancerRequest) (*driver.EnsureLoadBalancerResponse, error) {
	lb, err := ParseLoadBalancer(r.LBInfo)
	if err == nil {
		err = checkAttributes(r.Attributes)
	}
	if err != nil {
		return &driver.EnsureLoadBalancerResponse{ResponseForFailRetryHooks: driver.Fail(err.Error(), 0)}, nil
	}
	if r.DryRun {
		return &driver.EnsureLoadBalancerResponse{ResponseForFailRetryHooks: dryRunSucc()}, nil
	}
	resp, err := d.commit(ctx, lb.Name, func(m *Model) error { return m.PutLoadBalancer(lb) })
	if err != nil {
		return nil, err
	}
	return &driver.EnsureLoadBalancerResponse{ResponseForFailRetryHooks: resp}, nil
}

// DeleteLoadBalancer removes the LoadBalancer, its route and all its backends. Deleting an unknown
// LoadBalancer succeeds.
func (d *Driver) DeleteLoadBalancer(ctx context.Context, r *driver.DeleteLoadBalancerRequest) (*driver.DeleteLoadBalancerResponse, error) {
	name := lbName(r.LBInfo)
	if name == "" {
		return &driver.DeleteLoadBalancerResponse{ResponseForFailRetryHooks: driver.Succ()}, nil
	}
	if r.DryRun {
		return &driver.DeleteLoadBalancerResponse{ResponseForFailRetryHooks: dryRunSucc()}, nil
	}
	resp, err := d.commit(ctx, "", func(m *Model) error { m.DeleteLoadBalancer(name); return nil })
	if err != nil {
		return nil, err
	}
	return &driver.DeleteLoadBalancerResponse{ResponseForFailRetryHooks: resp}, nil
}

// lbName is the cluster name in lbInfo, or the one derived from it; "" when lbInfo is unusable.
func lbName(info map[string]string) string {
	if lb, err := ParseLoadBalancer(info); err == nil {
		return lb.Name
	}
	if n := info[SpecName]; checkClusterName(n) == nil {
		return n
	}
	return ""
}

// ValidateBackend checks the backend parameters.
func (d *Driver) ValidateBackend(_ context.Context, r *driver.ValidateBackendRequest) (*driver.ValidateBackendResponse, error) {
	if err := ValidateParameters(r.Parameters); err != nil {
		return &driver.ValidateBackendResponse{ResponseForNoRetryHooks: driver.Deny(err.Error())}, nil
	}
	return &driver.ValidateBackendResponse{ResponseForNoRetryHooks: driver.Allow()}, nil
}

// GenerateBackendAddr returns "ip:port": the pod IP and the selected container port, or a node
// address (InternalIP preferred) and the Service's nodePort for the selected port.
func (d *Driver) GenerateBackendAddr(_ context.Context, r *driver.GenerateBackendAddrRequest) (*driver.GenerateBackendAddrResponse, error) {
	addr, err := backendAddr(r)
	if err != nil {
		return &driver.GenerateBackendAddrResponse{ResponseForFailRetryHooks: driver.Fail(err.Error(), 0)}, nil
	}
	return &driver.GenerateBackendAddrResponse{ResponseForFailRetryHooks: driver.Succ(), BackendAddr: addr}, nil
}

func backendAddr(r *driver.GenerateBackendAddrRequest) (string, error) {
	switch {
	case r.PodBackend != nil:
		pod := &r.PodBackend.Pod
		port := r.PodBackend.SelectedPort()
		if port <= 0 || port > 65535 {
			return "", fmt.Errorf("pod %s/%s: invalid port %d", pod.Namespace, pod.Name, port)
		}
		ip, err := netip.ParseAddr(pod.Status.PodIP)
		if err != nil {
			return "", fmt.Errorf("pod %s/%s has no IP yet", pod.Namespace, pod.Name)
		}
		return netip.AddrPortFrom(ip, uint16(port)).String(), nil
	case r.ServiceBackend != nil:
		sb := r.ServiceBackend
		nodePort, err := sb.NodePort()
		if err != nil {
			return "", err
		}
		if a, ok := sb.NodeAddr(nil); ok {
			return netip.AddrPortFrom(a, uint16(nodePort)).String(), nil
		}
		return "", fmt.Errorf("node %s has no InternalIP or ExternalIP address", sb.NodeName)
	}
	return "", errors.New("neither podBackend nor serviceBackend is set")
}

// EnsureBackend adds or updates the backend and answers once BFE serves it. It fails while the
// LoadBalancer cannot be installed (its sub-cluster weights sum to 0).
func (d *Driver) EnsureBackend(ctx context.Context, r *driver.BackendOperationRequest) (*driver.BackendOperationResponse, error) {
	lb, err := ParseLoadBalancer(r.LBInfo)
	var b Backend
	if err == nil {
		b, err = ParseBackend(r.BackendAddr, r.Parameters)
	}
	if err != nil {
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: driver.Fail(err.Error(), 0)}, nil
	}
	if r.DryRun {
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: dryRunSucc()}, nil
	}
	resp, err := d.commit(ctx, lb.Name, func(m *Model) error { return m.PutBackend(lb, b) })
	if err != nil {
		return nil, err
	}
	return &driver.BackendOperationResponse{ResponseForFailRetryHooks: resp}, nil
}

// DeregisterBackend removes the backend. Removing an unknown backend, or one of a LoadBalancer that
// no longer exists, succeeds.
func (d *Driver) DeregisterBackend(ctx context.Context, r *driver.BackendOperationRequest) (*driver.BackendOperationResponse, error) {
	name := lbName(r.LBInfo)
	b, err := ParseBackend(r.BackendAddr, r.Parameters)
	if name == "" || err != nil {
		// Nothing this driver could have registered.
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: driver.Succ()}, nil
	}
	if r.DryRun {
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: dryRunSucc()}, nil
	}
	resp, err := d.commit(ctx, "", func(m *Model) error { m.DeleteBackend(name, b.Key()); return nil })
	if err != nil {
		return nil, err
	}
	return &driver.BackendOperationResponse{ResponseForFailRetryHooks: resp}, nil
}

// JudgePodDeregister keeps no not-ready pod: BFE's own health check does not replace readiness.
func (d *Driver) JudgePodDeregister(_ context.Context, _ *driver.JudgePodDeregisterRequest) (*driver.JudgePodDeregisterResponse, error) {
	return &driver.JudgePodDeregisterResponse{ResponseForNoRetryHooks: driver.Allow(), DoNotDeregister: []*corev1.Pod{}}, nil
}

func dryRunSucc() driver.ResponseForFailRetryHooks {
	r := driver.Succ()
	r.Msg = "dry run: nothing changed"
	return r
}

// commit runs mutate in the next coalesced commit and turns the outcome into an answer. When
// report is a LoadBalancer name, the answer also requires that LoadBalancer to be installed and
// describes how it is served.
func (d *Driver) commit(ctx context.Context, report string, mutate func(*Model) error) (driver.ResponseForFailRetryHooks, error) {
	ch, err := d.c.do(ctx, mutate)
	if err != nil {
		return driver.ResponseForFailRetryHooks{}, fmt.Errorf("waiting for the BFE commit: %w", err)
	}
	if ch.err != nil {
		return driver.Fail(ch.err.Error(), 0), nil
	}
	if ch.applyErr != nil {
		d.opts.Log.Error(ch.applyErr, "BFE commit failed")
		return driver.Fail(ch.applyErr.Error(), d.opts.RetryDelaySeconds), nil
	}
	res := ch.result
	msg := "bfe version " + strconv.FormatUint(res.Version, 10)
	if !res.Changed {
		msg += " (unchanged)"
	}
	if report == "" {
		return succ(msg), nil
	}
	rep, ok := res.Reports[report]
	switch {
	case !ok:
		return succ(msg), nil
	case !rep.Installed && rep.Reason != "no backends":
		return driver.Fail(fmt.Sprintf("%s: load balancer %s is not installed: %s", msg, report, rep.Reason), d.opts.RetryDelaySeconds), nil
	case !rep.Installed:
		return succ(fmt.Sprintf("%s: load balancer %s has no backends yet", msg, report)), nil
	}
	parts := make([]string, 0, len(rep.SubClusters))
	for _, m := range sortedMemberNames(rep.SubClusters) {
		parts = append(parts, fmt.Sprintf("%s=%d", m, rep.SubClusters[m]))
	}
	msg += fmt.Sprintf(": load balancer %s serves sub-clusters %s", report, strings.Join(parts, ","))
	if rep.Reason != "" {
		msg += " (" + rep.Reason + ")"
	}
	return succ(msg), nil
}

func succ(msg string) driver.ResponseForFailRetryHooks {
	r := driver.Succ()
	r.Msg = msg
	return r
}
