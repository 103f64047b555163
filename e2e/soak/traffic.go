package soak

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lbfed/lbfed/testinfra/traffic"
)

// Interval is the pause between two requests through one VIP (issue 46: one every 20 ms).
const Interval = traffic.Interval

// Traffic sends one request every Interval through each enabled VIP, a new connection each (an
// L4 balancer sends a whole connection to one backend), and records every request that no pod
// answered.
type Traffic struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	hc     *http.Client

	mu      sync.Mutex
	targets map[string]*target
	sent    map[string]int
	failed  []FailedRequest
}

type target struct{ on atomic.Bool }

// NewTraffic returns a load generator with no target yet.
func NewTraffic() *Traffic {
	ctx, cancel := context.WithCancel(context.Background())
	return &Traffic{ctx: ctx, cancel: cancel, targets: map[string]*target{}, sent: map[string]int{},
		hc: traffic.Client()}
}

// Enable starts (or resumes) the load through vip ("ip:port", or "host@ip:port" for an L7 route).
func (t *Traffic) Enable(vip string) {
	t.mu.Lock()
	tg := t.targets[vip]
	if tg == nil {
		tg = &target{}
		t.targets[vip] = tg
		t.wg.Add(1)
		go t.run(vip, tg)
	}
	t.mu.Unlock()
	tg.on.Store(true)
}

// Disable pauses the load through vip: taken from its LoadBalancer on purpose, it must not count.
func (t *Traffic) Disable(vip string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tg := t.targets[vip]; tg != nil {
		tg.on.Store(false)
	}
}

// Enabled tells whether the load runs through vip.
func (t *Traffic) Enabled(vip string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	tg := t.targets[vip]
	return tg != nil && tg.on.Load()
}

func (t *Traffic) run(vip string, tg *target) {
	defer t.wg.Done()
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		}
		if !tg.on.Load() {
			continue
		}
		at := time.Now()
		reason, err := t.get(vip)
		if t.ctx.Err() != nil {
			return
		}
		t.mu.Lock()
		t.sent[vip]++
		if err != nil {
			t.failed = append(t.failed, FailedRequest{At: at, VIP: vip, Err: err.Error(), Reason: reason})
		}
		t.mu.Unlock()
	}
}

func (t *Traffic) get(vip string) (reason string, err error) {
	host, addr, routed := strings.Cut(vip, "@") // an L7 route: "host@addr"
	if !routed {
		addr = vip
	}
	req, err := http.NewRequestWithContext(t.ctx, http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return "bad request", err
	}
	if routed {
		req.Host = host
	}
	if _, err := traffic.Do(t.hc, req); err != nil {
		var ne net.Error
		switch {
		case errors.Is(err, traffic.ErrBadAnswer):
			return "bad answer", err
		case errors.Is(err, syscall.ECONNREFUSED):
			return "refused", err
		case errors.Is(err, syscall.ECONNRESET), strings.Contains(err.Error(), "EOF"):
			return "reset", err
		case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
			return "timeout", err
		}
		return "error", err
	}
	return "", nil
}

// Stop ends the load.
func (t *Traffic) Stop() {
	t.cancel()
	t.wg.Wait()
}

// Totals returns the requests sent per VIP and every failed one so far.
func (t *Traffic) Totals() (sent map[string]int, failed []FailedRequest) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sent = make(map[string]int, len(t.sent))
	for k, v := range t.sent {
		sent[k] = v
	}
	return sent, append([]FailedRequest(nil), t.failed...)
}
