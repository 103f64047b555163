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
//
// A report of up to scanBackends backends keeps its items as the member wrote them (≈ 45 bytes
// a pod) and decodes its backends when asked (see list): decoded, a backend is ≈ 230 bytes, kept
// for every group and member (23 MB of the federation's live heap at 100,000 records in reports of
// 5), while a group's reconcile decodes its few again in microseconds. Larger reports keep their
// decoded backends: they are few, asked for often, and indexed (see find).
type clusterReport struct {
	cluster string
	// backends are the decoded backends of a large report (or one built in place by a test);
	// nil for a compact one.
	backends []controller.Backend
	// The compact form: the report's items and node table, and what decoding them needs besides.
	items, nodes []string
	svcName      string
	params       map[string]string
	// size is the number of backends that decoded; unobserved the number of pods among them whose
	// readiness the member could not observe (see lbcfv1beta1.Candidate.Unobserved).
	size, unobserved int
	partial          bool // truncated or undecodable: records of missing backends are kept
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

	// byID finds a backend by identity in reports of more than scanBackends backends, built on
	// the first lookup; smaller ones are scanned (see find).
	byIDOnce sync.Once
	byID     map[backendID]*controller.Backend

	// names memoizes the record names of the backends per load balancer and group (see
	// recordNames); a group usually has one load balancer.
	namesMu sync.Mutex
	names   []reportNames
}

// reportNames are the record names of a report's backends on one load balancer of one group.
type reportNames struct {
	key   string // lb/group
	names []string
}

// scanBackends is the size up to which a report's backends are scanned rather than looked up in
// an index: an index per report was ≈ 130 bytes a backend (a map and a key string each) for every
// group and member kept, 13 MB of the federation's live heap at 100,000 records in reports of 5
// (BenchmarkDecodedReportBytes); a scan of a few dozen needs none.
const scanBackends = 32

// backendID identifies a backend of one cluster from what its record carries (the pod UID is
// only in the record's name, which the caller checks). Ports are compared as defaulted; the node
// tells Service backends apart (one per node) and is empty for the other kinds.
type backendID struct {
	kind     lbcfv1beta1.CandidateKind
	name     string
	port     int32
	protocol string
	node     string
}

func idOf(kind lbcfv1beta1.CandidateKind, name string, port lbcfv1beta1.PortSelector, node string) backendID {
	if kind != lbcfv1beta1.CandidateNode {
		node = ""
	}
	return backendID{kind: kind, name: name, port: port.GetPort(), protocol: port.GetProtocol(), node: node}
}

func backendIDOf(b *controller.Backend) backendID { return idOf(b.Kind, b.Name, b.Port, b.NodeName) }

// list returns the report's backends: the kept ones, or a compact report's decoded again (a new
// slice each time, the same content: the items are decoded as decode did).
func (c *clusterReport) list() []controller.Backend {
	if c.backends != nil || len(c.items) == 0 {
		return c.backends
	}
	out, _, _ := decodeBackends(&lbcfv1beta1.Candidates{Items: c.items, Nodes: c.nodes}, c.cluster, c.svcName, c.params)
	return out
}

// count is the number of the report's backends.
func (c *clusterReport) count() int {
	if c.backends != nil {
		return len(c.backends)
	}
	return c.size
}

// find returns the backend of the given identity (see backendID), the last one reported when
// several share it, or nil.
func (c *clusterReport) find(kind lbcfv1beta1.CandidateKind, name string, port lbcfv1beta1.PortSelector, node string) *controller.Backend {
	id := idOf(kind, name, port, node)
	backends := c.list()
	if len(backends) > scanBackends {
		c.byIDOnce.Do(func() {
			c.byID = make(map[backendID]*controller.Backend, len(c.backends))
			for i := range c.backends {
				c.byID[backendIDOf(&c.backends[i])] = &c.backends[i]
			}
		})
		return c.byID[id]
	}
	for i := len(backends) - 1; i >= 0; i-- {
		if backendIDOf(&backends[i]) == id {
			return &backends[i]
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
	for _, n := range c.names {
		if n.key == key {
			return n.names
		}
	}
	backends := c.list()
	n := make([]string, len(backends))
	for i := range backends {
		n[i] = backends[i].RecordName(lb, group)
	}
	c.names = append(c.names, reportNames{key: key, names: n})
	return n
}

// decode turns a report into the backends of one member cluster of group bg. Their parameters
// (the member's, plus its name) go through share: the members' groups mostly repeat them.
func (r *report) decode(cluster string, bg *lbcfv1beta1.BackendGroup, share func(map[string]string) map[string]string) (*clusterReport, error) {
	params := maps.Clone(r.Candidates.Parameters)
	if params == nil {
		params = map[string]string{}
	}
	params[lbcfv1beta1.ParamCluster] = cluster
	params = share(params)
	svcName := ""
	if bg.Spec.Service != nil {
		svcName = bg.Spec.Service.Name
	}
	out := &clusterReport{cluster: cluster, partial: r.truncated(), truncated: r.truncated(), request: r.ReportRequest}
	backends, pos, err := decodeBackends(r.Candidates, cluster, svcName, params)
	if err != nil {
		out.partial = true // entries that did not decode may be backends we must not drop
	}
	out.size = len(backends)
	for i := range backends {
		if backends[i].ReadinessUnobserved {
			out.unobserved++
		}
	}
	if len(backends) > scanBackends {
		out.backends = backends
	} else {
		out.items, out.nodes, out.svcName, out.params = r.Candidates.Items, r.Candidates.Nodes, svcName, params
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

// decodeBackends decodes a member's candidates into backends of cluster; pos is the item index
// of each backend.
func decodeBackends(c *lbcfv1beta1.Candidates, cluster, svcName string, params map[string]string) ([]controller.Backend, []int, error) {
	cands, pos, err := c.DecodeIndexed()
	// Sized once: appended one by one, a report's backends took up to half as much again in
	// spare capacity (5 backends: 1,792 bytes for 1,040).
	out := make([]controller.Backend, 0, len(cands))
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
			b.ReadinessUnobserved = c.Unobserved
		case lbcfv1beta1.CandidateNode:
			b.Name, b.Port, b.NodePort = svcName, lbcfv1beta1.PortSelector{Port: c.Port, Protocol: string(c.Protocol)}, c.NodePort
		default:
			b.Name = c.Name
		}
		out = append(out, b)
	}
	return out, pos, err
}
