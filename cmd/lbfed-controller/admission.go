package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lbcfadmission "github.com/lbfed/lbfed/lbcf/admission"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/servingcert"
)

// admissionComponent serves LBCF's admission webhooks (package lbcf/admission) for the templates
// in the Karmada API server named by --kubeconfig: drivers, LoadBalancers and BackendGroups are
// validated there, with the drivers' validate webhooks, as a standalone LBCF validates them.
// Updates that change no spec pass untouched (Karmada's own writes), and the status subresource
// is not matched at all.
type admissionComponent struct {
	enabled                                     bool
	bindAddress                                 string
	certDir, certName, keyName                  string
	selfSignedHosts                             string
	configURL, configName                       string
	exemptUsers, exemptGroups                   string
	driverCA, driverClientCert, driverClientKey string
}

func (c *admissionComponent) name() string { return "admission" }

func (c *admissionComponent) addFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.enabled, "admission-enabled", false, "serve the LBCF admission webhooks for the templates in the Karmada API server (--kubeconfig), calling the drivers' validate webhooks")
	fs.StringVar(&c.bindAddress, "admission-bind-address", ":9444", "HTTPS address of the admission webhooks")
	fs.StringVar(&c.certDir, "admission-cert-dir", "", "folder holding the serving certificate and key of the admission webhooks, reloaded when they change")
	fs.StringVar(&c.certName, "admission-cert-name", servingcert.CertFile, "serving certificate file in --admission-cert-dir")
	fs.StringVar(&c.keyName, "admission-key-name", servingcert.KeyFile, "serving key file in --admission-cert-dir")
	fs.StringVar(&c.selfSignedHosts, "admission-self-signed-hosts", "", "comma-separated hosts/IPs: when --admission-cert-dir holds no certificate, write a self-signed CA and certificate for them there (local use) and log the caBundle")
	fs.StringVar(&c.configURL, "admission-webhook-config-url", "", "when set (e.g. https://127.0.0.1:9444), create or update the webhook configurations in the Karmada API server pointing at this URL with the serving CA (local use; the lbfed chart renders them otherwise)")
	fs.StringVar(&c.configName, "admission-webhook-config-name", "lbfed-admission", "name of the webhook configurations written by --admission-webhook-config-url")
	fs.StringVar(&c.exemptUsers, "admission-exempt-users", "", "comma-separated users whose updates skip the webhooks written by --admission-webhook-config-url (Karmada's controllers)")
	fs.StringVar(&c.exemptGroups, "admission-exempt-groups", "", "comma-separated groups whose updates skip the webhooks written by --admission-webhook-config-url")
	fs.StringVar(&c.driverCA, "admission-driver-ca-file", "", "CA bundle to verify HTTPS drivers (system roots when empty); re-read when it changes")
	fs.StringVar(&c.driverClientCert, "admission-driver-client-cert", "", "client certificate presented to drivers (mutual TLS; elb-driver --client-ca-file); re-read when it changes")
	fs.StringVar(&c.driverClientKey, "admission-driver-client-key", "", "key of the client certificate presented to drivers")
}

func (c *admissionComponent) runnables(ctx context.Context, log logr.Logger) ([]runnable, error) {
	if !c.enabled {
		return nil, nil
	}
	if c.certDir == "" {
		return nil, errors.New("--admission-cert-dir is required (the webhooks serve HTTPS only)")
	}
	host, portStr, err := net.SplitHostPort(c.bindAddress)
	if err != nil {
		return nil, fmt.Errorf("--admission-bind-address: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("--admission-bind-address: %w", err)
	}
	var caBundle []byte
	if c.selfSignedHosts != "" {
		if caBundle, err = servingcert.Ensure(c.certDir, splitList(c.selfSignedHosts), 0); err != nil {
			return nil, fmt.Errorf("self-signed certificate: %w", err)
		}
		log.Info("Self-signed serving certificate of the admission webhooks", "caBundle", base64.StdEncoding.EncodeToString(caBundle))
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, lbcfv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of the Karmada API server: %w", err)
	}
	// Uncached reads: admission looks up a driver or lists LoadBalancers now and then, and must
	// see what was just written.
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	// Re-read when the files change: rotating the driver CA or the client certificate needs no restart.
	driverTransport, err := driver.NewFilesTransport(driver.TLSFiles{CAFile: c.driverCA, CertFile: c.driverClientCert, KeyFile: c.driverClientKey})
	if err != nil {
		return nil, err
	}
	srv := webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: c.certDir, CertName: c.certName, KeyName: c.keyName})
	hooks := &lbcfadmission.Webhooks{
		Client:    cl,
		Invoker:   driver.NewClient(driver.ClientOptions{Transport: driverTransport, Metrics: driver.NewMetrics(ctrlmetrics.Registry)}),
		Decoder:   admission.NewDecoder(scheme),
		Federated: true,
	}
	hooks.Register(srv)
	if c.configURL != "" {
		if caBundle == nil {
			if caBundle, err = os.ReadFile(filepath.Join(c.certDir, servingcert.CAFile)); err != nil {
				return nil, fmt.Errorf("--admission-webhook-config-url needs the serving CA in %s: %w", c.certDir, err)
			}
		}
		opts := lbcfadmission.ConfigOptions{SpecUpdatesOnly: true, ExemptUsers: splitList(c.exemptUsers), ExemptGroups: splitList(c.exemptGroups)}
		if err := lbcfadmission.ApplyWith(ctx, cl, c.configName, lbcfadmission.URLClientConfig(c.configURL, caBundle), opts); err != nil {
			return nil, fmt.Errorf("write webhook configurations: %w", err)
		}
	}
	log.Info("admission webhooks configured", "address", c.bindAddress)
	return []runnable{srv}, nil
}
