// Package podresponder gives kwok's fake pods real sockets. kwok marks pods Running without
// running anything; localup gives them IPs inside 127.0.0.0/8, which are all local on Linux, and
// a Responder plays each pod's process: it listens on the pod's IP and TCP container ports while
// that process would run, answering any HTTP request with who answered (cluster, namespace, pod,
// IP, port, path as JSON).
//
// What it answers, when it listens and stops, and its limits: docs/design/podresponder.md.
package podresponder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// StoppedAnnotation set to "true" on a pod stops its process: its listeners close (connections
// refused) while the pod stays Running and Ready in the API — a crashed process the kubelet has
// not noticed yet. Removing it starts the process again.
const StoppedAnnotation = "podresponder.lbfed.io/stopped"

// Options configures a Responder.
type Options struct {
	// Config reaches the cluster whose pods are served.
	Config *rest.Config
	// Cluster is the name reported in answers.
	Cluster string
	// Network restricts served pod IPs; default 127.0.0.0/8. Pods outside it are ignored.
	Network netip.Prefix
	// Namespace restricts the watch; "" watches all namespaces.
	Namespace string
	Logger    logr.Logger
}

// Answer is the JSON body of every response.
type Answer struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	IP        string `json:"ip"`
	Port      int    `json:"port"`
	Path      string `json:"path"`
}

// Endpoint is one address being served for a pod.
type Endpoint struct {
	Namespace, Pod string
	Addr           netip.AddrPort
}

// Responder watches pods and keeps one HTTP listener per running pod's IP and TCP container port
// (see the package doc for when a pod runs).
type Responder struct {
	opts   Options
	log    logr.Logger
	queue  workqueue.TypedRateLimitingInterface[string]
	lister cache.Indexer
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	serving map[string]map[netip.AddrPort]*http.Server // pod key -> listeners
	errs    map[string]error                           // pod key -> last bind error
	exited  map[string]types.UID                       // pod key -> the terminating pod whose process Exit ended
}

// Start watches pods and returns once the initial list is served.
func Start(ctx context.Context, opts Options) (*Responder, error) {
	if !opts.Network.IsValid() {
		opts.Network = netip.MustParsePrefix("127.0.0.0/8")
	}
	if !netip.MustParsePrefix("127.0.0.0/8").Contains(opts.Network.Addr()) {
		return nil, fmt.Errorf("pod responder: network %s is not loopback", opts.Network)
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	cs, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("pod responder: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Responder{
		opts:    opts,
		log:     opts.Logger,
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 5*time.Second)),
		cancel:  cancel,
		done:    make(chan struct{}),
		serving: map[string]map[netip.AddrPort]*http.Server{},
		errs:    map[string]error{},
		exited:  map[string]types.UID{},
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(opts.Namespace))
	inf := factory.Core().V1().Pods().Informer()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			r.queue.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			pod, ok := obj.(*corev1.Pod)
			if tomb, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
				pod, ok = tomb.Obj.(*corev1.Pod)
			}
			if ok {
				r.forget(pod)
			}
			enqueue(obj)
		},
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("pod responder: %w", err)
	}
	r.lister = inf.GetIndexer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		factory.Shutdown()
		return nil, errors.New("pod responder: pod informer did not sync")
	}
	// Serve the pods that already exist before returning, so callers can dial right away.
	for _, key := range r.lister.ListKeys() {
		r.sync(key)
	}
	go func() {
		defer close(r.done)
		defer factory.Shutdown()
		go func() { <-ctx.Done(); r.queue.ShutDown() }()
		for r.processNext() {
		}
	}()
	return r, nil
}

// Stop closes every listener and stops watching. It is safe to call more than once.
func (r *Responder) Stop() {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, servers := range r.serving {
		for _, s := range servers {
			s.Close()
		}
		delete(r.serving, key)
	}
}

// Endpoints lists the addresses currently served, sorted.
func (r *Responder) Endpoints() []Endpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Endpoint
	for key, servers := range r.serving {
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		for addr := range servers {
			out = append(out, Endpoint{Namespace: ns, Pod: name, Addr: addr})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr.Compare(out[j].Addr) < 0 })
	return out
}

// Exit ends the process of a terminating pod as the kubelet's SIGTERM does once the preStop
// hook is over (the process does not handle it): the pod's listeners close before Exit returns
// and stay closed for this pod (its UID) whatever its status says. localup's kubelet model calls
// it before it reports the containers stopped. Exit on a pod that is not terminating does
// nothing: only a deleted pod's containers are stopped by the kubelet.
func (r *Responder) Exit(pod *corev1.Pod) {
	if pod.DeletionTimestamp == nil {
		return
	}
	key := podKey(pod)
	r.mu.Lock()
	r.exited[key] = pod.UID
	r.mu.Unlock()
	_ = r.sync(key)
}

// forget drops what Exit recorded about a pod now deleted.
func (r *Responder) forget(pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if uid, ok := r.exited[podKey(pod)]; ok && uid == pod.UID {
		delete(r.exited, podKey(pod))
	}
}

func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// Errors returns the last listen error per pod (e.g. a port below 1024 without privileges).
func (r *Responder) Errors() map[string]error {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]error, len(r.errs))
	for k, v := range r.errs {
		out[k] = v
	}
	return out
}

func (r *Responder) processNext() bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	if err := r.sync(key); err != nil {
		r.queue.AddRateLimited(key)
		return true
	}
	r.queue.Forget(key)
	return true
}

// sync makes the listeners of one pod match what it should serve. The lock is held from the
// decision on, so that a sync racing Exit cannot reopen what Exit closed.
func (r *Responder) sync(key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	want := map[netip.AddrPort]bool{}
	var pod *corev1.Pod
	if obj, exists, err := r.lister.GetByKey(key); err == nil && exists {
		pod = obj.(*corev1.Pod)
		for _, ap := range r.addresses(pod) {
			want[ap] = true
		}
	}
	if uid, ok := r.exited[key]; ok && pod != nil && pod.UID != uid {
		delete(r.exited, key) // a new pod of the same name runs anew
	}

	servers := r.serving[key]
	for addr, s := range servers {
		if !want[addr] {
			s.Close()
			delete(servers, addr)
			r.log.V(1).Info("stopped serving", "pod", key, "addr", addr)
		}
	}
	var errs []error
	for addr := range want {
		if _, ok := servers[addr]; ok {
			continue
		}
		s, err := r.serve(pod, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if servers == nil {
			servers = map[netip.AddrPort]*http.Server{}
			r.serving[key] = servers
		}
		servers[addr] = s
		r.log.V(1).Info("serving", "pod", key, "addr", addr)
	}
	if len(servers) == 0 {
		delete(r.serving, key)
	}
	if err := errors.Join(errs...); err != nil {
		r.errs[key] = err
		r.log.Error(err, "cannot serve pod", "pod", key)
		return err
	}
	delete(r.errs, key)
	return nil
}

// addresses returns the pod IP × TCP container ports to serve: none unless the pod's process
// runs (see running) and its IP is inside the network.
func (r *Responder) addresses(pod *corev1.Pod) []netip.AddrPort {
	if !r.running(pod) {
		return nil
	}
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || !r.opts.Network.Contains(ip) {
		return nil
	}
	var out []netip.AddrPort
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
				out = append(out, netip.AddrPortFrom(ip, uint16(p.ContainerPort)))
			}
		}
	}
	return out
}

// running reports whether the pod's process is up and answering, as the pod's status and the
// model of the package doc say. Called with r.mu held.
func (r *Responder) running(pod *corev1.Pod) bool {
	if pod.Annotations[StoppedAnnotation] == "true" {
		return false
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if uid, ok := r.exited[podKey(pod)]; ok && uid == pod.UID {
		return false // our copy may not show the deletion yet
	}
	// SIGTERM comes right away without a preStop hook, and the process does not handle it.
	if pod.DeletionTimestamp != nil && PreStop(pod) == 0 {
		return false
	}
	// A readiness gate not yet True keeps the pod out of Ready, not its process from running;
	// pods whose status is written by hand may carry Ready alone.
	if status, ok := podCondition(pod, corev1.ContainersReady); ok {
		return status == corev1.ConditionTrue
	}
	status, _ := podCondition(pod, corev1.PodReady)
	return status == corev1.ConditionTrue
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) (corev1.ConditionStatus, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status, true
		}
	}
	return "", false
}

func (r *Responder) serve(pod *corev1.Pod, addr netip.AddrPort) (*http.Server, error) {
	l, err := net.Listen("tcp", addr.String())
	if err != nil {
		return nil, fmt.Errorf("listen %s for pod %s/%s: %w", addr, pod.Namespace, pod.Name, err)
	}
	answer := Answer{Cluster: r.opts.Cluster, Namespace: pod.Namespace, Pod: pod.Name, IP: addr.Addr().String(), Port: int(addr.Port())}
	s := &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			a := answer
			a.Path = req.URL.Path
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(a)
		}),
	}
	go func() { _ = s.Serve(l) }()
	return s, nil
}
