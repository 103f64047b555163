package bfe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
)

// Metrics are the driver's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	reloads        *prometheus.CounterVec
	reloadFailures *prometheus.CounterVec
	invalid        prometheus.Counter
	version        prometheus.Gauge
	batchSize      prometheus.Histogram
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lbfed_bfe_reloads_total",
			Help: "BFE reload requests by reload group (server_data_conf, gslb_data_conf), including failed ones.",
		}, []string{"group"}),
		reloadFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lbfed_bfe_reload_failures_total",
			Help: "BFE reloads that failed: a body other than {\"error\":null}, a transport error, or a version mismatch after the reload.",
		}, []string{"group"}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lbfed_bfe_invalid_configurations_total",
			Help: "Generated configurations rejected by validation before anything was written.",
		}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lbfed_bfe_config_version",
			Help: "Version number of the configuration BFE last accepted (the store's current version).",
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lbfed_bfe_commit_batch_size",
			Help:    "Driver calls committed together in one write and reload.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500},
		}),
	}
	reg.MustRegister(m.reloads, m.reloadFailures, m.invalid, m.version, m.batchSize)
	return m
}

func (m *Metrics) reloaded(g bfeconf.Group, err error) {
	if m == nil {
		return
	}
	m.reloads.WithLabelValues(string(g)).Inc()
	if err != nil {
		m.reloadFailures.WithLabelValues(string(g)).Inc()
	}
}

func (m *Metrics) validationFailed() {
	if m != nil {
		m.invalid.Inc()
	}
}

func (m *Metrics) setVersion(v uint64) {
	if m != nil {
		m.version.Set(float64(v))
	}
}

func (m *Metrics) batch(n int) {
	if m != nil {
		m.batchSize.Observe(float64(n))
	}
}
