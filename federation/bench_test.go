package federation_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/elb/radware"
	"github.com/lbfed/lbfed/elb/radware/alteon"
	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/elb/radware/alteonsim/simpair"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// radwareDriverWith serves the Radware driver over a simulated HA pair with the given device
// timings and status poll interval; wrap, when set, wraps the driver's handler.
func radwareDriverWith(tb testing.TB, o alteonsim.Options, poll time.Duration, wrap func(http.Handler) http.Handler) (url string, sim *alteonsim.Pair) {
	return radwareDriverLogged(tb, o, poll, wrap, logr.Discard())
}

// radwareDriverLogged is radwareDriverWith whose frontend logs to log.
func radwareDriverLogged(tb testing.TB, o alteonsim.Options, poll time.Duration, wrap func(http.Handler) http.Handler, log logr.Logger) (url string, sim *alteonsim.Pair) {
	sim, pair := simpair.Start(tb, o, o, 5*time.Millisecond, alteon.PairOptions{PollInterval: poll})
	fo := radware.FrontendOptions{Pair: pair, Logger: log}
	// The burst window's default, or another one to compare (e.g. -1 for none).
	if v := os.Getenv("LBFED_BENCH_RADWARE_MAX_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			tb.Fatal(err)
		}
		fo.MaxWindow = d
	}
	fe, err := radware.NewFrontend(fo)
	if err != nil {
		tb.Fatal(err)
	}
	drv, err := radware.NewDriver(radware.DriverOptions{Frontend: fe, RetryDelaySeconds: 1})
	if err != nil {
		tb.Fatal(err)
	}
	var h http.Handler = driver.NewHandler(drv, driver.HandlerOptions{})
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv.URL, sim
}

// BenchmarkFederatedBackendChanges: three members report 1,000 backend changes at once (500 of
// the 999 registered pods replaced by 500 new ones, spread over the members). Measured: device
// applies and time until the group is fully programmed again (every expected backend registered,
// every removed one deregistered). Target ≤ 5 applies and < 5 s. Also reported: the CPU per
// change of the control plane (API server and etcd) and of this process (the controller, the
// Radware driver and the simulated HA pair). The stages (API writes of the controller, driver
// calls, device commits with their size and duration: count, first and last) are logged with -v.
//
//	go test ./federation -run XXX -bench FederatedBackendChanges -benchtime 1x -v
//	LBFED_BENCH_RADWARE_MAX_WINDOW=-1ns …     # the Radware frontend without its burst window
//	LBFED_BENCH_RECORD_WORKERS=1024 …         # more record workers, and so a larger call budget
//	LBFED_BENCH_CPU_PROFILE=/tmp/own.pprof …  # this process's CPU over the measured phase
//	LBFED_BENCH_APISERVER_PROFILE=/tmp/p …    # the test API server's CPU (6 s from the binding write)
//
// Measurements and their history: docs/benchmarks.md ("BenchmarkFederatedBackendChanges (federation)").
func BenchmarkFederatedBackendChanges(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st := newStages()
		e := newEnvWithoutController(b)
		e.cfg = st.traceAPI(e.cfg)
		e.onManager = st.traceCache
		stopController := e.startController(time.Minute)
		o := alteonsim.Options{ApplyDuration: 20 * time.Millisecond, SaveDuration: 5 * time.Millisecond, SyncDuration: 10 * time.Millisecond}
		url, sim := radwareDriverLogged(b, o, 5*time.Millisecond, st.traceDriver, st.logger())
		e.url = url
		e.worldSpec("m1", "m2", "m3")(map[string]string{"vip": "127.0.0.50", "port": "80", "protocol": "TCP"})
		podsOf := func(gen, offset int) map[string][]pod {
			out := map[string][]pod{}
			for j := 0; j < 999; j++ {
				c := fmt.Sprintf("m%d", j%3+1)
				n := offset + j
				out[c] = append(out[c], pod{fmt.Sprintf("p%d-%d", gen, n), fmt.Sprintf("10.%d.%d.%d", 60+j%3, n/250, n%250+1), true})
			}
			return out
		}
		set := func(pods map[string][]pod) {
			items := map[string]*runtime.RawExtension{}
			for c, ps := range pods {
				items[c] = report(nil, 1, 1, false, ps...)
			}
			e.setReports(items)
		}
		// The records are listed only once the group's counts are right: listing a thousand
		// records every 100ms would cost the API server (on the same two cores) more than a
		// little.
		registered := func(n int32) {
			e.g.Eventually(func(g Gomega) {
				bg := &lbcfv1beta1.BackendGroup{}
				g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(e.bg), bg)).To(Succeed())
				g.Expect(bg.Status.Backends).To(Equal(n))
				g.Expect(bg.Status.RegisteredBackends).To(Equal(n))
				recs := &metav1.PartialObjectMetadataList{}
				recs.SetGroupVersionKind(lbcfv1beta1.SchemeGroupVersion.WithKind("BackendRecordList"))
				g.Expect(e.c.List(e.ctx, recs, client.InNamespace(e.ns))).To(Succeed())
				g.Expect(recs.Items).To(HaveLen(int(n)), "deregistered records are gone")
			}, 5*time.Minute, 100*time.Millisecond).Should(Succeed())
		}
		first := podsOf(0, 0)
		set(first)
		registered(999)
		// 1,000 changes: 500 pods go, 500 new ones come, in all three members at once.
		next := map[string][]pod{}
		for c, ps := range first {
			next[c] = append(next[c], ps[:len(ps)/2]...)
		}
		for c, ps := range podsOf(1, 1000) {
			next[c] = append(next[c], ps[:len(ps)/2]...)
		}
		n := 0
		for _, ps := range next {
			n += len(ps)
		}
		recsBefore := e.records(b)
		stop := make(chan struct{})
		st.restart()
		go st.traceApplies(sim, stop)
		before := sim.A.Applies() + sim.B.Applies()
		start, cpu0, own0 := time.Now(), testenv.ControlPlaneCPU(b), testenv.OwnCPU(b)
		profiled := testenv.ProfileAPIServer(b, e.cfg, "backendchanges", 6*time.Second)
		stopProfile := testenv.ProfileOwnCPU(b)
		b.StartTimer()
		set(next)
		st.mark("binding written")
		registered(int32(n))
		b.StopTimer()
		stopProfile()
		st.mark("fully programmed (seen by the benchmark)")
		close(stop)
		b.ReportMetric(float64(sim.A.Applies()+sim.B.Applies()-before), "applies")
		programmed := time.Since(start)
		b.ReportMetric(programmed.Seconds(), "s-to-programmed")
		b.ReportMetric(float64((testenv.ControlPlaneCPU(b)-cpu0).Milliseconds())/1000, "cp-cpu-ms/change")
		// The test process: the controller, the Radware driver and the simulated HA pair.
		b.ReportMetric(float64((testenv.OwnCPU(b)-own0).Milliseconds())/1000, "own-cpu-ms/change")
		profiled()
		b.Logf("stages after the binding write:\n%s", st.table())
		// The baseline in the same run: the controller's record writes again by a bare
		// client, from the same 999 records (see testenv.Replay).
		stopController()
		recsAfter := e.records(b)
		var created, deleted []client.Object
		for name, br := range recsAfter {
			if recsBefore[name] == nil {
				created = append(created, br)
			}
		}
		for name, br := range recsBefore {
			if recsAfter[name] == nil {
				deleted = append(deleted, br)
			}
		}
		var initial []client.Object
		for _, br := range recsBefore {
			initial = append(initial, br)
		}
		replay := testenv.Replay{Config: e.cfg, Scheme: scheme, Namespace: e.ns + "-bare"}
		bare, bareCPU := replay.Run(b, initial, created, deleted)
		b.ReportMetric(bare.Seconds(), "s-bare-writes")
		b.ReportMetric(float64(bareCPU.Milliseconds())/float64(len(created)+len(deleted)), "bare-cp-cpu-ms/change")
		b.ReportMetric(programmed.Seconds()/bare.Seconds(), "x-bare-writes")
	}
}

// records are the records of e's namespace by name.
func (e *env) records(tb testing.TB) map[string]client.Object {
	list := &lbcfv1beta1.BackendRecordList{}
	if err := e.c.List(e.ctx, list, client.InNamespace(e.ns)); err != nil {
		tb.Fatal(err)
	}
	out := make(map[string]client.Object, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}
