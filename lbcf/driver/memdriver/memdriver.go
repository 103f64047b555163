// Package memdriver is an in-memory LBCF driver: a working example of the protocol for driver
// authors, and the driver controller tests run against. It records every call and can inject
// faults (fail N times, answer Running N times, add latency, answer an HTTP error or bad JSON).
//
// Behaviour, by webhook:
//   - validateLoadBalancer / validateBackend: allowed, unless lbSpec, attributes or parameters
//     carry the key DenyKey (its value is the message).
//   - createLoadBalancer: creates a load balancer once per recordID; lbInfo = lbSpec + {"lbID": id}.
//   - ensureLoadBalancer: stores the attributes; Fail when lbInfo names no load balancer.
//   - deleteLoadBalancer: removes it and its backends; Succ when it does not exist.
//   - generateBackendAddr: "<podIP>:<port>", or "<node address>:<nodePort>" for Service backends.
//   - ensureBackend: registers backendAddr with its parameters; Fail when the load balancer is missing.
//   - deregisterBackend: unregisters; Succ when the backend or the load balancer does not exist
//     (Running while a Drain fault lasts).
//   - judgePodDeregister: keeps pods labelled KeepLabel=true registered (or SetJudge's answer).
//   - healthz: healthy unless SetHealthy(false).
//
// Requests with dryRun=true are answered as if done but change nothing.
package memdriver

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lbfed/lbfed/lbcf/driver"
)

const (
	// DenyKey in lbSpec, attributes or parameters makes the validate webhooks refuse.
	DenyKey = "memdriver.lbfed.io/deny"
	// KeepLabel=true on a pod makes the default judgePodDeregister keep it registered.
	KeepLabel = "memdriver.lbfed.io/keep"
	// LBIDKey is the lbInfo key naming the load balancer.
	LBIDKey = "lbID"
)

// LoadBalancer is the driver's state of one load balancer.
type LoadBalancer struct {
	ID         string
	RecordID   string
	Spec       map[string]string
	Attributes map[string]string
	// Backends maps a backend address to its parameters.
	Backends map[string]map[string]string
}

// Call is one recorded webhook call.
type Call struct {
	Webhook string
	At      time.Time
	// Request is the decoded request (a pointer to one of the driver package's request types).
	Request any
	// Status is the answer's status (Succ/Fail/Running), "allow"/"deny" for validate webhooks, or
	// the injected fault ("http-500", "bad-json").
	Status string
}

// Fault is what to inject into a webhook's next calls.
type Fault struct {
	// Fail answers the next Fail calls with status Fail (validate webhooks: deny).
	Fail int
	// Running answers the next Running calls with status Running.
	Running int
	// HTTPStatus answers the next HTTPStatusTimes calls with this HTTP status.
	HTTPStatus      int
	HTTPStatusTimes int
	// BadJSON answers the next BadJSON calls with a body that is not JSON.
	BadJSON int
	// Latency delays every call (until the request is cancelled).
	Latency time.Duration
	// LoseAnswer (ensureBackend only): the next LoseAnswer calls change the load balancer and
	// then never answer, until the caller gives up — a device that applied a change whose
	// caller crashed or timed out before hearing back.
	LoseAnswer int
	// Drain (deregisterBackend only): the next Drain calls take the backend out of the load
	// balancer and answer Running, as a driver that drains connections before it removes a
	// backend does (the Radware driver's drain period).
	Drain int
	// RetryDelay is the minRetryDelayInSeconds of injected Fail and Running answers.
	RetryDelay int32
	// Msg is the message of injected answers.
	Msg string
}

// Driver is the in-memory driver. The zero value is not usable; call New.
type Driver struct {
	mu       sync.Mutex
	lbs      map[string]*LoadBalancer
	byRecord map[string]string // createLoadBalancer recordID → lbID
	nextID   int
	calls    []Call
	faults   map[string]*Fault
	healthy  bool
	judge    func([]*corev1.Pod) []*corev1.Pod
	// inFlight and maxInFlight count HTTP requests being served, per webhook: evidence of how
	// many calls a caller keeps open at once (e.g. against a hanging driver).
	inFlight, maxInFlight map[string]int
}

var _ driver.Driver = &Driver{}

// New returns an empty, healthy driver.
func New() *Driver {
	return &Driver{lbs: map[string]*LoadBalancer{}, byRecord: map[string]string{}, faults: map[string]*Fault{}, healthy: true,
		inFlight: map[string]int{}, maxInFlight: map[string]int{}}
}

// Handler serves the driver with the protocol kit, plus HTTP-level faults.
func (d *Driver) Handler(opts driver.HandlerOptions) http.Handler {
	kit := driver.NewHandler(d, opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		webhook := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		d.mu.Lock()
		d.inFlight[webhook]++
		d.maxInFlight[webhook] = max(d.maxInFlight[webhook], d.inFlight[webhook])
		defer func() {
			d.mu.Lock()
			d.inFlight[webhook]--
			d.mu.Unlock()
		}()
		f := d.faults[webhook]
		var status int
		var bad bool
		if f != nil {
			switch {
			case f.HTTPStatusTimes > 0:
				f.HTTPStatusTimes--
				status = f.HTTPStatus
			case f.BadJSON > 0:
				f.BadJSON--
				bad = true
			}
		}
		switch {
		case status != 0:
			d.calls = append(d.calls, Call{Webhook: webhook, At: time.Now(), Status: "http-" + strconv.Itoa(status)})
		case bad:
			d.calls = append(d.calls, Call{Webhook: webhook, At: time.Now(), Status: "bad-json"})
		}
		d.mu.Unlock()
		switch {
		case status != 0:
			http.Error(w, "injected fault", status)
		case bad:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status": "Succ", "msg": `))
		default:
			kit.ServeHTTP(w, r)
		}
	})
}

// Inject sets the fault of a webhook, replacing any previous one.
func (d *Driver) Inject(webhook string, f Fault) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults[webhook] = &f
}

// ClearFaults removes every fault.
func (d *Driver) ClearFaults() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = map[string]*Fault{}
}

// InFlight returns how many calls of webhook are being served now, and the most there ever were
// at once.
func (d *Driver) InFlight(webhook string) (now, peak int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inFlight[webhook], d.maxInFlight[webhook]
}

// SetHealthy sets healthz's answer.
func (d *Driver) SetHealthy(h bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.healthy = h
}

// SetJudge replaces judgePodDeregister's decision: it returns the pods to keep registered.
func (d *Driver) SetJudge(f func(notReady []*corev1.Pod) (keep []*corev1.Pod)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.judge = f
}

// Calls returns the recorded calls of the given webhooks (all when none is given), oldest first.
func (d *Driver) Calls(webhooks ...string) []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Call
	for _, c := range d.calls {
		if len(webhooks) == 0 || contains(webhooks, c.Webhook) {
			out = append(out, c)
		}
	}
	return out
}

// CountCalls returns how many calls of webhook were recorded.
func (d *Driver) CountCalls(webhook string) int { return len(d.Calls(webhook)) }

// ResetCalls forgets the recorded calls.
func (d *Driver) ResetCalls() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = nil
}

// LoadBalancers returns a copy of every load balancer, sorted by ID.
func (d *Driver) LoadBalancers() []LoadBalancer {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]LoadBalancer, 0, len(d.lbs))
	for _, lb := range d.lbs {
		out = append(out, lb.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// clone copies lb with its maps; the caller holds d.mu.
func (lb *LoadBalancer) clone() LoadBalancer {
	c := LoadBalancer{ID: lb.ID, RecordID: lb.RecordID, Spec: maps.Clone(lb.Spec), Attributes: maps.Clone(lb.Attributes),
		Backends: make(map[string]map[string]string, len(lb.Backends))}
	for a, p := range lb.Backends {
		c.Backends[a] = maps.Clone(p)
	}
	return c
}

// LoadBalancer returns a copy of the load balancer with the given ID (d.lbs is keyed by it).
func (d *Driver) LoadBalancer(id string) (LoadBalancer, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if lb, ok := d.lbs[id]; ok {
		return lb.clone(), true
	}
	return LoadBalancer{}, false
}

// BackendAddrs returns the sorted backend addresses registered on the load balancer.
func (d *Driver) BackendAddrs(lbID string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := []string{}
	if lb, ok := d.lbs[lbID]; ok {
		for a := range lb.Backends {
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return out
}

// BackendCount is len(BackendAddrs(lbID)) without collecting and sorting the addresses: for a poll
// that must not take the CPU the measured controller and API server need.
func (d *Driver) BackendCount(lbID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if lb, ok := d.lbs[lbID]; ok {
		return len(lb.Backends)
	}
	return 0
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// begin records the call, waits for injected latency and returns an injected answer, if any.
// It is called without d.mu held and returns with it held.
func (d *Driver) begin(ctx context.Context, webhook string, req any) (*driver.ResponseForFailRetryHooks, func(status string), error) {
	d.mu.Lock()
	f := d.faults[webhook]
	var latency time.Duration
	if f != nil {
		latency = f.Latency
	}
	d.mu.Unlock()
	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	d.mu.Lock()
	idx := len(d.calls)
	d.calls = append(d.calls, Call{Webhook: webhook, At: time.Now(), Request: req})
	record := func(status string) { d.calls[idx].Status = status }
	if f = d.faults[webhook]; f != nil {
		msg := f.Msg
		switch {
		case f.Fail > 0:
			f.Fail--
			if msg == "" {
				msg = "injected failure"
			}
			r := driver.Fail(msg, f.RetryDelay)
			return &r, record, nil
		case f.Running > 0:
			f.Running--
			if msg == "" {
				msg = "injected: still running"
			}
			r := driver.Running(msg, f.RetryDelay)
			return &r, record, nil
		}
	}
	return nil, record, nil
}

func (d *Driver) validate(ctx context.Context, webhook string, req any, inputs ...map[string]string) (driver.ResponseForNoRetryHooks, error) {
	injected, record, err := d.begin(ctx, webhook, req)
	if err != nil {
		return driver.ResponseForNoRetryHooks{}, err
	}
	defer d.mu.Unlock()
	if injected != nil {
		record("deny")
		return driver.Deny(injected.Msg), nil
	}
	for _, m := range inputs {
		if msg, ok := m[DenyKey]; ok {
			record("deny")
			return driver.Deny(msg), nil
		}
	}
	record("allow")
	return driver.Allow(), nil
}

// Healthz implements driver.Driver.
func (d *Driver) Healthz(ctx context.Context, req *driver.HealthzRequest) (*driver.HealthzResponse, error) {
	_, record, err := d.begin(ctx, driver.Healthz, req)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	record(strconv.FormatBool(d.healthy))
	return &driver.HealthzResponse{Healthy: d.healthy}, nil
}

// ValidateLoadBalancer implements driver.Driver.
func (d *Driver) ValidateLoadBalancer(ctx context.Context, req *driver.ValidateLoadBalancerRequest) (*driver.ValidateLoadBalancerResponse, error) {
	r, err := d.validate(ctx, driver.ValidateLoadBalancer, req, req.LBSpec, req.Attributes)
	return &driver.ValidateLoadBalancerResponse{ResponseForNoRetryHooks: r}, err
}

// ValidateBackend implements driver.Driver.
func (d *Driver) ValidateBackend(ctx context.Context, req *driver.ValidateBackendRequest) (*driver.ValidateBackendResponse, error) {
	r, err := d.validate(ctx, driver.ValidateBackend, req, req.Parameters)
	return &driver.ValidateBackendResponse{ResponseForNoRetryHooks: r}, err
}

// CreateLoadBalancer implements driver.Driver.
func (d *Driver) CreateLoadBalancer(ctx context.Context, req *driver.CreateLoadBalancerRequest) (*driver.CreateLoadBalancerResponse, error) {
	injected, record, err := d.begin(ctx, driver.CreateLoadBalancer, req)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	if injected != nil {
		record(injected.Status)
		return &driver.CreateLoadBalancerResponse{ResponseForFailRetryHooks: *injected}, nil
	}
	id, ok := d.byRecord[req.RecordID]
	if !ok {
		if req.DryRun {
			record(driver.StatusSucc)
			return &driver.CreateLoadBalancerResponse{ResponseForFailRetryHooks: driver.Succ(), LBInfo: lbInfo("dry-run", req.LBSpec)}, nil
		}
		d.nextID++
		id = "lb-" + strconv.Itoa(d.nextID)
		d.byRecord[req.RecordID] = id
		d.lbs[id] = &LoadBalancer{ID: id, RecordID: req.RecordID, Spec: maps.Clone(req.LBSpec), Attributes: maps.Clone(req.Attributes),
			Backends: map[string]map[string]string{}}
	}
	record(driver.StatusSucc)
	lb := d.lbs[id]
	return &driver.CreateLoadBalancerResponse{ResponseForFailRetryHooks: driver.Succ(), LBInfo: lbInfo(id, lb.Spec)}, nil
}

func lbInfo(id string, spec map[string]string) map[string]string {
	info := maps.Clone(spec)
	if info == nil {
		info = map[string]string{}
	}
	info[LBIDKey] = id
	return info
}

// EnsureLoadBalancer implements driver.Driver.
func (d *Driver) EnsureLoadBalancer(ctx context.Context, req *driver.EnsureLoadBalancerRequest) (*driver.EnsureLoadBalancerResponse, error) {
	injected, record, err := d.begin(ctx, driver.EnsureLoadBalancer, req)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	if injected != nil {
		record(injected.Status)
		return &driver.EnsureLoadBalancerResponse{ResponseForFailRetryHooks: *injected}, nil
	}
	lb, ok := d.lbs[req.LBInfo[LBIDKey]]
	if !ok {
		record(driver.StatusFail)
		return &driver.EnsureLoadBalancerResponse{ResponseForFailRetryHooks: driver.Fail(fmt.Sprintf("load balancer %q not found", req.LBInfo[LBIDKey]), 0)}, nil
	}
	if !req.DryRun {
		lb.Attributes = maps.Clone(req.Attributes)
	}
	record(driver.StatusSucc)
	return &driver.EnsureLoadBalancerResponse{ResponseForFailRetryHooks: driver.Succ()}, nil
}

// DeleteLoadBalancer implements driver.Driver.
func (d *Driver) DeleteLoadBalancer(ctx context.Context, req *driver.DeleteLoadBalancerRequest) (*driver.DeleteLoadBalancerResponse, error) {
	injected, record, err := d.begin(ctx, driver.DeleteLoadBalancer, req)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	if injected != nil {
		record(injected.Status)
		return &driver.DeleteLoadBalancerResponse{ResponseForFailRetryHooks: *injected}, nil
	}
	if lb, ok := d.lbs[req.LBInfo[LBIDKey]]; ok && !req.DryRun {
		delete(d.lbs, lb.ID)
		delete(d.byRecord, lb.RecordID)
	}
	record(driver.StatusSucc)
	return &driver.DeleteLoadBalancerResponse{ResponseForFailRetryHooks: driver.Succ()}, nil
}

// GenerateBackendAddr implements driver.Driver.
func (d *Driver) GenerateBackendAddr(ctx context.Context, req *driver.GenerateBackendAddrRequest) (*driver.GenerateBackendAddrResponse, error) {
	injected, record, err := d.begin(ctx, driver.GenerateBackendAddr, req)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	if injected != nil {
		record(injected.Status)
		return &driver.GenerateBackendAddrResponse{ResponseForFailRetryHooks: *injected}, nil
	}
	addr, msg := backendAddr(req)
	if addr == "" {
		record(driver.StatusFail)
		return &driver.GenerateBackendAddrResponse{ResponseForFailRetryHooks: driver.Fail(msg, 0)}, nil
	}
	record(driver.StatusSucc)
	return &driver.GenerateBackendAddrResponse{ResponseForFailRetryHooks: driver.Succ(), BackendAddr: addr}, nil
}

func backendAddr(req *driver.GenerateBackendAddrRequest) (addr, msg string) {
	switch {
	case req.PodBackend != nil:
		pod := &req.PodBackend.Pod
		ip := pod.Status.PodIP
		if ip == "" && len(pod.Status.PodIPs) > 0 {
			ip = pod.Status.PodIPs[0].IP
		}
		if ip == "" {
			return "", fmt.Sprintf("pod %s/%s has no IP", pod.Namespace, pod.Name)
		}
		return net.JoinHostPort(ip, strconv.Itoa(int(req.PodBackend.Port.GetPort()))), ""
	case req.ServiceBackend != nil:
		sb := req.ServiceBackend
		var nodePort int32
		for _, p := range sb.Service.Spec.Ports {
			if p.Port == sb.Port.GetPort() && string(p.Protocol) == sb.Port.GetProtocol() {
				nodePort = p.NodePort
			}
		}
		if nodePort == 0 {
			return "", fmt.Sprintf("service %s/%s has no nodePort for port %d/%s", sb.Service.Namespace, sb.Service.Name, sb.Port.GetPort(), sb.Port.GetProtocol())
		}
		for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
			for _, a := range sb.NodeAddresses {
				if a.Type == t && a.Address != "" {
					return net.JoinHostPort(a.Address, strconv.Itoa(int(nodePort))), ""
				}
			}
		}
		return "", fmt.Sprintf("node %s has no address", sb.NodeName)
	}
	return "", "neither podBackend nor serviceBackend is set"
}

// EnsureBackend implements driver.Driver.
func (d *Driver) EnsureBackend(ctx context.Context, req *driver.BackendOperationRequest) (*driver.BackendOperationResponse, error) {
	injected, record, err := d.begin(ctx, driver.EnsureBackend, req)
	if err != nil {
		return nil, err
	}
	rsp, lost := d.ensureBackend(req, injected, record)
	d.mu.Unlock()
	if lost {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return rsp, nil
}

// ensureBackend is EnsureBackend's work, with d.mu held; lost reports an answer to withhold.
func (d *Driver) ensureBackend(req *driver.BackendOperationRequest, injected *driver.ResponseForFailRetryHooks, record func(string)) (_ *driver.BackendOperationResponse, lost bool) {
	if injected != nil {
		record(injected.Status)
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: *injected}, false
	}
	id := req.LBInfo[LBIDKey]
	lb, ok := d.lbs[id]
	if !ok {
		record(driver.StatusFail)
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: driver.Fail(fmt.Sprintf("load balancer %q not found", id), 0)}, false
	}
	if req.BackendAddr == "" {
		record(driver.StatusFail)
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: driver.Fail("empty backendAddr", 0)}, false
	}
	if !req.DryRun {
		params := maps.Clone(req.Parameters)
		if params == nil {
			params = map[string]string{}
		}
		lb.Backends[req.BackendAddr] = params
	}
	if f := d.faults[driver.EnsureBackend]; f != nil && f.LoseAnswer > 0 {
		f.LoseAnswer--
		record("lost")
		return nil, true
	}
	record(driver.StatusSucc)
	return &driver.BackendOperationResponse{ResponseForFailRetryHooks: driver.Succ(),
		InjectedInfo: map[string]string{"backendID": id + "/" + req.BackendAddr}}, false
}

// DeregisterBackend implements driver.Driver.
func (d *Driver) DeregisterBackend(ctx context.Context, req *driver.BackendOperationRequest) (*driver.BackendOperationResponse, error) {
	injected, record, err := d.begin(ctx, driver.DeregisterBackend, req)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	if injected != nil {
		record(injected.Status)
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: *injected}, nil
	}
	if lb, ok := d.lbs[req.LBInfo[LBIDKey]]; ok && !req.DryRun {
		delete(lb.Backends, req.BackendAddr)
	}
	if f := d.faults[driver.DeregisterBackend]; f != nil && f.Drain > 0 {
		f.Drain--
		record(driver.StatusRunning)
		return &driver.BackendOperationResponse{ResponseForFailRetryHooks: driver.Running("injected: draining", f.RetryDelay)}, nil
	}
	record(driver.StatusSucc)
	return &driver.BackendOperationResponse{ResponseForFailRetryHooks: driver.Succ()}, nil
}

// JudgePodDeregister implements driver.Driver.
func (d *Driver) JudgePodDeregister(ctx context.Context, req *driver.JudgePodDeregisterRequest) (*driver.JudgePodDeregisterResponse, error) {
	injected, record, err := d.begin(ctx, driver.JudgePodDeregister, req)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	if injected != nil {
		record("deny")
		return &driver.JudgePodDeregisterResponse{ResponseForNoRetryHooks: driver.Deny(injected.Msg)}, nil
	}
	var keep []*corev1.Pod
	if d.judge != nil {
		keep = d.judge(req.NotReadyPods)
	} else {
		for _, p := range req.NotReadyPods {
			if p != nil && p.Labels[KeepLabel] == "true" {
				keep = append(keep, p)
			}
		}
	}
	record("allow")
	return &driver.JudgePodDeregisterResponse{ResponseForNoRetryHooks: driver.Allow(), DoNotDeregister: keep}, nil
}
