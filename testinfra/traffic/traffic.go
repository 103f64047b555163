// Package traffic is the load the end-to-end suites send through a front end's VIP while they
// change things behind it: one HTTP request every interval, each on a new connection (an L4
// balancer chooses a backend per connection), answered by the demo workload with who answered
// (podresponder.Answer, the line both the local topology's pods and the kind topology's
// responder give). A request fails when it gets no such answer within RequestTimeout.
package traffic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/lbfed/lbfed/testinfra/localup/podresponder"
)

// Interval is the suites' pause between two requests.
const Interval = 20 * time.Millisecond

// RequestTimeout bounds one request. A refused, reset or unroutable connection fails at once;
// this only bounds a slow answer. It was a second: on the kind topology (three clusters and
// Karmada on two cores) one request in about 1,500 now and then waited longer during a burst of
// container starts (a client timeout, no refused or reset connection) and failed a gated
// rollout that otherwise dropped nothing.
const RequestTimeout = 3 * time.Second

// Load is a running load; Stop ends it.
type Load struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	sent     int
	failed   []time.Time
	errs     []string // the first few failures
	byMember map[string]int
}

// Start sends a GET to url every interval until Stop, at most max long (and max/interval
// requests).
func Start(url string, interval, max time.Duration) *Load {
	ctx, cancel := context.WithTimeout(context.Background(), max)
	l := &Load{cancel: cancel, done: make(chan struct{}), byMember: map[string]int{}}
	hc := Client()
	go func() {
		defer close(l.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; i < int(max/interval)+1; i++ {
			a, err := Get(ctx, hc, url)
			if ctx.Err() != nil {
				return
			}
			l.mu.Lock()
			l.sent++
			if err != nil {
				l.failed = append(l.failed, time.Now())
				if len(l.errs) < 5 {
					l.errs = append(l.errs, time.Now().Format("15:04:05.000")+" "+err.Error())
				}
			} else {
				l.byMember[a.Cluster]++
			}
			l.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return l
}

// Get asks url once and returns who answered.
func Get(ctx context.Context, hc *http.Client, url string) (podresponder.Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return podresponder.Answer{}, err
	}
	return Do(hc, req)
}

// Do sends req (a GET through a VIP, its Host an L7 route's) and returns who answered: a
// request fails unless a pod's responder answers it.
func Do(hc *http.Client, req *http.Request) (podresponder.Answer, error) {
	var a podresponder.Answer
	rsp, err := hc.Do(req)
	if err != nil {
		return a, err
	}
	defer rsp.Body.Close()
	if err := json.NewDecoder(rsp.Body).Decode(&a); err != nil || rsp.StatusCode != http.StatusOK || a.Pod == "" {
		return a, fmt.Errorf("%w: HTTP %d, answer %+v, %v", ErrBadAnswer, rsp.StatusCode, a, err)
	}
	return a, nil
}

// ErrBadAnswer is a request answered, but not by a pod's responder.
var ErrBadAnswer = errors.New("not a pod's answer")

// Client is the load's HTTP client: a new connection per request, RequestTimeout each.
func Client() *http.Client {
	return &http.Client{Timeout: RequestTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
}

// Result is what a load saw.
type Result struct {
	Sent, Failed int
	ByMember     map[string]int
	// FailedAt are the times of the failed requests; Failures the first few errors.
	FailedAt []time.Time
	Failures []string
}

func (r Result) String() string {
	return fmt.Sprintf("%d requests, %d failed, by member %v, first failures %q", r.Sent, r.Failed, r.ByMember, r.Failures)
}

// Stop ends the load (it may be called again) and returns what it saw.
func (l *Load) Stop() Result {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	by := make(map[string]int, len(l.byMember))
	for k, v := range l.byMember {
		by[k] = v
	}
	return Result{Sent: l.sent, Failed: len(l.failed), ByMember: by, FailedAt: append([]time.Time(nil), l.failed...), Failures: append([]string(nil), l.errs...)}
}

// Percentile returns the p quantile (0..1) of sorted durations (0 when empty).
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}
