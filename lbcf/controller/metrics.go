package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Metrics are the original LBCF's controller metrics (same names and labels) plus lbfed's:
// driver_healthy, and candidates/registered gauges per BackendGroup.
type Metrics struct {
	K8sOpLatency      *prometheus.HistogramVec // k8s_operation_latency{k8s_op_obj, k8s_op_type}
	KeyProcessLatency *prometheus.HistogramVec // key_process_latency{crd}
	PendingKeys       *prometheus.GaugeVec     // pending_key{key_kind}: queue depth
	WorkingKeys       *prometheus.GaugeVec     // working_key{key_kind}
	DriverHealthy     *prometheus.GaugeVec     // driver_healthy{driver_name}
	// HeldPods: not-Ready pods a group keeps registered (see keptPods), by reason: unobserved
	// (readiness unobserved) or panic (the panic threshold). Only groups that hold some have series.
	HeldPods *prometheus.GaugeVec // lbfed_readiness_held_pods{namespace, group, reason}
}

// NewMetrics creates the metrics and registers them with reg (when not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		K8sOpLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "k8s_operation_latency", Help: "Latency of writes to the Kubernetes API in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"k8s_op_obj", "k8s_op_type"}),
		KeyProcessLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "key_process_latency", Help: "Time to process one queue key in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"crd"}),
		PendingKeys:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pending_key", Help: "Keys waiting in the queue."}, []string{"key_kind"}),
		WorkingKeys:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "working_key", Help: "Keys being processed."}, []string{"key_kind"}),
		DriverHealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "driver_healthy", Help: "1 when the driver's healthz answered healthy, 0 otherwise."}, []string{"driver_name"}),
		HeldPods: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lbfed_readiness_held_pods",
			Help: "Not-Ready pods a BackendGroup keeps registered: reason unobserved (readiness unobserved: node unreachable or NotReady) or panic (more than the panic threshold turned not Ready at once)."},
			[]string{"namespace", "group", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.K8sOpLatency, m.KeyProcessLatency, m.PendingKeys, m.WorkingKeys, m.DriverHealthy, m.HeldPods)
	}
	return m
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *lbcfv1beta1.LoadBalancerDriver:
		return lbcfv1beta1.KindLoadBalancerDriver
	case *lbcfv1beta1.LoadBalancer:
		return lbcfv1beta1.KindLoadBalancer
	case *lbcfv1beta1.BackendGroup:
		return lbcfv1beta1.KindBackendGroup
	case *lbcfv1beta1.BackendRecord:
		return lbcfv1beta1.KindBackendRecord
	}
	return obj.GetObjectKind().GroupVersionKind().Kind
}

// observeProcess records how long one key took.
func (m *Metrics) observeProcess(kind string, start time.Time) {
	m.KeyProcessLatency.WithLabelValues(kind).Observe(time.Since(start).Seconds())
}

// meteredQueue is the controller's work queue with pending_key/working_key gauges.
type meteredQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	pending, working prometheus.Gauge
	// pendingMu makes reading the length and setting the gauge one step: otherwise a caller that
	// read a longer queue could set its figure after the last worker set 0, and the gauge kept
	// showing work that was done (14 records for 15 minutes, beside workqueue_depth 0).
	pendingMu sync.Mutex
}

func (q *meteredQueue) setPending() {
	q.pendingMu.Lock()
	defer q.pendingMu.Unlock()
	q.pending.Set(float64(q.Len()))
}

func (m *Metrics) newQueue(kind string) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name})
		return &meteredQueue{TypedRateLimitingInterface: q, pending: m.PendingKeys.WithLabelValues(kind), working: m.WorkingKeys.WithLabelValues(kind)}
	}
}

func (q *meteredQueue) Add(item reconcile.Request) {
	q.TypedRateLimitingInterface.Add(item)
	q.setPending()
}

func (q *meteredQueue) Get() (reconcile.Request, bool) {
	item, shutdown := q.TypedRateLimitingInterface.Get()
	q.setPending()
	if !shutdown {
		q.working.Inc()
	}
	return item, shutdown
}

func (q *meteredQueue) Done(item reconcile.Request) {
	q.TypedRateLimitingInterface.Done(item)
	q.working.Dec()
	q.setPending()
}

// setHeld sets a group's held-pod figures; a group holding none has no series.
func (m *Metrics) setHeld(bg *lbcfv1beta1.BackendGroup, unobserved, panic int) {
	set := func(reason string, n int) {
		if n > 0 {
			m.HeldPods.WithLabelValues(bg.Namespace, bg.Name, reason).Set(float64(n))
		} else {
			m.HeldPods.DeleteLabelValues(bg.Namespace, bg.Name, reason)
		}
	}
	set("unobserved", unobserved)
	set("panic", panic)
}
