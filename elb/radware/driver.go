package radware

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbspec"
)

// DriverOptions configure a Driver.
type DriverOptions struct {
	Frontend *Frontend
	// Owner marks the device objects the driver creates (default "lbfed"), followed by "/" and the
	// LBCF LoadBalancer's UID; objects with another mark are never changed or deleted.
	Owner string
	// RetryDelaySeconds is the minRetryDelayInSeconds of Fail answers (default 10).
	RetryDelaySeconds int32
	Logger            logr.Logger
}

// Driver serves the LBCF driver webhooks for an Alteon pair.
//
// lbSpec: vip, port, protocol (TCP|UDP), method (rr|lc|hash), healthCheck (tcp|udp|icmp|http|none).
// attributes (optional, mutable): healthCheckInterval (seconds, 1..600), healthCheckRetries and
// healthCheckRestore (1..63), written on the load balancer's real servers as PingInterval,
// FailRetry and SuccRetry instead of the --radware-health-check-* flags; a change reaches the
// existing real servers with the next ensureLoadBalancer.
// validateLoadBalancer denies a VIP:port/protocol the device already serves, naming its owner.
// createLoadBalancer creates one group, one virtual server and its service 1 bound to the group,
// marked <owner>/<LoadBalancer UID> (from the recordID); lbInfo is the canonical spec plus the
// virtual server id and the UID. ensureBackend adds a real server
// (weight from parameters.weight, 1..48) and its group membership; deregisterBackend drains it
// (shutdown-connection, answering Running until the drain period ends) and then removes it;
// deleteLoadBalancer removes what the driver created and nothing else. Backend parameters other
// than weight (e.g. lbfed.io/cluster) are ignored.
type Driver struct {
	opts DriverOptions
	fe   *Frontend
	log  logr.Logger
}

var _ driver.Driver = (*Driver)(nil)

// NewDriver returns a driver over a frontend.
func NewDriver(opts DriverOptions) (*Driver, error) {
	if opts.Frontend == nil {
		return nil, errors.New("radware driver: no frontend")
	}
	if opts.Owner == "" {
		opts.Owner = "lbfed"
	}
	if opts.RetryDelaySeconds <= 0 {
		opts.RetryDelaySeconds = 10
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	return &Driver{opts: opts, fe: opts.Frontend, log: opts.Logger}, nil
}

func (d *Driver) parseLB(spec map[string]string) (LoadBalancer, error) {
	lb, err := ParseLoadBalancer(spec)
	d.setOwner(&lb)
	return lb, err
}

// setOwner marks the load balancer's objects with the driver's owner and the LoadBalancer's UID
// (just the driver's owner for load balancers created before marks carried the UID).
func (d *Driver) setOwner(lb *LoadBalancer) {
	lb.Owner = d.opts.Owner
	if lb.UID != "" {
		lb.Owner += "/" + lb.UID
	}
}

// uidOf returns the object UID of a recordID "<webhook>(<uid>)".
func uidOf(recordID string) string {
	open, end := strings.LastIndexByte(recordID, '('), len(recordID)-1
	if open < 0 || end <= open+1 || recordID[end] != ')' {
		return ""
	}
	return recordID[open+1 : end]
}

func (d *Driver) fail(err error) driver.ResponseForFailRetryHooks {
	return driver.Fail(err.Error(), d.opts.RetryDelaySeconds)
}

func dryRun() driver.ResponseForFailRetryHooks {
	r := driver.Succ()
	r.Msg = "dry run: nothing changed"
	return r
}

func succ(msg string) driver.ResponseForFailRetryHooks {
	r := driver.Succ()
	r.Msg = msg
	return r
}

// Healthz is healthy when a unit answers as master.
func (d *Driver) Healthz(ctx context.Context, _ *driver.HealthzRequest) (*driver.HealthzResponse, error) {
	err := d.fe.Healthy(ctx)
	if err != nil {
		d.log.Info("unhealthy", "err", err.Error())
	}
	return &driver.HealthzResponse{Healthy: err == nil}, nil
}

// ValidateLoadBalancer checks lbSpec and attributes (ParseAttributes). A new load
// balancer whose VIP:port/protocol the device already serves (for another LoadBalancer of this
// driver or anyone else) is denied, naming the owner mark found on the device. When the device
// cannot be asked the check is left to createLoadBalancer, which refuses objects of another owner.
func (d *Driver) ValidateLoadBalancer(ctx context.Context, r *driver.ValidateLoadBalancerRequest) (*driver.ValidateLoadBalancerResponse, error) {
	lb, err := ParseLoadBalancer(r.LBSpec)
	if err != nil {
		return &driver.ValidateLoadBalancerResponse{ResponseForNoRetryHooks: driver.Deny(err.Error())}, nil
	}
	if _, err := ParseAttributes(lb, r.Attributes); err != nil {
		return &driver.ValidateLoadBalancerResponse{ResponseForNoRetryHooks: driver.Deny(err.Error())}, nil
	}
	if r.Operation == driver.OperationCreate {
		vs, owner, found, err := d.fe.ServedBy(ctx, lb)
		switch {
		case err != nil:
			d.log.Info("cannot check on the Alteon whether the VIP is free; createLoadBalancer will", "loadBalancer", lb.String(), "err", err.Error())
		case found:
			return &driver.ValidateLoadBalancerResponse{ResponseForNoRetryHooks: driver.Deny(fmt.Sprintf(
				"%s is already served on the Alteon by virtual server %s, owned by %q: one LoadBalancer per VIP:port/protocol (delete that one first)",
				lb, vs, owner))}, nil
		}
	}
	return &driver.ValidateLoadBalancerResponse{ResponseForNoRetryHooks: driver.Allow()}, nil
}

// withAttributes sets lb.Health from the load balancer's attributes.
func withAttributes(lb LoadBalancer, attrs map[string]string) (LoadBalancer, error) {
	h, err := ParseAttributes(lb, attrs)
	if err != nil {
		return lb, err
	}
	lb.Health = &h
	return lb, nil
}

// CreateLoadBalancer creates the group, virtual server and service; calling it again is harmless.
func (d *Driver) CreateLoadBalancer(ctx context.Context, r *driver.CreateLoadBalancerRequest) (*driver.CreateLoadBalancerResponse, error) {
	lb, err := ParseLoadBalancer(r.LBSpec)
	if err == nil {
		lb, err = withAttributes(lb, r.Attributes)
	}
	if err != nil {
		return &driver.CreateLoadBalancerResponse{ResponseForFailRetryHooks: driver.Fail(err.Error(), 0)}, nil
	}
	lb.UID = uidOf(r.RecordID)
	d.setOwner(&lb)
	if r.DryRun {
		return &driver.CreateLoadBalancerResponse{ResponseForFailRetryHooks: dryRun(), LBInfo: lb.Info()}, nil
	}
	if err := d.fe.EnsureLoadBalancer(ctx, lb); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return &driver.CreateLoadBalancerResponse{ResponseForFailRetryHooks: d.fail(err)}, nil
	}
	return &driver.CreateLoadBalancerResponse{ResponseForFailRetryHooks: succ("virtual server " + lb.ID()), LBInfo: lb.Info()}, nil
}

// EnsureLoadBalancer repairs the load balancer's objects (periodic ensure) and sets its real
// servers' health-check timing from the attributes.
func (d *Driver) EnsureLoadBalancer(ctx context.Context, r *driver.EnsureLoadBalancerRequest) (*driver.EnsureLoadBalancerResponse, error) {
	lb, err := d.parseLB(r.LBInfo)
	if err == nil {
		lb, err = withAttributes(lb, r.Attributes)
	}
	if err != nil {
		return &driver.EnsureLoadBalancerResponse{ResponseForFailRetryHooks: driver.Fail(err.Error(), 0)}, nil
	}
	if r.DryRun {
		return &driver.EnsureLoadBalancerResponse{ResponseForFailRetryHooks: dryRun()}, nil
	}
	if err := d.fe.EnsureLoadBalancer(ctx, lb); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return &driver.EnsureLoadBalancerResponse{ResponseForFailRetryHooks: d.fail(err)}, nil
	}
	return &driver.EnsureLoadBalancerResponse{ResponseForFailRetryHooks: succ("virtual server " + lb.ID())}, nil
}

// DeleteLoadBalancer removes everything the driver created for the load balancer. An lbInfo this
// driver cannot have produced means nothing to delete.
func (d *Driver) DeleteLoadBalancer(ctx context.Context, r *driver.DeleteLoadBalancerRequest) (*driver.DeleteLoadBalancerResponse, error) {
	lb, err := d.parseLB(r.LBInfo)
	if err != nil {
		return &driver.DeleteLoadBalancerResponse{ResponseForFailRetryHooks: succ("nothing to delete: " + err.Error())}, nil
	}
	// Without the virtual server's key, lbInfo is the LoadBalancer's lbSpec: the caller never had
	// createLoadBalancer's answer (its call timed out while the device committed it). What that
	// create made is marked with the UID of its recordID, which this recordID names too.
	if _, fromCreate := r.LBInfo[lbspec.KeyVirtualServer]; !fromCreate && lb.UID == "" {
		lb.UID = uidOf(r.RecordID)
		d.setOwner(&lb)
	}
	if r.DryRun {
		return &driver.DeleteLoadBalancerResponse{ResponseForFailRetryHooks: dryRun()}, nil
	}
	if err := d.fe.DeleteLoadBalancer(ctx, lb); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return &driver.DeleteLoadBalancerResponse{ResponseForFailRetryHooks: d.fail(err)}, nil
	}
	return &driver.DeleteLoadBalancerResponse{ResponseForFailRetryHooks: succ("deleted " + lb.ID())}, nil
}

// ValidateBackend checks the backend parameters (weight).
func (d *Driver) ValidateBackend(_ context.Context, r *driver.ValidateBackendRequest) (*driver.ValidateBackendResponse, error) {
	if _, err := ParseWeight(r.Parameters); err != nil {
		return &driver.ValidateBackendResponse{ResponseForNoRetryHooks: driver.Deny(err.Error())}, nil
	}
	return &driver.ValidateBackendResponse{ResponseForNoRetryHooks: driver.Allow()}, nil
}

// GenerateBackendAddr returns "ip:port": the pod IP and selected port, or a node address
// (InternalIP preferred) and the Service's nodePort for the selected port. IPv4 only.
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
		ip := pod.Status.PodIP
		for _, p := range pod.Status.PodIPs {
			if a, err := netip.ParseAddr(p.IP); err == nil && a.Is4() {
				ip = p.IP
				break
			}
		}
		a, err := netip.ParseAddr(ip)
		if err != nil || !a.Is4() {
			return "", fmt.Errorf("pod %s/%s has no IPv4 address yet", pod.Namespace, pod.Name)
		}
		if port < 5 || port > 65534 {
			return "", fmt.Errorf("pod %s/%s: port %d is outside the Alteon real port range 5..65534", pod.Namespace, pod.Name, port)
		}
		return netip.AddrPortFrom(a, uint16(port)).String(), nil
	case r.ServiceBackend != nil:
		sb := r.ServiceBackend
		nodePort, err := sb.NodePort()
		if err != nil {
			return "", err
		}
		if a, ok := sb.NodeAddr(netip.Addr.Is4); ok {
			return netip.AddrPortFrom(a, uint16(nodePort)).String(), nil
		}
		return "", fmt.Errorf("node %s has no IPv4 InternalIP or ExternalIP", sb.NodeName)
	}
	return "", errors.New("neither podBackend nor serviceBackend is set")
}

// EnsureBackend adds or updates the backend; it fails while the load balancer does not exist.
func (d *Driver) EnsureBackend(ctx context.Context, r *driver.BackendOperationRequest) (*driver.BackendOperationResponse, error) {
	lb, err := d.parseLB(r.LBInfo)
	var b Backend
	if err == nil {
		b, err = ParseBackend(r.BackendAddr, r.Parameters)
	}
	if err != nil {
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: driver.Fail(err.Error(), 0)}, nil
	}
	if r.DryRun {
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: dryRun()}, nil
	}
	if err := d.fe.EnsureBackend(ctx, lb, b); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: d.fail(err)}, nil
	}
	return &driver.BackendOperationResponse{ResponseForFailRetryHooks: succ("real server " + lb.realServerID(b))}, nil
}

// DeregisterBackend drains then removes the backend. While it drains the answer is Running with
// the time left; an unknown backend, or one of a load balancer that no longer exists, succeeds.
func (d *Driver) DeregisterBackend(ctx context.Context, r *driver.BackendOperationRequest) (*driver.BackendOperationResponse, error) {
	lb, err := d.parseLB(r.LBInfo)
	var b Backend
	if err == nil {
		// The weight does not matter for removal; a bad one must not block it.
		b, err = ParseBackend(r.BackendAddr, nil)
	}
	if err != nil {
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: succ("nothing registered: " + err.Error())}, nil
	}
	if r.DryRun {
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: dryRun()}, nil
	}
	wait, err := d.fe.DeregisterBackend(ctx, lb, b)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, err
	case err != nil:
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: d.fail(err)}, nil
	case wait > 0:
		secs := int32(math.Ceil(wait.Seconds()))
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: driver.Running(
			fmt.Sprintf("draining real server %s (shutdown-connection) for %s more", lb.realServerID(b), wait.Round(time.Second)), secs)}, nil
	}
	return &driver.BackendOperationResponse{ResponseForFailRetryHooks: succ("removed real server " + lb.realServerID(b))}, nil
}

// JudgePodDeregister keeps no not-ready pod.
func (d *Driver) JudgePodDeregister(_ context.Context, _ *driver.JudgePodDeregisterRequest) (*driver.JudgePodDeregisterResponse, error) {
	return &driver.JudgePodDeregisterResponse{ResponseForNoRetryHooks: driver.Allow(), DoNotDeregister: []*corev1.Pod{}}, nil
}
