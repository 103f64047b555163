package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lbfed/lbfed/interpreter"
)

// interpreterComponent serves the Karmada resource interpreter webhook.
type interpreterComponent struct {
	enabled         bool
	bindAddress     string
	certDir         string
	certName        string
	keyName         string
	selfSigned      bool
	selfSignedHosts string
	maxRequestBytes int64
	webhookURL      string
	webhookService  string
	timeoutSeconds  int
	writeConfig     string
}

func (c *interpreterComponent) name() string { return "interpreter" }

func (c *interpreterComponent) addFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.enabled, "interpreter-enabled", true, "serve the Karmada resource interpreter webhook for the LBCF kinds")
	fs.StringVar(&c.bindAddress, "interpreter-bind-address", ":9443", "HTTPS address of the interpreter (/interpret, /healthz, /readyz, /metrics)")
	fs.StringVar(&c.certDir, "interpreter-cert-dir", "", "folder holding the serving certificate and key, reloaded when they change")
	fs.StringVar(&c.certName, "interpreter-cert-name", interpreter.DefaultCertName, "serving certificate file in --interpreter-cert-dir")
	fs.StringVar(&c.keyName, "interpreter-key-name", interpreter.DefaultKeyName, "serving key file in --interpreter-cert-dir")
	fs.BoolVar(&c.selfSigned, "interpreter-self-signed", false, "for local use: make a CA and a serving certificate at start-up (kept in --interpreter-cert-dir when set, and reused from there) and log the caBundle")
	fs.StringVar(&c.selfSignedHosts, "interpreter-self-signed-hosts", "127.0.0.1,localhost", "comma-separated IP addresses and DNS names of the self-signed serving certificate")
	fs.Int64Var(&c.maxRequestBytes, "interpreter-max-request-bytes", interpreter.DefaultMaxRequestBytes, fmt.Sprintf("largest request body accepted (at least %d: AggregateStatus carries every member's status)", interpreter.MinMaxRequestBytes))
	fs.StringVar(&c.webhookURL, "interpreter-webhook-url", "", "https URL Karmada calls, for --interpreter-write-config (default: https://<bind address, 127.0.0.1 when unspecified>/interpret)")
	fs.StringVar(&c.webhookService, "interpreter-webhook-service", "", "namespace/name[:port] of a Service in the Karmada API server that Karmada calls instead of a URL, for --interpreter-write-config")
	fs.IntVar(&c.timeoutSeconds, "interpreter-timeout-seconds", interpreter.DefaultTimeoutSeconds, "per-call timeout Karmada applies (1..30), for --interpreter-write-config")
	fs.StringVar(&c.writeConfig, "interpreter-write-config", "", "write the ResourceInterpreterWebhookConfiguration (with the caBundle) to this file at start-up; - for standard output")
}

func (c *interpreterComponent) runnables(_ context.Context, log logr.Logger) ([]runnable, error) {
	if !c.enabled {
		return nil, nil
	}
	certs, caPEM, err := c.certificates(log)
	if err != nil {
		return nil, err
	}
	srv, err := interpreter.NewServer(interpreter.NewHandler(log), interpreter.ServerOptions{
		BindAddress:     c.bindAddress,
		Certificates:    certs,
		MaxRequestBytes: c.maxRequestBytes,
		Registerer:      ctrlmetrics.Registry,
		Gatherer:        ctrlmetrics.Registry,
		Log:             log,
	})
	if err != nil {
		return nil, err
	}
	if c.writeConfig != "" {
		if err := c.writeWebhookConfig(caPEM); err != nil {
			return nil, err
		}
	}
	return []runnable{srv}, nil
}

// certificates returns the serving certificate source and, when known, the CA that signed it.
func (c *interpreterComponent) certificates(log logr.Logger) (interpreter.CertificateSource, []byte, error) {
	if c.selfSigned {
		hosts := splitList(c.selfSignedHosts)
		if c.certDir == "" {
			ss, err := interpreter.NewSelfSigned(hosts, 365*24*time.Hour)
			if err != nil {
				return nil, nil, err
			}
			logCABundle(log, ss.CAPEM, false)
			return ss, ss.CAPEM, nil
		}
		if c.certName != interpreter.DefaultCertName || c.keyName != interpreter.DefaultKeyName {
			return nil, nil, errors.New("--interpreter-self-signed writes the default certificate and key names")
		}
		caPEM, created, err := interpreter.BootstrapSelfSigned(c.certDir, hosts, 365*24*time.Hour)
		if err != nil {
			return nil, nil, err
		}
		logCABundle(log, caPEM, !created)
		certs, err := interpreter.FileCertificates(c.certDir, c.certName, c.keyName)
		return certs, caPEM, err
	}
	if c.certDir == "" {
		return nil, nil, errors.New("the interpreter serves HTTPS only: set --interpreter-cert-dir or --interpreter-self-signed")
	}
	certs, err := interpreter.FileCertificates(c.certDir, c.certName, c.keyName)
	if err != nil {
		return nil, nil, err
	}
	// A CA next to the certificate (as cert-manager writes it) fills the generated caBundle.
	caPEM, err := os.ReadFile(filepath.Join(c.certDir, interpreter.DefaultCAName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("read CA: %w", err)
	}
	return certs, caPEM, nil
}

func logCABundle(log logr.Logger, caPEM []byte, reused bool) {
	log.Info("Self-signed serving certificate; register the interpreter with this caBundle",
		"reused", reused, "caBundle", base64.StdEncoding.EncodeToString(caPEM))
}

// writeWebhookConfig writes the ResourceInterpreterWebhookConfiguration for this server.
func (c *interpreterComponent) writeWebhookConfig(caPEM []byte) error {
	if len(caPEM) == 0 {
		return fmt.Errorf("--interpreter-write-config: no CA known (use --interpreter-self-signed or put %s in --interpreter-cert-dir)", interpreter.DefaultCAName)
	}
	opts := interpreter.WebhookConfigOptions{CABundle: caPEM, TimeoutSeconds: int32(c.timeoutSeconds)}
	switch {
	case c.webhookService != "":
		svc, err := parseService(c.webhookService)
		if err != nil {
			return err
		}
		opts.Service = svc
	case c.webhookURL != "":
		opts.URL = c.webhookURL
	default:
		host, port, err := net.SplitHostPort(c.bindAddress)
		if err != nil {
			return fmt.Errorf("--interpreter-bind-address: %w", err)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		opts.URL = "https://" + net.JoinHostPort(host, port) + interpreter.InterpretPath
	}
	var out bytes.Buffer
	if err := interpreter.WriteWebhookConfiguration(&out, opts); err != nil {
		return err
	}
	if c.writeConfig == "-" {
		_, err := os.Stdout.Write(out.Bytes())
		return err
	}
	if err := os.WriteFile(c.writeConfig, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write webhook configuration: %w", err)
	}
	return nil
}

// parseService parses namespace/name[:port].
func parseService(s string) (*admissionregistrationv1.ServiceReference, error) {
	nsName, portStr, hasPort := strings.Cut(s, ":")
	ns, name, ok := strings.Cut(nsName, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--interpreter-webhook-service %q: want namespace/name[:port]", s)
	}
	path := interpreter.InterpretPath
	ref := &admissionregistrationv1.ServiceReference{Namespace: ns, Name: name, Path: &path}
	if hasPort {
		p, err := strconv.ParseInt(portStr, 10, 32)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("--interpreter-webhook-service %q: bad port", s)
		}
		port := int32(p)
		ref.Port = &port
	}
	return ref, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
