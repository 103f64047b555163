package controller_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
)

// BenchmarkHealthyDriverBesideHangingOne: the p99 time from a BackendGroup's creation to each
// of its 300 backends registered on a healthy driver, first alone, then while another driver's
// 600 records hang in generateBackendAddr (more than the 512 record workers). Default settings.
// Both phases run on one controller; the ratio is the cost of the hanging neighbour. Run with:
//
//	go test ./lbcf/controller -run XXX -bench HangingOne -benchtime 1x
func BenchmarkHealthyDriverBesideHangingOne(b *testing.B) {
	const healthy, hanging = 300, 600
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := newEnv(b)
		var mu sync.Mutex
		latency := map[string][]time.Duration{}
		start := map[string]time.Time{}
		e.start(controller.Options{OnRegistered: func(br *lbcfv1beta1.BackendRecord) {
			mu.Lock()
			defer mu.Unlock()
			g := br.Labels[lbcfv1beta1.LabelGroupName]
			latency[g] = append(latency[g], time.Since(start[g]))
		}})
		hang := e.secondDriver("hang", func(d *lbcfv1beta1.LoadBalancerDriver) {
			d.Spec.Webhooks = []lbcfv1beta1.WebhookConfig{{Name: driver.GenerateBackendAddr, Timeout: metav1.Duration{Duration: time.Minute}}}
		})
		hang.Inject(driver.GenerateBackendAddr, memdriver.Fault{Latency: time.Hour})
		e.driverObj("mem")
		e.lb("lb1", "mem")
		e.lb("lbh", "hang")
		e.lbID("lb1")
		e.lbID("lbh")
		for j := 0; j < healthy; j++ {
			e.pod(fmt.Sprintf("a-%03d", j), "alone", fmt.Sprintf("10.7.%d.%d", j/200, j%200+1))
			e.pod(fmt.Sprintf("b-%03d", j), "beside", fmt.Sprintf("10.8.%d.%d", j/200, j%200+1))
		}
		for j := 0; j < hanging; j++ {
			e.pod(fmt.Sprintf("h-%03d", j), "slow", fmt.Sprintf("10.9.%d.%d", j/200, j%200+1))
		}
		p99 := func(group string) time.Duration {
			mu.Lock()
			start[group] = time.Now()
			mu.Unlock()
			e.podGroup(group, []string{"lb1"}, []int32{80})
			for {
				mu.Lock()
				n := len(latency[group])
				mu.Unlock()
				if n >= healthy {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			l := latency[group]
			sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
			return l[len(l)*99/100]
		}
		defaults := controller.Options{}
		defaults.Defaults()
		b.StartTimer()
		alone := p99("alone")
		e.podGroup("slow", []string{"lbh"}, []int32{80})
		for {
			if n, _ := hang.InFlight(driver.GenerateBackendAddr); n >= defaults.DriverCallBudget {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		beside := p99("beside")
		b.StopTimer()
		_, peak := hang.InFlight(driver.GenerateBackendAddr)
		b.ReportMetric(alone.Seconds()*1000, "ms-p99-alone")
		b.ReportMetric(beside.Seconds()*1000, "ms-p99-beside-hanging")
		b.ReportMetric(beside.Seconds()/alone.Seconds(), "p99-ratio")
		b.ReportMetric(float64(peak), "hanging-calls-peak")
	}
}
