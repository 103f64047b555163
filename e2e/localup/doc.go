// Package localup runs real Kubernetes and Karmada control planes as plain local processes — no
// Docker, no root — for lbfed's integration tests, end-to-end tests and `make up`.
//
// Everything listens on 127.0.0.1 on ports chosen at run time, so runs do not collide; every
// process logs to <run folder>/logs/<name>.log; processes are stopped in order (clients,
// aggregated apiserver, apiservers, etcd) and die with the process that started them even when
// it is killed, so nothing is left behind.
//
// The binaries come from package binaries (`make tools` builds them once into a cache).
//
// # A plain cluster for controller integration tests
//
// Most tests want package testenv, which shares one cluster per test package:
//
//	func TestMain(m *testing.M) {
//		crds, _ := crd.CRDs() // github.com/lbfed/lbfed/lbcf/api/crd
//		testenv.Main(m, localup.ClusterOptions{CRDs: crds, ControllerManager: true, FakeNodes: 2})
//	}
//
//	func TestX(t *testing.T) {
//		cfg := testenv.Config(t)
//		…
//	}
//
// Or directly:
//
//	c, err := localup.StartCluster(ctx, localup.ClusterOptions{ControllerManager: true})
//	if err != nil { … }
//	defer c.Stop()
//	cfg := c.RESTConfig()   // admin (system:masters)
//	kc := c.KubeconfigPath() // for kubectl or a process under test
//
// etcd and kube-apiserver start in about 3 s. ControllerManager adds kube-controller-manager
// (Deployments get ReplicaSets and pods, garbage collection, namespaces); FakeNodes adds
// kube-scheduler, kwok and fake nodes on which pods become Running and Ready with IPs inside
// the cluster's 127.0.0.0/8 block; PodResponder makes those pods answer HTTP on their IPs and
// container ports (package podresponder).
//
// # Fake nodes behave like a kubelet where rollouts care
//
// kwok makes a pod Running once, with kwok-pod-stages.yaml instead of its default pod stages;
// from then on a status loop in this package (kubelet.go) is the only writer of what a kubelet
// would write, so tests can show what a rolling update drops:
//
//   - Readiness gates: Initialized, ContainersReady (and PodScheduled, from the scheduler) are
//     True at once. A pod without spec.readinessGates is Ready at once too; a pod with gates is
//     Ready only while ContainersReady is True and every gate's condition in status.conditions
//     is True — False until its controller sets them, and back to False when one is set False
//     (reason ReadinessGatesNotReady, as the kubelet writes it). Nothing fakes a gate condition.
//   - Termination: a deleted pod (grace period > 0) stays in the API, its conditions left as
//     they are, and its process keeps answering while its preStop hook runs: the longest across
//     containers of a sleep action or an exec of `sleep N` (directly or via sh/bash -c), at
//     most the pod's deletionGracePeriodSeconds (podresponder.PreStop). Then SIGTERM ends the
//     process at once (it does not handle it: the listeners close), the containers are
//     reported terminated (exit code 143, phase Failed, Ready and ContainersReady False) and
//     the pod is removed (grace 0; finalizers still hold it). Without a hook this happens
//     straight away. A forced delete (grace 0) removes the pod at once; so does the apiserver
//     for a pod never scheduled.
//   - A crashed process: annotation podresponder.lbfed.io/stopped: "true" closes the pod's
//     sockets while it stays Running and Ready; removing it starts them again.
//
// Not modelled: readiness, liveness and startup probes (containers are ready at once and
// stay so); container restarts; containers as separate processes (all of a pod's ports close
// when its longest hook ends); graceful shutdown after SIGTERM; httpGet and other exec hooks
// (instant); the kubelet's delay in noticing a dead container (the stopped annotation never
// turns the pod not Ready). Pods of a NotReady node are left alone, as by a kubelet cut off;
// Job pods complete as kwok's default stage has them (Succeeded, conditions left True).
//
// A process under test — a controller, a webhook server — can be started into the run with
// Cluster.StartProcess: it logs next to the others and is stopped first. Webhooks are
// registered by URL (https://127.0.0.1:<port>/…) with PKI().ServingCert/ServingKey (or
// PKI().WebhookCertDir) and PKI().CAPEM() as caBundle.
//
// # The Karmada topology
//
//	t, err := localup.StartTopology(ctx, localup.TopologyOptions{CRDs: crds})
//	defer t.Stop()
//	karmada := t.KarmadaConfig()
//	m1 := t.Member("m1").RESTConfig()
//
// One etcd; members m1..mN (kube-apiserver, kube-controller-manager, kube-scheduler, kwok with
// two fake nodes, pod responder); Karmada's apiserver with its kube-controller-manager
// (namespace and garbage collector), karmada-aggregated-apiserver, karmada-webhook,
// karmada-controller-manager and karmada-scheduler; members joined in Push mode with
// karmadactl and Ready. TopologyOptions.AfterReady hooks start further processes (lbfed's)
// with Topology.StartProcess. `make up` runs this topology in the background
// (cmd/localup); its kubeconfigs are in .localup/run/{karmada,m1,m2}.kubeconfig.
//
// # Pull-mode members
//
// TopologyOptions.PullMembers adds members joined in Pull mode, named after the Push ones (m3
// with two Push members; `make up PULL_MEMBERS=1`, `localup up --pull-members=1`). Each is a
// member like the others (same processes, fake nodes and pod responder) plus a karmada-agent,
// run as a process next to it with admin kubeconfigs for its member (--kubeconfig) and for
// karmada-apiserver (--karmada-kubeconfig) — upstream it runs in the member with a certificate
// from `karmadactl register`'s bootstrap token. The agent registers the Cluster (spec.syncMode
// Pull, spec.apiEndpoint = the member's API server, as karmadactl register sets it, and the
// tokens of the karmada-cluster ServiceAccounts it creates in the member), keeps its lease,
// reports its status, applies the member's Works and reports their status. Cluster.SyncMode
// tells the members apart; the agent's process is karmada-agent-<member>.
//
// What differs from a Push member, and matters to what runs on the topology:
//
//   - karmada-controller-manager never dials a Pull member. Its Works (karmada-es-<member>) are
//     applied by the agent; without it they wait.
//   - The agent calls the resource interpreter webhooks for the member's objects: InterpretStatus
//     and InterpretHealth (work status), Retain (when it updates an object); the control plane
//     keeps the others (AggregateStatus, InterpretDependency, replica operations). A webhook
//     registered by URL must be reachable from where the agent runs — here 127.0.0.1 in the
//     host, as for karmada-controller-manager.
//   - Karmada learns that the member is lost from its lease: when the agent stops, the Cluster
//     turns not Ready after the lease duration (40 s) although the member runs on.
//   - Karmada's cluster proxy (clusters/<member>/proxy) reaches the member at spec.apiEndpoint,
//     directly from karmada-aggregated-apiserver: here it can; where it cannot (no endpoint, or
//     one the control plane does not reach — Cluster.spec.proxyURL, the agent's
//     --proxy-server-address, is upstream's answer), reads through the proxy fail.
//   - A Pull member always stays in the host network namespace, even with MemberNetNS: its agent
//     dials karmada-apiserver on 127.0.0.1. It has no Link; to lose it, stop its agent (SIGSTOP
//     the process) or its API server.
//
// # Cutting a member off from Karmada
//
// With ClusterOptions.NetNS (TopologyOptions.MemberNetNS), and as root, a (Push) member runs its own
// etcd, kube-apiserver, controllers and kwok inside a network namespace of its own, reached over
// two veth links with addresses in 10.231.N.0/29: Karmada joins it over the peer link, which
// Cluster.Link().Cut() drops like a network partition, and everything else — tests, the pod
// responder, processes started with ProcessSpec.NetNS = Cluster.NetNS() listening on
// Cluster.Address() — uses the admin link, which stays up. Pods keep their 127.x addresses in
// the host namespace, so traffic to them is unaffected by a cut. Stop removes the namespace and
// its links; namespaces left by a killed run are removed by the next one.
package localup
