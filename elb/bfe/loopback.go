package bfe

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lbfed/lbfed/servingcert"
)

// WriteLoopbackRoot writes a BFE configuration root for a BFE process on this machine, as tests
// and demos run it: bfe.conf listening on 127.0.0.1 at the given ports (BFE ≥ 1.8.4 options) and
// reading its routing from the store at linkDir (see BFEConfServerSection), and the TLS files BFE
// needs even to serve HTTP (a certificate of a CA made for it).
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
	cert, key, err := listenerCertPEM()
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

// listenerCertPEM returns a certificate for BFE's TLS listener, which the loopback root needs
// to start and nothing verifies, and its key, PEM-encoded.
func listenerCertPEM() (cert, key []byte, err error) {
	ca, err := servingcert.NewCA("lbfed-local-bfe", 24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	return ca.Issue("lbfed-local-bfe", []string{"app.example.test"}, x509.ExtKeyUsageServerAuth)
}
