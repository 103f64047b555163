package soak

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Want is what the device must hold once the faults have stopped: per "vip:port" of every
// LoadBalancer, the Ready backends of every member of every group bound to it (enabled).
type Want map[string][]Member

// Diff lists how unit u differs from want (invariant 2): a LoadBalancer without exactly one
// virtual service, a member missing or extra (orphan), a weight or state that differs, a virtual
// service of no LoadBalancer, a real server held by no group.
func Diff(u Unit, want Want) []string {
	var out []string
	for _, key := range sortedKeys(want) {
		if n := u.Services[key]; n != 1 {
			out = append(out, fmt.Sprintf("%s: %s has %d virtual services, want 1", u.Name, key, n))
		}
		w := slices.Clone(want[key])
		SortMembers(w)
		got := u.Members[key]
		missing, extra := minus(w, got), minus(got, w)
		if len(missing) > 0 {
			out = append(out, fmt.Sprintf("%s: %s misses %v", u.Name, key, missing))
		}
		if len(extra) > 0 {
			out = append(out, fmt.Sprintf("%s: %s has orphans %v", u.Name, key, extra))
		}
	}
	for _, key := range sortedKeys(u.Services) {
		if _, ok := want[key]; !ok {
			out = append(out, fmt.Sprintf("%s: virtual service %s of no LoadBalancer (members %v)", u.Name, key, u.Members[key]))
		}
	}
	for _, o := range u.Orphans {
		out = append(out, u.Name+": orphan "+o)
	}
	return out
}

func minus(a, b []Member) []string {
	in := map[string]int{}
	for _, m := range b {
		in[m.String()]++
	}
	var out []string
	for _, m := range a {
		if in[m.String()] > 0 {
			in[m.String()]--
			continue
		}
		out = append(out, m.String())
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Record is a BackendRecord as the checks see it.
type Record struct {
	Name string
	// Service is the "vip:port" of its LoadBalancer ("" when the LoadBalancer is gone).
	Service    string
	Addr       string
	Registered bool
	Deleting   bool
	// Version is its resourceVersion: a record that did not change between two checks.
	Version string
}

// Unbacked lists the records that say Registered for an address the unit does not hold behind
// their LoadBalancer (invariant 3), keyed by name and version.
func Unbacked(records []Record, u Unit) map[string]string {
	out := map[string]string{}
	for _, r := range records {
		if !r.Registered || r.Deleting || r.Service == "" {
			continue
		}
		held := false
		for _, m := range u.Members[r.Service] {
			held = held || m.IP+":"+fmt.Sprint(m.Port) == r.Addr
		}
		if !held {
			out[r.Name+"@"+r.Version] = fmt.Sprintf("record %s says %s is Registered on %s; %s does not hold it", r.Name, r.Addr, r.Service, u.Name)
		}
	}
	return out
}

// Window is when a fault was in force.
type Window struct {
	Kind       Kind
	Target     string
	Start, End time.Time // End zero: still in force
}

// FailedRequest is one request through a VIP that got no answer from a pod.
type FailedRequest struct {
	At     time.Time
	VIP    string
	Err    string
	Reason string // refused, reset, timeout, bad answer
}

// PodStop is a backend whose process stopped: a pod deleted (after its preStop) or killed.
type PodStop struct {
	Addr string
	At   time.Time
	// Killed: the process died without warning (PodKill); else the pod was deleted.
	Killed bool
}

// Attribution bounds.
const (
	// HealthCheckBound is how long the device keeps choosing a dead real server: health checks
	// every 2 s, failed after 4 misses, plus one 2 s dial limit (the device's defaults).
	HealthCheckBound = 12 * time.Second
	// Aftermath is how long after a fault's end a failure is still the fault's.
	Aftermath = 60 * time.Second
)

// Cause names why a request failed, from what was in force at the time:
//   - "pod-killed": a pod's process died without warning within HealthCheckBound before: the
//     device's health check bounds it;
//   - "pod-stopped:<kinds>": a deleted pod stopped within HealthCheckBound before while still in
//     rotation, its drain delayed by the faults named (in force up to Aftermath before);
//   - "data-plane:<kinds>": a fault of the device was in force (or ended within Aftermath);
//   - "control-plane:<kinds>": only control-plane faults were (a violation of invariant 1);
//   - "no-fault": nothing was (a violation: the workload's changes alone must cost nothing).
func Cause(f FailedRequest, stops []PodStop, faults []Window) string {
	inForce := func(from, to time.Time) (device, control []string) {
		for _, w := range faults {
			end := w.End
			if end.IsZero() {
				end = to
			}
			if to.Before(w.Start) || from.After(end.Add(Aftermath)) {
				continue
			}
			if w.Kind.ControlPlane() {
				control = appendOnce(control, string(w.Kind))
			} else {
				device = appendOnce(device, string(w.Kind))
			}
		}
		return device, control
	}
	// The latest stop before the failure: the likeliest backend the device still chose.
	var latest *PodStop
	for i, s := range stops {
		if !f.At.Before(s.At) && f.At.Sub(s.At) <= HealthCheckBound && (latest == nil || s.At.After(latest.At)) {
			latest = &stops[i]
		}
	}
	if s := latest; s != nil {
		if s.Killed {
			return "pod-killed"
		}
		if device, control := inForce(s.At, s.At); len(device)+len(control) > 0 {
			return "pod-stopped:" + strings.Join(append(device, control...), "+")
		}
	}
	device, control := inForce(f.At, f.At)
	switch {
	case len(device) > 0:
		return "data-plane:" + strings.Join(device, "+")
	case len(control) > 0:
		return "control-plane:" + strings.Join(control, "+")
	}
	return "no-fault"
}

// Violation tells whether a cause breaks invariant 1.
func Violation(cause string) bool {
	return strings.HasPrefix(cause, "control-plane:") || cause == "no-fault"
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// Percentile returns the p-quantile (0..1) of d, nearest rank; 0 for none.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
