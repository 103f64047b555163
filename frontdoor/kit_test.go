package frontdoor

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestName: generated names are deterministic, valid label values (LBCF copies them into
// BackendRecord labels), and distinct for distinct inputs even when shortened.
func TestName(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("a", 70)
	for _, tt := range []struct {
		kind, name string
		port       Port
		want       string
	}{
		{"mcs", "web", Port{Port: 80, Protocol: corev1.ProtocolTCP}, "mcs-web-tcp-80"},
		{"service", "dns", Port{Port: 53, Protocol: corev1.ProtocolUDP}, "service-dns-udp-53"},
		{"mcs", long, Port{Port: 80, Protocol: corev1.ProtocolTCP}, ""},
	} {
		got := Name(tt.kind, tt.name, tt.port)
		g.Expect(validation.IsValidLabelValue(got)).To(BeEmpty(), got)
		g.Expect(validation.IsDNS1123Subdomain(got)).To(BeEmpty(), got)
		g.Expect(Name(tt.kind, tt.name, tt.port)).To(Equal(got), "deterministic")
		if tt.want != "" {
			g.Expect(got).To(Equal(tt.want))
		}
	}
	a := Name("mcs", long, Port{Port: 80, Protocol: corev1.ProtocolTCP})
	b := Name("mcs", long, Port{Port: 81, Protocol: corev1.ProtocolTCP})
	g.Expect(a).NotTo(Equal(b))
	g.Expect(len(a)).To(BeNumerically("<=", 63))
}
