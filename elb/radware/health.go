package radware

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/lbfed/lbfed/elb/radware/alteon"
)

// HealthTiming is how the device health-checks a load balancer's real servers: every Interval
// seconds (real server PingInterval); a server is failed after Retries consecutive failed checks
// (FailRetry) and restored after Restore consecutive successful ones (SuccRetry). A zero field
// means the frontend's setting.
type HealthTiming = alteon.HealthTiming

// DefaultHealthTiming is the device's own: a check every 2 s, failed after 4 failures (Alteon
// Web OS Application Guide, "Real Server Health Checks": every two seconds, four consecutive
// health checks), restored after 2 successes (the SuccRetry default the simulator uses; not
// confirmed in public Radware documentation).
var DefaultHealthTiming = HealthTiming{Interval: 2, Retries: 4, Restore: 2}

// Load balancer attributes (LBCF LoadBalancer spec.attributes): per load balancer health-check
// timing, overriding the --radware-health-check-* flags. Attributes are mutable: a change reaches
// the real servers with the next ensureLoadBalancer.
const (
	KeyHealthCheckInterval = "healthCheckInterval"
	KeyHealthCheckRetries  = "healthCheckRetries"
	KeyHealthCheckRestore  = "healthCheckRestore"
)

// Ranges the driver accepts: the MIB's (PingInterval 0..600, FailRetry and SuccRetry 0..63)
// without 0, whose meaning is "no check" for PingInterval and undocumented for the others.
const (
	MaxHealthInterval = 600
	MaxHealthRetries  = 63
)

// CheckHealthTiming refuses values outside the accepted ranges; what names the settings (flag or
// attribute names, in the order interval, retries, restore).
func CheckHealthTiming(h HealthTiming, interval, retries, restore string) error {
	switch {
	case h.Interval < 1 || h.Interval > MaxHealthInterval:
		return fmt.Errorf("%s %d: must be a whole number of seconds 1..%d (Alteon real server PingInterval)", interval, h.Interval, MaxHealthInterval)
	case h.Retries < 1 || h.Retries > MaxHealthRetries:
		return fmt.Errorf("%s %d: must be an integer 1..%d (Alteon real server FailRetry)", retries, h.Retries, MaxHealthRetries)
	case h.Restore < 1 || h.Restore > MaxHealthRetries:
		return fmt.Errorf("%s %d: must be an integer 1..%d (Alteon real server SuccRetry)", restore, h.Restore, MaxHealthRetries)
	}
	return nil
}

// ParseAttributes reads a load balancer's attributes: healthCheckInterval (seconds, 1..600),
// healthCheckRetries and healthCheckRestore (1..63); absent ones are 0 (the frontend's setting).
// Unknown attributes are refused, and so is any of them on a load balancer without health check.
func ParseAttributes(lb LoadBalancer, attrs map[string]string) (HealthTiming, error) {
	var h HealthTiming
	var unknown, set []string
	for k, v := range attrs {
		var dst *int
		max, what, col := MaxHealthRetries, "an integer", ""
		switch k {
		case KeyHealthCheckInterval:
			dst, max, what, col = &h.Interval, MaxHealthInterval, "a whole number of seconds", "PingInterval"
		case KeyHealthCheckRetries:
			dst, col = &h.Retries, "FailRetry"
		case KeyHealthCheckRestore:
			dst, col = &h.Restore, "SuccRetry"
		default:
			unknown = append(unknown, k)
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > max {
			return HealthTiming{}, fmt.Errorf("attribute %s %q: must be %s 1..%d (Alteon real server %s)", k, v, what, max, col)
		}
		*dst = n
		set = append(set, k)
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return HealthTiming{}, fmt.Errorf("unknown load balancer attributes %s (known: %s, %s, %s)", strings.Join(unknown, ", "),
			KeyHealthCheckInterval, KeyHealthCheckRetries, KeyHealthCheckRestore)
	}
	if len(set) > 0 && lb.HealthCheck == "" {
		sort.Strings(set)
		return HealthTiming{}, fmt.Errorf("attribute %s has no effect with healthCheck none", strings.Join(set, ", "))
	}
	return h, nil
}

// over fills h's zero fields from d.
func over(h, d HealthTiming) HealthTiming {
	if h.Interval == 0 {
		h.Interval = d.Interval
	}
	if h.Retries == 0 {
		h.Retries = d.Retries
	}
	if h.Restore == 0 {
		h.Restore = d.Restore
	}
	return h
}

// healthOf is the timing the load balancer's real servers get when its caller knows it (lb.Health
// set, or a level-triggered Sync): lb.Health over the frontend's.
func (f *Frontend) healthOf(lb LoadBalancer) HealthTiming {
	if lb.Health == nil {
		return f.opts.HealthCheck
	}
	return over(*lb.Health, f.opts.HealthCheck)
}

// backendHealth is the timing for a backend added without the load balancer's attributes
// (ensureBackend): the last ensureLoadBalancer's, else what the load balancer's real servers carry
// on the device (this one first), else the frontend's.
func (f *Frontend) backendHealth(ctx context.Context, tx *alteon.Tx, lb LoadBalancer, rs string) (HealthTiming, error) {
	if lb.Health != nil {
		return f.healthOf(lb), nil
	}
	f.healthMu.Lock()
	h, ok := f.health[lb.ID()]
	f.healthMu.Unlock()
	if ok {
		return h, nil
	}
	members, err := tx.Members(ctx, lb.ID())
	if err != nil {
		return HealthTiming{}, err
	}
	candidates := []string{rs}
	for m := range members {
		if m != rs && lb.owns(m) {
			candidates = append(candidates, m)
		}
	}
	sort.Strings(candidates[1:])
	for _, id := range candidates {
		cur, ok, err := tx.RealServer(ctx, id)
		if err != nil {
			return HealthTiming{}, err
		}
		if ok && cur.Name == lb.Owner && cur.Health.Interval > 0 {
			return over(cur.Health, f.opts.HealthCheck), nil
		}
	}
	return f.opts.HealthCheck, nil
}

// rememberHealth keeps the timing an ensureLoadBalancer wrote, for the backends added next.
func (f *Frontend) rememberHealth(lb LoadBalancer, h HealthTiming) {
	f.healthMu.Lock()
	defer f.healthMu.Unlock()
	f.health[lb.ID()] = h
}

func (f *Frontend) forgetHealth(id string) {
	f.healthMu.Lock()
	defer f.healthMu.Unlock()
	delete(f.health, id)
}

// writeMembersHealth sets the timing on the load balancer's real servers in its group.
func (f *Frontend) writeMembersHealth(ctx context.Context, tx *alteon.Tx, lb LoadBalancer, h HealthTiming) error {
	members, err := tx.Members(ctx, lb.ID())
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(members))
	for m := range members {
		if lb.owns(m) {
			ids = append(ids, m)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		cur, ok, err := tx.RealServer(ctx, id)
		if err != nil {
			return err
		}
		if !ok || cur.Name != lb.Owner {
			continue
		}
		if _, err := tx.SetRealServerHealth(ctx, id, h); err != nil {
			return err
		}
	}
	return nil
}
