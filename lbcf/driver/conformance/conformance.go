// Package conformance checks a running LBCF driver against the protocol's MUST rules. It talks to
// the driver only over HTTP, so it runs against any driver at a base URL:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Config{
//			BaseURL: srv.URL,
//			LBSpec:  map[string]string{"vip": "127.0.0.10", "port": "80", "protocol": "TCP"},
//		})
//	}
//
// Rules checked: the validate webhooks accept a valid load balancer; createLoadBalancer is
// idempotent per recordID; ensureLoadBalancer succeeds on a created load balancer; a Ready pod
// gets an address; re-ensuring a registered backend succeeds; deregistering an unregistered
// backend succeeds; deregistering twice succeeds; deleteLoadBalancer is idempotent;
// deregistering from a deleted load balancer succeeds; Running always turns into Succ or Fail;
// malformed request bodies get 4xx.
package conformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// Rule names, as reported in Results and subtests.
const (
	RuleValidate               = "validate webhooks accept a valid load balancer and backend"
	RuleCreateIdempotent       = "createLoadBalancer is idempotent per recordID"
	RuleEnsureLoadBalancer     = "ensureLoadBalancer succeeds on a created load balancer"
	RuleGenerateAddr           = "generateBackendAddr gives a Ready pod an address"
	RuleReEnsure               = "re-ensuring a registered backend succeeds"
	RuleDeregisterUnregistered = "deregistering an unregistered backend succeeds"
	RuleDeregisterTwice        = "deregistering a backend twice succeeds"
	RuleDeleteIdempotent       = "deleteLoadBalancer is idempotent"
	RuleDeregisterDeletedLB    = "deregistering from a non-existent load balancer succeeds"
	RuleRunningSettles         = "Running eventually turns into Succ or Fail"
	RuleMalformed              = "malformed request bodies get 4xx"
)

// Rules lists every rule in the order they are checked.
var Rules = []string{
	RuleValidate, RuleCreateIdempotent, RuleEnsureLoadBalancer, RuleGenerateAddr, RuleReEnsure,
	RuleDeregisterUnregistered, RuleDeregisterTwice, RuleDeleteIdempotent, RuleDeregisterDeletedLB,
	RuleRunningSettles, RuleMalformed,
}

// Config says how to reach the driver and what it accepts.
type Config struct {
	// BaseURL is the driver's URL (what a LoadBalancerDriver's spec.url would hold).
	BaseURL string
	// TLS configures HTTPS to the driver.
	TLS *tls.Config
	// LBSpec and Attributes describe a load balancer the driver accepts. The suite creates and
	// deletes several with distinct recordIDs; a driver may map them to one device object.
	LBSpec, Attributes map[string]string
	// Parameters are the backends' parameters.
	Parameters map[string]string
	// PodIPs are the IPs of the synthetic Ready pods used as backends (at least 2;
	// default 127.0.0.201 and 127.0.0.202).
	PodIPs []string
	// Port is the backends' port (default 8080).
	Port int32
	// SettleTimeout bounds how long a Running answer may last (default 60s).
	SettleTimeout time.Duration
	// MaxPoll caps the wait between polls of a Running operation (default 1s), whatever
	// minRetryDelayInSeconds asks for, to keep the suite quick.
	MaxPoll time.Duration
}

// Result is the outcome of one rule; Err is nil when the driver complies.
type Result struct {
	Rule string
	Err  error
}

// Run checks every rule as a subtest of t.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, r := range Check(ctx, cfg) {
		t.Run(r.Rule, func(t *testing.T) {
			if r.Err != nil {
				t.Error(r.Err)
			}
		})
	}
}

// Check checks every rule and returns one Result per rule, in Rules order.
func Check(ctx context.Context, cfg Config) []Result {
	if len(cfg.PodIPs) < 2 {
		cfg.PodIPs = []string{"127.0.0.201", "127.0.0.202"}
	}
	if cfg.Port == 0 {
		cfg.Port = 8080
	}
	if cfg.SettleTimeout <= 0 {
		cfg.SettleTimeout = time.Minute
	}
	if cfg.MaxPoll <= 0 {
		cfg.MaxPoll = time.Second
	}
	s := &suite{cfg: cfg, errs: map[string]error{},
		d: driver.Bound{
			Invoker:  driver.NewClient(driver.ClientOptions{TLS: cfg.TLS}),
			Endpoint: driver.Endpoint{Name: "conformance/" + cfg.BaseURL, URL: cfg.BaseURL},
		}}
	s.lifecycle(ctx)
	s.malformed(ctx)
	out := make([]Result, 0, len(Rules))
	for _, r := range Rules {
		out = append(out, Result{Rule: r, Err: s.errs[r]})
	}
	return out
}

type suite struct {
	cfg  Config
	d    driver.Bound
	errs map[string]error
}

// fail records the first error of a rule.
func (s *suite) fail(rule string, format string, args ...any) {
	if s.errs[rule] == nil {
		s.errs[rule] = fmt.Errorf(format, args...)
	}
}

// settle calls op until it answers Succ or Fail. It returns the last answer's status and message;
// an error means no valid answer (recorded against rule) or a Running that never ended.
func (s *suite) settle(ctx context.Context, rule, what string, op func() (*driver.ResponseForFailRetryHooks, error)) (string, string, error) {
	deadline := time.Now().Add(s.cfg.SettleTimeout)
	for {
		rsp, err := op()
		if err != nil {
			s.fail(rule, "%s: %v", what, err)
			return "", "", err
		}
		if rsp.Status != driver.StatusRunning {
			return rsp.Status, rsp.Msg, nil
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("%s: still Running after %s (last msg %q)", what, s.cfg.SettleTimeout, rsp.Msg)
			s.fail(RuleRunningSettles, "%v", err)
			return "", "", err
		}
		wait := time.Duration(rsp.MinRetryDelayInSeconds) * time.Second
		if wait <= 0 || wait > s.cfg.MaxPoll {
			wait = s.cfg.MaxPoll
		}
		select {
		case <-ctx.Done():
			return "", "", ctx.Err()
		case <-time.After(wait):
		}
	}
}

// succ settles op and records a rule failure unless it ends in Succ.
func (s *suite) succ(ctx context.Context, rule, what string, op func() (*driver.ResponseForFailRetryHooks, error)) bool {
	status, msg, err := s.settle(ctx, rule, what, op)
	if err != nil {
		return false
	}
	if status != driver.StatusSucc {
		s.fail(rule, "%s: status %s, msg %q", what, status, msg)
		return false
	}
	return true
}

func (s *suite) pod(i int) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("conformance-%d", i), Namespace: "default", UID: types.UID(uuid.NewUUID())},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: s.cfg.PodIPs[i], PodIPs: []corev1.PodIP{{IP: s.cfg.PodIPs[i]}}, HostIP: "127.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
}

// lifecycle walks one load balancer through create, backends and deletion, checking each rule.
func (s *suite) lifecycle(ctx context.Context) {
	d := s.d
	v, err := d.ValidateLoadBalancer(ctx, &driver.ValidateLoadBalancerRequest{LBSpec: s.cfg.LBSpec, Operation: driver.OperationCreate, Attributes: s.cfg.Attributes})
	switch {
	case err != nil:
		s.fail(RuleValidate, "validateLoadBalancer: %v", err)
	case !v.Succ:
		s.fail(RuleValidate, "validateLoadBalancer refused the configured load balancer: %s", v.Msg)
	}

	lbUID := string(uuid.NewUUID())
	create := func(rule string) (map[string]string, bool) {
		var info map[string]string
		ok := s.succ(ctx, rule, "createLoadBalancer", func() (*driver.ResponseForFailRetryHooks, error) {
			rsp, err := d.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{
				RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: driver.RecordID(driver.CreateLoadBalancer, lbUID)},
				LBSpec:               s.cfg.LBSpec, Attributes: s.cfg.Attributes,
			})
			if err != nil {
				return nil, err
			}
			info = rsp.LBInfo
			return &rsp.ResponseForFailRetryHooks, nil
		})
		if len(info) == 0 {
			info = s.cfg.LBSpec // LBCF stores lbSpec as lbInfo when the driver returns none
		}
		return info, ok
	}
	info, ok := create(RuleCreateIdempotent)
	if !ok {
		s.skipAfterCreate(RuleCreateIdempotent)
		return
	}
	again, ok := create(RuleCreateIdempotent)
	if ok && !reflect.DeepEqual(info, again) {
		s.fail(RuleCreateIdempotent, "the same recordID gave lbInfo %v, then %v", info, again)
	}
	defer s.cleanupLB(ctx, lbUID, info)

	s.succ(ctx, RuleEnsureLoadBalancer, "ensureLoadBalancer", func() (*driver.ResponseForFailRetryHooks, error) {
		rsp, err := d.EnsureLoadBalancer(ctx, &driver.EnsureLoadBalancerRequest{
			RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: driver.RecordID(driver.EnsureLoadBalancer, lbUID)},
			LBInfo:               info, Attributes: s.cfg.Attributes,
		})
		if err != nil {
			return nil, err
		}
		return &rsp.ResponseForFailRetryHooks, nil
	})

	vb, err := d.ValidateBackend(ctx, &driver.ValidateBackendRequest{BackendType: lbcfv1beta1.BackendTypePod, LBInfo: info, Operation: driver.OperationCreate, Parameters: s.cfg.Parameters})
	switch {
	case err != nil:
		s.fail(RuleValidate, "validateBackend: %v", err)
	case !vb.Succ:
		s.fail(RuleValidate, "validateBackend refused the configured parameters: %s", vb.Msg)
	}

	addrs := make([]string, 2)
	for i := range addrs {
		brUID := string(uuid.NewUUID())
		s.succ(ctx, RuleGenerateAddr, "generateBackendAddr", func() (*driver.ResponseForFailRetryHooks, error) {
			rsp, err := d.GenerateBackendAddr(ctx, &driver.GenerateBackendAddrRequest{
				RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: driver.RecordID(driver.GenerateBackendAddr, brUID)},
				LBInfo:               info, LBAttributes: s.cfg.Attributes, Parameters: s.cfg.Parameters,
				PodBackend: &driver.PodBackendInRequest{Pod: *s.pod(i), Port: lbcfv1beta1.PortSelector{Port: s.cfg.Port, Protocol: "TCP"}},
			})
			if err != nil {
				return nil, err
			}
			addrs[i] = rsp.BackendAddr
			return &rsp.ResponseForFailRetryHooks, nil
		})
		if addrs[i] == "" {
			s.skipAfterCreate(RuleGenerateAddr)
			return
		}
	}

	backendOp := func(rule, webhook, addr, uid string) bool {
		return s.succ(ctx, rule, webhook+" "+addr, func() (*driver.ResponseForFailRetryHooks, error) {
			req := &driver.BackendOperationRequest{
				RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: driver.RecordID(webhook, uid)},
				LBInfo:               info, BackendAddr: addr, Parameters: s.cfg.Parameters,
			}
			var rsp *driver.BackendOperationResponse
			var err error
			if webhook == driver.EnsureBackend {
				rsp, err = d.EnsureBackend(ctx, req)
			} else {
				rsp, err = d.DeregisterBackend(ctx, req)
			}
			if err != nil {
				return nil, err
			}
			return &rsp.ResponseForFailRetryHooks, nil
		})
	}
	registered := string(uuid.NewUUID())
	if backendOp(RuleReEnsure, driver.EnsureBackend, addrs[0], registered) {
		backendOp(RuleReEnsure, driver.EnsureBackend, addrs[0], registered)
	}
	backendOp(RuleDeregisterUnregistered, driver.DeregisterBackend, addrs[1], string(uuid.NewUUID()))
	if backendOp(RuleDeregisterTwice, driver.DeregisterBackend, addrs[0], registered) {
		backendOp(RuleDeregisterTwice, driver.DeregisterBackend, addrs[0], registered)
	}
	// Register again so that the load balancer is deleted with a backend on it, as LBCF does.
	backendOp(RuleReEnsure, driver.EnsureBackend, addrs[0], registered)

	del := func() bool {
		return s.succ(ctx, RuleDeleteIdempotent, "deleteLoadBalancer", func() (*driver.ResponseForFailRetryHooks, error) {
			rsp, err := d.DeleteLoadBalancer(ctx, &driver.DeleteLoadBalancerRequest{
				RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: driver.RecordID(driver.DeleteLoadBalancer, lbUID)},
				LBInfo:               info, Attributes: s.cfg.Attributes,
			})
			if err != nil {
				return nil, err
			}
			return &rsp.ResponseForFailRetryHooks, nil
		})
	}
	if del() {
		del()
		// LBCF deletes a load balancer without waiting for its backends, which are then
		// deregistered from a load balancer that no longer exists.
		backendOp(RuleDeregisterDeletedLB, driver.DeregisterBackend, addrs[0], registered)
	}
}

// skipAfterCreate marks the rules that could not be checked because an earlier step failed.
func (s *suite) skipAfterCreate(cause string) {
	for _, r := range []string{RuleEnsureLoadBalancer, RuleGenerateAddr, RuleReEnsure, RuleDeregisterUnregistered,
		RuleDeregisterTwice, RuleDeleteIdempotent, RuleDeregisterDeletedLB} {
		if r != cause {
			s.fail(r, "not checked: %q failed first", cause)
		}
	}
}

// cleanupLB deletes the suite's load balancer even when a check failed half-way.
func (s *suite) cleanupLB(ctx context.Context, lbUID string, info map[string]string) {
	_, _ = s.d.DeleteLoadBalancer(ctx, &driver.DeleteLoadBalancerRequest{
		RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: driver.RecordID(driver.DeleteLoadBalancer, lbUID)},
		LBInfo:               maps.Clone(info), Attributes: s.cfg.Attributes,
	})
}

// malformed posts bodies that are not valid requests to every webhook and expects 4xx.
func (s *suite) malformed(ctx context.Context) {
	base, err := url.Parse(s.cfg.BaseURL)
	if err != nil {
		s.fail(RuleMalformed, "bad base URL: %v", err)
		return
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if s.cfg.TLS != nil {
		client.Transport = &http.Transport{TLSClientConfig: s.cfg.TLS}
	}
	bodies := []string{`{`, `not json`, `[]`, `"a string"`, `{"dryRun": "yes"}`}
	var problems []string
	for _, w := range driver.Webhooks {
		u := *base
		u.Path = path.Join(u.Path, w)
		for _, b := range bodies {
			if w == driver.Healthz && b == `{"dryRun": "yes"}` {
				continue // healthz has no fields to get wrong
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader([]byte(b)))
			if err != nil {
				s.fail(RuleMalformed, "%v", err)
				return
			}
			req.Header.Set("Content-Type", "application/json")
			rsp, err := client.Do(req)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s %q: %v", w, b, err))
				continue
			}
			_ = rsp.Body.Close()
			if rsp.StatusCode < 400 || rsp.StatusCode > 499 {
				problems = append(problems, fmt.Sprintf("%s %q: HTTP %d", w, b, rsp.StatusCode))
			}
		}
	}
	if len(problems) > 0 {
		s.fail(RuleMalformed, "%s", strings.Join(problems, "; "))
	}
}

// Failed returns the results with errors.
func Failed(results []Result) []Result {
	var out []Result
	for _, r := range results {
		if r.Err != nil {
			out = append(out, r)
		}
	}
	return out
}
