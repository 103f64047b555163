package bfe

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// DefaultSubCluster is the member-cluster name used for backends without a cluster parameter.
const DefaultSubCluster = "default"

// Match is a cookie or header condition: the route applies only when the request's cookie or header
// Key has one of the values in Value ("a|b" lists alternatives, as in BFE's *_value_in primitives).
type Match struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// LoadBalancer is one BFE cluster and the route that leads to it.
type LoadBalancer struct {
	// Name is the BFE cluster name.
	Name string `json:"name"`
	// Host is an exact hostname, "*" (any host) or "*.suffix".
	Host string `json:"host"`
	// Path is a BFE path pattern: "/api/*" matches /api and everything below it, "/api" only itself.
	Path   string `json:"path"`
	Cookie *Match `json:"cookie,omitempty"`
	Header *Match `json:"header,omitempty"`
}

// routeKey identifies the traffic a LoadBalancer receives; two LoadBalancers with the same key would
// compete for the same requests.
func (lb *LoadBalancer) routeKey() string {
	var b strings.Builder
	b.WriteString(strings.ToLower(lb.Host))
	b.WriteByte(0)
	b.WriteString(lb.Path)
	for _, m := range []*Match{lb.Cookie, lb.Header} {
		b.WriteByte(0)
		if m != nil {
			b.WriteString(m.Key)
			b.WriteByte('=')
			b.WriteString(m.Value)
		}
	}
	return b.String()
}

// Backend is one instance of a LoadBalancer.
type Backend struct {
	// Cluster is the member cluster the backend runs in; it becomes the BFE sub-cluster.
	Cluster string `json:"cluster"`
	// Addr is the instance address.
	Addr netip.AddrPort `json:"addr"`
	// Weight is the instance weight inside its sub-cluster (0 drains it).
	Weight int `json:"weight"`
	// ClusterWeight, when set, is the GSLB weight of the backend's sub-cluster.
	ClusterWeight *int `json:"clusterWeight,omitempty"`
	// Subset, when set, names the part of the LoadBalancer's traffic the backend serves (e.g. one
	// Service of an ingress-bfe balance.weight split): each subset has its own sub-clusters.
	Subset string `json:"subset,omitempty"`
	// SubsetWeight is the subset's share of the LoadBalancer's traffic (default 1).
	SubsetWeight *int `json:"subsetWeight,omitempty"`
}

// Key identifies a backend within its LoadBalancer.
func (b Backend) Key() string {
	if b.Subset != "" {
		return b.Cluster + "/" + b.Subset + "/" + b.Addr.String()
	}
	return b.Cluster + "/" + b.Addr.String()
}

// Model is the desired state: every LoadBalancer with its backends, keyed by name and Backend.Key.
type Model struct {
	LoadBalancers map[string]*LBState `json:"loadBalancers"`
}

// LBState is a LoadBalancer with its backends.
type LBState struct {
	LoadBalancer
	Backends map[string]Backend `json:"backends"`
}

// NewModel returns an empty model.
func NewModel() *Model { return &Model{LoadBalancers: map[string]*LBState{}} }

// Clone returns a deep copy, so that a batch can be applied to a copy and dropped if it fails.
func (m *Model) Clone() *Model {
	out := &Model{LoadBalancers: make(map[string]*LBState, len(m.LoadBalancers))}
	for name, lb := range m.LoadBalancers {
		c := &LBState{LoadBalancer: lb.LoadBalancer, Backends: make(map[string]Backend, len(lb.Backends))}
		for k, b := range lb.Backends {
			c.Backends[k] = b
		}
		out.LoadBalancers[name] = c
	}
	return out
}

// sortedLBs returns the LoadBalancers ordered by name.
func (m *Model) sortedLBs() []*LBState {
	out := make([]*LBState, 0, len(m.LoadBalancers))
	for _, lb := range m.LoadBalancers {
		out = append(out, lb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// PutLoadBalancer adds lb or updates its route, keeping its backends. It fails when another
// LoadBalancer already receives the same traffic.
func (m *Model) PutLoadBalancer(lb LoadBalancer) error {
	key := lb.routeKey()
	for name, other := range m.LoadBalancers {
		if name != lb.Name && other.routeKey() == key {
			return fmt.Errorf("load balancer %s: route conflicts with load balancer %s", lb.Name, name)
		}
	}
	if cur, ok := m.LoadBalancers[lb.Name]; ok {
		cur.LoadBalancer = lb
		return nil
	}
	m.LoadBalancers[lb.Name] = &LBState{LoadBalancer: lb, Backends: map[string]Backend{}}
	return nil
}

// DeleteLoadBalancer removes a LoadBalancer with all its backends; deleting a missing one is a no-op.
func (m *Model) DeleteLoadBalancer(name string) { delete(m.LoadBalancers, name) }

// PutBackend adds or updates a backend of LoadBalancer lb, creating the LoadBalancer when needed
// (backend calls carry the complete lbInfo, so the driver recovers from a lost LoadBalancer).
func (m *Model) PutBackend(lb LoadBalancer, b Backend) error {
	if _, ok := m.LoadBalancers[lb.Name]; !ok {
		if err := m.PutLoadBalancer(lb); err != nil {
			return err
		}
	}
	m.LoadBalancers[lb.Name].Backends[b.Key()] = b
	return nil
}

// DeleteBackend removes a backend; removing a missing backend or one of a missing LoadBalancer is a
// no-op, as the LBCF protocol requires.
func (m *Model) DeleteBackend(lbName, key string) {
	if lb, ok := m.LoadBalancers[lbName]; ok {
		delete(lb.Backends, key)
	}
}

// Size returns the number of LoadBalancers and backends.
func (m *Model) Size() (lbs, backends int) {
	for _, lb := range m.LoadBalancers {
		backends += len(lb.Backends)
	}
	return len(m.LoadBalancers), backends
}

// String summarizes the model for logs.
func (m *Model) String() string {
	lbs, backends := m.Size()
	return strconv.Itoa(lbs) + " load balancers, " + strconv.Itoa(backends) + " backends"
}
