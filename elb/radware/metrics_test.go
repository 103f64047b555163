package radware

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/go-logr/logr"

	"github.com/lbfed/lbfed/elb/radware/alteonsim"
)

// series returns the value of the metric family name whose labels include want (nil: absent).
func series(g Gomega, reg *prometheus.Registry, name string, want map[string]string) *float64 {
	families, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			v := value(m)
			return &v
		}
	}
	return nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// TestDeviceMetrics: built from the command-line flags, the frontend exports device calls per unit
// (count by status, latency), each unit's HA role and the owed save/sync.
func TestDeviceMetrics(t *testing.T) {
	g := NewWithT(t)
	fast := alteonsim.Options{ApplyDuration: 5 * time.Millisecond, SaveDuration: time.Millisecond, SyncDuration: time.Millisecond}
	sim := alteonsim.NewPair(fast, fast)
	ua, ub, err := sim.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = sim.Close() })
	t.Setenv("ALTEON_PASSWORD", "admin")
	reg := prometheus.NewRegistry()
	f := Flags{URLs: ua + "," + ub, User: "admin", Sync: "explicit", PollInterval: 2 * time.Millisecond, ApplyTimeout: time.Minute,
		ForeignWait: time.Second, Window: 5 * time.Millisecond, HealthCheck: DefaultHealthTiming}
	fe, err := f.Frontend(logr.Discard(), reg)
	g.Expect(err).NotTo(HaveOccurred())
	unitA, unitB := ua[len("http://"):], ub[len("http://"):]

	lb := mustLB(t, map[string]string{"vip": "192.0.2.25", "port": "80"}, "elb/c1/ns/web")
	sim.A.InjectSaveFailure("Flash write error.")
	_, err = fe.Sync(testCtx(t), lb, []Backend{be("10.6.0.1", 30080)})
	g.Expect(err).To(HaveOccurred())
	g.Expect(series(g, reg, "lbfed_alteon_owed", map[string]string{"work": "save"})).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(series(g, reg, "lbfed_alteon_owed", map[string]string{"work": "sync"})).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(series(g, reg, "lbfed_alteon_requests_total", map[string]string{"unit": unitA, "method": "PUT", "target": "SlbNewCfgEnhVirtServerTable", "status": "200"})).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(series(g, reg, "lbfed_alteon_request_duration_seconds", map[string]string{"unit": unitA, "method": "GET"})).To(HaveValue(BeNumerically(">", 0)))
	g.Expect(series(g, reg, "lbfed_alteon_unit_role", map[string]string{"unit": unitA, "role": "master"})).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(series(g, reg, "lbfed_alteon_unit_role", map[string]string{"unit": unitB, "role": "backup"})).To(HaveValue(BeEquivalentTo(1)))

	g.Expect(fe.Pair().Settle(testCtx(t))).To(Succeed())
	g.Expect(series(g, reg, "lbfed_alteon_owed", map[string]string{"work": "save"})).To(HaveValue(BeEquivalentTo(0)))
	g.Expect(series(g, reg, "lbfed_alteon_owed", map[string]string{"work": "sync"})).To(HaveValue(BeEquivalentTo(0)))

	_ = sim.A.Close()
	g.Expect(fe.Healthy(testCtx(t))).To(HaveOccurred())
	g.Expect(series(g, reg, "lbfed_alteon_unit_role", map[string]string{"unit": unitA, "role": "unknown"})).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(series(g, reg, "lbfed_alteon_unit_role", map[string]string{"unit": unitA, "role": "master"})).To(HaveValue(BeEquivalentTo(0)))
	g.Expect(series(g, reg, "lbfed_alteon_requests_total", map[string]string{"unit": unitA, "status": "error"})).To(HaveValue(BeNumerically(">", 0)))
}
