package servingcert

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestSelfSignedBootstrapServesTheGivenHosts(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	ca, err := Ensure(dir, []string{"127.0.0.1", "lbcf-controller.kube-system.svc"}, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ca).NotTo(BeEmpty())

	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	g.Expect(err).NotTo(HaveOccurred())
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
	for _, host := range []string{"127.0.0.1", "lbcf-controller.kube-system.svc"} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
		g.Expect(err).NotTo(HaveOccurred(), host)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "other.example"})
	g.Expect(err).To(HaveOccurred())

	// A second call keeps what is there.
	before, _ := os.ReadFile(filepath.Join(dir, CertFile))
	ca2, err := Ensure(dir, []string{"ignored"}, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ca2).To(Equal(ca))
	after, _ := os.ReadFile(filepath.Join(dir, CertFile))
	g.Expect(after).To(Equal(before))

	_, err = Ensure(t.TempDir(), nil, time.Hour)
	g.Expect(err).To(HaveOccurred())
}
