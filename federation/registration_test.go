package federation_test

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
)

// reportItems returns the items of a report as the member wrote them.
func reportItems(g Gomega, raw *runtime.RawExtension) []string {
	var r struct {
		Candidates lbcfv1beta1.Candidates `json:"candidates"`
	}
	g.Expect(json.Unmarshal(raw.Raw, &r)).To(Succeed())
	return r.Candidates.Items
}

// registration decodes the template's lbfed.io/registered for one member: nil until written.
func (e *env) registration(g Gomega, member string) map[string]bool {
	reg, err := lbcfv1beta1.ParseRegistration(e.template(g).Annotations[lbcfv1beta1.AnnotationRegistered])
	g.Expect(err).NotTo(HaveOccurred())
	m, ok := reg[e.ns+"-"+member]
	if !ok {
		return nil
	}
	bits, err := m.Registered()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]bool{"@" + m.Report: true}
	for i, b := range bits {
		out[itemName(i)] = b
	}
	return out
}

func itemName(i int) string { return string(rune('a' + i)) }

func TestRegistrationReachesMembers(t *testing.T) {
	e := newEnv(t, wait)
	g := e.g
	e.world("m1", "m2")
	// ensureBackend fails at first: nothing is registered, and the members must hear so.
	e.drv.Inject(driver.EnsureBackend, memdriver.Fault{Fail: 1000, RetryDelay: 1})
	r1 := report(nil, 1, 1, false, pod{"a-0", "10.0.1.1", true}, pod{"a-1", "10.0.1.2", false})
	r2 := report(nil, 1, 1, false, pod{"b-0", "10.0.2.1", true})
	e.setReports(map[string]*runtime.RawExtension{"m1": r1, "m2": r2})
	d1, d2 := "@"+lbcfv1beta1.ReportDigest(reportItems(g, r1)), "@"+lbcfv1beta1.ReportDigest(reportItems(g, r2))
	g.Eventually(func() []memdriver.Call { return e.drv.Calls(driver.EnsureBackend) }, wait).ShouldNot(BeEmpty(), "the federation is trying")
	g.Eventually(func(g Gomega) {
		g.Expect(e.registration(g, "m1")).To(Equal(map[string]bool{d1: true, "a": false, "b": false}))
		g.Expect(e.registration(g, "m2")).To(Equal(map[string]bool{d2: true, "a": false}))
	}, wait).Should(Succeed())

	// The driver recovers: the ready pods' bits turn on; the not-ready one stays off.
	e.drv.Inject(driver.EnsureBackend, memdriver.Fault{})
	g.Eventually(e.backends, wait).Should(ConsistOf("10.0.1.1:80", "10.0.2.1:80"))
	g.Eventually(func(g Gomega) {
		g.Expect(e.registration(g, "m1")).To(Equal(map[string]bool{d1: true, "a": true, "b": false}))
		g.Expect(e.registration(g, "m2")).To(Equal(map[string]bool{d2: true, "a": true}))
	}, wait).Should(Succeed())

	// A new report (a-1 ready now) is answered under its own digest.
	r1b := report(nil, 1, 1, false, pod{"a-0", "10.0.1.1", true}, pod{"a-1", "10.0.1.2", true})
	e.setReports(map[string]*runtime.RawExtension{"m1": r1b, "m2": r2})
	d1b := "@" + lbcfv1beta1.ReportDigest(reportItems(g, r1b))
	g.Eventually(func(g Gomega) {
		g.Expect(e.registration(g, "m1")).To(Equal(map[string]bool{d1b: true, "a": true, "b": true}))
	}, wait).Should(Succeed())
}
