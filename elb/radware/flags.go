package radware

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbfed/lbfed/elb/radware/alteon"
	"github.com/lbfed/lbfed/reloadfile"
)

// Flags are the command-line settings of a binary that drives an Alteon pair (elb-driver,
// elb-controller). Register them on a FlagSet, parse, then call Frontend.
type Flags struct {
	URLs         string
	User         string
	PasswordFile string
	CAFile       string
	Insecure     bool
	Sync         string
	PollInterval time.Duration
	ApplyTimeout time.Duration
	ForeignWait  time.Duration
	// RevertForeign discards other writers' pending edits (alteon.PairOptions.RevertForeign).
	RevertForeign bool
	Window        time.Duration
	MaxWindow     time.Duration
	DrainPeriod   time.Duration
	ProxyIPMode   int
	// HealthCheck is the real servers' health-check timing (load balancer attributes override it).
	HealthCheck HealthTiming
}

// Register adds the flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.URLs, "alteon-urls", "", "comma-separated base URLs of the Alteon units: one, or the two units of an HA pair")
	fs.StringVar(&f.User, "alteon-user", "admin", "Alteon administrator user")
	fs.StringVar(&f.PasswordFile, "alteon-password-file", "", "file holding the Alteon password, re-read when it changes (default: $ALTEON_PASSWORD)")
	fs.StringVar(&f.CAFile, "alteon-ca-file", "", "CA bundle (PEM) that signed the Alteon management certificates (default: system roots)")
	fs.BoolVar(&f.Insecure, "alteon-insecure-skip-verify", false, "do not verify the Alteon certificates (lab use only)")
	fs.StringVar(&f.Sync, "alteon-sync", "explicit", "how the backup unit gets the configuration: explicit (sync after every commit), auto (the pair syncs itself) or none")
	fs.DurationVar(&f.PollInterval, "alteon-poll-interval", 200*time.Millisecond, "apply/save/sync status polling period")
	fs.DurationVar(&f.ApplyTimeout, "alteon-apply-timeout", 3*time.Minute, "longest wait for one apply")
	fs.DurationVar(&f.ForeignWait, "alteon-foreign-wait", 20*time.Second, "how long a transaction waits for configuration another writer left pending on the master to be applied or reverted before it fails (it is never discarded)")
	fs.BoolVar(&f.RevertForeign, "alteon-revert-foreign-edits", false, "discard configuration pending on the master that is not this process's before each transaction (only for a pair nothing else edits, e.g. after a crash mid-transaction)")
	fs.DurationVar(&f.Window, "radware-commit-window", 50*time.Millisecond, "how long a change waits for others to share its apply and save (counted from the latest change of the batch)")
	fs.DurationVar(&f.MaxWindow, "radware-commit-max-window", DefaultMaxWindow, "longest wait of a batch's first change while changes keep coming (each within --radware-commit-window of the previous one): a burst becomes a few commits, each of its changes answered up to this much later; a lone change waits only --radware-commit-window (at most --radware-commit-window: no extension)")
	fs.DurationVar(&f.DrainPeriod, "radware-drain-period", 30*time.Second, "how long a removed backend stays in shutdown-connection before it is deleted (0: at once)")
	fs.IntVar(&f.ProxyIPMode, "radware-proxy-ip-mode", 0, "ProxyIpMode of the virtual services: 0 ingress, 1 egress, 2 address, 3 nwclss, 4 disable")
	fs.IntVar(&f.HealthCheck.Interval, "radware-health-check-interval", DefaultHealthTiming.Interval, "seconds between two health checks of a real server (its PingInterval, 1..600; the device's default); a LoadBalancer's healthCheckInterval attribute overrides it")
	fs.IntVar(&f.HealthCheck.Retries, "radware-health-check-retries", DefaultHealthTiming.Retries, "consecutive failed health checks before the Alteon fails a real server and stops sending it new connections (its FailRetry, 1..63; the device's default); a LoadBalancer's healthCheckRetries attribute overrides it")
	fs.IntVar(&f.HealthCheck.Restore, "radware-health-check-restore", DefaultHealthTiming.Restore, "consecutive successful health checks before the Alteon restores a failed real server (its SuccRetry, 1..63); a LoadBalancer's healthCheckRestore attribute overrides it")
}

// Frontend builds the Alteon clients, the pair and the frontend from the flags.
func (f *Flags) Frontend(log logr.Logger, reg prometheus.Registerer) (*Frontend, error) {
	var urls []string
	for _, u := range strings.Split(f.URLs, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	if len(urls) == 0 || len(urls) > 2 {
		return nil, errors.New("--alteon-urls needs one or two URLs")
	}
	password := os.Getenv("ALTEON_PASSWORD")
	var passwordSource func() (string, uint64)
	if f.PasswordFile != "" {
		pf, err := reloadfile.Open(f.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("read --alteon-password-file: %w", err)
		}
		// Read again when the file changes (a rotated Secret): no restart, and a new password is
		// tried at once even while a rejected one is held back.
		passwordSource = func() (string, uint64) {
			b, v, err := pf.Read()
			if err != nil {
				log.Error(err, "Alteon password file unreadable; using its last content", "file", f.PasswordFile)
			}
			return strings.TrimRight(string(b), "\r\n"), v
		}
		password, _ = passwordSource()
	}
	if password == "" {
		return nil, errors.New("no Alteon password: set --alteon-password-file or $ALTEON_PASSWORD")
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.Insecure} // #nosec G402 -- explicit opt-in flag
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read --alteon-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--alteon-ca-file %s holds no PEM certificate", f.CAFile)
		}
		tlsConfig.RootCAs = pool
	}
	mode, ok := map[string]alteon.SyncMode{"explicit": alteon.SyncExplicit, "auto": alteon.SyncAuto, "none": alteon.SyncNone}[f.Sync]
	if !ok {
		return nil, fmt.Errorf("--alteon-sync must be explicit, auto or none, not %q", f.Sync)
	}
	if f.ProxyIPMode < 0 || f.ProxyIPMode > 4 {
		return nil, fmt.Errorf("--radware-proxy-ip-mode must be 0..4, not %d", f.ProxyIPMode)
	}
	if err := CheckHealthTiming(f.HealthCheck, "--radware-health-check-interval", "--radware-health-check-retries", "--radware-health-check-restore"); err != nil {
		return nil, err
	}
	var metrics *Metrics
	if reg != nil {
		metrics = NewMetrics(reg)
	}
	// One client and transport for both units, so connections are reused across requests.
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsConfig, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second}}
	var units []*alteon.Client
	for _, u := range urls {
		c, err := alteon.NewClient(alteon.Config{URL: u, User: f.User, Password: password, PasswordSource: passwordSource, HTTPClient: hc, Logger: log.WithName("alteon"), OnRequest: metrics.Request})
		if err != nil {
			return nil, err
		}
		units = append(units, c)
	}
	pair, err := alteon.NewPair(alteon.PairOptions{Sync: mode, PollInterval: f.PollInterval, ApplyTimeout: f.ApplyTimeout,
		ForeignWait: f.ForeignWait, RevertForeign: f.RevertForeign, Logger: log.WithName("pair"), OnRole: metrics.Role}, units...)
	if err != nil {
		return nil, err
	}
	return NewFrontend(FrontendOptions{
		Pair: pair, Window: f.Window, MaxWindow: f.MaxWindow, DrainPeriod: f.DrainPeriod, ProxyIPMode: f.ProxyIPMode, HealthCheck: f.HealthCheck,
		Metrics: metrics, Logger: log.WithName("frontend"),
	})
}
