package v1beta1

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Registration is the value of AnnotationRegistered: the registration state of each member's
// reported candidates, keyed by member cluster.
//
// It answers "is this pod's backend on the front end yet?" for members that cannot see the
// records (they live on Karmada) and may not even be reachable from it (Pull mode): the answer
// rides on the template, which Karmada already propagates to every member. Its size is one bit per
// candidate, not one name: 20,000 candidates take 3.4 kB, so it is rewritten whole on every
// change without strain. Bits are positions in one report's items; the report is named by its
// digest (ReportDigest), so a member that reported again in between still knows which list the
// bits describe (it keeps its last reports, see lbcf/controller).
type Registration map[string]MemberRegistration

// MemberRegistration is the registration state of one member report.
type MemberRegistration struct {
	// Report is the ReportDigest of the items the bits refer to.
	Report string `json:"r"`
	// Bits has bit i (byte i/8, bit i%8 from the least significant) set when item i is registered
	// on every LoadBalancer of the group; base64 (standard, unpadded).
	Bits string `json:"b"`
	// Count is the number of items (so that a short bitmap is not read as "not registered").
	Count int `json:"n"`
}

// ReportDigest names a member report by its items (FNV-64a of the items in order): the member and
// the federation compute it from the same strings.
func ReportDigest(items []string) string {
	h := fnv.New64a()
	for _, it := range items {
		_, _ = h.Write([]byte(it))
		_, _ = h.Write([]byte{'\n'})
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// NewMemberRegistration encodes the state of a report's items.
func NewMemberRegistration(items []string, registered func(i int) bool) MemberRegistration {
	return MemberRegistrationOf(ReportDigest(items), len(items), registered)
}

// MemberRegistrationOf encodes the state of the count items of the report whose ReportDigest is
// digest: for a reader that keeps the digest rather than the items.
func MemberRegistrationOf(digest string, count int, registered func(i int) bool) MemberRegistration {
	bits := make([]byte, (count+7)/8)
	for i := 0; i < count; i++ {
		if registered(i) {
			bits[i/8] |= 1 << (i % 8)
		}
	}
	return MemberRegistration{Report: digest, Bits: base64.RawStdEncoding.EncodeToString(bits), Count: count}
}

// Registered returns the state of each of the report's Count items.
func (m MemberRegistration) Registered() ([]bool, error) {
	bits, err := base64.RawStdEncoding.DecodeString(m.Bits)
	if err != nil {
		return nil, fmt.Errorf("registration of report %s: %w", m.Report, err)
	}
	if m.Count < 0 || len(bits) != (m.Count+7)/8 {
		return nil, fmt.Errorf("registration of report %s: %d bytes for %d items", m.Report, len(bits), m.Count)
	}
	out := make([]bool, m.Count)
	for i := range out {
		out[i] = bits[i/8]&(1<<(i%8)) != 0
	}
	return out, nil
}

// ParseRegistration decodes an AnnotationRegistered value ("" is an empty registration).
func ParseRegistration(s string) (Registration, error) {
	r := Registration{}
	if strings.TrimSpace(s) == "" {
		return r, nil
	}
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationRegistered, err)
	}
	return r, nil
}

// String encodes the registration for the annotation (keys sorted by encoding/json).
func (r Registration) String() string {
	b, _ := json.Marshal(r) // a map of strings to a struct of strings and an int cannot fail
	return string(b)
}

// ItemPodName returns the pod name of a pod candidate item ("" for other kinds), without decoding
// the rest.
func ItemPodName(item string) string {
	rest, ok := strings.CutPrefix(item, "p|")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "|")
	return name
}
