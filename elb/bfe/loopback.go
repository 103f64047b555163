package bfe

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// WriteLoopbackRoot writes a BFE configuration root for a BFE process on this machine, as tests
// and demos run it: bfe.conf listening on 127.0.0.1 at the given ports (BFE ≥ 1.8.4 options) and
// reading its routing from the store at linkDir (see BFEConfServerSection), and the TLS files BFE
// needs even to serve HTTP (a self-signed certificate).
func WriteLoopbackRoot(root string, httpPort, httpsPort, monitorPort int, linkDir string) error {
	conf := fmt.Sprintf(`[Server]
HttpPort = %d
HttpsPort = %d
MonitorPort = %d
HttpAddr = 127.0.0.1
HttpsAddr = 127.0.0.1
MonitorAddr = 127.0.0.1
MonitorEnabled = true
GracefulShutdownTimeout = 2
MonitorInterval = 20
%s
[HttpsBasic]
ServerCertConf = tls_conf/server_cert_conf.data
TlsRuleConf = tls_conf/tls_rule_conf.data
ClientCABaseDir = tls_conf/client_ca
ClientCRLBaseDir = tls_conf/client_crl

[SessionCache]
SessionCacheDisabled = true

[SessionTicket]
SessionTicketsDisabled = true
`, httpPort, httpsPort, monitorPort, BFEConfServerSection(linkDir))
	cert, key, err := selfSignedPEM()
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"bfe.conf":                       []byte(conf),
		"tls_conf/server_cert_conf.data": []byte(`{"Version": "1", "Config": {"Default": "selfsigned", "CertConf": {"selfsigned": {"ServerCertFile": "tls_conf/certs/server.crt", "ServerKeyFile": "tls_conf/certs/server.key"}}}}`),
		"tls_conf/tls_rule_conf.data":    []byte(`{"Version": "1", "DefaultNextProtos": ["http/1.1"], "Config": {}}`),
		"tls_conf/certs/server.crt":      cert,
		"tls_conf/certs/server.key":      key,
		"tls_conf/client_ca/.keep":       nil,
		"tls_conf/client_crl/.keep":      nil,
		"log/.keep":                      nil,
	}
	for rel, b := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("bfe root: %w", err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("bfe root: %w", err)
		}
	}
	return nil
}

// selfSignedPEM returns a self-signed ECDSA certificate and its key, PEM-encoded.
func selfSignedPEM() (cert, key []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lbfed-local-bfe"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), DNSNames: []string{"app.example.test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}
