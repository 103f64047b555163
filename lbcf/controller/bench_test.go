package controller_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// BenchmarkRegister5000Pods: a BackendGroup selecting 5,000 Ready pods, from creation to every
// backend registered on the memdriver, with the engine's default settings (client QPS 500/1000
// as lbcf-controller's flags; success events off — lbcf-controller turns them on as the original
// did, two more writes per backend). Each backend costs two writes of its record: the record,
// created with its address (the group asks generateBackendAddr first) and its finalizer, and its
// Registered status. The controller's API writes are counted (a transport wrapper: per resource,
// count, first and last answer, mean latency, non-2xx answers; logged with -v). The original
// LBCF's floor for the same job is 500 s: its 10 qps queue limiter paces the 5,000 records. Target:
// ≤ 20 s. Run with:
//
//	go test ./lbcf/controller -run XXX -bench Register5000 -benchtime 1x -v
//	LBFED_BENCH_CPU_PROFILE=/tmp/own.pprof …  # this process's CPU over the measured phase
//
// Measurements and their history: docs/benchmarks.md ("BenchmarkRegister5000Pods (lbcf/controller)").
func BenchmarkRegister5000Pods(b *testing.B) {
	const n = 5000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := newEnv(b)
		// As deployed: a ServiceAccount token, and lbcf-controller's default client rate.
		e.cfg = testenv.TokenConfig(b, "lbcf-controller")
		e.cfg.QPS, e.cfg.Burst = 500, 1000
		writes := e.countWrites()
		e.driverObj("mem")
		e.lb("lb1", "mem")
		createPods(b, e, n)
		stopController := e.start(controller.Options{})
		id := e.lbID("lb1")
		stop, peakc := make(chan struct{}), make(chan uint64)
		go samplePeakHeap(stop, peakc)
		start, cpu0, own0 := time.Now(), testenv.ControlPlaneCPU(b), testenv.OwnCPU(b)
		b.StartTimer()
		profiled := testenv.ProfileAPIServer(b, e.cfg, "register5000", 15*time.Second)
		stopOwnProfile := testenv.ProfileOwnCPU(b)
		e.podGroup("web", []string{"lb1"}, []int32{80})
		for e.drv.BackendCount(id) < n {
			time.Sleep(50 * time.Millisecond)
		}
		for e.group("web").Status.RegisteredBackends < n {
			time.Sleep(50 * time.Millisecond)
		}
		b.StopTimer()
		stopOwnProfile()
		own := testenv.OwnCPU(b) - own0
		profiled()
		close(stop)
		peak := <-peakc
		elapsed := time.Since(start)
		b.ReportMetric(float64((testenv.ControlPlaneCPU(b)-cpu0).Milliseconds())/n, "cp-cpu-ms/backend")
		// This process: the controller, the memdriver and the benchmark's own polling.
		b.ReportMetric(float64(own.Milliseconds())/n, "own-cpu-ms/backend")
		b.ReportMetric(elapsed.Seconds(), "s/5000-registered")
		b.ReportMetric(500, "s/lbcf-floor")
		b.ReportMetric(500/elapsed.Seconds(), "x-faster-than-floor")
		b.ReportMetric(float64(peak)/(1<<20), "MiB-peak-heap")
		b.ReportMetric(float64(writes.of("backendrecords", "backendrecords/status"))/n, "record-writes/backend")
		all := 0
		for _, v := range writes.snapshot() {
			all += v
		}
		b.ReportMetric(float64(all)/n, "api-writes/backend")
		b.Logf("API writes of the controller:%s", writes.timeline(start))
		// The baseline in the same run: the controller's record writes again without the
		// controller.
		stopController()
		replay := testenv.Replay{Config: e.cfg, Scheme: scheme, Namespace: e.ns + "-bare"}
		if v := os.Getenv("LBFED_BENCH_BARE_IN_FLIGHT"); v != "" {
			var err error
			if replay.InFlight, err = strconv.Atoi(v); err != nil {
				b.Fatal(err)
			}
		}
		recs := &lbcfv1beta1.BackendRecordList{}
		if err := e.c.List(e.ctx, recs, client.InNamespace(e.ns)); err != nil {
			b.Fatal(err)
		}
		written := make([]client.Object, len(recs.Items))
		for i := range recs.Items {
			written[i] = &recs.Items[i]
		}
		bare, bareCPU := replay.Run(b, nil, written, nil)
		b.ReportMetric(bare.Seconds(), "s-bare-writes")
		b.ReportMetric(float64(bareCPU.Milliseconds())/n, "bare-cp-cpu-ms/backend")
		b.ReportMetric(elapsed.Seconds()/bare.Seconds(), "x-bare-writes")
	}
}

func createPods(b *testing.B, e *env, n int) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%05d", i), Namespace: e.ns, Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}, NodeName: "node-1"},
			}
			if err := e.c.Create(context.Background(), p); err != nil {
				errs <- err
				return
			}
			ip := fmt.Sprintf("10.%d.%d.%d", 100+i/65536, (i/256)%256, i%256)
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
			if err := e.c.Status().Update(context.Background(), p); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	list := &corev1.PodList{}
	if err := e.c.List(context.Background(), list, client.InNamespace(e.ns)); err != nil || len(list.Items) != n {
		b.Fatalf("pods: %d, %v", len(list.Items), err)
	}
}

func samplePeakHeap(stop chan struct{}, out chan<- uint64) {
	var ms runtime.MemStats
	var peak uint64
	for {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		select {
		case <-stop:
			out <- peak
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}
