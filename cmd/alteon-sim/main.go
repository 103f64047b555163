// Command alteon-sim runs a simulated Radware Alteon HA pair (or a single unit) for tests and
// demos: the /config REST API on each unit, an L4 data plane on the master, and an out-of-band
// control API for failover and fault injection (see alteonsim.ControlHandler).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/servingcert"
)

func main() {
	var (
		listenA      = flag.String("listen-a", "127.0.0.1:8443", "REST address of unit A (initial master)")
		listenB      = flag.String("listen-b", "127.0.0.1:8444", "REST address of unit B (initial backup)")
		control      = flag.String("control", "127.0.0.1:8440", "address of the out-of-band control API (empty: off)")
		user         = flag.String("user", "admin", "administrator user of both units")
		passwordFile = flag.String("password-file", "", "file holding the administrator password (default password: admin)")
		applyDur     = flag.Duration("apply-duration", 200*time.Millisecond, "how long an apply stays in progress")
		saveDur      = flag.Duration("save-duration", 50*time.Millisecond, "how long a save stays in progress")
		syncDur      = flag.Duration("sync-duration", 100*time.Millisecond, "how long a config sync stays in progress")
		autoSync     = flag.Bool("auto-sync", true, "push the configuration to the peer after every apply")
		backupWrites = flag.String("backup-writes", "accept", "what the backup does with writes: accept, reject or ignore")
		dataPlane    = flag.Bool("data-plane", true, "forward traffic from applied VIP:port to group members (master only)")
		hcScale      = flag.Float64("health-check-time-scale", 1, "seconds one second of a real server's PingInterval lasts: 1 is the device's timing (each real server's PingInterval, FailRetry and SuccRetry columns, device defaults 2 s, 4, 2), 0.1 checks ten times faster; 0 runs no health checks (every real server counts as running)")
		tlsDir       = flag.String("tls-dir", "", "serve HTTPS with tls.crt/tls.key from this folder, creating a self-signed CA (ca.crt, for --alteon-ca-file) and certificate when absent; empty serves HTTP")
	)
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*listenA, *listenB, *control, *user, *passwordFile, *applyDur, *saveDur, *syncDur, *autoSync, *backupWrites, *dataPlane, *hcScale, *tlsDir); err != nil {
		klog.ErrorS(err, "alteon-sim failed")
		os.Exit(1)
	}
}

func run(listenA, listenB, control, user, passwordFile string, applyDur, saveDur, syncDur time.Duration, autoSync bool, backupWrites string, dataPlane bool, hcScale float64, tlsDir string) error {
	password := "admin"
	if passwordFile != "" {
		b, err := os.ReadFile(passwordFile)
		if err != nil {
			return fmt.Errorf("read password file: %w", err)
		}
		password = string(trimNewline(b))
	}
	mode, ok := map[string]alteonsim.BackupWriteMode{"accept": alteonsim.BackupAccept, "reject": alteonsim.BackupReject, "ignore": alteonsim.BackupIgnore}[backupWrites]
	if !ok {
		return fmt.Errorf("--backup-writes must be accept, reject or ignore, not %q", backupWrites)
	}
	if hcScale < 0 {
		return fmt.Errorf("--health-check-time-scale must be 0 or more, not %v", hcScale)
	}
	var tlsConfig *tls.Config
	if tlsDir != "" {
		if _, err := servingcert.Ensure(tlsDir, []string{"127.0.0.1", "localhost"}, 365*24*time.Hour); err != nil {
			return fmt.Errorf("serving certificate: %w", err)
		}
		cert, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, servingcert.CertFile), filepath.Join(tlsDir, servingcert.KeyFile))
		if err != nil {
			return fmt.Errorf("load serving certificate: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		klog.InfoS("serving HTTPS", "ca", filepath.Join(tlsDir, servingcert.CAFile))
	}
	opts := func(name string) alteonsim.Options {
		return alteonsim.Options{
			TLS:  tlsConfig,
			Name: name, User: user, Password: password,
			ApplyDuration: applyDur, SaveDuration: saveDur, SyncDuration: syncDur,
			AutoSync: autoSync, BackupWrites: mode, DataPlane: dataPlane,
			HealthCheckTimeScale: hcScale, HealthCheckManual: hcScale == 0,
			Logger: klog.Background(),
		}
	}
	pair := alteonsim.NewPair(opts("alteon-a"), opts("alteon-b"))
	defer pair.Close()
	urlA, err := pair.A.Start(listenA)
	if err != nil {
		return err
	}
	klog.InfoS("unit serving", "device", pair.A.Name(), "url", urlA, "role", pair.A.Role())
	if listenB != "" {
		urlB, err := pair.B.Start(listenB)
		if err != nil {
			return err
		}
		klog.InfoS("unit serving", "device", pair.B.Name(), "url", urlB, "role", pair.B.Role())
	}
	if control != "" {
		l, err := net.Listen("tcp", control)
		if err != nil {
			return fmt.Errorf("listen control %s: %w", control, err)
		}
		srv := &http.Server{Handler: alteonsim.ControlHandler(pair), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "control API stopped")
			}
		}()
		defer srv.Shutdown(context.Background())
		klog.InfoS("control API serving", "url", "http://"+l.Addr().String())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	klog.InfoS("shutting down")
	return nil
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
