package interpreter

import (
	"time"

	configv1alpha1 "github.com/karmada-io/karmada/pkg/apis/config/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Metrics are the interpreter server's per-operation metrics.
type Metrics struct {
	// Requests counts answered requests by operation, kind and outcome (answered, noop, failed,
	// or bad_request for requests that could not be decoded).
	Requests *prometheus.CounterVec
	// Duration is the time from request to response, by operation.
	Duration *prometheus.HistogramVec
	// RequestBytes is the request body size, by operation: AggregateStatus carries every
	// member's status, so this shows how close groups get to the body limit.
	RequestBytes *prometheus.HistogramVec
}

// outcomeBadRequest labels requests that could not be decoded.
const outcomeBadRequest = "bad_request"

// NewMetrics creates the metrics and registers them with reg when it is not nil.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lbfed_interpreter_requests_total",
			Help: "Resource interpreter requests from Karmada, by operation, kind and outcome (answered, noop, failed, bad_request).",
		}, []string{"operation", "kind", "outcome"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lbfed_interpreter_request_duration_seconds",
			Help:    "Time to decode, interpret and answer a resource interpreter request, by operation.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"operation"}),
		RequestBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lbfed_interpreter_request_size_bytes",
			Help:    "Size of resource interpreter request bodies, by operation.",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 9), // 1 KiB .. 64 MiB
		}, []string{"operation"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.Requests, m.Duration, m.RequestBytes} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// operationLabel bounds the operation label to Karmada's operation names.
func operationLabel(op configv1alpha1.InterpreterOperation) string {
	switch op {
	case configv1alpha1.InterpreterOperationInterpretReplica,
		configv1alpha1.InterpreterOperationInterpretComponent,
		configv1alpha1.InterpreterOperationReviseReplica,
		configv1alpha1.InterpreterOperationInterpretStatus,
		configv1alpha1.InterpreterOperationPrune,
		configv1alpha1.InterpreterOperationRetain,
		configv1alpha1.InterpreterOperationAggregateStatus,
		configv1alpha1.InterpreterOperationInterpretHealth,
		configv1alpha1.InterpreterOperationInterpretDependency:
		return string(op)
	case "":
		return "none"
	}
	return "other"
}

// kindLabel bounds the kind label to the LBCF kinds.
func kindLabel(kind string) string {
	switch kind {
	case lbcfv1beta1.KindLoadBalancer, lbcfv1beta1.KindBackendGroup:
		return kind
	case "":
		return "none"
	}
	return "other"
}

func (m *Metrics) observe(op configv1alpha1.InterpreterOperation, kind, outcome string, size int, start time.Time) {
	if m == nil {
		return
	}
	o := operationLabel(op)
	m.Requests.WithLabelValues(o, kindLabel(kind), outcome).Inc()
	m.Duration.WithLabelValues(o).Observe(time.Since(start).Seconds())
	m.RequestBytes.WithLabelValues(o).Observe(float64(size))
}
