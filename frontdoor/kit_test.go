package frontdoor

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// TestDoorOwns: every front door's objects carry the same two labels (the name hashed when it
// is no label value) and an owner reference; a Door owns by UID, and a Door known by name only
// (its object gone) owns what any incarnation of that kind and name generated, nothing else.
func TestDoorOwns(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("n", 100)
	mk := func(name string, uid types.UID) Door {
		return Door{Kind: "mcs", GVK: schema.GroupVersionKind{Group: "networking.karmada.io", Version: "v1alpha1", Kind: "MultiClusterService"},
			Object: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}}}
	}
	for _, name := range []string{"web", long} {
		d := mk(name, "u1")
		g.Expect(validation.IsValidLabelValue(d.Labels()[LabelFrontDoorName])).To(BeEmpty())
		obj := &corev1.ConfigMap{ObjectMeta: d.Meta("x")}
		g.Expect(obj.Namespace).To(Equal("ns"))
		for _, tt := range []struct {
			door Door
			obj  client.Object
			owns bool
		}{
			{d, obj, true},
			{mk(name, "u2"), obj, false},   // another incarnation
			{mk(name, ""), obj, true},      // known by name only
			{mk(name+"x", ""), obj, false}, // another name
			{Door{Kind: "service", GVK: d.GVK, Object: d.Object}, obj, false},                                                    // another kind
			{d, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: d.Labels()}}, false},                                     // labels only
			{d, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{d.OwnerRef()}}}, false}, // owner only
		} {
			g.Expect(tt.door.Owns(tt.obj)).To(Equal(tt.owns), "%s owns %v", tt.door, tt.obj.GetLabels())
		}
	}
	g.Expect(NameLabel(long)).NotTo(Equal(NameLabel(long + "x")))
}

// TestDriverKey: a shared driver is the same from every namespace; another is its namespace's.
func TestDriverKey(t *testing.T) {
	g := NewWithT(t)
	g.Expect(DriverKey("a", "lbcf-bfe")).To(Equal(DriverKey("b", "lbcf-bfe")))
	g.Expect(DriverKey("a", "bfe")).NotTo(Equal(DriverKey("b", "bfe")))
	g.Expect(DriverKey("kube-system", "bfe")).NotTo(Equal(DriverKey("a", "lbcf-bfe")))
}
