package radware

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbfed/lbfed/elb/radware/alteon"
)

// Metrics are the Radware frontend's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	reg          prometheus.Registerer
	transactions *prometheus.CounterVec
	batchSize    prometheus.Histogram
	duration     prometheus.Histogram
	attempts     prometheus.Counter
	syncFailures prometheus.Counter
	requests     *prometheus.CounterVec
	reqDuration  *prometheus.HistogramVec
	role         *prometheus.GaugeVec
	roles        sync.Map // unit -> last role label set to 1
}

// HA roles reported by lbfed_alteon_unit_role ("unknown": the role could not be read).
var roleLabels = []string{"master", "backup", "standalone", "other", "unknown"}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lbfed_alteon_requests_total",
			Help: "HTTP requests to the Alteon units (every attempt) by unit, method, target (table, config or getdiff) and status (HTTP code, or error when no answer came).",
		}, []string{"unit", "method", "target", "status"}),
		reqDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lbfed_alteon_request_duration_seconds",
			Help:    "Latency of HTTP requests to the Alteon units by unit and method.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}, []string{"unit", "method"}),
		role: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lbfed_alteon_unit_role",
			Help: "HA role of each Alteon unit as last read: 1 for the current role (master, backup, standalone for a single unit, other, unknown when unreadable), 0 for the others.",
		}, []string{"unit", "role"}),
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lbfed_alteon_transactions_total",
			Help: "Alteon transactions by result: committed (apply+save), unchanged (nothing to apply), apply_failed, change_refused (the device refused one change's write; it was taken out of the batch), failed.",
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
	reg.MustRegister(m.transactions, m.batchSize, m.duration, m.attempts, m.syncFailures, m.requests, m.reqDuration, m.role)
	return m
}

// Request records one HTTP request to a unit (alteon.Config.OnRequest).
func (m *Metrics) Request(r alteon.RequestInfo) {
	if m == nil {
		return
	}
	status := "error"
	if r.Status != 0 {
		status = strconv.Itoa(r.Status)
	}
	m.requests.WithLabelValues(r.Unit, r.Method, r.Target, status).Inc()
	m.reqDuration.WithLabelValues(r.Unit, r.Method).Observe(r.Duration.Seconds())
}

// Role records a unit's HA role as read (alteon.PairOptions.OnRole; "" when unreadable).
func (m *Metrics) Role(unit, role string) {
	if m == nil {
		return
	}
	label := role
	switch role {
	case "master", "backup", "standalone":
	case "":
		label = "unknown"
	default:
		label = "other"
	}
	if prev, ok := m.roles.Swap(unit, label); ok && prev == label {
		return
	}
	for _, l := range roleLabels {
		v := 0.0
		if l == label {
			v = 1
		}
		m.role.WithLabelValues(unit, l).Set(v)
	}
}

// watchPair exports the pair's owed work: lbfed_alteon_owed{work="save"|"sync"}.
func (m *Metrics) watchPair(p *alteon.Pair) {
	if m == nil || p == nil {
		return
	}
	owed := func(get func(alteon.Owed) bool) func() float64 {
		return func() float64 {
			if get(p.Owed()) {
				return 1
			}
			return 0
		}
	}
	for work, get := range map[string]func(alteon.Owed) bool{
		"save": func(o alteon.Owed) bool { return o.Save },
		"sync": func(o alteon.Owed) bool { return o.Sync },
	} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "lbfed_alteon_owed",
			Help:        "1 while commit work is owed: a save (the running configuration may not survive a reboot) or a sync (the backup may lack it; a failover would roll it back).",
			ConstLabels: prometheus.Labels{"work": work},
		}, owed(get)))
	}
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
	case ownFault(err):
		result = "change_refused"
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
