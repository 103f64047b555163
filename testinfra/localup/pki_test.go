package localup

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
)

func loadCert(g Gomega, path string) *x509.Certificate {
	b, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	block, _ := pem.Decode(b)
	g.Expect(block).NotTo(BeNil(), path)
	c, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func TestGeneratePKI(t *testing.T) {
	g := NewWithT(t)
	p, err := GeneratePKI(filepath.Join(t.TempDir(), "pki"))
	g.Expect(err).NotTo(HaveOccurred())

	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(p.CAPEM())).To(BeTrue())
	ca := loadCert(g, p.CACert)
	g.Expect(ca.IsCA).To(BeTrue())

	serving := loadCert(g, p.ServingCert)
	for _, name := range []string{"localhost", "karmada-aggregated-apiserver.karmada-system.svc", "kubernetes.default.svc"} {
		_, err := serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		g.Expect(err).NotTo(HaveOccurred(), name)
	}
	_, err = serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"})
	g.Expect(err).NotTo(HaveOccurred(), "webhooks are registered by https://127.0.0.1 URLs")
	_, err = serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: "example.com"})
	g.Expect(err).To(HaveOccurred())

	tests := []struct {
		cert, key string
		cn        string
		org       []string
	}{
		{p.AdminCert, p.AdminKey, "lbfed-localup-admin", []string{"system:masters"}},
		{p.FrontProxyCert, p.FrontProxyKey, "front-proxy-client", nil},
	}
	for _, tc := range tests {
		c := loadCert(g, tc.cert)
		g.Expect(c.Subject.CommonName).To(Equal(tc.cn))
		g.Expect(c.Subject.Organization).To(Equal(tc.org))
		_, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		g.Expect(err).NotTo(HaveOccurred(), tc.cn)
		_, err = tls.LoadX509KeyPair(tc.cert, tc.key)
		g.Expect(err).NotTo(HaveOccurred(), "key matches certificate %s", tc.cn)
	}
	_, err = tls.LoadX509KeyPair(filepath.Join(p.WebhookCertDir, "tls.crt"), filepath.Join(p.WebhookCertDir, "tls.key"))
	g.Expect(err).NotTo(HaveOccurred())

	for _, f := range []string{p.ServiceAccountKey, p.ServiceAccountPub} {
		b, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		block, _ := pem.Decode(b)
		g.Expect(block).NotTo(BeNil(), f)
	}
	key, err := os.Stat(p.AdminKey)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(key.Mode().Perm()).To(Equal(os.FileMode(0o600)))
}

func TestKubeconfigAndRESTConfig(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	p, err := GeneratePKI(filepath.Join(dir, "pki"))
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(dir, "m1.kubeconfig")
	g.Expect(p.writeKubeconfig(path, "m1", "https://127.0.0.1:6443")).To(Succeed())

	cfg, err := clientcmd.LoadFromFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.CurrentContext).To(Equal("m1"), "karmadactl join --cluster-context=<name>")
	rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, "m1", nil, nil).ClientConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc.Host).To(Equal("https://127.0.0.1:6443"))
	g.Expect(rc.CertData).To(Equal(p.restConfig(rc.Host).CertData))

	direct := p.restConfig("https://127.0.0.1:6443")
	direct.CAData[0] ^= 0xff // callers get copies: mutating one must not affect the PKI
	g.Expect(p.restConfig("x").CAData).To(Equal(p.CAPEM()))
	g.Expect(direct.QPS).To(BeNumerically(">", 5), "no client-side throttling against a local apiserver")
}

func TestAllocatePorts(t *testing.T) {
	g := NewWithT(t)
	a, err := allocatePorts(20)
	g.Expect(err).NotTo(HaveOccurred())
	b, err := allocatePorts(20)
	g.Expect(err).NotTo(HaveOccurred())
	seen := map[int]bool{}
	for _, p := range append(a, b...) {
		g.Expect(seen[p]).To(BeFalse(), "port %d handed out twice", p)
		seen[p] = true
		g.Expect(p).To(And(BeNumerically(">=", portRangeLow), BeNumerically("<", portRangeHigh)))
		l, err := net.Listen("tcp", loopback(p))
		g.Expect(err).NotTo(HaveOccurred(), "port %d is free", p)
		l.Close()
	}
}

func TestPodNetwork(t *testing.T) {
	for _, tc := range []struct {
		name            string
		wide            bool
		bits, nodeBits  int
		podsPerNodeHeld int
	}{
		{name: "narrow: a /20, a /24 per node", bits: 20, nodeBits: 24, podsPerNodeHeld: narrowPodsPerNode},
		{name: "wide: a /16, a /20 per node", wide: true, bits: 16, nodeBits: 20, podsPerNodeHeld: widePodsPerNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			n, err := allocatePodNetwork(tc.wide)
			g.Expect(err).NotTo(HaveOccurred())
			defer n.release()
			// Either kind of block: a held one is never handed out again.
			for _, wide := range []bool{false, true} {
				other, err := allocatePodNetwork(wide)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(n.prefix.Overlaps(other.prefix)).To(BeFalse(), "a held block is not handed out again")
				other.release()
			}
			g.Expect(n.prefix.Bits()).To(Equal(tc.bits))
			g.Expect(n.podsPerNode()).To(Equal(tc.podsPerNodeHeld))

			seen := map[string]bool{}
			var cidrs []netip.Prefix
			for i := 1; i <= maxFakeNodes; i++ {
				for _, s := range []string{n.nodeIP(i), n.nodePodCIDR(i)} {
					g.Expect(seen[s]).To(BeFalse(), s)
					seen[s] = true
				}
				cidr, err := netip.ParsePrefix(n.nodePodCIDR(i))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cidr.Bits()).To(Equal(tc.nodeBits))
				g.Expect(1<<(32-cidr.Bits()) - 2).To(Equal(tc.podsPerNodeHeld))
				g.Expect(n.prefix.Contains(cidr.Addr())).To(BeTrue())
				for _, c := range cidrs {
					g.Expect(c.Overlaps(cidr)).To(BeFalse(), "%s and %s", c, cidr)
				}
				cidrs = append(cidrs, cidr)
				ip, err := netip.ParseAddr(n.nodeIP(i))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(n.prefix.Contains(ip)).To(BeTrue())
				g.Expect(cidr.Contains(ip)).To(BeFalse())
				// Every address of the block is local: a pod IP can be listened on.
				l, err := net.Listen("tcp", net.JoinHostPort(cidr.Addr().Next().String(), "0"))
				g.Expect(err).NotTo(HaveOccurred())
				l.Close()
			}
			fallback := netip.MustParsePrefix(n.fallbackCIDR())
			for _, c := range cidrs {
				g.Expect(c.Overlaps(fallback)).To(BeFalse())
			}
		})
	}
	NewWithT(t).Expect(checkFakeNodes(maxFakeNodes + 1)).To(HaveOccurred())
}
