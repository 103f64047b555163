package v1beta1

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
)

func samplePod(i int, ready bool) Candidate {
	return Candidate{
		Kind: CandidatePod, Name: fmt.Sprintf("nginx-5d8f7c9b4-%05d", i), UID: ShortUID(uuid.NewUUID()),
		IPs: []string{fmt.Sprintf("127.1.%d.%d", i/250, i%250+1)}, Port: 8080, Protocol: corev1.ProtocolTCP,
		NodeName: fmt.Sprintf("kwok-node-%d", i%3),
		NodeAddresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", i%3)},
			{Type: corev1.NodeHostName, Address: fmt.Sprintf("kwok-node-%d", i%3)},
		},
		Phase: corev1.PodRunning, Ready: ready,
	}
}

func sortByKey(c []Candidate) {
	sort.Slice(c, func(i, j int) bool { return c[i].Key() < c[j].Key() })
}

func TestCandidatesRoundTrip(t *testing.T) {
	g := NewWithT(t)
	in := []Candidate{
		samplePod(1, true),
		samplePod(2, false),
		func() Candidate { c := samplePod(3, false); c.Unobserved = true; return c }(),
		{Kind: CandidatePod, Name: "pending", UID: "deadbeef", Port: 53, Protocol: corev1.ProtocolUDP, Phase: corev1.PodPending},
		{Kind: CandidatePod, Name: "dual", UID: "01234567", IPs: []string{"10.1.0.1", "fd00::1"}, Port: 80, Protocol: corev1.ProtocolSCTP,
			NodeName: "kwok-node-1", NodeAddresses: samplePod(1, true).NodeAddresses, Phase: corev1.PodRunning, Ready: true, Deleting: true},
		{Kind: CandidateNode, NodeName: "edge-1", NodeAddresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "1.2.3.4"}, {Type: corev1.NodeInternalDNS, Address: "edge-1.local"}},
			Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080, Ready: true},
		{Kind: CandidateNode, NodeName: "edge-2", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080},
		{Kind: CandidateStatic, Name: "opaque|addr with spaces,and commas", Ready: true},
	}
	enc, truncated := EncodeCandidates(map[string]string{"weight": "3"}, in, 0)
	g.Expect(truncated).To(BeFalse())
	g.Expect(enc.Total).To(Equal(int32(len(in))))
	g.Expect(enc.Ready).To(Equal(int32(4)))

	// Through JSON, as Karmada carries it.
	raw, err := json.Marshal(enc)
	g.Expect(err).NotTo(HaveOccurred())
	var back Candidates
	g.Expect(json.Unmarshal(raw, &back)).To(Succeed())
	out, err := back.Decode()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Parameters).To(Equal(map[string]string{"weight": "3"}))

	sortByKey(in)
	sortByKey(out)
	g.Expect(out).To(HaveLen(len(in)))
	for i := range in {
		if len(in[i].NodeAddresses) == 0 {
			in[i].NodeAddresses = nil
		}
		g.Expect(out[i]).To(Equal(in[i]), "candidate %d", i)
	}
}

func TestCandidateFlags(t *testing.T) {
	for _, tc := range []struct {
		item                        string
		ready, deleting, unobserved bool
		wantErr                     bool
	}{
		{item: "p|a|01234567|10.0.0.1|80t|-|R"},
		{item: "p|a|01234567|10.0.0.1|80t|-|Rr", ready: true},
		{item: "p|a|01234567|10.0.0.1|80t|-|Rd", deleting: true},
		{item: "p|a|01234567|10.0.0.1|80t|-|Ru", unobserved: true},
		{item: "p|a|01234567|10.0.0.1|80t|-|Rdu", deleting: true, unobserved: true},
		// A Ready pod was observed: the flag means nothing there.
		{item: "p|a|01234567|10.0.0.1|80t|-|Rru", ready: true},
		// A flag this version does not know fails the entry (the report is then partial).
		{item: "p|a|01234567|10.0.0.1|80t|-|Rx", wantErr: true},
	} {
		t.Run(tc.item, func(t *testing.T) {
			g := NewWithT(t)
			out, err := (&Candidates{Items: []string{tc.item}}).Decode()
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
				g.Expect(out).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(HaveLen(1))
			g.Expect([]bool{out[0].Ready, out[0].Deleting, out[0].Unobserved}).To(Equal([]bool{tc.ready, tc.deleting, tc.unobserved}))
		})
	}
}

func TestCandidatesAreDeterministic(t *testing.T) {
	g := NewWithT(t)
	list := make([]Candidate, 200)
	for i := range list {
		list[i] = samplePod(i, i%4 != 0)
	}
	a, _ := EncodeCandidates(nil, list, 0)
	shuffled := append([]Candidate(nil), list...)
	rand.New(rand.NewSource(1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b, _ := EncodeCandidates(nil, shuffled, 0)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	g.Expect(string(jb)).To(Equal(string(ja)))
}

// ARCHITECTURE.md: ≤ 60 bytes per candidate, so that ≈ 1.2 MiB holds ≈ 20,000 candidates across
// members of one BackendGroup.
func TestCandidatesAreCompact(t *testing.T) {
	const n = 1000
	list := make([]Candidate, n)
	for i := range list {
		list[i] = samplePod(i, true)
	}
	enc, _ := EncodeCandidates(map[string]string{"weight": "1"}, list, 0)
	raw, _ := json.Marshal(enc.Items)
	perItem := float64(len(raw)) / n
	all, _ := json.Marshal(enc)
	t.Logf("%d pod candidates: %.1f bytes per item, %d bytes in all (%.1f per candidate)", n, perItem, len(all), float64(len(all))/n)
	if perItem > 60 {
		t.Fatalf("%.1f bytes per candidate, want ≤ 60 (a typical Deployment pod name, one IP, one port)", perItem)
	}
}

func TestCandidatesTruncationKeepsReadyFirstAndSaysSo(t *testing.T) {
	g := NewWithT(t)
	list := make([]Candidate, 100)
	for i := range list {
		list[i] = samplePod(i, i%2 == 0)
	}
	full, truncated := EncodeCandidates(nil, list, 0)
	g.Expect(truncated).To(BeFalse())
	raw, _ := json.Marshal(full.Items)

	budget := len(raw) / 3
	cut, truncated := EncodeCandidates(nil, list, budget)
	g.Expect(truncated).To(BeTrue())
	g.Expect(cut.Total).To(Equal(int32(100)), "Total still counts every candidate")
	g.Expect(len(cut.Items)).To(BeNumerically("<", 100))
	g.Expect(len(cut.Items)).To(BeNumerically(">", 0))
	size := 0
	for _, s := range cut.Items {
		size += len(s) + 3
	}
	g.Expect(size).To(BeNumerically("<=", budget))
	g.Expect(sort.StringsAreSorted(cut.Items)).To(BeTrue())
	out, err := cut.Decode()
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range out {
		g.Expect(c.Ready).To(BeTrue(), "not-ready %s kept while ready candidates were cut", c.Name)
	}
	// Within budget (items and node table) nothing is cut.
	nodes, _ := json.Marshal(full.Nodes)
	_, truncated = EncodeCandidates(nil, list, len(raw)+len(nodes)+10)
	g.Expect(truncated).To(BeFalse())
}

func TestDecodeReportsBadEntriesAndKeepsGoodOnes(t *testing.T) {
	g := NewWithT(t)
	c := &Candidates{
		Nodes: []string{"n0|I=10.0.0.1", "|", "n2|Z=1"},
		Items: []string{
			"p|good|abcdef01|10.0.0.5|80t|0|Rr",
			"p|badnode|abcdef01|10.0.0.5|80t|7|Rr",
			"p|badport|abcdef01|10.0.0.5|0t|0|Rr",
			"p|badproto|abcdef01|10.0.0.5|80x|0|Rr",
			"p|badphase|abcdef01|10.0.0.5|80t|0|Xr",
			"p|badflag|abcdef01|10.0.0.5|80t|0|Rz",
			"p|short|abc",
			"n|0|80t|99999|r",
			"n|-|80t|30000|r",
			"x|what",
			"s|",
			"nothing",
			"s|1.1.1.1",
		},
	}
	out, err := c.Decode()
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(HaveLen(2))
	g.Expect(out[0].Name).To(Equal("good"))
	g.Expect(out[0].NodeName).To(Equal("n0"))
	g.Expect(out[1].Kind).To(Equal(CandidateStatic))
}

func TestShortUID(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ShortUID(types.UID("3f2a1b4c-1111-4222-8333-444455556666"))).To(Equal("3f2a1b4c"))
	g.Expect(ShortUID(types.UID("abc"))).To(Equal("abc"))
}

func FuzzCandidatesDecode(f *testing.F) {
	f.Add("n0|I=10.0.0.1,H=n0", "p|web-0|abcdef01|10.0.0.5|80t|0|Rr")
	f.Add("", "n|0|80u|30080|rd")
	f.Add("x", "s|anything|goes")
	f.Fuzz(func(t *testing.T, node, item string) {
		c := &Candidates{Nodes: []string{node}, Items: []string{item}}
		out, _ := c.Decode()
		// Whatever decodes must re-encode to an entry that decodes to the same candidate.
		for _, cand := range out {
			re, _ := EncodeCandidates(nil, []Candidate{cand}, 0)
			back, err := re.Decode()
			if err != nil || len(back) != 1 {
				t.Fatalf("re-encoding %+v: %v", cand, err)
			}
			if len(cand.NodeAddresses) == 0 {
				cand.NodeAddresses = nil
			}
			if len(back[0].NodeAddresses) == 0 {
				back[0].NodeAddresses = nil
			}
			if !reflect.DeepEqual(back[0], cand) {
				t.Fatalf("round trip changed %+v into %+v", cand, back[0])
			}
		}
	})
}

// A DaemonSet's pods (or a Deployment spread one per node) each bring a node of their own, and a
// node entry with a cloud's usual addresses is longer than the pod's item: the budget is what the
// member may add to its group's ResourceBinding (one etcd object), so it covers the node table
// as well as the items — at 1,000 such pods and a 20-member share the items alone filled it and
// the node table added 2.3× as much again, so twenty members wrote a ≈ 4 MB binding.
func TestCandidatesBudgetCoversNodeTable(t *testing.T) {
	const budget = 1200 * 1024 / 20 // a member's share when the group has 20
	for _, tc := range []struct {
		name        string
		pods        int
		podsPerNode int
		ready       func(i int) bool
		wantCut     bool
	}{
		{"one pod per node, over budget", 1000, 1, func(int) bool { return true }, true},
		{"one pod per node, some not ready, over budget", 1000, 1, func(i int) bool { return i%3 != 0 }, true},
		{"twenty pods per node, within budget", 800, 20, func(int) bool { return true }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			list := make([]Candidate, tc.pods)
			for i := range list {
				node := i / tc.podsPerNode
				host := fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", node/250, node%250+1)
				list[i] = Candidate{Kind: CandidatePod, Name: fmt.Sprintf("ingress-nginx-controller-%05d", i), UID: ShortUID(uuid.NewUUID()),
					IPs: []string{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}, Port: 80, Protocol: corev1.ProtocolTCP, Phase: corev1.PodRunning, Ready: tc.ready(i),
					NodeName: host, NodeAddresses: []corev1.NodeAddress{
						{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.%d.%d", node/250, node%250+1)},
						{Type: corev1.NodeHostName, Address: host}, {Type: corev1.NodeInternalDNS, Address: host}}}
			}
			enc, truncated := EncodeCandidates(map[string]string{"weight": "1"}, list, budget)
			g.Expect(truncated).To(Equal(tc.wantCut))
			items, _ := json.Marshal(enc.Items)
			nodes, _ := json.Marshal(enc.Nodes)
			g.Expect(len(items)+len(nodes)).To(BeNumerically("<=", budget), "items %d bytes, node table %d bytes", len(items), len(nodes))
			out, err := enc.Decode()
			g.Expect(err).NotTo(HaveOccurred(), "every kept item refers to a node of the table")
			if !tc.wantCut {
				g.Expect(out).To(HaveLen(tc.pods))
				return
			}
			g.Expect(len(out)).To(BeNumerically(">", tc.pods/4), "the budget still holds a good part of the pods")
			used := map[string]bool{}
			for _, c := range out {
				g.Expect(c.Ready || len(out) == tc.pods).To(BeTrue(), "Ready candidates are kept first")
				g.Expect(c.NodeAddresses).NotTo(BeEmpty(), "%s keeps its node's addresses", c.Name)
				used[c.NodeName] = true
			}
			g.Expect(enc.Nodes).To(HaveLen(len(used)), "the table lists only the nodes of the candidates kept")
		})
	}
}
