package federation

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Metrics are the federation's per-member figures:
//
//	lbfed_cluster_candidates{cluster}          candidate backends the member reports, all groups
//	lbfed_cluster_registered_backends{cluster} its backends registered on front ends (from the records)
//	lbfed_backend_registration_seconds{cluster} time from a record's creation (the federation seeing
//	                                             the backend) to the driver confirming the registration
type Metrics struct {
	candidates   *prometheus.GaugeVec
	registration *prometheus.HistogramVec

	mu     sync.Mutex
	counts map[types.UID]map[string]int
}

// NewMetrics creates the metrics and registers them with reg. records lists the control plane's
// BackendRecords (the manager's cache) for the registered gauge, computed at scrape time.
func NewMetrics(reg prometheus.Registerer, records client.Reader) *Metrics {
	m := &Metrics{
		candidates: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lbfed_cluster_candidates", Help: "Candidate backends reported by each member cluster, over all BackendGroups."}, []string{"cluster"}),
		registration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lbfed_backend_registration_seconds", Help: "Seconds from a backend's record being created to its registration on the front end.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"cluster"}),
		counts: map[types.UID]map[string]int{},
	}
	if reg != nil {
		reg.MustRegister(m.candidates, m.registration, &registeredCollector{records: records})
	}
	return m
}

func (m *Metrics) setCandidates(bg types.UID, cluster string, n int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts[bg] == nil {
		m.counts[bg] = map[string]int{}
	}
	if n == 0 {
		delete(m.counts[bg], cluster)
	} else {
		m.counts[bg][cluster] = n
	}
	total := 0
	for _, per := range m.counts {
		total += per[cluster]
	}
	m.candidates.WithLabelValues(cluster).Set(float64(total))
}

// ObserveRegistered records a record's registration latency (engine hook).
func (m *Metrics) ObserveRegistered(br *lbcfv1beta1.BackendRecord) {
	if m == nil {
		return
	}
	m.registration.WithLabelValues(br.Labels[lbcfv1beta1.LabelCluster]).Observe(time.Since(br.CreationTimestamp.Time).Seconds())
}

// registeredCollector counts registered records per cluster when scraped.
type registeredCollector struct{ records client.Reader }

var registeredDesc = prometheus.NewDesc("lbfed_cluster_registered_backends", "Backends of each member cluster registered on front ends.", []string{"cluster"}, nil)

func (c *registeredCollector) Describe(ch chan<- *prometheus.Desc) { ch <- registeredDesc }

func (c *registeredCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &lbcfv1beta1.BackendRecordList{}
	if err := c.records.List(ctx, list, client.HasLabels{lbcfv1beta1.LabelCluster}, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	counts := map[string]int{}
	for i := range list.Items {
		if list.Items[i].IsRegistered() {
			counts[list.Items[i].Labels[lbcfv1beta1.LabelCluster]]++
		}
	}
	for cluster, n := range counts {
		ch <- prometheus.MustNewConstMetric(registeredDesc, prometheus.GaugeValue, float64(n), cluster)
	}
}
