package radware

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbfed/lbfed/elb/radware/alteon"
)

// Metrics are the Radware frontend's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	transactions *prometheus.CounterVec
	batchSize    prometheus.Histogram
	duration     prometheus.Histogram
	attempts     prometheus.Counter
	syncFailures prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lbfed_alteon_transactions_total",
			Help: "Alteon transactions by result: committed (apply+save), unchanged (nothing to apply), apply_failed, failed.",
		}, []string{"result"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lbfed_alteon_batch_size",
			Help:    "Changes (driver calls, Service syncs) committed together in one Alteon transaction.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lbfed_alteon_transaction_duration_seconds",
			Help:    "Duration of Alteon transactions from master discovery to the end of save and sync.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
		}),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lbfed_alteon_transaction_reruns_total",
			Help: "Transactions run again, on a new master or after a lost unit.",
		}),
		syncFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lbfed_alteon_sync_failures_total",
			Help: "Config syncs to the backup unit that failed after a commit.",
		}),
	}
	reg.MustRegister(m.transactions, m.batchSize, m.duration, m.attempts, m.syncFailures)
	return m
}

func (m *Metrics) commit(size int, res alteon.Result, err error, d time.Duration) {
	if m == nil {
		return
	}
	var ae *alteon.ApplyError
	result := "committed"
	switch {
	case errors.As(err, &ae):
		result = "apply_failed"
	case err != nil:
		result = "failed"
	case !res.Committed:
		result = "unchanged"
	}
	m.transactions.WithLabelValues(result).Inc()
	m.batchSize.Observe(float64(size))
	m.duration.Observe(d.Seconds())
	if res.Attempts > 1 {
		m.attempts.Add(float64(res.Attempts - 1))
	}
	if res.SyncErr != nil {
		m.syncFailures.Inc()
	}
}
