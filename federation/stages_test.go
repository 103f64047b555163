package federation_test

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// stages is a benchmark's timeline: when each kind of event (an API write of the controller, a
// driver call, a device commit) happened first and last after start, and how often. It tells
// where the time to "fully programmed" goes.
type stages struct {
	mu    sync.Mutex
	start time.Time
	at    map[string][]time.Duration
	sizes []int           // changes per device commit
	took  []time.Duration // duration of each device commit
}

func newStages() *stages { return &stages{start: time.Now(), at: map[string][]time.Duration{}} }

// restart forgets everything and counts time from now.
func (s *stages) restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start, s.at, s.sizes, s.took = time.Now(), map[string][]time.Duration{}, nil, nil
}

func (s *stages) mark(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at[name] = append(s.at[name], time.Since(s.start))
}

// table lists the stages by first occurrence: count, first, last (seconds after start).
func (s *stages) table() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.at))
	for n := range s.at {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return s.at[names[i]][0] < s.at[names[j]][0] })
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "stage\tn\tfirst s\tlast s")
	for _, n := range names {
		t := s.at[n]
		fmt.Fprintf(w, "%s\t%d\t%.2f\t%.2f\n", n, len(t), t[0].Seconds(), t[len(t)-1].Seconds())
	}
	_ = w.Flush()
	b.WriteString(s.timeline(names))
	fmt.Fprintf(&b, "changes per device commit: %v\n", s.sizes)
	took := make([]string, len(s.took))
	for i, d := range s.took {
		took[i] = fmt.Sprintf("%.2f", d.Seconds())
	}
	fmt.Fprintf(&b, "seconds per device commit: %v\n", took)
	return b.String()
}

// timelineStep is the width of a column of the timeline.
const timelineStep = 500 * time.Millisecond

// timeline counts each stage's events per timelineStep: whether the API server was kept busy
// while the device committed, and what the last step waited for. s.mu is held.
func (s *stages) timeline(names []string) string {
	cols := 0
	for _, t := range s.at {
		cols = max(cols, int(t[len(t)-1]/timelineStep)+1)
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "per 0.5 s from\t")
	for c := 0; c < cols; c++ {
		fmt.Fprintf(w, "%.1f\t", (time.Duration(c) * timelineStep).Seconds())
	}
	fmt.Fprintln(w)
	for _, n := range names {
		counts := make([]int, cols)
		for _, d := range s.at[n] {
			counts[int(d/timelineStep)]++
		}
		fmt.Fprintf(w, "%s\t", n)
		for _, c := range counts {
			fmt.Fprintf(w, "%d\t", c)
		}
		fmt.Fprintln(w)
	}
	_ = w.Flush()
	return b.String()
}

// traceAPI marks every mutating request of the controller built from cfg, when it is answered
// ("api PATCH backendrecords/status"; "… (409)" when refused).
func (s *stages) traceAPI(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			rsp, err := rt.RoundTrip(req)
			if req.Method != http.MethodGet {
				name := "api " + req.Method + " " + testenv.APIResource(req)
				switch {
				case err != nil:
					name += " (error)"
				case rsp.StatusCode >= 300:
					name += fmt.Sprintf(" (%d)", rsp.StatusCode)
				}
				s.mark(name)
			}
			return rsp, err
		})
	})
	return cfg
}

// traceCache marks when the controller's cache shows a record created or deleted: how far its
// watch trails the API writes.
func (s *stages) traceCache(mgr ctrl.Manager) {
	inf, err := mgr.GetCache().GetInformer(context.Background(), &lbcfv1beta1.BackendRecord{})
	if err != nil {
		panic(err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.mark("cache: backendrecords added") },
		DeleteFunc: func(any) { s.mark("cache: backendrecords deleted") },
	})
	if err != nil {
		panic(err)
	}
}

// traceDriver marks every webhook call when it arrives and when it is answered.
func (s *stages) traceDriver(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hook := path.Base(r.URL.Path)
		s.mark("driver " + hook + " called")
		h.ServeHTTP(w, r)
		s.mark("driver " + hook + " answered")
	})
}

// traceApplies marks every apply of the pair's units until stop is closed.
func (s *stages) traceApplies(sim *alteonsim.Pair, stop <-chan struct{}) {
	last := sim.A.Applies() + sim.B.Applies()
	for {
		select {
		case <-stop:
			return
		case <-time.After(2 * time.Millisecond):
		}
		n := sim.A.Applies() + sim.B.Applies()
		for ; last < n; last++ {
			s.mark("device apply")
		}
	}
}

// logger receives the Radware frontend's log: its commits are marked with their size.
func (s *stages) logger() logr.Logger { return logr.New(stageSink{s}) }

type stageSink struct{ s *stages }

func (stageSink) Init(logr.RuntimeInfo)  {}
func (stageSink) Enabled(level int) bool { return level <= 1 }
func (k stageSink) Info(_ int, msg string, kv ...any) {
	if msg != "Alteon transaction committed" {
		return
	}
	k.s.mark("device commit")
	for i := 0; i+1 < len(kv); i += 2 {
		k.s.mu.Lock()
		switch v := kv[i+1].(type) {
		case int:
			if kv[i] == "changes" {
				k.s.sizes = append(k.s.sizes, v)
			}
		case time.Duration:
			if kv[i] == "duration" {
				k.s.took = append(k.s.took, v)
			}
		}
		k.s.mu.Unlock()
	}
}
func (stageSink) Error(error, string, ...any)      {}
func (k stageSink) WithValues(...any) logr.LogSink { return k }
func (k stageSink) WithName(string) logr.LogSink   { return k }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
