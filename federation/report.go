package federation

import (
	"encoding/json"
	"fmt"
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
)

// report is one member's BackendGroup status as the interpreter's InterpretStatus delivers it in
// the ResourceBinding's aggregatedStatus.
type report struct {
	Candidates         *lbcfv1beta1.Candidates `json:"candidates,omitempty"`
	Backends           int32                   `json:"backends,omitempty"`
	RegisteredBackends int32                   `json:"registeredBackends,omitempty"`
	Conditions         []metav1.Condition      `json:"conditions,omitempty"`
	ObservedGeneration *int64                  `json:"observedGeneration,omitempty"`
	// Generation is the member object's generation; ResourceTemplateGeneration the template
	// generation the member object was last updated from.
	Generation                 *int64 `json:"generation,omitempty"`
	ResourceTemplateGeneration *int64 `json:"resourceTemplateGeneration,omitempty"`
	// ReportRequest echoes the template's lbfed.io/report-request the member last saw.
	ReportRequest string `json:"reportRequest,omitempty"`
}

func parseReport(raw []byte) (*report, error) {
	r := &report{}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("decode member status: %w", err)
	}
	return r, nil
}

// current reports whether the report describes the template at generation: the member object
// was updated from that template generation (when Karmada says so) and the member controller
// has observed the member object's latest generation.
func (r *report) current(templateGeneration int64) bool {
	if r.Candidates == nil || r.ObservedGeneration == nil {
		return false // no member-mode report yet
	}
	if r.Generation != nil && *r.ObservedGeneration < *r.Generation {
		return false
	}
	if r.ResourceTemplateGeneration != nil && *r.ResourceTemplateGeneration < templateGeneration {
		return false
	}
	return true
}

// truncated reports whether the member cut its candidate list.
func (r *report) truncated() bool {
	return meta.IsStatusConditionTrue(r.Conditions, lbcfv1beta1.BackendGroupCandidatesTruncated)
}

// clusterReport is a decoded member report: its backends, and its pod candidates by name for
// generateBackendAddr.
type clusterReport struct {
	cluster  string
	backends []controller.Backend
	partial  bool // truncated or undecodable: records of missing backends are kept
	// truncated: the member cut its list to its byte budget.
	truncated bool
	// request is the report request the member echoed.
	request string
	// digest of the report's bytes and the template generation it was judged current for.
	digest     uint64
	generation int64
	// itemsDigest is the ReportDigest of the report's items as the member wrote them, and
	// itemBackend the index in backends of each item (-1 when it did not decode): what the
	// registration answer refers to. The items themselves are not kept (≈ 70 bytes a backend).
	itemsDigest string
	itemBackend []int

	// byKey finds a backend by backendKey in reports of more than scanBackends backends, built
	// on the first lookup; smaller ones are scanned (see find).
	byKeyOnce sync.Once
	byKey     map[string]*controller.Backend

	// names memoizes the record names of the backends per load balancer and group (see
	// recordNames): the first pair in namesKey and namesFirst (a group usually has one load
	// balancer), further ones in names.
	namesMu    sync.Mutex
	namesKey   string
	namesFirst []string
	names      map[string][]string
}

// scanBackends is the size up to which a report's backends are scanned rather than looked up by
// key: an index per report was ≈ 130 bytes a backend (a map and a key string each) for every
// group and member kept, 13 MB of the federation's live heap at 100,000 records in reports of 5
// (BenchmarkDecodedReportBytes), and a scan of a few dozen is cheaper than building the key.
const scanBackends = 32

// find returns the backend of the given identity (node is compared for Service backends only),
// the last one reported when several share it, or nil.
func (c *clusterReport) find(kind lbcfv1beta1.CandidateKind, name string, port lbcfv1beta1.PortSelector, node string) *controller.Backend {
	if kind != lbcfv1beta1.CandidateNode {
		node = ""
	}
	if len(c.backends) > scanBackends {
		c.byKeyOnce.Do(func() {
			c.byKey = make(map[string]*controller.Backend, len(c.backends))
			for i := range c.backends {
				b := &c.backends[i]
				c.byKey[backendKey(b.Kind, b.Name, b.Port, keyNode(b))] = b
			}
		})
		return c.byKey[backendKey(kind, name, port, node)]
	}
	for i := len(c.backends) - 1; i >= 0; i-- {
		b := &c.backends[i]
		if b.Kind == kind && b.Name == name && b.Port.GetPort() == port.GetPort() &&
			b.Port.GetProtocol() == port.GetProtocol() && keyNode(b) == node {
			return b
		}
	}
	return nil
}

// recordNames returns the record name of each backend on load balancer lb of group group,
// computed once per report and load balancer: the registration reporter asks for every
// backend's names on every pass (every 50 ms while records turn Registered), and hashing 20,000
// names each time was 41 % of the controller's CPU in BenchmarkTwentyMembers.
func (c *clusterReport) recordNames(lb, group string) []string {
	c.namesMu.Lock()
	defer c.namesMu.Unlock()
	key := lb + "/" + group
	if c.namesFirst != nil && c.namesKey == key {
		return c.namesFirst
	}
	if n, ok := c.names[key]; ok {
		return n
	}
	n := make([]string, len(c.backends))
	for i := range c.backends {
		n[i] = c.backends[i].RecordName(lb, group)
	}
	switch {
	case c.namesFirst == nil:
		c.namesKey, c.namesFirst = key, n
	default:
		if c.names == nil {
			c.names = map[string][]string{}
		}
		c.names[key] = n
	}
	return n
}

// keyNode is the node that tells b apart from the cluster's other backends (Service backends
// only: one per node).
func keyNode(b *controller.Backend) string {
	if b.Kind == lbcfv1beta1.CandidateNode {
		return b.NodeName
	}
	return ""
}

// backendKey identifies a backend of one cluster from what its record carries (the pod UID is
// only in the record's name, which the caller checks).
func backendKey(kind lbcfv1beta1.CandidateKind, name string, port lbcfv1beta1.PortSelector, node string) string {
	return fmt.Sprintf("%s|%s|%d|%s|%s", kind, name, port.GetPort(), port.GetProtocol(), node)
}

// decode turns a report into the backends of one member cluster of group bg. Their parameters
// (the member's, plus its name) go through share: the members' groups mostly repeat them.
func (r *report) decode(cluster string, bg *lbcfv1beta1.BackendGroup, share func(map[string]string) map[string]string) (*clusterReport, error) {
	cands, pos, err := r.Candidates.DecodeIndexed()
	params := maps.Clone(r.Candidates.Parameters)
	if params == nil {
		params = map[string]string{}
	}
	params[lbcfv1beta1.ParamCluster] = cluster
	params = share(params)
	// Sized once: appended one by one, a report's backends took up to half as much again in
	// spare capacity (5 backends: 1,792 bytes for 1,040), kept for every group and member.
	out := &clusterReport{cluster: cluster, partial: r.truncated(), truncated: r.truncated(), request: r.ReportRequest,
		backends: make([]controller.Backend, 0, len(cands))}
	if err != nil {
		out.partial = true // entries that did not decode may be backends we must not drop
	}
	svcName := ""
	if bg.Spec.Service != nil {
		svcName = bg.Spec.Service.Name
	}
	for i := range cands {
		c := &cands[i]
		b := controller.Backend{
			Kind: c.Kind, Cluster: cluster, Parameters: params, NodeName: c.NodeName, NodeAddresses: c.NodeAddresses,
			Ready: c.Ready, Deleting: c.Deleting,
		}
		switch c.Kind {
		case lbcfv1beta1.CandidatePod:
			port := lbcfv1beta1.PortSelector{Port: c.Port, Protocol: string(c.Protocol)}
			b.Name, b.UID, b.Port, b.IPs, b.HasIP, b.Phase = c.Name, c.UID, port, c.IPs, len(c.IPs) > 0, c.Phase
		case lbcfv1beta1.CandidateNode:
			b.Name, b.Port, b.NodePort = svcName, lbcfv1beta1.PortSelector{Port: c.Port, Protocol: string(c.Protocol)}, c.NodePort
		default:
			b.Name = c.Name
		}
		out.backends = append(out.backends, b)
	}
	out.itemsDigest = lbcfv1beta1.ReportDigest(r.Candidates.Items)
	out.itemBackend = make([]int, len(r.Candidates.Items))
	for i := range out.itemBackend {
		out.itemBackend[i] = -1
	}
	for k, i := range pos {
		out.itemBackend[i] = k
	}
	return out, err
}
