package localup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/testinfra/localup/binaries"
)

// TopologyOptions configures StartTopology.
type TopologyOptions struct {
	// Dir is the run folder: <Dir>/karmada.kubeconfig, <Dir>/m1.kubeconfig, …, <Dir>/logs/,
	// <Dir>/pki/. Default: a new temporary folder, removed by Stop unless KeepRunDir was called.
	Dir string
	// Members is the number of member clusters joined in Push mode (karmadactl join: Karmada's
	// controllers reach into the member), named m1..mN. Default 2.
	Members int
	// PullMembers adds this many member clusters joined in Pull mode, named after the Push ones
	// (m3 with the default two): a karmada-agent per member, run as a process next to it,
	// registers the Cluster (syncMode Pull) with karmada-apiserver, applies its Works and reports
	// their status, calling the resource interpreter webhooks itself. They stay in the host
	// network namespace whatever MemberNetNS says (their agent dials karmada-apiserver on
	// 127.0.0.1), so they have no Link. Default 0.
	PullMembers int
	// FakeNodesPerMember is the number of kwok nodes per member. Default 2.
	FakeNodesPerMember int
	// PodsPerNode is the pod capacity of the members' fake nodes (ClusterOptions.PodsPerNode).
	PodsPerNode int
	// MemberNetNS puts every Push member in its own network namespace (ClusterOptions.NetNS), so
	// a test can cut a member off from Karmada with Member(name).Link().Cut(). Needs root and the
	// ip command (NetNSSupported). Pull members stay in the host namespace.
	MemberNetNS bool
	// NoPodResponder turns off the pod responders (see package podresponder) that otherwise
	// serve HTTP on every Ready pod of every member.
	NoPodResponder bool
	// CRDs are installed on Karmada (before its controllers start, so they are detected at once)
	// and on every member before it joins (Karmada's scheduler only places a kind on members
	// that list its API).
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// AfterReady hooks run in order once the members have joined and are Ready, e.g. to start
	// lbfed's own processes with Topology.StartProcess. An error fails StartTopology.
	AfterReady []func(ctx context.Context, t *Topology) error
	// Binaries to run; nil locates them in the default cache.
	Binaries *binaries.Set
	// StartTimeout bounds each readiness wait. Default 90s.
	StartTimeout time.Duration
	Logger       logr.Logger
}

// Topology is a running Karmada control plane with member clusters joined in Push mode (and,
// optionally, Pull mode), all local processes sharing one etcd (one key prefix per apiserver) and
// one PKI.
type Topology struct {
	dir     string
	tempDir bool
	keepDir bool
	sup     *supervisor
	pki     *PKI
	etcd    *etcdServer
	karmada *Cluster
	members []*Cluster
	log     logr.Logger
}

// StartTopology starts etcd, the members and Karmada (concurrently), joins the members, waits
// for every Cluster to be Ready and runs the AfterReady hooks. On error everything is stopped
// again and the run folder kept.
func StartTopology(ctx context.Context, opts TopologyOptions) (t *Topology, err error) {
	if opts.Members == 0 {
		opts.Members = 2
	}
	if opts.Members < 1 || opts.PullMembers < 0 {
		return nil, fmt.Errorf("start topology: %d members, %d pull members", opts.Members, opts.PullMembers)
	}
	if opts.FakeNodesPerMember == 0 {
		opts.FakeNodesPerMember = 2
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.Binaries == nil {
		if opts.Binaries, err = binaries.Locate(""); err != nil {
			return nil, fmt.Errorf("start topology: %w", err)
		}
	}
	start := time.Now()
	t = &Topology{dir: opts.Dir, log: opts.Logger}
	if t.dir == "" {
		if t.dir, err = os.MkdirTemp("", "localup-topology-"); err != nil {
			return nil, fmt.Errorf("start topology: %w", err)
		}
		t.tempDir = true
	} else {
		if t.dir, err = filepath.Abs(t.dir); err != nil {
			return nil, fmt.Errorf("start topology: %w", err)
		}
		if err := os.MkdirAll(t.dir, 0o755); err != nil {
			return nil, fmt.Errorf("start topology: %w", err)
		}
	}
	if t.sup, err = newSupervisor(filepath.Join(t.dir, "logs"), t.log); err != nil {
		return nil, fmt.Errorf("start topology: %w", err)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("start topology: %w (logs in %s)", err, t.sup.logDir)
			t.keepDir = true
			_ = t.Stop()
		}
	}()
	if t.pki, err = GeneratePKI(filepath.Join(t.dir, "pki")); err != nil {
		return t, err
	}
	if t.etcd, err = startEtcd(ctx, t.sup, opts.Binaries, "etcd", filepath.Join(t.dir, "etcd"), opts.StartTimeout, "127.0.0.1", ""); err != nil {
		return t, err
	}
	t.log.Info("etcd ready", "elapsed", since(start))

	setup, err := newKarmadaSetup(t, opts.CRDs)
	if err != nil {
		return t, err
	}
	base := ClusterOptions{
		Dir: t.dir, Binaries: opts.Binaries, StartTimeout: opts.StartTimeout, Logger: t.log,
		sup: t.sup, pki: t.pki, etcd: t.etcd,
	}
	t.members = make([]*Cluster, opts.Members+opts.PullMembers)
	g, gctx := errgroup.WithContext(ctx)
	for i := range t.members {
		g.Go(func() error {
			pull := i >= opts.Members
			o := base
			o.Name = fmt.Sprintf("m%d", i+1)
			// karmadactl join and karmada-agent wait for the token controller (their
			// ServiceAccount token Secrets in the member).
			o.ControllerManager = true
			o.FakeNodes = opts.FakeNodesPerMember
			o.PodsPerNode = opts.PodsPerNode
			o.PodResponder = !opts.NoPodResponder
			o.CRDs = opts.CRDs
			o.NetNS = opts.MemberNetNS && !pull
			m, err := StartCluster(gctx, o)
			if m != nil {
				m.pull = pull
			}
			t.members[i] = m
			if err == nil {
				t.log.Info("member ready", "cluster", o.Name, "syncMode", m.SyncMode(), "elapsed", since(start))
			}
			return err
		})
	}
	g.Go(func() error {
		o := base
		o.Name = KarmadaName
		o.ControllerManager = true
		o.kcmControllers = karmadaHostControllers
		// As upstream: Karmada's apiserver runs no pods, so no ServiceAccount admission.
		o.APIServerArgs = []string{"--disable-admission-plugins=StorageObjectInUseProtection,ServiceAccount"}
		o.apiserverReady = setup.onAPIServerReady
		k, err := StartCluster(gctx, o)
		t.karmada = k
		if err != nil {
			return err
		}
		if err := setup.startControllers(gctx, k); err != nil {
			return err
		}
		t.log.Info("karmada control plane ready", "elapsed", since(start))
		return nil
	})
	if err := g.Wait(); err != nil {
		return t, err
	}

	if err := t.join(ctx, opts.StartTimeout); err != nil {
		return t, err
	}
	t.log.Info("members joined and Ready", "members", len(t.members), "elapsed", since(start))
	for _, hook := range opts.AfterReady {
		if err := hook(ctx, t); err != nil {
			return t, fmt.Errorf("after-ready hook: %w", err)
		}
	}
	return t, nil
}

// join registers every member with Karmada, the Push members through karmadactl join and the
// Pull members by starting their karmada-agent (the paths users take), and waits for each
// Cluster's Ready condition.
func (t *Topology) join(ctx context.Context, timeout time.Duration) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, m := range t.members {
		if m.pull {
			// Watched, with every other daemon, by the wait below.
			if _, err := t.startAgent(m); err != nil {
				return err
			}
			continue
		}
		g.Go(func() error {
			return t.sup.run(gctx, ProcessSpec{
				Name: "karmadactl-join-" + m.name,
				Path: t.karmada.bins.Path(binaries.Karmadactl),
				Tier: TierClient,
				Args: []string{
					"join", m.name,
					"--kubeconfig=" + t.karmada.kubeconfig,
					"--cluster-kubeconfig=" + m.PeerKubeconfigPath(),
					"--cluster-context=" + m.name,
				},
			})
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	c, err := newClient(t.karmada.RESTConfig())
	if err != nil {
		return err
	}
	return waitFor(ctx, timeout, "member clusters Ready", t.sup.daemons(), func(ctx context.Context) error {
		for _, m := range t.members {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.karmada.io", Version: "v1alpha1", Kind: "Cluster"})
			if err := c.Get(ctx, client.ObjectKey{Name: m.name}, u); err != nil {
				return err
			}
			if mode, _, _ := unstructured.NestedString(u.Object, "spec", "syncMode"); mode != m.SyncMode() {
				return fmt.Errorf("cluster %s has syncMode %q, want %s", m.name, mode, m.SyncMode())
			}
			if status, msg := condition(u, "Ready"); status != "True" {
				return fmt.Errorf("cluster %s Ready=%s: %s", m.name, status, msg)
			}
		}
		return nil
	})
}

// Karmada is the Karmada control plane's apiserver (kubeconfig, RESTConfig).
func (t *Topology) Karmada() *Cluster { return t.karmada }

// KarmadaConfig returns a new admin client configuration for the Karmada apiserver.
func (t *Topology) KarmadaConfig() *rest.Config { return t.karmada.RESTConfig() }

// Members returns the member clusters, m1 first: the Push members, then the Pull ones.
func (t *Topology) Members() []*Cluster { return append([]*Cluster(nil), t.members...) }

// Member returns the member called name, or nil.
func (t *Topology) Member(name string) *Cluster {
	for _, m := range t.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

// Dir is the run folder; kubeconfigs are <Dir>/<cluster>.kubeconfig.
func (t *Topology) Dir() string { return t.dir }

// LogDir holds one <process>.log per process.
func (t *Topology) LogDir() string { return t.sup.logDir }

// PKI is shared by every cluster of the topology.
func (t *Topology) PKI() *PKI { return t.pki }

// StartProcess starts an extra process (an lbfed controller or webhook) in the run: logged in
// LogDir and stopped first, before any Karmada or member component.
func (t *Topology) StartProcess(spec ProcessSpec) (*Process, error) { return t.sup.start(spec) }

// Processes lists every process of the run, in start order.
func (t *Topology) Processes() []*Process { return t.sup.processes() }

// CheckProcesses returns an error, with a log tail, if a process of the run has died.
func (t *Topology) CheckProcesses() error { return t.sup.firstUnexpectedExit() }

// Exited lists the processes that exited on their own: not stopped by the run, not replaced,
// not one-shot commands.
func (t *Topology) Exited() []*Process {
	var out []*Process
	for _, p := range t.sup.daemons() {
		if exited, _ := p.Exited(); exited && !p.StopRequested() && !p.Replaced() {
			out = append(out, p)
		}
	}
	return out
}

// Process returns the current process called name: the latest started that no other replaced,
// or nil.
func (t *Topology) Process(name string) *Process {
	procs := t.sup.processes()
	for i := len(procs) - 1; i >= 0; i-- {
		if procs[i].Name == name && !procs[i].Replaced() {
			return procs[i]
		}
	}
	return nil
}

// Restart kills the current process called name with SIGKILL (a crash, an OOM kill, a node
// lost), waits down, and starts it again with the same flags, ports and data, as a Deployment
// or a supervisor restarts a container; it returns once the new process serves (an apiserver's
// /readyz, etcd's /health) or has started (any other process). The run's references to it —
// a cluster's apiserver (RestartAPIServer), the shared etcd — move to the new process. Only for
// processes that nothing else restarts (not testinfra/deploy's workloads, which deploy restarts).
func (t *Topology) Restart(ctx context.Context, name string, down time.Duration) (*Process, error) {
	old := t.Process(name)
	if old == nil {
		return nil, fmt.Errorf("restart %s: no such process", name)
	}
	// Marked first: the exit is the test's doing, not a crash CheckProcesses should report.
	old.MarkReplaced()
	if err := old.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return nil, fmt.Errorf("restart %s: kill: %w", name, err)
	}
	<-old.Done()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(down):
	}
	p, err := t.sup.start(old.spec)
	if err != nil {
		return nil, fmt.Errorf("restart %s: %w", name, err)
	}
	var ready func(ctx context.Context) error
	for _, c := range append([]*Cluster{t.karmada}, t.members...) {
		if c != nil && c.apiserver == old {
			c.apiserver = p
			ready = httpOK(c.httpClient, c.host+"/readyz")
		}
	}
	if t.etcd != nil && t.etcd.proc == old {
		t.etcd.proc = p
		ready = httpOK(&http.Client{Timeout: 2 * time.Second}, t.etcd.clientURL+"/health")
	}
	if ready == nil {
		return p, nil
	}
	if err := waitFor(ctx, 2*time.Minute, name+" ready after restart", []*Process{p}, ready); err != nil {
		return p, err
	}
	return p, nil
}

// KeepRunDir makes Stop leave a temporary run folder in place.
func (t *Topology) KeepRunDir() { t.keepDir = true }

// Stop stops every process in order — clients (lbfed's, Karmada's and the members'
// controllers, kwok, pod responders), the aggregated apiserver, the apiservers, etcd — and
// removes a temporary run folder.
func (t *Topology) Stop() error {
	err := t.sup.stop()
	for _, m := range t.members {
		if m != nil {
			err = errors.Join(err, m.releaseNetwork())
		}
	}
	if err == nil && t.tempDir && !t.keepDir {
		if rmErr := os.RemoveAll(t.dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove run dir: %w", rmErr))
		}
	}
	return err
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }
