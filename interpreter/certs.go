package interpreter

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/lbfed/lbfed/servingcert"
)

// Default file names in a certificate folder (those of a kubernetes.io/tls Secret, plus the CA).
const (
	DefaultCertName = "tls.crt"
	DefaultKeyName  = "tls.key"
	DefaultCAName   = "ca.crt"
)

// FileCertificates serves certName and keyName from dir and reloads them when they change
// (file events, plus a poll every 10 s for mounts that do not emit them). Start the returned
// watcher (the Server does) to get reloads.
func FileCertificates(dir, certName, keyName string) (*certwatcher.CertWatcher, error) {
	cw, err := certwatcher.New(filepath.Join(dir, certName), filepath.Join(dir, keyName))
	if err != nil {
		return nil, fmt.Errorf("load serving certificate from %s: %w", dir, err)
	}
	return cw, nil
}

// SelfSigned is a CA and a serving certificate signed by it, made at start-up for local use
// (make up, e2e): the CA goes into the webhook configuration's caBundle.
type SelfSigned struct {
	// CAPEM, CertPEM and KeyPEM are PEM encoded.
	CAPEM, CertPEM, KeyPEM []byte
	cert                   tls.Certificate
}

// NewSelfSigned creates a CA and a serving certificate for hosts (IP addresses and DNS names),
// both valid for validFor from now.
func NewSelfSigned(hosts []string, validFor time.Duration) (*SelfSigned, error) {
	if len(hosts) == 0 {
		return nil, errors.New("self-signed certificate: no hosts")
	}
	ca, err := servingcert.NewCA("lbfed-interpreter-ca", validFor)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	certPEM, keyPEM, err := ca.Issue(hosts[0], hosts, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, fmt.Errorf("create serving certificate: %w", err)
	}
	s := &SelfSigned{CAPEM: ca.PEM, CertPEM: certPEM, KeyPEM: keyPEM}
	if s.cert, err = tls.X509KeyPair(s.CertPEM, s.KeyPEM); err != nil {
		return nil, fmt.Errorf("load serving certificate: %w", err)
	}
	return s, nil
}

// GetCertificate implements CertificateSource.
func (s *SelfSigned) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return &s.cert, nil
}

// WriteFiles writes the serving certificate, its key (mode 0600) and the CA into dir under
// the default names.
func (s *SelfSigned) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create certificate folder: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
		mode fs.FileMode
	}{{DefaultCAName, s.CAPEM, 0o644}, {DefaultKeyName, s.KeyPEM, 0o600}, {DefaultCertName, s.CertPEM, 0o644}} {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// BootstrapSelfSigned makes sure dir holds a serving certificate: when tls.crt is missing it
// writes a new self-signed set for hosts. It returns the CA in PEM (from ca.crt) and whether the
// files were created.
func BootstrapSelfSigned(dir string, hosts []string, validFor time.Duration) (caPEM []byte, created bool, err error) {
	if _, err := os.Stat(filepath.Join(dir, DefaultCertName)); err == nil {
		ca, err := os.ReadFile(filepath.Join(dir, DefaultCAName))
		if err != nil {
			return nil, false, fmt.Errorf("read CA of existing certificate: %w", err)
		}
		return ca, false, nil
	}
	s, err := NewSelfSigned(hosts, validFor)
	if err != nil {
		return nil, false, err
	}
	if err := s.WriteFiles(dir); err != nil {
		return nil, false, err
	}
	return s.CAPEM, true, nil
}

// writeFileAtomic replaces path in one rename, so a watcher never reads half a file.
func writeFileAtomic(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
