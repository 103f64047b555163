package localup

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is the certificate set of one run. One CA signs everything: the serving certificate shared
// by every apiserver and webhook (all listen on 127.0.0.1), an admin client certificate in
// system:masters used by every component and kubeconfig, the front-proxy client certificate for
// API aggregation, and the service-account signing key. This is a test shortcut — real clusters
// give each component its own identity.
type PKI struct {
	Dir string

	CACert, CAKey                 string // CA, also client, request-header and cluster-signing CA
	ServingCert, ServingKey       string // serverAuth+clientAuth, SANs for 127.0.0.1 and the Service names below
	AdminCert, AdminKey           string // O=system:masters
	FrontProxyCert, FrontProxyKey string // CN=front-proxy-client
	ServiceAccountKey             string // ECDSA private key signing service-account tokens
	ServiceAccountPub             string
	// WebhookCertDir holds the serving pair as tls.crt/tls.key, the names controller-runtime
	// webhook servers (karmada-webhook, lbfed's webhooks) expect in their --cert-dir.
	WebhookCertDir string

	caPEM, adminCertPEM, adminKeyPEM []byte
}

// CAPEM returns the CA certificate, e.g. for a webhook configuration's caBundle.
func (p *PKI) CAPEM() []byte { return append([]byte(nil), p.caPEM...) }

// servingDNSNames are the DNS SANs of the shared serving certificate. Karmada's aggregator verifies
// the aggregated apiserver against the Service name of its APIService even though it dials
// localhost, hence the karmada-aggregated-apiserver name.
var servingDNSNames = []string{
	"localhost",
	"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
	"karmada-aggregated-apiserver.karmada-system.svc",
	"karmada-webhook.karmada-system.svc",
}

// GeneratePKI writes a fresh PKI into dir. ECDSA P-256 keeps it to a few milliseconds.
func GeneratePKI(dir string) (*PKI, error) {
	p := &PKI{
		Dir:               dir,
		CACert:            filepath.Join(dir, "ca.crt"),
		CAKey:             filepath.Join(dir, "ca.key"),
		ServingCert:       filepath.Join(dir, "serving.crt"),
		ServingKey:        filepath.Join(dir, "serving.key"),
		AdminCert:         filepath.Join(dir, "admin.crt"),
		AdminKey:          filepath.Join(dir, "admin.key"),
		FrontProxyCert:    filepath.Join(dir, "front-proxy-client.crt"),
		FrontProxyKey:     filepath.Join(dir, "front-proxy-client.key"),
		ServiceAccountKey: filepath.Join(dir, "sa.key"),
		ServiceAccountPub: filepath.Join(dir, "sa.pub"),
		WebhookCertDir:    filepath.Join(dir, "webhook"),
	}
	if err := os.MkdirAll(p.WebhookCertDir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	now := time.Now().Add(-time.Hour) // tolerate small clock differences between processes
	caKey, err := newKey()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "lbfed-localup-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, caCert, err := sign(caTmpl, caKey, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	p.caPEM = pemCert(caDER)
	if err := writePair(p.CACert, p.CAKey, caDER, caKey); err != nil {
		return nil, err
	}

	leaf := func(cn string, orgs []string, usages []x509.ExtKeyUsage) *x509.Certificate {
		return &x509.Certificate{
			Subject:     pkix.Name{CommonName: cn, Organization: orgs},
			NotBefore:   now,
			NotAfter:    now.Add(10 * 365 * 24 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: usages,
		}
	}
	serving := leaf("lbfed-localup-serving", nil, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
	serving.DNSNames = servingDNSNames
	serving.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1)}

	for _, c := range []struct {
		tmpl      *x509.Certificate
		cert, key string
		keep      func(certPEM, keyPEM []byte)
	}{
		{tmpl: serving, cert: p.ServingCert, key: p.ServingKey},
		{
			tmpl: leaf("lbfed-localup-admin", []string{"system:masters"}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}),
			cert: p.AdminCert, key: p.AdminKey,
			keep: func(c, k []byte) { p.adminCertPEM, p.adminKeyPEM = c, k },
		},
		{
			tmpl: leaf("front-proxy-client", nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}),
			cert: p.FrontProxyCert, key: p.FrontProxyKey,
		},
	} {
		key, err := newKey()
		if err != nil {
			return nil, err
		}
		der, _, err := sign(c.tmpl, key, caCert, caKey)
		if err != nil {
			return nil, fmt.Errorf("sign %s: %w", c.tmpl.Subject.CommonName, err)
		}
		if err := writePair(c.cert, c.key, der, key); err != nil {
			return nil, err
		}
		if c.keep != nil {
			keyPEM, err := pemKey(key)
			if err != nil {
				return nil, err
			}
			c.keep(pemCert(der), keyPEM)
		}
	}
	// karmada-webhook and controller-runtime webhook servers read tls.crt/tls.key from a folder.
	for src, dst := range map[string]string{p.ServingCert: "tls.crt", p.ServingKey: "tls.key"} {
		b, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("copy serving pair: %w", err)
		}
		if err := os.WriteFile(filepath.Join(p.WebhookCertDir, dst), b, 0o600); err != nil {
			return nil, fmt.Errorf("copy serving pair: %w", err)
		}
	}

	saKey, err := newKey()
	if err != nil {
		return nil, err
	}
	saKeyPEM, err := pemKey(saKey)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("encode service-account public key: %w", err)
	}
	if err := os.WriteFile(p.ServiceAccountKey, saKeyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write service-account key: %w", err)
	}
	if err := os.WriteFile(p.ServiceAccountPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return nil, fmt.Errorf("write service-account key: %w", err)
	}
	return p, nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return k, nil
}

// sign issues tmpl for key's public half; a nil parent self-signs.
func sign(tmpl *x509.Certificate, key *ecdsa.PrivateKey, parent *x509.Certificate, parentKey crypto.Signer) ([]byte, *x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return der, cert, err
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func pemKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	keyPEM, err := pemKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certPath, pemCert(der), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", certPath, err)
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", keyPath, err)
	}
	return nil
}

// withServingIPs returns a copy of p whose serving pair (also in WebhookCertDir) is a new one,
// written into dir, with ips added to the usual SANs: for a cluster in its own network
// namespace, reached at addresses other than 127.0.0.1. The CA and client pairs are shared.
func (p *PKI) withServingIPs(dir string, ips ...net.IP) (*PKI, error) {
	caCert, caKey, err := p.loadCA()
	if err != nil {
		return nil, err
	}
	q := *p
	q.ServingCert, q.ServingKey = filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	q.WebhookCertDir = filepath.Join(dir, "webhook")
	if err := os.MkdirAll(q.WebhookCertDir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	now := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "lbfed-localup-serving"},
		NotBefore:   now,
		NotAfter:    now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    servingDNSNames,
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1)}, ips...),
	}
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	der, _, err := sign(tmpl, key, caCert, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign serving certificate: %w", err)
	}
	for _, pair := range [][2]string{{q.ServingCert, q.ServingKey}, {filepath.Join(q.WebhookCertDir, "tls.crt"), filepath.Join(q.WebhookCertDir, "tls.key")}} {
		if err := writePair(pair[0], pair[1], der, key); err != nil {
			return nil, err
		}
	}
	return &q, nil
}

func (p *PKI) loadCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(p.caPEM)
	if block == nil {
		return nil, nil, errors.New("load CA: no certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("load CA: %w", err)
	}
	b, err := os.ReadFile(p.CAKey)
	if err != nil {
		return nil, nil, fmt.Errorf("load CA key: %w", err)
	}
	if block, _ = pem.Decode(b); block == nil {
		return nil, nil, errors.New("load CA key: no PEM block")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("load CA key: %w", err)
	}
	return cert, key, nil
}
