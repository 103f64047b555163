package driver

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the driver-call metrics of the original LBCF (same names and labels, no namespace
// prefix): webhook_calls, webhook_errors (no valid answer), webhook_fails (a Fail or a refusal)
// and webhook_latency, labelled by driver_name ("namespace/name") and webhook_name.
type Metrics struct {
	Calls   *prometheus.CounterVec
	Errors  *prometheus.CounterVec
	Fails   *prometheus.CounterVec
	Latency *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg (when not nil). Registering twice
// with the same registry returns the already registered collectors.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"driver_name", "webhook_name"}
	m := &Metrics{
		Calls:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "webhook_calls", Help: "Driver webhook calls."}, labels),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "webhook_errors", Help: "Driver webhook calls without a valid answer (network, HTTP status, decoding, invalid status)."}, labels),
		Fails:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "webhook_fails", Help: "Driver webhook answers with status Fail, or succ=false."}, labels),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "webhook_latency", Help: "Driver webhook call latency in seconds.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, labels),
	}
	if reg != nil {
		m.Calls = registerOrReuse(reg, m.Calls)
		m.Errors = registerOrReuse(reg, m.Errors)
		m.Fails = registerOrReuse(reg, m.Fails)
		m.Latency = registerOrReuse(reg, m.Latency)
	}
	return m
}

func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err) // a name clash with a different collector type is a programming error
	}
	return c
}
