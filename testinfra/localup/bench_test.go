package localup

import (
	"os"
	"testing"
	"time"

	"github.com/lbfed/lbfed/testinfra/localup/binaries"
)

// BenchmarkStart measures start-up (to ready) and stop of each kind of run, and the resident
// memory of all its processes once ready. The bare etcd+apiserver cluster is the baseline the
// others compare against:
//
//	go test ./testinfra/localup/ -run '^$' -bench Start -benchtime 3x
func BenchmarkStart(b *testing.B) {
	bins, err := binaries.Locate("")
	if err != nil {
		b.Skip(err)
	}
	cases := []struct {
		name  string
		start func() (stop func() error, procs func() []*Process, err error)
	}{
		{"bare-cluster", func() (func() error, func() []*Process, error) {
			c, err := StartCluster(b.Context(), ClusterOptions{Binaries: bins})
			if err != nil {
				return nil, nil, err
			}
			return c.Stop, c.Processes, nil
		}},
		{"workload-cluster", func() (func() error, func() []*Process, error) {
			c, err := StartCluster(b.Context(), ClusterOptions{Binaries: bins, ControllerManager: true, FakeNodes: 2, PodResponder: true})
			if err != nil {
				return nil, nil, err
			}
			return c.Stop, c.Processes, nil
		}},
		{"topology", func() (func() error, func() []*Process, error) {
			t, err := StartTopology(b.Context(), TopologyOptions{Binaries: bins})
			if err != nil {
				return nil, nil, err
			}
			return t.Stop, t.Processes, nil
		}},
		// The same plus a third member joined in Pull mode (its karmada-agent).
		{"topology-pull", func() (func() error, func() []*Process, error) {
			t, err := StartTopology(b.Context(), TopologyOptions{Binaries: bins, PullMembers: 1})
			if err != nil {
				return nil, nil, err
			}
			return t.Stop, t.Processes, nil
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var startTotal, stopTotal time.Duration
			var rss int64
			for b.Loop() {
				t0 := time.Now()
				stop, procs, err := tc.start()
				if err != nil {
					b.Fatal(err)
				}
				startTotal += time.Since(t0)
				rss = max(rss, totalRSS(procs()))
				t1 := time.Now()
				if err := stop(); err != nil {
					b.Fatal(err)
				}
				stopTotal += time.Since(t1)
			}
			n := float64(b.N)
			b.ReportMetric(startTotal.Seconds()/n, "start-s/op")
			b.ReportMetric(stopTotal.Seconds()/n, "stop-s/op")
			b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
		})
	}
}

// totalRSS sums VmRSS over running processes, plus this process (which hosts the pod
// responders), in bytes.
func totalRSS(procs []*Process) int64 {
	pids := []int{os.Getpid()}
	for _, p := range procs {
		if exited, _ := p.Exited(); !exited {
			pids = append(pids, p.PID())
		}
	}
	var total int64
	for _, pid := range pids {
		total += MemoryOf(pid, "VmRSS")
	}
	return total
}
