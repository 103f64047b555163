package federation

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Metrics are the federation's per-member figures:
//
//	lbfed_cluster_candidates{cluster}          candidate backends the member reports, all groups
//	lbfed_cluster_registered_backends{cluster} its backends registered on front ends (from the records)
//	lbfed_backend_registration_seconds{cluster} time from a record's creation (the federation seeing
//	                                             the backend) to the driver confirming the registration
//	lbfed_member_groups{cluster,state}         groups in which the member is in each state
//	                                             (Contributing, Stale, Unobserved, Held, Withdrawn,
//	                                             Recovering): Withdrawn and Held are what to alert on
//	lbfed_cluster_candidates_truncated{cluster} groups whose report from the member is cut to its budget
//	lbfed_cluster_unregistered_backends{cluster} its records not registered (yet)
//	lbfed_cluster_unregistered_oldest_seconds{cluster} age of its oldest record not registered
type Metrics struct {
	candidates   *prometheus.GaugeVec
	registration *prometheus.HistogramVec
	states       *prometheus.GaugeVec
	truncated    *prometheus.GaugeVec

	mu     sync.Mutex
	counts map[types.UID]map[string]int
	// plans: per group, each member's state and truncation.
	plans map[types.UID]map[string]memberFigures
	// records: the record gauges.
	records *recordCounts
}

type memberFigures struct {
	state     lbcfv1beta1.MemberState
	truncated bool
}

var memberStates = []lbcfv1beta1.MemberState{lbcfv1beta1.MemberContributing, lbcfv1beta1.MemberStale, lbcfv1beta1.MemberUnobserved,
	lbcfv1beta1.MemberHeld, lbcfv1beta1.MemberWithdrawn, lbcfv1beta1.MemberRecovering}

// NewMetrics creates the metrics and registers them with reg. The record gauges follow the
// records once Setup has given them the manager's cache.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		candidates: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lbfed_cluster_candidates", Help: "Candidate backends reported by each member cluster, over all BackendGroups."}, []string{"cluster"}),
		registration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lbfed_backend_registration_seconds", Help: "Seconds from a backend's record being created to its registration on the front end.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"cluster"}),
		states: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lbfed_member_groups",
			Help: "BackendGroups in which the member cluster is in each state (Contributing, Stale, Unobserved, Held, Withdrawn, Recovering)."}, []string{"cluster", "state"}),
		truncated: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lbfed_cluster_candidates_truncated",
			Help: "BackendGroups whose report from the member cluster is cut to its byte budget."}, []string{"cluster"}),
		counts:  map[types.UID]map[string]int{},
		plans:   map[types.UID]map[string]memberFigures{},
		records: newRecordCounts(),
	}
	if reg != nil {
		reg.MustRegister(m.candidates, m.registration, m.states, m.truncated, m.records)
	}
	return m
}

// setPlan records a group's member plan.
func (m *Metrics) setPlan(bg types.UID, p *groupPlan) {
	if m == nil {
		return
	}
	figures := map[string]memberFigures{}
	clusters := map[string]bool{}
	for name, mp := range p.members {
		figures[name] = memberFigures{state: mp.status.State, truncated: mp.status.Truncated}
		n := 0
		if mp.report != nil {
			n = len(mp.report.backends)
		}
		m.setCandidates(bg, name, n)
		clusters[name] = true
	}
	m.mu.Lock()
	for name := range m.plans[bg] {
		clusters[name] = true
	}
	m.plans[bg] = figures
	m.mu.Unlock()
	for name := range clusters {
		if _, ok := figures[name]; !ok {
			m.setCandidates(bg, name, 0)
		}
		m.refresh(name)
	}
}

// forget drops a deleted group's figures.
func (m *Metrics) forget(bg types.UID) {
	if m == nil {
		return
	}
	m.mu.Lock()
	clusters := map[string]bool{}
	for name := range m.plans[bg] {
		clusters[name] = true
	}
	for name := range m.counts[bg] {
		clusters[name] = true
	}
	delete(m.plans, bg)
	m.mu.Unlock()
	for name := range clusters {
		m.setCandidates(bg, name, 0)
		m.refresh(name)
	}
}

// refresh recomputes a cluster's state and truncation gauges over every group.
func (m *Metrics) refresh(cluster string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	counts := map[lbcfv1beta1.MemberState]int{}
	truncated := 0
	for _, per := range m.plans {
		if f, ok := per[cluster]; ok {
			counts[f.state]++
			if f.truncated {
				truncated++
			}
		}
	}
	for _, st := range memberStates {
		m.states.WithLabelValues(cluster, string(st)).Set(float64(counts[st]))
	}
	m.truncated.WithLabelValues(cluster).Set(float64(truncated))
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
