// Package servingcert gives lbfed's HTTPS servers (LBCF admission, the Karmada interpreter,
// drivers) a certificate: the operator's, from a folder (tls.crt, tls.key), or for local use a
// self-signed bootstrap — a CA and a serving certificate written to that folder once, whose CA
// is what webhook configurations need as caBundle. Reloading on change is left to the server
// (controller-runtime's certwatcher watches the same files).
package servingcert

import (
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

// File names inside the certificate folder (the names cert-manager and Kubernetes TLS secrets use).
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	CAFile   = "ca.crt"
)

// Ensure makes sure dir holds a serving certificate. When tls.crt and tls.key exist they are
// used as they are and the returned CA is the content of ca.crt (nil if absent). Otherwise a new
// CA and a certificate for hosts (DNS names or IPs) valid for validity are written, and the CA
// PEM is returned for caBundle fields.
func Ensure(dir string, hosts []string, validity time.Duration) (caPEM []byte, err error) {
	certPath, keyPath, caPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile), filepath.Join(dir, CAFile)
	if exists(certPath) && exists(keyPath) {
		ca, err := os.ReadFile(caPath)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return ca, err
	}
	if len(hosts) == 0 {
		return nil, errors.New("self-signed certificate: no host names or IPs given")
	}
	if validity <= 0 {
		validity = 365 * 24 * time.Hour
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create certificate folder: %w", err)
	}
	ca, err := NewCA("lbfed-selfsigned-ca", validity)
	if err != nil {
		return nil, err
	}
	crt, key, err := ca.Issue(hosts[0], hosts, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	caPEM = ca.PEM
	// The key goes last: a folder with a certificate but no key is not taken for a finished one.
	for _, f := range []struct {
		path string
		data []byte
	}{
		{caPath, caPEM},
		{certPath, crt},
		{keyPath, key},
	} {
		if err := writeAtomic(f.path, f.data); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// CA is a certificate authority held in memory, for local topologies and tests that need
// certificates of both kinds: serving certificates and client certificates (mutual TLS towards
// drivers).
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM encoded (what a ca.crt or --client-ca-file holds).
	PEM []byte
}

// NewCA creates a CA named cn, valid for validity from now (a year when 0; a negative validity
// makes a CA that has already expired, for tests of expiry).
func NewCA(cn string, validity time.Duration) (*CA, error) {
	if validity == 0 {
		validity = 365 * 24 * time.Hour
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// KeyPEM returns the CA's private key, PEM encoded (for a --cluster-signing-key-file).
func (ca *CA) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(ca.Key)
	if err != nil {
		return nil, fmt.Errorf("encode CA key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// Issue returns a certificate for cn and its key (PEM), valid as long as the CA, for the given
// extended usages (x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth); hosts (DNS names or
// IPs) become its subject alternative names.
func (ca *CA) Issue(cn string, hosts []string, usages ...x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	return ca.IssueTo(pkix.Name{CommonName: cn}, hosts, usages...)
}

// IssueTo is Issue for a whole subject: a client certificate's organizations are the groups
// Kubernetes authenticates it into (system:masters).
func (ca *CA) IssueTo(subject pkix.Name, hosts []string, usages ...x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	cn := subject.CommonName
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: ca.Cert.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue certificate for %s: %w", cn, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// WriteIssued issues a certificate as Issue does and writes ca.crt, tls.crt and tls.key into dir
// (the layout of a kubernetes.io/tls Secret), replacing each file in one rename.
func (ca *CA) WriteIssued(dir, cn string, hosts []string, usages ...x509.ExtKeyUsage) error {
	crt, key, err := ca.Issue(cn, hosts, usages...)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create certificate folder: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{CAFile, ca.PEM}, {CertFile, crt}, {KeyFile, key}} {
		if err := writeAtomic(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return nil
}
