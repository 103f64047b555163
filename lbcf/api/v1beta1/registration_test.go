package v1beta1

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

func TestRegistrationRoundTrip(t *testing.T) {
	g := NewWithT(t)
	for _, n := range []int{0, 1, 7, 8, 9, 20000} {
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf("p|web-%d|abcdef01|127.0.0.%d|8080t|0|Rr", i, i%250)
		}
		want := func(i int) bool { return i%3 == 0 || i == n-1 }
		m := NewMemberRegistration(items, want)
		g.Expect(m.Report).To(Equal(ReportDigest(items)))
		reg := Registration{"m1": m}
		back, err := ParseRegistration(reg.String())
		g.Expect(err).NotTo(HaveOccurred())
		got, err := back["m1"].Registered()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(HaveLen(n))
		for i := range got {
			g.Expect(got[i]).To(Equal(want(i)), "item %d of %d", i, n)
		}
		if n == 20000 {
			// The whole point: one bit per candidate keeps the annotation small.
			g.Expect(len(reg.String())).To(BeNumerically("<", 3500))
		}
	}
}

func TestRegistrationRefusesBadInput(t *testing.T) {
	g := NewWithT(t)
	_, err := ParseRegistration("{not json")
	g.Expect(err).To(HaveOccurred())
	_, err = MemberRegistration{Report: "x", Bits: "AA", Count: 20}.Registered()
	g.Expect(err).To(MatchError(ContainSubstring("1 bytes for 20 items")))
	_, err = MemberRegistration{Report: "x", Bits: "!!", Count: 1}.Registered()
	g.Expect(err).To(HaveOccurred())
	r, err := ParseRegistration("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r).To(BeEmpty())
}

func TestReportDigestOrderMatters(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ReportDigest([]string{"a", "b"})).NotTo(Equal(ReportDigest([]string{"b", "a"})))
	g.Expect(ReportDigest([]string{"ab"})).NotTo(Equal(ReportDigest([]string{"a", "b"})))
	g.Expect(ItemPodName("p|web-1|abcdef01|1.2.3.4|80t|0|Rr")).To(Equal("web-1"))
	g.Expect(ItemPodName("n|0|80t|30080|r")).To(Equal(""))
}
