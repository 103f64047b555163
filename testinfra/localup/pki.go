package localup

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/lbfed/lbfed/servingcert"
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

	ca                        *servingcert.CA
	adminCertPEM, adminKeyPEM []byte
}

// CAPEM returns the CA certificate, e.g. for a webhook configuration's caBundle.
func (p *PKI) CAPEM() []byte { return append([]byte(nil), p.ca.PEM...) }

// servingHosts are the SANs of the shared serving certificate. Karmada's aggregator verifies
// the aggregated apiserver against the Service name of its APIService even though it dials
// localhost, hence the karmada-aggregated-apiserver name.
var servingHosts = []string{
	"127.0.0.1", "::1", "10.96.0.1",
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
	ca, err := servingcert.NewCA("lbfed-localup-ca", 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	p.ca = ca
	if err := writePair(p.CACert, p.CAKey, ca.PEM, caKey); err != nil {
		return nil, err
	}
	if err := p.issueServing(servingHosts); err != nil {
		return nil, err
	}
	admin := pkix.Name{CommonName: "lbfed-localup-admin", Organization: []string{"system:masters"}}
	if p.adminCertPEM, p.adminKeyPEM, err = ca.IssueTo(admin, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	if err := writePair(p.AdminCert, p.AdminKey, p.adminCertPEM, p.adminKeyPEM); err != nil {
		return nil, err
	}
	proxyCert, proxyKey, err := ca.Issue("front-proxy-client", nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	if err := writePair(p.FrontProxyCert, p.FrontProxyKey, proxyCert, proxyKey); err != nil {
		return nil, err
	}
	if err := p.writeServiceAccountKey(); err != nil {
		return nil, err
	}
	return p, nil
}

// issueServing writes a serving pair for hosts as ServingCert/ServingKey and into WebhookCertDir
// as tls.crt/tls.key, the names karmada-webhook and controller-runtime webhook servers read.
func (p *PKI) issueServing(hosts []string) error {
	crt, key, err := p.ca.Issue("lbfed-localup-serving", hosts, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	if err := writePair(p.ServingCert, p.ServingKey, crt, key); err != nil {
		return err
	}
	return writePair(filepath.Join(p.WebhookCertDir, "tls.crt"), filepath.Join(p.WebhookCertDir, "tls.key"), crt, key)
}

func (p *PKI) writeServiceAccountKey() error {
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return fmt.Errorf("encode service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return fmt.Errorf("encode service-account public key: %w", err)
	}
	return writePair(p.ServiceAccountPub, p.ServiceAccountKey,
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

func writePair(certPath, keyPath string, certPEM, keyPEM []byte) error {
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
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
	q := *p
	q.ServingCert, q.ServingKey = filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	q.WebhookCertDir = filepath.Join(dir, "webhook")
	if err := os.MkdirAll(q.WebhookCertDir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	hosts := append([]string(nil), servingHosts...)
	for _, ip := range ips {
		hosts = append(hosts, ip.String())
	}
	if err := q.issueServing(hosts); err != nil {
		return nil, err
	}
	return &q, nil
}
