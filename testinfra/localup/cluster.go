package localup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/lbfed/lbfed/testinfra/localup/binaries"
	"github.com/lbfed/lbfed/testinfra/localup/podresponder"
)

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	// Name names the cluster in kubeconfig contexts, log file names and pod responder answers.
	// Default "localup".
	Name string
	// Dir is the run folder (PKI, kubeconfig, logs, etcd data). Default: a new temporary folder,
	// removed by Stop unless KeepRunDir was called.
	Dir string
	// Binaries to run; nil locates them in the default cache (binaries.Locate).
	Binaries *binaries.Set
	// ControllerManager starts kube-controller-manager (Deployments → ReplicaSets → Pods,
	// garbage collection, namespace deletion, service-account tokens). Without it pods cannot be
	// created either: the ServiceAccount admission plugin waits for the "default" account.
	ControllerManager bool
	// Scheduler starts kube-scheduler. Implied by FakeNodes > 0 (kwok does not schedule).
	Scheduler bool
	// FakeNodes starts kwok and registers this many fake nodes (0..14) whose pods become
	// Running and Ready, with pod IPs in this cluster's 127.0.0.0/8 block (PodNetwork); a
	// status loop plays the kubelet's part in readiness gates and termination (package doc).
	FakeNodes int
	// PodsPerNode is each fake node's pod capacity. Default 110, as a kubelet's; above 254 (what
	// a node's /24 podCIDR holds) the cluster takes a 127.x.0.0/16 block and gives each node a
	// /20 podCIDR, so at most 4094.
	PodsPerNode int
	// PodResponder serves HTTP on every running pod's IP and container ports (see package
	// podresponder). Needs FakeNodes > 0.
	PodResponder bool
	// CRDs are installed, and Established, before StartCluster returns (e.g. lbfed's, from
	// github.com/lbfed/lbfed/lbcf/api/crd.CRDs()).
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// NetNS runs the cluster's own etcd, apiserver, controllers and kwok in a new network
	// namespace joined to the host by two links (see Link): Karmada dials the API server over
	// one (PeerKubeconfigPath), which a test can cut; everything else over the other (Address,
	// KubeconfigPath). Pod IPs and the pod responder stay on 127.x in the host. Needs root and
	// the ip command (NetNSSupported). Within a topology such a member has its own etcd.
	NetNS bool
	// APIServerArgs are appended to kube-apiserver's flags (later flags win).
	APIServerArgs []string
	// StartTimeout bounds each readiness wait. Default 90s: generous for a loaded 2-core CI box.
	StartTimeout time.Duration
	// Logger receives progress messages. Default: discard.
	Logger logr.Logger

	// Set by StartTopology: shared run, PKI and etcd instead of the cluster's own.
	sup  *supervisor
	pki  *PKI
	etcd *etcdServer
	// kcmControllers overrides kube-controller-manager's --controllers (Karmada's host).
	kcmControllers string
	// apiserverReady is called with the apiserver up, before anything else starts (Karmada
	// starts its aggregated apiserver and webhook there).
	apiserverReady func(ctx context.Context, c *Cluster) error
}

func (o *ClusterOptions) defaults() error {
	if o.Name == "" {
		o.Name = "localup"
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 90 * time.Second
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	if err := checkFakeNodes(o.FakeNodes); err != nil {
		return err
	}
	if o.FakeNodes > 0 {
		o.Scheduler = true
	}
	if o.PodsPerNode == 0 {
		o.PodsPerNode = 110
	}
	if o.PodsPerNode < 0 || o.PodsPerNode > widePodsPerNode {
		return fmt.Errorf("pods per node: %d out of range 1..%d", o.PodsPerNode, widePodsPerNode)
	}
	if o.PodResponder && o.FakeNodes == 0 {
		return errors.New("PodResponder needs FakeNodes > 0")
	}
	return nil
}

// Cluster is a running Kubernetes control plane made of local processes.
type Cluster struct {
	name       string
	dir        string
	host       string
	kubeconfig string
	pki        *PKI
	bins       *binaries.Set
	sup        *supervisor
	log        logr.Logger
	timeout    time.Duration
	apiserver  *Process
	// apiserverSpec starts the apiserver again with the same flags (RestartAPIServer).
	apiserverSpec ProcessSpec
	network       *podNetwork
	ns            *netNamespace // nil unless ClusterOptions.NetNS
	pull          bool          // a topology member joined in Pull mode (karmada-agent)
	addr          string        // where the cluster's endpoints listen: 127.0.0.1, or ns.adminAddr
	peerHost      string        // the apiserver URL over the peer link (= host without NetNS)
	peerConfig    string        // kubeconfig for peerHost
	ownsRun       bool          // plain cluster: Stop stops every process of the run
	tempDir       bool
	keepDir       bool
	responder     *podresponder.Responder
	httpClient    *http.Client
}

// StartCluster starts etcd and kube-apiserver (plus what opts asks for) on free loopback ports and
// returns once every component is ready. On error everything already started is stopped again
// and the run folder is kept for its logs.
func StartCluster(ctx context.Context, opts ClusterOptions) (c *Cluster, err error) {
	if err := opts.defaults(); err != nil {
		return nil, fmt.Errorf("start cluster: %w", err)
	}
	if opts.Binaries == nil {
		if opts.Binaries, err = binaries.Locate(""); err != nil {
			return nil, fmt.Errorf("start cluster %s: %w", opts.Name, err)
		}
	}
	c = &Cluster{name: opts.Name, dir: opts.Dir, bins: opts.Binaries, log: opts.Logger.WithValues("cluster", opts.Name), timeout: opts.StartTimeout, addr: "127.0.0.1"}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "localup-"+opts.Name+"-"); err != nil {
			return nil, fmt.Errorf("start cluster %s: %w", opts.Name, err)
		}
		c.tempDir = true
	} else if c.dir, err = filepath.Abs(c.dir); err != nil {
		return nil, fmt.Errorf("start cluster %s: %w", opts.Name, err)
	}
	if opts.sup == nil {
		c.ownsRun = true
		if c.sup, err = newSupervisor(filepath.Join(c.dir, "logs"), c.log); err != nil {
			return nil, fmt.Errorf("start cluster %s: %w", opts.Name, err)
		}
	} else {
		c.sup = opts.sup
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("start cluster %s: %w (logs in %s)", opts.Name, err, c.sup.logDir)
			if c.ownsRun {
				c.keepDir = true
				_ = c.Stop()
				c = nil
			}
		}
	}()

	c.pki = opts.pki
	if c.pki == nil {
		if c.pki, err = GeneratePKI(filepath.Join(c.dir, "pki")); err != nil {
			return c, err
		}
	}
	etcd := opts.etcd
	if opts.NetNS {
		if c.ns, err = createNetNamespace(c.name); err != nil {
			return c, err
		}
		c.addr = c.ns.adminAddr.String()
		c.log.V(1).Info("network namespace", "netns", c.ns.name, "peer", c.ns.peerAddr, "admin", c.ns.adminAddr)
		if c.pki, err = c.pki.withServingIPs(filepath.Join(c.dir, c.name+"-pki"), c.ns.peerAddr.AsSlice(), c.ns.adminAddr.AsSlice()); err != nil {
			return c, err
		}
		etcd = nil // the shared etcd is out of reach: the cluster gets its own, inside
	}
	if c.httpClient, err = c.pki.httpClient(); err != nil {
		return c, err
	}
	if etcd == nil {
		dataDir := filepath.Join(c.dir, "etcd")
		if opts.NetNS {
			dataDir = filepath.Join(c.dir, c.name+"-etcd") // next to a topology's shared etcd
		}
		if etcd, err = startEtcd(ctx, c.sup, c.bins, opts.Name+"-etcd", dataDir, c.timeout, c.addr, c.netns()); err != nil {
			return c, err
		}
	}
	if err := c.startAPIServer(ctx, etcd, opts.APIServerArgs); err != nil {
		return c, err
	}
	if len(opts.CRDs) > 0 {
		if err := InstallCRDs(ctx, c.RESTConfig(), opts.CRDs); err != nil {
			return c, err
		}
	}
	if opts.apiserverReady != nil {
		if err := opts.apiserverReady(ctx, c); err != nil {
			return c, err
		}
	}
	var comps []component
	if opts.ControllerManager {
		p, err := c.startControllerManager(opts.kcmControllers)
		if err != nil {
			return c, err
		}
		comps = append(comps, p)
	}
	if opts.Scheduler {
		p, err := c.startScheduler()
		if err != nil {
			return c, err
		}
		comps = append(comps, p)
	}
	if opts.FakeNodes > 0 {
		if err := c.startFakeNodes(ctx, opts.FakeNodes, opts.PodsPerNode); err != nil {
			return c, err
		}
	}
	// Controller health is checked last so that the processes above start up in parallel.
	for _, p := range comps {
		if err := c.waitHealthz(ctx, p); err != nil {
			return c, err
		}
	}
	if opts.PodResponder {
		if err := c.startPodResponder(ctx); err != nil {
			return c, err
		}
	}
	if opts.FakeNodes > 0 {
		if err := c.startKubelet(ctx); err != nil {
			return c, err
		}
	}
	// Within a topology the topology reports progress; a plain cluster reports itself.
	level := 1
	if c.ownsRun {
		level = 0
	}
	c.log.V(level).Info("cluster ready", "host", c.host, "kubeconfig", c.kubeconfig)
	return c, nil
}

// Name is the cluster's name.
func (c *Cluster) Name() string { return c.name }

// SyncMode is how a topology member joined Karmada: SyncModePush (karmadactl join) or
// SyncModePull (karmada-agent, TopologyOptions.PullMembers).
func (c *Cluster) SyncMode() string {
	if c.pull {
		return SyncModePull
	}
	return SyncModePush
}

// Host is the apiserver URL, https://<Address>:<port>.
func (c *Cluster) Host() string { return c.host }

// Address is the IP the cluster's endpoints are reached at, from the host and from inside its
// network namespace alike: 127.0.0.1, or the admin link's inside address with NetNS. A process
// started inside the namespace (ProcessSpec.NetNS) should listen there to be reachable.
func (c *Cluster) Address() string { return c.addr }

// NetNS is the name of the cluster's network namespace, or "" without ClusterOptions.NetNS.
func (c *Cluster) NetNS() string { return c.netns() }

func (c *Cluster) netns() string {
	if c.ns == nil {
		return ""
	}
	return c.ns.name
}

// Link is the link Karmada reaches the cluster over, or nil without ClusterOptions.NetNS.
func (c *Cluster) Link() *Link {
	if c.ns == nil {
		return nil
	}
	return &Link{ns: c.ns}
}

// PeerKubeconfigPath is an admin kubeconfig reaching the API server over Link: what Karmada is
// given when the cluster joins. Without NetNS it is KubeconfigPath.
func (c *Cluster) PeerKubeconfigPath() string { return c.peerConfig }

// RESTConfig returns a new admin (system:masters) client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return c.pki.restConfig(c.host) }

// KubeconfigPath is an admin kubeconfig for the cluster; its context is the cluster's name.
func (c *Cluster) KubeconfigPath() string { return c.kubeconfig }

// PKI returns the run's certificates: use PKI().ServingCert/ServingKey (or WebhookCertDir) for
// a webhook served on 127.0.0.1 and PKI().CAPEM() as its caBundle.
func (c *Cluster) PKI() *PKI { return c.pki }

// Dir is the run folder; LogDir holds one <process>.log per process.
func (c *Cluster) Dir() string    { return c.dir }
func (c *Cluster) LogDir() string { return c.sup.logDir }

// PodNetwork is the loopback block holding the fake nodes' addresses and pod IPs; invalid when
// the cluster has no fake nodes.
func (c *Cluster) PodNetwork() netip.Prefix {
	if c.network == nil {
		return netip.Prefix{}
	}
	return c.network.prefix
}

// Responder is the pod responder, or nil when it was not requested.
func (c *Cluster) Responder() *podresponder.Responder { return c.responder }

// StartProcess starts an extra process (a controller under test, a webhook) in the cluster's
// run: its log goes next to the others and it is stopped first, before the control plane.
func (c *Cluster) StartProcess(spec ProcessSpec) (*Process, error) {
	return c.sup.start(spec)
}

// Processes lists every process started for the run, in start order.
func (c *Cluster) Processes() []*Process { return c.sup.processes() }

// CheckProcesses returns an error, with a log tail, if a process of the run has died.
func (c *Cluster) CheckProcesses() error { return c.sup.firstUnexpectedExit() }

// KeepRunDir makes Stop leave a temporary run folder in place (for its logs after a failure).
func (c *Cluster) KeepRunDir() { c.keepDir = true }

// Stop stops every process of the cluster in order (clients, apiserver, etcd) and removes a
// temporary run folder. Clusters of a Topology are stopped by Topology.Stop instead.
func (c *Cluster) Stop() error {
	if !c.ownsRun {
		return errors.New("stop cluster " + c.name + ": part of a topology; stop the topology")
	}
	err := c.sup.stop()
	err = errors.Join(err, c.releaseNetwork())
	if err == nil && c.tempDir && !c.keepDir {
		if rmErr := os.RemoveAll(c.dir); rmErr != nil {
			err = fmt.Errorf("remove run dir: %w", rmErr)
		}
	}
	return err
}

// releaseNetwork frees the pod network block and removes the network namespace; call it once
// the cluster's processes are stopped.
func (c *Cluster) releaseNetwork() error {
	if c.network != nil {
		c.network.release()
	}
	if c.ns != nil {
		if err := c.ns.remove(); err != nil {
			return fmt.Errorf("remove network namespace of %s: %w", c.name, err)
		}
	}
	return nil
}

func (c *Cluster) startAPIServer(ctx context.Context, etcd *etcdServer, extra []string) error {
	ports, err := allocatePorts(1)
	if err != nil {
		return err
	}
	port := strconv.Itoa(ports[0])
	c.host = "https://" + net.JoinHostPort(c.addr, port)
	c.kubeconfig = filepath.Join(c.dir, c.name+".kubeconfig")
	if err := c.pki.writeKubeconfig(c.kubeconfig, c.name, c.host); err != nil {
		return err
	}
	c.peerHost, c.peerConfig = c.host, c.kubeconfig
	bind := c.addr
	if c.ns != nil {
		// Both links' inside addresses (and loopback): only this namespace's own interfaces.
		bind = "0.0.0.0"
		c.peerHost = "https://" + net.JoinHostPort(c.ns.peerAddr.String(), port)
		c.peerConfig = filepath.Join(c.dir, c.name+"-peer.kubeconfig")
		if err := c.pki.writeKubeconfig(c.peerConfig, c.name, c.peerHost); err != nil {
			return err
		}
	}
	p := c.pki
	args := []string{
		"--bind-address=" + bind,
		"--secure-port=" + port,
		// A loopback --bind-address is not used as the advertised address: without this the
		// apiserver advertises the host's default-route address.
		"--advertise-address=127.0.0.1",
		// The lease reconciler would try every 10 s to publish 127.0.0.1 in the kubernetes
		// Endpoints, which validation rejects.
		"--endpoint-reconciler-type=none",
		"--etcd-servers=" + etcd.clientURL,
		"--etcd-prefix=/" + c.name,
		"--tls-cert-file=" + p.ServingCert, "--tls-private-key-file=" + p.ServingKey,
		"--client-ca-file=" + p.CACert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.ServiceAccountPub,
		"--service-account-signing-key-file=" + p.ServiceAccountKey,
		"--service-cluster-ip-range=10.96.0.0/12",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		// Aggregation (Karmada's cluster API; metrics-style APIs in tests).
		"--proxy-client-cert-file=" + p.FrontProxyCert, "--proxy-client-key-file=" + p.FrontProxyKey,
		"--requestheader-client-ca-file=" + p.CACert,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--cert-dir=" + filepath.Join(c.dir, c.name+"-apiserver-certs"),
	}
	args = append(args, extra...)
	c.apiserverSpec = ProcessSpec{Name: c.name + "-apiserver", Path: c.bins.Path(binaries.KubeAPIServer), Args: args, Tier: TierAPIServer, NetNS: c.netns()}
	c.apiserver, err = c.sup.start(c.apiserverSpec)
	if err != nil {
		return err
	}
	return waitFor(ctx, c.timeout, c.name+"-apiserver /readyz", []*Process{c.apiserver}, httpOK(c.httpClient, c.host+"/readyz"))
}

// RestartAPIServer stops the cluster's kube-apiserver as a rollout does (SIGTERM, SIGKILL after
// the supervisor's timeout) and starts it again with the same flags, port and etcd, then waits
// for its /readyz. Its clients see every watch end; the new server's watch caches start at
// etcd's current revision, so an informer whose last revision is older lists again. The
// stopped process stays in Processes, exited (its CPU time no longer counted).
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	if errs := c.sup.stopGroup([]*Process{c.apiserver}); len(errs) > 0 {
		return fmt.Errorf("restart %s: %w", c.apiserverSpec.Name, errors.Join(errs...))
	}
	p, err := c.sup.start(c.apiserverSpec)
	if err != nil {
		return fmt.Errorf("restart %s: %w", c.apiserverSpec.Name, err)
	}
	c.apiserver = p
	return waitFor(ctx, c.timeout, c.name+"-apiserver /readyz", []*Process{p}, httpOK(c.httpClient, c.host+"/readyz"))
}

// component is a started controller with the port its /healthz is served on.
type component struct {
	Name       string
	proc       *Process
	healthPort int
}

// clientArgs are the flags every kube component needs to reach the apiserver and to serve its
// own /healthz with the run's certificate.
func (c *Cluster) clientArgs(port int) []string {
	return []string{
		"--kubeconfig=" + c.kubeconfig,
		"--authentication-kubeconfig=" + c.kubeconfig,
		"--authorization-kubeconfig=" + c.kubeconfig,
		"--bind-address=" + c.addr,
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + c.pki.ServingCert, "--tls-private-key-file=" + c.pki.ServingKey,
		"--leader-elect=false",
	}
}

func (c *Cluster) waitHealthz(ctx context.Context, p component) error {
	return waitFor(ctx, c.timeout, p.Name+" /healthz", []*Process{p.proc}, httpOK(c.httpClient, "https://"+net.JoinHostPort(c.addr, strconv.Itoa(p.healthPort))+"/healthz"))
}

func (c *Cluster) startControllerManager(controllers string) (component, error) {
	ports, err := allocatePorts(1)
	if err != nil {
		return component{}, err
	}
	p := c.pki
	args := append(c.clientArgs(ports[0]),
		"--service-account-private-key-file="+p.ServiceAccountKey,
		"--root-ca-file="+p.CACert,
		"--cluster-signing-cert-file="+p.CACert, "--cluster-signing-key-file="+p.CAKey,
		"--use-service-account-credentials=true",
		"--cluster-name="+c.name,
		// kwok renews node leases every 40 s; the default 40 s grace would race it.
		"--node-monitor-grace-period=50s",
	)
	if controllers != "" {
		args = append(args, "--controllers="+controllers)
	}
	name := c.name + "-kube-controller-manager"
	proc, err := c.sup.start(ProcessSpec{Name: name, Path: c.bins.Path(binaries.KubeControllerManager), Args: args, Tier: TierClient, NetNS: c.netns()})
	return component{Name: name, proc: proc, healthPort: ports[0]}, err
}

func (c *Cluster) startScheduler() (component, error) {
	ports, err := allocatePorts(1)
	if err != nil {
		return component{}, err
	}
	name := c.name + "-kube-scheduler"
	proc, err := c.sup.start(ProcessSpec{Name: name, Path: c.bins.Path(binaries.KubeScheduler), Args: c.clientArgs(ports[0]), Tier: TierClient, NetNS: c.netns()})
	return component{Name: name, proc: proc, healthPort: ports[0]}, err
}

// fakeNodeAnnotation selects the nodes kwok manages; other nodes (none here) are left alone.
const fakeNodeAnnotation = "kwok.x-k8s.io/node"

func (c *Cluster) startFakeNodes(ctx context.Context, n, podsPerNode int) error {
	var err error
	if c.network, err = allocatePodNetwork(podsPerNode > narrowPodsPerNode); err != nil {
		return err
	}
	config, err := writeKwokConfig(c.dir, c.name)
	if err != nil {
		return err
	}
	kwok, err := c.sup.start(ProcessSpec{
		Name:  c.name + "-kwok",
		Path:  c.bins.Path(binaries.Kwok),
		Tier:  TierClient,
		NetNS: c.netns(),
		Args: []string{
			"--kubeconfig=" + c.kubeconfig,
			// Pod stages that leave readiness gates and deletion to the kubelet model.
			"--config=" + config,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + fakeNodeAnnotation + "=fake",
			"--cidr=" + c.network.fallbackCIDR(),
			"--node-ip=" + c.network.nodeIP(1),
			// The kwok binary defaults to no node leases; the node lifecycle controller then
			// marks the nodes NotReady after ~40 s and their pods unready for good.
			"--node-lease-duration-seconds=40",
		},
	})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	names := make([]string, n)
	for i := 1; i <= n; i++ {
		names[i-1] = fmt.Sprintf("%s-node-%d", c.name, i)
		if _, err := cs.CoreV1().Nodes().Create(ctx, c.fakeNode(names[i-1], i, podsPerNode), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create fake node %s: %w", names[i-1], err)
		}
	}
	return waitFor(ctx, c.timeout, fmt.Sprintf("%d fake nodes Ready", n), []*Process{kwok}, func(ctx context.Context) error {
		for _, name := range names {
			node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !nodeReady(node) {
				return fmt.Errorf("node %s not Ready", name)
			}
		}
		return nil
	})
}

func (c *Cluster) fakeNode(name string, i, pods int) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				fakeNodeAnnotation:             "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
		},
		// kwok hands out pod IPs from the node's podCIDR: a /24 (or /20) of this cluster's
		// loopback block.
		Spec: corev1.NodeSpec{PodCIDR: c.network.nodePodCIDR(i), PodCIDRs: []string{c.network.nodePodCIDR(i)}},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			// kwok keeps addresses that are already set, so every node gets its own 127.x IP.
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: c.network.nodeIP(i)},
				{Type: corev1.NodeHostName, Address: name},
			},
		},
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// startKubelet starts the kubelet model (kubelet.go) for the fake nodes' pods; it ends pod
// processes through the pod responder when there is one.
func (c *Cluster) startKubelet(ctx context.Context) error {
	var exit func(*corev1.Pod)
	if c.responder != nil {
		exit = c.responder.Exit
	}
	k, err := startKubelet(context.WithoutCancel(ctx), c.RESTConfig(), c.log.WithName("kubelet"), exit)
	if err != nil {
		return err
	}
	c.sup.onStop(k.stop)
	return nil
}

func (c *Cluster) startPodResponder(ctx context.Context) error {
	r, err := podresponder.Start(context.WithoutCancel(ctx), podresponder.Options{
		Config:  c.RESTConfig(),
		Cluster: c.name,
		Network: c.network.prefix,
		Logger:  c.log.WithName("pod-responder"),
	})
	if err != nil {
		return err
	}
	c.responder = r
	c.sup.onStop(r.Stop)
	return nil
}
