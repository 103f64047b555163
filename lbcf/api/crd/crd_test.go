package crd

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestCRDsShipWhatUsersExpect(t *testing.T) {
	g := NewWithT(t)
	crds, err := CRDs()
	g.Expect(err).NotTo(HaveOccurred())

	want := map[string]struct {
		short   string
		columns []string
	}{
		"backendgroups.lbcf.tkestack.io":       {"bg", []string{"LoadBalancers", "Backends", "Registered", "Age"}},
		"backendrecords.lbcf.tkestack.io":      {"br", []string{"LB", "Address", "Registered", "Age"}},
		"loadbalancerdrivers.lbcf.tkestack.io": {"driver", []string{"URL", "Accepted", "Healthy", "Age"}},
		"loadbalancers.lbcf.tkestack.io":       {"lb", []string{"Driver", "Created", "Synced", "Age"}},
	}
	g.Expect(crds).To(HaveLen(len(want)))
	for _, c := range crds {
		w, ok := want[c.Name]
		g.Expect(ok).To(BeTrue(), "unexpected CRD %s", c.Name)
		g.Expect(c.Spec.Group).To(Equal("lbcf.tkestack.io"))
		g.Expect(c.Spec.Names.ShortNames).To(ConsistOf(w.short), c.Name)
		g.Expect(c.Spec.Versions).To(HaveLen(1))
		v := c.Spec.Versions[0]
		g.Expect(v.Name).To(Equal("v1beta1"))
		g.Expect(v.Served && v.Storage).To(BeTrue())
		g.Expect(v.Subresources).NotTo(BeNil())
		g.Expect(v.Subresources.Status).NotTo(BeNil(), "%s needs the status subresource (Karmada writes status through it)", c.Name)
		var cols []string
		for _, col := range v.AdditionalPrinterColumns {
			if col.Priority == 0 {
				cols = append(cols, col.Name)
			}
		}
		g.Expect(cols).To(Equal(w.columns), c.Name)
	}
}
