package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lbfed/lbfed/elb/bfe"
	"github.com/lbfed/lbfed/testinfra/localup"
)

// BFE is a real BFE on loopback and its driver (elb-driver --backend=bfe), processes of a
// topology: the L7 front end of the e2e suites and the soak.
type BFE struct {
	// HTTPAddr is BFE's HTTP listener (127.0.0.1); DriverURL the driver's webhook server
	// (mutual TLS with lbfed-controller, as DriverServerArgs sets it up).
	HTTPAddr, DriverURL string
	// MonitorURL is BFE's monitor; DataDir the driver's configuration store, which BFE reads.
	MonitorURL, DataDir string
}

// StartBFE runs BFE (binary bin) and its driver as processes of t named after name, their files
// in t's folder name, and waits until both serve.
func (d *Deployment) StartBFE(ctx context.Context, t *localup.Topology, bin, name string) (*BFE, error) {
	ports, err := localup.FreePorts(5)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	httpAddr, monitorAddr, driverAddr, driverMetrics := addr(0), addr(2), addr(3), addr(4)
	root := filepath.Join(t.Dir(), name)
	b := &BFE{HTTPAddr: httpAddr, DriverURL: "https://" + driverAddr, MonitorURL: "http://" + monitorAddr, DataDir: filepath.Join(root, "lbfed")}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	// The driver first: it writes the store's first version, which bfe.conf names.
	auth, err := d.DriverServerArgs("elb-driver-" + name)
	if err != nil {
		return nil, err
	}
	if _, err := t.StartProcess(localup.ProcessSpec{Name: "elb-driver-" + name, Path: filepath.Join(t.Dir(), "lbfed-bin", "elb-driver"),
		Tier: localup.TierClient, Args: append([]string{"--backend=bfe", "--bfe-data-dir=" + b.DataDir, "--bfe-monitor-url=" + b.MonitorURL,
			"--listen=" + driverAddr, "--metrics-listen=" + driverMetrics}, auth...)}); err != nil {
		return nil, err
	}
	if err := poll(ctx, time.Minute, func() error { _, err := os.Stat(filepath.Join(b.DataDir, "current")); return err }); err != nil {
		return nil, fmt.Errorf("%s driver: %w", name, err)
	}
	if err := bfe.WriteLoopbackRoot(root, ports[0], ports[1], ports[2], b.DataDir); err != nil {
		return nil, err
	}
	if _, err := t.StartProcess(localup.ProcessSpec{Name: name, Path: bin, Dir: root, Tier: localup.TierClient,
		Args: []string{"-c", root, "-l", filepath.Join(root, "log")}}); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, b.MonitorURL+"/monitor/host_table_version"); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// The driver is healthy once BFE's monitor answers.
	if err := waitHTTP(ctx, "http://"+driverMetrics+"/healthz"); err != nil {
		return nil, fmt.Errorf("%s driver: %w", name, err)
	}
	return b, nil
}
