package alteon

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/servingcert"
)

// TestHTTPSWithVerifiedCertificates drives a unit over HTTPS, verifying its certificate against a
// CA bundle (the device's transport), and refuses an unknown CA.
func TestHTTPSWithVerifiedCertificates(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	caPEM, err := servingcert.Ensure(dir, []string{"127.0.0.1"}, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, servingcert.CertFile), filepath.Join(dir, servingcert.KeyFile))
	g.Expect(err).NotTo(HaveOccurred())
	d := alteonsim.New(alteonsim.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}, ApplyDuration: time.Millisecond, SaveDuration: time.Millisecond})
	url, err := d.Start("127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer d.Close()
	g.Expect(url).To(HavePrefix("https://"))

	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(caPEM)).To(BeTrue())
	c, err := NewClient(Config{URL: url, User: "admin", Password: "admin",
		HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}})
	g.Expect(err).NotTo(HaveOccurred())
	p, err := NewPair(PairOptions{PollInterval: 2 * time.Millisecond}, c)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = p.Do(ctx(t), program("rs1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Snapshot(alteonsim.Running).RealServers()).To(Equal([]string{"rs1"}))

	untrusted, err := NewClient(Config{URL: url, User: "admin", Password: "admin", Attempts: 1})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = untrusted.Role(ctx(t))
	g.Expect(err).To(MatchError(ContainSubstring("certificate")))
}
