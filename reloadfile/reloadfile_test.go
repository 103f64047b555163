package reloadfile

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/servingcert"
)

// replace writes data to path the way a Secret volume update does: a new file renamed over.
func replace(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestFileIsReadAgainWhenReplaced(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "password")
	replace(t, path, []byte("one"))
	f, err := Open(path)
	g.Expect(err).NotTo(HaveOccurred())
	data, v1, err := f.Read()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal("one"))
	_, same, _ := f.Read()
	g.Expect(same).To(Equal(v1), "an unchanged file keeps its version")

	replace(t, path, []byte("two"))
	data, v2, err := f.Read()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal("two"))
	g.Expect(v2).To(BeNumerically(">", v1))

	// Gone for a moment (a symlink swap): the last content stays in use, the error is told.
	g.Expect(os.Remove(path)).To(Succeed())
	data, v3, err := f.Read()
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(data)).To(Equal("two"))
	g.Expect(v3).To(Equal(v2))
}

func TestOpenFailsOnAMissingFile(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nope"))
	NewWithT(t).Expect(err).To(HaveOccurred())
}

func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	ca, err := servingcert.NewCA(cn, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err = ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	return ca.PEM, keyPEM
}

func TestKeyPairKeepsTheLastValidPairWhileOnlyOneFileIsNew(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	c1, k1 := selfSigned(t, "one")
	replace(t, certPath, c1)
	replace(t, keyPath, k1)
	kp, err := KeyPair(certPath, keyPath)
	g.Expect(err).NotTo(HaveOccurred())
	cert, v1, err := kp.Get()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cert.Leaf.Subject.CommonName).To(Equal("one"))

	c2, k2 := selfSigned(t, "two")
	replace(t, certPath, c2) // the key follows later
	cert, v, err := kp.Get()
	g.Expect(err).To(HaveOccurred(), "a certificate without its key is reported")
	g.Expect(cert.Leaf.Subject.CommonName).To(Equal("one"), "and the previous pair is kept")
	g.Expect(v).To(Equal(v1))

	replace(t, keyPath, k2)
	cert, v2, err := kp.Get()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cert.Leaf.Subject.CommonName).To(Equal("two"))
	g.Expect(v2).To(BeNumerically(">", v1))
}

func TestCertPoolFollowsTheBundle(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "ca.crt")
	c1, _ := selfSigned(t, "ca-one")
	replace(t, path, c1)
	cp, err := CertPool(path)
	g.Expect(err).NotTo(HaveOccurred())
	_, v1, _ := cp.Get()
	c2, _ := selfSigned(t, "ca-two")
	replace(t, path, append(c1, c2...))
	pool, v2, err := cp.Get()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v2).To(BeNumerically(">", v1))
	for _, ca := range [][]byte{c1, c2} {
		block, _ := pem.Decode(ca)
		cert, err := x509.ParseCertificate(block.Bytes)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cert.Verify(x509.VerifyOptions{Roots: pool})
		g.Expect(err).NotTo(HaveOccurred(), "both CAs of the bundle are trusted")
	}

	_, err = CertPool(filepath.Join(t.TempDir(), "missing"))
	g.Expect(err).To(HaveOccurred())
	bad := filepath.Join(t.TempDir(), "bad")
	replace(t, bad, []byte("not pem"))
	_, err = CertPool(bad)
	g.Expect(err).To(MatchError(ContainSubstring("no PEM certificate")))
}
