package federation

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
)

// memberStatus is a member's report of pods (name, IP) as the interpreter delivers it.
func memberStatus(tb testing.TB, cluster string, params map[string]string, pods ...[2]string) *workv1alpha2.AggregatedStatusItem {
	var cands []lbcfv1beta1.Candidate
	for _, p := range pods {
		cands = append(cands, lbcfv1beta1.Candidate{Kind: lbcfv1beta1.CandidatePod, Name: p[0], UID: lbcfv1beta1.ShortUID(types.UID(p[0] + "-uid")),
			IPs: []string{p[1]}, Port: 80, Protocol: corev1.ProtocolTCP, Phase: corev1.PodRunning, Ready: true})
	}
	enc, _ := lbcfv1beta1.EncodeCandidates(params, cands, 0)
	raw, err := json.Marshal(map[string]any{"candidates": enc, "backends": len(pods), "observedGeneration": 1, "generation": 1, "resourceTemplateGeneration": 1})
	if err != nil {
		tb.Fatal(err)
	}
	return &workv1alpha2.AggregatedStatusItem{ClusterName: cluster, Status: &k8sruntime.RawExtension{Raw: raw}, Applied: true}
}

// BenchmarkDecodedReportBytes: what the federation keeps per backend of its members' decoded
// reports (Source.fresh keeps each member's last report per group, and the registration reporter
// asks each for its record names), in BenchmarkRestartResync's shape: 10,000 groups, two members
// of 5 pods each.
func BenchmarkDecodedReportBytes(b *testing.B) {
	const groups, pods = 10000, 5
	clusters := []string{"m1", "m2"}
	items := make([][]*workv1alpha2.AggregatedStatusItem, groups)
	for i := range items {
		for ci, c := range clusters {
			var ps [][2]string
			for j := 0; j < pods; j++ {
				n := i*pods + j
				ps = append(ps, [2]string{fmt.Sprintf("g%d-p%d", i, j), fmt.Sprintf("10.%d.%d.%d", 100+ci, n/250%250, n%250+1)})
			}
			items[i] = append(items[i], memberStatus(b, c, nil, ps...))
		}
	}
	for range b.N {
		s := &Source{}
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for i := range items {
			bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bg-%04d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)), Generation: 1}}
			for ci, c := range clusters {
				cr := s.fresh(bg, c, items[i][ci])
				if cr == nil || cr.count() != pods {
					b.Fatalf("group %d member %s: %v", i, c, cr)
				}
				_ = cr.recordNames(fmt.Sprintf("lb-%04d", i), bg.Name)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/float64(groups*len(clusters)*pods), "B/backend")
		runtime.KeepAlive(s)
	}
}

// find answers as an index by a key string of the identity would, whether the report is scanned or indexed: the
// last backend of an identity, Service backends told apart by node, protocols defaulted.
func TestReportFindMatchesTheKeyIndex(t *testing.T) {
	for _, n := range []int{3, scanBackends, scanBackends + 1, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			cr := &clusterReport{}
			for i := 0; i < n; i++ {
				b := controller.Backend{Kind: lbcfv1beta1.CandidatePod, Name: fmt.Sprintf("p%d", i), Port: lbcfv1beta1.PortSelector{Port: 80}}
				switch i % 4 {
				case 1:
					b.Port.Protocol = "UDP"
				case 2:
					b.Kind, b.Name, b.NodeName = lbcfv1beta1.CandidateNode, "svc", fmt.Sprintf("node%d", i)
				case 3:
					b.Kind, b.Name = lbcfv1beta1.CandidateStatic, fmt.Sprintf("10.0.0.%d:80", i)
				}
				b.UID = fmt.Sprint(i) // tells duplicates apart
				cr.backends = append(cr.backends, b)
			}
			// A duplicate identity: the later one is found.
			dup := cr.backends[0]
			dup.UID = "dup"
			cr.backends = append(cr.backends, dup)
			// The reference: an index by a key string of the identity, as reports once had.
			key := func(kind lbcfv1beta1.CandidateKind, name string, port lbcfv1beta1.PortSelector, node string) string {
				return fmt.Sprintf("%s|%s|%d|%s|%s", kind, name, port.GetPort(), port.GetProtocol(), node)
			}
			index := map[string]*controller.Backend{}
			for i := range cr.backends {
				b := &cr.backends[i]
				index[key(b.Kind, b.Name, b.Port, map[bool]string{true: b.NodeName}[b.Kind == lbcfv1beta1.CandidateNode])] = b
			}
			type query struct {
				kind       lbcfv1beta1.CandidateKind
				name, node string
				port       lbcfv1beta1.PortSelector
			}
			var queries []query
			for _, b := range cr.backends {
				queries = append(queries, query{b.Kind, b.Name, b.NodeName, b.Port},
					query{b.Kind, b.Name, "other-node", b.Port},
					query{b.Kind, b.Name, b.NodeName, lbcfv1beta1.PortSelector{Port: b.Port.Port, Protocol: "TCP"}},
					query{b.Kind, b.Name, b.NodeName, lbcfv1beta1.PortSelector{Port: 81}},
					query{b.Kind, b.Name + "x", b.NodeName, b.Port})
			}
			found := 0
			for _, q := range queries {
				want := index[key(q.kind, q.name, q.port, map[bool]string{true: q.node}[q.kind == lbcfv1beta1.CandidateNode])]
				got := cr.find(q.kind, q.name, q.port, q.node)
				if got != want {
					t.Fatalf("find(%v): %v, want %v", q, got, want)
				}
				if got != nil {
					found++
				}
			}
			if found == 0 || cr.find(dup.Kind, dup.Name, dup.Port, "").UID != "dup" {
				t.Fatalf("found %d; duplicate: %v", found, cr.find(dup.Kind, dup.Name, dup.Port, ""))
			}
		})
	}
}

// Record names are memoized per load balancer and group, the first pair and the others alike.
func TestReportRecordNamesPerLoadBalancer(t *testing.T) {
	s := &Source{}
	bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: "bg", UID: "u", Generation: 1}}
	cr := s.fresh(bg, "m1", memberStatus(t, "m1", nil, [2]string{"a", "10.0.0.1"}, [2]string{"b", "10.0.0.2"}))
	for round := 0; round < 2; round++ {
		for _, lb := range []string{"lb1", "lb2", "lb3"} {
			for _, group := range []string{"bg", "bg2"} {
				got := cr.recordNames(lb, group)
				for i, b := range cr.list() {
					if want := b.RecordName(lb, group); got[i] != want {
						t.Fatalf("round %d %s/%s backend %d: %q, want %q", round, lb, group, i, got[i], want)
					}
				}
			}
		}
	}
}

// Members' parameters are one map per content across the groups' reports, each with the member's
// name, and the members' own maps are left as they were.
func TestReportParametersShared(t *testing.T) {
	s := &Source{}
	own := map[string]string{"weight": "2"}
	var got []map[string]string
	for i, c := range []string{"m1", "m1", "m2", "m1"} {
		params := map[string]string{"weight": "2"}
		if i == 3 {
			params["weight"] = "3"
		}
		bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("bg", i), UID: types.UID(fmt.Sprint(i)), Generation: 1}}
		cr := s.fresh(bg, c, memberStatus(t, c, params, [2]string{"a", "10.0.0.1"}, [2]string{"b", "10.0.0.2"}))
		backends := cr.list()
		if backends[0].Parameters[lbcfv1beta1.ParamCluster] != c || mapPtr(backends[0].Parameters) != mapPtr(backends[1].Parameters) {
			t.Fatalf("report %d: %v / %v", i, backends[0].Parameters, backends[1].Parameters)
		}
		got = append(got, backends[0].Parameters)
	}
	if mapPtr(got[0]) != mapPtr(got[1]) || mapPtr(got[0]) == mapPtr(got[2]) || mapPtr(got[0]) == mapPtr(got[3]) {
		t.Fatalf("shared: %v", got)
	}
	if len(own) != 1 || got[3]["weight"] != "3" || got[0]["weight"] != "2" {
		t.Fatalf("contents: %v %v", own, got)
	}
}

func mapPtr(m map[string]string) uintptr { return reflect.ValueOf(m).Pointer() }

// A report keeps its items and decodes them when asked up to scanBackends backends, and keeps its
// decoded backends beyond: either way it answers with the backends its items decode to, in their
// order, each found by identity, undecodable items left out and the report partial.
func TestReportCompactAndKeptAnswerAlike(t *testing.T) {
	for _, n := range []int{1, scanBackends, scanBackends + 1, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var cands []lbcfv1beta1.Candidate
			for i := 0; i < n; i++ {
				c := lbcfv1beta1.Candidate{Kind: lbcfv1beta1.CandidatePod, Name: fmt.Sprintf("p%d", i), UID: fmt.Sprintf("u%d", i),
					IPs: []string{fmt.Sprintf("10.0.%d.%d", i/250, i%250)}, Port: 80, Protocol: corev1.ProtocolTCP, Phase: corev1.PodRunning,
					Ready: i%3 != 0, NodeName: fmt.Sprintf("node%d", i%2), NodeAddresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.0.%d", i%2)}}}
				switch i % 4 {
				case 1:
					c.Kind, c.Name, c.UID, c.IPs, c.Phase, c.NodePort = lbcfv1beta1.CandidateNode, "", "", nil, "", 30080
					c.NodeName = fmt.Sprintf("node%d", i) // one backend per node
				case 2:
					c = lbcfv1beta1.Candidate{Kind: lbcfv1beta1.CandidateStatic, Name: fmt.Sprintf("10.9.0.%d:80", i), Ready: true}
				}
				cands = append(cands, c)
			}
			enc, _ := lbcfv1beta1.EncodeCandidates(map[string]string{"weight": "2"}, cands, 0)
			enc.Items = append(enc.Items, "p|broken") // does not decode
			raw, err := json.Marshal(map[string]any{"candidates": enc, "observedGeneration": 1})
			if err != nil {
				t.Fatal(err)
			}
			bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: "bg", UID: "u", Generation: 1},
				Spec: lbcfv1beta1.BackendGroupSpec{Service: &lbcfv1beta1.ServiceBackend{Name: "svc"}}}
			s := &Source{}
			cr := s.fresh(bg, "m1", &workv1alpha2.AggregatedStatusItem{ClusterName: "m1", Status: &k8sruntime.RawExtension{Raw: raw}})
			if cr == nil {
				t.Fatal("no report")
			}
			want, _, err := decodeBackends(enc, "m1", "svc", cr.list()[0].Parameters)
			if err == nil || !cr.partial {
				t.Fatalf("the broken item: err %v, partial %v", err, cr.partial)
			}
			if kept := cr.backends != nil; kept != (n > scanBackends) {
				t.Fatalf("%d backends: kept decoded %v", n, kept)
			}
			for round := 0; round < 2; round++ {
				if got := cr.list(); !reflect.DeepEqual(got, want) || cr.count() != n {
					t.Fatalf("round %d: %d backends (count %d), want %d:\n%+v\n%+v", round, len(got), cr.count(), n, got, want)
				}
			}
			if want[0].Parameters["weight"] != "2" || want[0].Parameters[lbcfv1beta1.ParamCluster] != "m1" {
				t.Fatalf("parameters: %v", want[0].Parameters)
			}
			for i := range want {
				b := &want[i]
				if got := cr.find(b.Kind, b.Name, b.Port, b.NodeName); got == nil || !reflect.DeepEqual(*got, *b) {
					t.Fatalf("find %d: %+v, want %+v", i, got, b)
				}
			}
			if got := len(cr.itemBackend); got != n+1 || cr.itemBackend[n] != -1 || cr.itemBackend[n-1] != n-1 {
				t.Fatalf("itemBackend: %v", cr.itemBackend)
			}
		})
	}
}
