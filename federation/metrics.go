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

	// The gauges are running totals, changed by each group's difference: recomputed over every
	// group for each group reconcile, they cost 1.9 ms per reconcile at 10,000 groups, under this
	// lock, and a restart reconciles every group.
	mu sync.Mutex
	// counts: per group, each member's candidates; candTotal their sum per member.
	counts    map[types.UID]map[string]int
	candTotal map[string]int
	// plans: per group, each member's state and truncation; stateTotal and truncTotal the
	// groups per member in each state and truncated.
	plans      map[types.UID]map[string]memberFigures
	stateTotal map[string]map[lbcfv1beta1.MemberState]int
	truncTotal map[string]int
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
		counts:     map[types.UID]map[string]int{},
		candTotal:  map[string]int{},
		plans:      map[types.UID]map[string]memberFigures{},
		stateTotal: map[string]map[lbcfv1beta1.MemberState]int{},
		truncTotal: map[string]int{},
		records:    newRecordCounts(),
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
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setPlanLocked(bg, p.members)
}

// forget drops a deleted group's figures: a plan without members, then no entry at all.
func (m *Metrics) forget(bg types.UID) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setPlanLocked(bg, nil)
	delete(m.plans, bg)
}

// setPlanLocked replaces group bg's figures with those of members: its old figures leave the
// totals, the new ones enter them, and the gauges of every member either names are set again.
func (m *Metrics) setPlanLocked(bg types.UID, members map[string]*memberPlan) {
	touched := map[string]bool{}
	for name, f := range m.plans[bg] {
		m.tallyLocked(name, f, -1)
		touched[name] = true
	}
	figures := make(map[string]memberFigures, len(members))
	for name, mp := range members {
		f := memberFigures{state: mp.status.State, truncated: mp.status.Truncated}
		figures[name] = f
		m.tallyLocked(name, f, 1)
		touched[name] = true
		n := 0
		if mp.report != nil {
			n = mp.report.count()
		}
		m.setCandidatesLocked(bg, name, n)
	}
	for name := range m.counts[bg] {
		if _, ok := figures[name]; !ok {
			m.setCandidatesLocked(bg, name, 0)
		}
	}
	m.plans[bg] = figures
	for name := range touched {
		m.publishLocked(name)
	}
}

// tallyLocked adds d groups with figures f to cluster's totals.
func (m *Metrics) tallyLocked(cluster string, f memberFigures, d int) {
	if m.stateTotal[cluster] == nil {
		m.stateTotal[cluster] = map[lbcfv1beta1.MemberState]int{}
	}
	m.stateTotal[cluster][f.state] += d
	if f.truncated {
		m.truncTotal[cluster] += d
	}
}

// publishLocked sets a cluster's state and truncation gauges from its totals.
func (m *Metrics) publishLocked(cluster string) {
	for _, st := range memberStates {
		m.states.WithLabelValues(cluster, string(st)).Set(float64(m.stateTotal[cluster][st]))
	}
	m.truncated.WithLabelValues(cluster).Set(float64(m.truncTotal[cluster]))
}

// setCandidatesLocked sets the candidates group bg has from cluster, and the cluster's gauge.
func (m *Metrics) setCandidatesLocked(bg types.UID, cluster string, n int) {
	m.candTotal[cluster] += n - m.counts[bg][cluster]
	switch {
	case n != 0 && m.counts[bg] == nil:
		m.counts[bg] = map[string]int{cluster: n}
	case n != 0:
		m.counts[bg][cluster] = n
	default:
		delete(m.counts[bg], cluster)
		if len(m.counts[bg]) == 0 {
			delete(m.counts, bg) // a deleted group leaves nothing behind
		}
	}
	m.candidates.WithLabelValues(cluster).Set(float64(m.candTotal[cluster]))
}

// ObserveRegistered records a record's registration latency (engine hook).
func (m *Metrics) ObserveRegistered(br *lbcfv1beta1.BackendRecord) {
	if m == nil {
		return
	}
	m.registration.WithLabelValues(br.Labels[lbcfv1beta1.LabelCluster]).Observe(time.Since(br.CreationTimestamp.Time).Seconds())
}
