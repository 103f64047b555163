package federation

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// recordCounts keeps the per-cluster record gauges up to date from the record informer's events.
// They used to be computed by listing every record at each scrape: at 100,000 records a scrape
// copied all of them (≈ 50 MB) and the scrapes were most of the idle controller's CPU. Now a
// scrape costs what the clusters and the records not yet registered cost.
type recordCounts struct {
	mu         sync.Mutex
	registered map[string]int
	// pending: per cluster, the creation time of each record not registered (yet) nor deleting.
	pending map[string]map[types.UID]time.Time
}

func newRecordCounts() *recordCounts {
	return &recordCounts{registered: map[string]int{}, pending: map[string]map[types.UID]time.Time{}}
}

// watch counts the records of informers' BackendRecord informer (before or after it starts: the
// informer replays what it has to a new handler).
func (c *recordCounts) watch(ctx context.Context, informers ctrlcache.Informers) error {
	inf, err := informers.GetInformer(ctx, &lbcfv1beta1.BackendRecord{})
	if err != nil {
		return fmt.Errorf("record informer for the metrics: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.apply(o, 1) },
		UpdateFunc: func(old, o any) { c.apply(old, -1); c.apply(o, 1) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			c.apply(o, -1)
		},
	})
	return err
}

// apply adds (sign 1) or removes (sign -1) a record as the informer delivered it: an update
// removes the object it replaces, which the informer delivered before.
func (c *recordCounts) apply(o any, sign int) {
	br, ok := o.(*lbcfv1beta1.BackendRecord)
	if !ok {
		return
	}
	cluster := br.Labels[lbcfv1beta1.LabelCluster]
	if cluster == "" {
		return // not a federated record
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case br.IsRegistered():
		if c.registered[cluster] += sign; c.registered[cluster] <= 0 {
			delete(c.registered, cluster)
		}
	case br.DeletionTimestamp == nil:
		p := c.pending[cluster]
		if sign > 0 {
			if p == nil {
				p = map[types.UID]time.Time{}
				c.pending[cluster] = p
			}
			p[br.UID] = br.CreationTimestamp.Time
			return
		}
		if delete(p, br.UID); len(p) == 0 {
			delete(c.pending, cluster)
		}
	}
}

var (
	registeredDesc      = prometheus.NewDesc("lbfed_cluster_registered_backends", "Backends of each member cluster registered on front ends.", []string{"cluster"}, nil)
	unregisteredDesc    = prometheus.NewDesc("lbfed_cluster_unregistered_backends", "Backends of each member cluster whose records are not registered (yet).", []string{"cluster"}, nil)
	unregisteredAgeDesc = prometheus.NewDesc("lbfed_cluster_unregistered_oldest_seconds", "Age of the oldest record of each member cluster that is not registered.", []string{"cluster"}, nil)
)

// Describe implements prometheus.Collector.
func (c *recordCounts) Describe(ch chan<- *prometheus.Desc) {
	ch <- registeredDesc
	ch <- unregisteredDesc
	ch <- unregisteredAgeDesc
}

// Collect implements prometheus.Collector.
func (c *recordCounts) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for cluster, n := range c.registered {
		ch <- prometheus.MustNewConstMetric(registeredDesc, prometheus.GaugeValue, float64(n), cluster)
	}
	for cluster, p := range c.pending {
		oldest := 0.0
		for _, created := range p {
			oldest = max(oldest, now.Sub(created).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(unregisteredDesc, prometheus.GaugeValue, float64(len(p)), cluster)
		ch <- prometheus.MustNewConstMetric(unregisteredAgeDesc, prometheus.GaugeValue, oldest, cluster)
	}
}
