package controller_test

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// apiWrites counts the mutating requests a controller sends to the API server, by resource
// ("backendrecords", "backendrecords/status", "events", …): the figure the registration path is
// bound by.
type apiWrites struct {
	mu          sync.Mutex
	n           map[string]int
	first, last map[string]time.Time
	latency     map[string]time.Duration // summed
	failed      map[string]int           // "resource code" of answers other than 2xx
	reads       map[string]int           // GETs (lists, watches) by resource
}

// countWrites makes the controller started next (e.start) count its writes in the test's
// namespace (the controller also acts on what earlier tests left in theirs).
func (e *env) countWrites() *apiWrites {
	ns := "/namespaces/" + e.ns + "/"
	w := &apiWrites{n: map[string]int{}, first: map[string]time.Time{}, last: map[string]time.Time{},
		latency: map[string]time.Duration{}, failed: map[string]int{}, reads: map[string]int{}}
	cfg := rest.CopyConfig(e.cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			sent := time.Now()
			if !strings.Contains(req.URL.Path, ns) {
				return rt.RoundTrip(req)
			}
			r, write := testenv.APIResource(req), req.Method != http.MethodGet
			if write {
				// Counted when sent: the server may have applied the write, and the test seen
				// it (a record gone), before its response reaches this client.
				w.mu.Lock()
				w.n[r]++
				w.mu.Unlock()
			}
			rsp, err := rt.RoundTrip(req)
			now := time.Now()
			w.mu.Lock()
			defer w.mu.Unlock()
			if !write {
				w.reads[r]++
				return rsp, err
			}
			w.latency[r] += now.Sub(sent)
			switch {
			case err != nil:
				w.failed[r+" error"]++
			case rsp.StatusCode >= 300:
				w.failed[r+" "+strconv.Itoa(rsp.StatusCode)]++
			}
			if _, ok := w.first[r]; !ok {
				w.first[r] = now
			}
			w.last[r] = now
			return rsp, err
		})
	})
	e.cfg = cfg
	return w
}

// of returns the writes of the given resources (e.g. "backendrecords", "backendrecords/status").
func (w *apiWrites) of(resources ...string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range resources {
		n += w.n[r]
	}
	return n
}

func (w *apiWrites) snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.n))
	for k, v := range w.n {
		out[k] = v
	}
	return out
}

// timeline tells, per resource, how many writes were answered and when the first and the last
// were, in seconds after start.
func (w *apiWrites) timeline(start time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.n))
	for r := range w.n {
		names = append(names, r)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, r := range names {
		fmt.Fprintf(&b, "\n  %-28s %6d  first %6.2fs  last %6.2fs  mean latency %4dms", r, w.n[r], w.first[r].Sub(start).Seconds(), w.last[r].Sub(start).Seconds(),
			(w.latency[r] / time.Duration(w.n[r])).Milliseconds())
	}
	fmt.Fprintf(&b, "\n  reads: %v", w.reads)
	if len(w.failed) > 0 {
		fmt.Fprintf(&b, "\n  not 2xx: %v", w.failed)
	}
	return b.String()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Registering a backend costs two writes of its record: the record (created with its address
// and its finalizer) and its Registered status (which copies the address into status.backendAddr).
func TestRegistrationWritesTwicePerBackend(t *testing.T) {
	e := newEnv(t)
	g := e.g
	writes := e.countWrites()
	e.driverObj("mem")
	e.lb("lb1", "mem")
	const n = 20
	var want []string
	for i := 0; i < n; i++ {
		ip := "10.7.0." + itoa(int32(i+1))
		e.pod("web-"+itoa(int32(i)), "web", ip)
		want = append(want, ip+":80")
	}
	e.start(fastOptions())
	id := e.lbID("lb1")
	e.podGroup("web", []string{"lb1"}, []int32{80})
	g.Eventually(e.backends(id), wait).Should(ConsistOf(want))
	g.Eventually(func() int32 { return e.group("web").Status.RegisteredBackends }, wait).Should(Equal(int32(n)))
	recs := e.records("web")
	g.Expect(recs).To(HaveLen(n))
	g.Expect(writes.of("backendrecords", "backendrecords/status")).To(Equal(2*n), "record writes: %v", writes.snapshot())
	for _, br := range recs {
		g.Expect(br.IsRegistered()).To(BeTrue())
		g.Expect(br.Finalizers).To(ConsistOf("lbcf.tkestack.io/deregister-backend"))
		g.Expect(br.Status.BackendAddr).NotTo(BeEmpty(), "the Registered write stores the address in the status too")
		g.Expect(br.Status.BackendAddr).To(Equal(br.Annotations[controller.AnnotationBackendAddr]))
	}
}
