package localup

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/lbfed/lbfed/testinfra/localup/binaries"
)

// etcdServer is one etcd member on loopback. A topology shares one between all apiservers, each
// under its own --etcd-prefix.
type etcdServer struct {
	proc      *Process
	clientURL string
}

// startEtcd starts etcd listening on addr, inside network namespace netns unless "".
func startEtcd(ctx context.Context, sup *supervisor, bins *binaries.Set, name, dataDir string, timeout time.Duration, addr, netns string) (*etcdServer, error) {
	// Every run starts from an empty cluster: data left in a reused run folder would carry
	// objects (and service-account tokens) signed by a previous run's keys.
	if err := os.RemoveAll(dataDir); err != nil {
		return nil, fmt.Errorf("start etcd: clean data dir: %w", err)
	}
	ports, err := allocatePorts(2)
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	client := fmt.Sprintf("http://%s:%d", addr, ports[0])
	peer := fmt.Sprintf("http://%s:%d", addr, ports[1])
	proc, err := sup.start(ProcessSpec{
		Name:  name,
		Path:  bins.Path(binaries.Etcd),
		Tier:  TierStorage,
		NetNS: netns,
		Args: []string{
			"--name=localup",
			"--data-dir=" + filepath.Clean(dataDir),
			"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=localup=" + peer,
			// Throw-away data: fsync only costs time.
			"--unsafe-no-fsync",
			"--quota-backend-bytes=4294967296",
			"--snapshot-count=100000",
			"--logger=zap", "--log-level=warn",
		},
	})
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	if err := waitFor(ctx, timeout, name+" /health", []*Process{proc}, httpOK(hc, client+"/health")); err != nil {
		return nil, err
	}
	return &etcdServer{proc: proc, clientURL: client}, nil
}
