package v1beta1

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Candidates is a member cluster's report of every backend its BackendGroup selects, written by
// lbcf-controller --mode=member into status.candidates and carried to the Karmada control plane
// through the interpreter's InterpretStatus.
//
// Size matters: Karmada keeps every member's status of one BackendGroup in one ResourceBinding
// (one etcd object, 1.5 MiB), so each candidate is one short string (typically ≤ 60 bytes) and
// what is common to many candidates — the group's parameters and node addresses — is stated once.
//
// Item grammar (fields separated by '|'):
//
//	pod:     p|<name>|<uid8>|<ip>[,<ip>...]|<port><proto>|<node#>|<state>
//	node:    n|<node#>|<servicePort><proto>|<nodePort>|<state>
//	static:  s|<address>                       (the address is the rest of the string)
//
// <uid8> is ShortUID of the pod UID; <proto> is t (TCP), u (UDP) or s (SCTP); <node#> indexes
// Nodes ("-" when the pod is not scheduled); <state> is a phase letter for pods (P Pending,
// R Running, S Succeeded, F Failed, U Unknown) followed by flags: r = Ready, d = being deleted,
// u = readiness unobserved (see Candidate.Unobserved). Node entries carry only flags. A node
// table entry is "<name>|<T>=<addr>,..." with T one of
// H (Hostname), I (InternalIP), E (ExternalIP), i (InternalDNS), e (ExternalDNS).
type Candidates struct {
	// Parameters are the group's effective spec.parameters in the member (after Karmada overrides).
	// +optional
	Parameters map[string]string `json:"parameters,omitempty"`
	// Nodes is the node table that items refer to by index.
	// +optional
	Nodes []string `json:"nodes,omitempty"`
	// Items has one entry per candidate backend, sorted.
	// +optional
	Items []string `json:"items,omitempty"`
	// Total is the number of candidates selected; more than len(items) when truncated.
	// +optional
	Total int32 `json:"total"`
	// Ready is the number of Ready candidates among Total.
	// +optional
	Ready int32 `json:"ready"`
}

// CandidateKind is the kind of a candidate backend.
type CandidateKind string

// Candidate kinds.
const (
	CandidatePod    CandidateKind = "Pod"
	CandidateNode   CandidateKind = "Node"
	CandidateStatic CandidateKind = "Static"
)

// Candidate is the decoded form of one candidate backend.
type Candidate struct {
	Kind CandidateKind
	// Name is the pod name (Pod), or the address (Static). Empty for Node.
	Name string
	// UID is the pod's ShortUID.
	UID string
	// IPs are the pod IPs.
	IPs []string
	// Port and Protocol: the pod port (Pod) or the Service port (Node).
	Port     int32
	Protocol corev1.Protocol
	// NodePort is the Service's nodePort (Node).
	NodePort int32
	// NodeName and NodeAddresses describe the pod's node (Pod) or the node itself (Node).
	NodeName      string
	NodeAddresses []corev1.NodeAddress
	// Phase is the pod phase (Pod).
	Phase corev1.PodPhase
	// Ready: the pod's Ready condition (Pod), the node's Ready condition (Node), always true (Static).
	Ready bool
	// Deleting: the pod or node has a deletionTimestamp.
	Deleting bool
	// Unobserved (Pod): the pod is not Ready only on control-plane evidence — its node's kubelet
	// is unreachable or NotReady, or the node lifecycle controller cleared Ready while the
	// containers are ready — so nobody looked at the pod: the federation keeps it like a member
	// it cannot observe instead of taking it for gone.
	Unobserved bool
}

// Key identifies the candidate within one member's report; it is stable across updates of the
// same backend and different for a recreated pod.
func (c *Candidate) Key() string {
	switch c.Kind {
	case CandidatePod:
		return fmt.Sprintf("pod/%s/%s/%d/%s", c.Name, c.UID, c.Port, c.Protocol)
	case CandidateNode:
		return fmt.Sprintf("node/%s/%d/%s", c.NodeName, c.Port, c.Protocol)
	default:
		return "static/" + c.Name
	}
}

// ShortUID is the part of a pod UID that candidates carry: the first 8 hex digits. It only has to
// tell apart successive pods with the same name, for which 32 random bits are plenty.
func ShortUID(uid types.UID) string {
	s := strings.ReplaceAll(string(uid), "-", "")
	if len(s) > 8 {
		s = s[:8]
	}
	return s
}

var (
	protoLetter = map[corev1.Protocol]byte{corev1.ProtocolTCP: 't', corev1.ProtocolUDP: 'u', corev1.ProtocolSCTP: 's'}
	letterProto = map[byte]corev1.Protocol{'t': corev1.ProtocolTCP, 'u': corev1.ProtocolUDP, 's': corev1.ProtocolSCTP}
	phaseLetter = map[corev1.PodPhase]byte{
		corev1.PodPending: 'P', corev1.PodRunning: 'R', corev1.PodSucceeded: 'S', corev1.PodFailed: 'F', corev1.PodUnknown: 'U',
	}
	letterPhase = map[byte]corev1.PodPhase{
		'P': corev1.PodPending, 'R': corev1.PodRunning, 'S': corev1.PodSucceeded, 'F': corev1.PodFailed, 'U': corev1.PodUnknown,
	}
	addrLetter = map[corev1.NodeAddressType]byte{
		corev1.NodeHostName: 'H', corev1.NodeInternalIP: 'I', corev1.NodeExternalIP: 'E',
		corev1.NodeInternalDNS: 'i', corev1.NodeExternalDNS: 'e',
	}
	letterAddr = map[byte]corev1.NodeAddressType{
		'H': corev1.NodeHostName, 'I': corev1.NodeInternalIP, 'E': corev1.NodeExternalIP,
		'i': corev1.NodeInternalDNS, 'e': corev1.NodeExternalDNS,
	}
)

// EncodeCandidates builds the compact report of list with the group's effective parameters.
// Output is deterministic: nodes and items are sorted, so an unchanged set encodes identically
// and Karmada sees no spurious change. When maxBytes > 0 and the items and node table would take
// more, Ready candidates are kept first and the rest cut (the table then lists only the nodes of
// the candidates kept); truncated then reports true and Total still counts every candidate, so
// the cut is visible.
func EncodeCandidates(params map[string]string, list []Candidate, maxBytes int) (out *Candidates, truncated bool) {
	out = &Candidates{Parameters: params, Total: int32(len(list))}
	nodeIdx := map[string]int{}
	nodeAddrs := map[string][]corev1.NodeAddress{}
	for i := range list {
		if n := list[i].NodeName; n != "" {
			nodeIdx[n] = 0
			if len(list[i].NodeAddresses) > 0 {
				nodeAddrs[n] = list[i].NodeAddresses
			}
		}
		if list[i].Ready {
			out.Ready++
		}
	}
	names := make([]string, 0, len(nodeIdx))
	for n := range nodeIdx {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		nodeIdx[n] = i
	}

	type entry struct {
		s     string
		ready bool
		c     *Candidate
	}
	entries := make([]entry, 0, len(list))
	for i := range list {
		entries = append(entries, entry{encodeItem(&list[i], nodeIdx), list[i].Ready, &list[i]})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].s < entries[j].s })
	nodeEntries := make(map[string]string, len(names))
	for _, n := range names {
		nodeEntries[n] = encodeNode(n, nodeAddrs[n])
	}

	keep := entries
	if maxBytes > 0 {
		// The budget is what the report adds to the group's ResourceBinding: the items and the node
		// table (a DaemonSet brings a node per pod, and a node entry is often longer than the item).
		size := 0
		for _, e := range entries {
			size += len(e.s) + 3 // quotes and comma in JSON
		}
		for _, n := range names {
			size += len(nodeEntries[n]) + 3
		}
		if size > maxBytes {
			truncated = true
			// Ready candidates first: they are the ones the front end must keep serving.
			ordered := make([]entry, 0, len(entries))
			for _, e := range entries {
				if e.ready {
					ordered = append(ordered, e)
				}
			}
			for _, e := range entries {
				if !e.ready {
					ordered = append(ordered, e)
				}
			}
			keep = keep[:0:0]
			size = 0
			charged := map[string]bool{}
			for _, e := range ordered {
				// An item's node index only shrinks when the table does: its length here is an upper bound.
				cost := len(e.s) + 3
				n := e.c.NodeName
				if n != "" && !charged[n] {
					cost += len(nodeEntries[n]) + 3
				}
				if size+cost > maxBytes {
					break
				}
				size += cost
				if n != "" {
					charged[n] = true
				}
				keep = append(keep, e)
			}
			// The table lists the nodes of the candidates kept, and their items refer to it.
			names = names[:0]
			for n := range charged {
				names = append(names, n)
			}
			sort.Strings(names)
			clear(nodeIdx)
			for i, n := range names {
				nodeIdx[n] = i
			}
			for i := range keep {
				keep[i].s = encodeItem(keep[i].c, nodeIdx)
			}
			sort.Slice(keep, func(i, j int) bool { return keep[i].s < keep[j].s })
		}
	}
	for _, e := range keep {
		out.Items = append(out.Items, e.s)
	}
	for _, n := range names {
		out.Nodes = append(out.Nodes, nodeEntries[n])
	}
	return out, truncated
}

func encodeNode(name string, addrs []corev1.NodeAddress) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('|')
	first := true
	for _, a := range addrs {
		l, ok := addrLetter[a.Type]
		if !ok || a.Address == "" || strings.ContainsAny(a.Address, ",|") {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteByte(l)
		b.WriteByte('=')
		b.WriteString(a.Address)
	}
	return b.String()
}

func encodeItem(c *Candidate, nodeIdx map[string]int) string {
	var b strings.Builder
	node := "-"
	if c.NodeName != "" {
		node = strconv.Itoa(nodeIdx[c.NodeName])
	}
	portProto := func() {
		b.WriteString(strconv.Itoa(int(c.Port)))
		if l, ok := protoLetter[c.Protocol]; ok {
			b.WriteByte(l)
		} else {
			b.WriteByte('t')
		}
	}
	flags := func() {
		if c.Ready {
			b.WriteByte('r')
		}
		if c.Deleting {
			b.WriteByte('d')
		}
		if c.Unobserved {
			b.WriteByte('u')
		}
	}
	switch c.Kind {
	case CandidatePod:
		b.WriteString("p|")
		b.WriteString(c.Name)
		b.WriteByte('|')
		b.WriteString(c.UID)
		b.WriteByte('|')
		b.WriteString(strings.Join(c.IPs, ","))
		b.WriteByte('|')
		portProto()
		b.WriteByte('|')
		b.WriteString(node)
		b.WriteByte('|')
		if l, ok := phaseLetter[c.Phase]; ok {
			b.WriteByte(l)
		} else {
			b.WriteByte('U')
		}
		flags()
	case CandidateNode:
		b.WriteString("n|")
		b.WriteString(node)
		b.WriteByte('|')
		portProto()
		b.WriteByte('|')
		b.WriteString(strconv.Itoa(int(c.NodePort)))
		b.WriteByte('|')
		flags()
	default:
		b.WriteString("s|")
		b.WriteString(c.Name)
	}
	return b.String()
}

// Decode returns the candidates of the report. Malformed entries are skipped and reported in the
// returned error (joined), so one bad entry never hides the others.
func (c *Candidates) Decode() ([]Candidate, error) {
	out, _, err := c.DecodeIndexed()
	return out, err
}

// DecodeIndexed is Decode that also returns, for each candidate, its position in Items.
func (c *Candidates) DecodeIndexed() ([]Candidate, []int, error) {
	if c == nil {
		return nil, nil, nil
	}
	type node struct {
		name  string
		addrs []corev1.NodeAddress
	}
	nodes := make([]node, len(c.Nodes))
	var errs []error
	for i, s := range c.Nodes {
		name, addrs, _ := strings.Cut(s, "|")
		if name == "" {
			errs = append(errs, fmt.Errorf("node %d %q: empty name", i, s))
			continue
		}
		n := node{name: name}
		if addrs != "" {
			for _, a := range strings.Split(addrs, ",") {
				if len(a) < 3 || a[1] != '=' || strings.Contains(a, "|") {
					errs = append(errs, fmt.Errorf("node %d %q: bad address %q", i, s, a))
					continue
				}
				t, ok := letterAddr[a[0]]
				if !ok {
					errs = append(errs, fmt.Errorf("node %d %q: unknown address type %q", i, s, a[:1]))
					continue
				}
				n.addrs = append(n.addrs, corev1.NodeAddress{Type: t, Address: a[2:]})
			}
		}
		nodes[i] = n
	}
	lookupNode := func(ref string) (string, []corev1.NodeAddress, error) {
		if ref == "-" {
			return "", nil, nil
		}
		i, err := strconv.Atoi(ref)
		if err != nil || i < 0 || i >= len(nodes) || nodes[i].name == "" {
			return "", nil, fmt.Errorf("bad node reference %q", ref)
		}
		return nodes[i].name, nodes[i].addrs, nil
	}
	out := make([]Candidate, 0, len(c.Items))
	pos := make([]int, 0, len(c.Items))
	for i, s := range c.Items {
		cand, err := decodeItem(s, lookupNode)
		if err != nil {
			errs = append(errs, fmt.Errorf("candidate %q: %w", s, err))
			continue
		}
		out = append(out, cand)
		pos = append(pos, i)
	}
	return out, pos, errors.Join(errs...)
}

func decodeItem(s string, lookupNode func(string) (string, []corev1.NodeAddress, error)) (Candidate, error) {
	kind, rest, ok := strings.Cut(s, "|")
	if !ok {
		return Candidate{}, errors.New("no kind")
	}
	switch kind {
	case "s":
		if rest == "" {
			return Candidate{}, errors.New("empty static address")
		}
		return Candidate{Kind: CandidateStatic, Name: rest, Ready: true}, nil
	case "p":
		f := strings.Split(rest, "|")
		if len(f) != 6 {
			return Candidate{}, fmt.Errorf("pod entry has %d fields, want 6", len(f))
		}
		c := Candidate{Kind: CandidatePod, Name: f[0], UID: f[1]}
		if c.Name == "" {
			return Candidate{}, errors.New("empty pod name")
		}
		if f[2] != "" {
			c.IPs = strings.Split(f[2], ",")
		}
		var err error
		if c.Port, c.Protocol, err = decodePortProto(f[3]); err != nil {
			return Candidate{}, err
		}
		if c.NodeName, c.NodeAddresses, err = lookupNode(f[4]); err != nil {
			return Candidate{}, err
		}
		if f[5] == "" {
			return Candidate{}, errors.New("empty pod state")
		}
		if c.Phase, ok = letterPhase[f[5][0]]; !ok {
			return Candidate{}, fmt.Errorf("unknown phase %q", f[5][:1])
		}
		var unobserved bool
		if c.Ready, c.Deleting, unobserved, err = decodeFlags(f[5][1:]); err != nil {
			return Candidate{}, err
		}
		// Only a pod that is not Ready can have its readiness unobserved.
		c.Unobserved = unobserved && !c.Ready
		return c, nil
	case "n":
		f := strings.Split(rest, "|")
		if len(f) != 4 {
			return Candidate{}, fmt.Errorf("node entry has %d fields, want 4", len(f))
		}
		c := Candidate{Kind: CandidateNode}
		var err error
		if c.NodeName, c.NodeAddresses, err = lookupNode(f[0]); err != nil || c.NodeName == "" {
			return Candidate{}, fmt.Errorf("bad node reference %q", f[0])
		}
		if c.Port, c.Protocol, err = decodePortProto(f[1]); err != nil {
			return Candidate{}, err
		}
		np, err := strconv.ParseInt(f[2], 10, 32)
		if err != nil || np <= 0 || np > 65535 {
			return Candidate{}, fmt.Errorf("bad nodePort %q", f[2])
		}
		c.NodePort = int32(np)
		if c.Ready, c.Deleting, _, err = decodeFlags(f[3]); err != nil {
			return Candidate{}, err
		}
		return c, nil
	}
	return Candidate{}, fmt.Errorf("unknown kind %q", kind)
}

func decodePortProto(s string) (int32, corev1.Protocol, error) {
	if len(s) < 2 {
		return 0, "", fmt.Errorf("bad port %q", s)
	}
	proto, ok := letterProto[s[len(s)-1]]
	if !ok {
		return 0, "", fmt.Errorf("bad protocol in %q", s)
	}
	p, err := strconv.ParseInt(s[:len(s)-1], 10, 32)
	if err != nil || p <= 0 || p > 65535 {
		return 0, "", fmt.Errorf("bad port %q", s)
	}
	return int32(p), proto, nil
}

// decodeFlags reads an entry's flags. An unknown flag fails the entry: the federation then
// treats the report as partial and deregisters nothing it cannot read.
func decodeFlags(s string) (ready, deleting, unobserved bool, err error) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 'r':
			ready = true
		case 'd':
			deleting = true
		case 'u':
			unobserved = true
		default:
			return false, false, false, fmt.Errorf("unknown flag %q", s[i:i+1])
		}
	}
	return ready, deleting, unobserved, nil
}
