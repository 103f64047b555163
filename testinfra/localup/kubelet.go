package localup

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/lbfed/lbfed/testinfra/localup/podresponder"
)

// kwokPodStages replaces kwok's default pod stages (see the file's header).
//
//go:embed kwok-pod-stages.yaml
var kwokPodStages []byte

// writeKwokConfig writes kwok's --config file and returns its path.
func writeKwokConfig(dir, name string) (string, error) {
	p := filepath.Join(dir, name+"-kwok.yaml")
	if err := os.WriteFile(p, kwokPodStages, 0o644); err != nil {
		return "", fmt.Errorf("write kwok configuration: %w", err)
	}
	return p, nil
}

// Reasons the kubelet gives for a pod that is not Ready (pkg/kubelet/status).
const (
	reasonGatesNotReady      = "ReadinessGatesNotReady"
	reasonContainersNotReady = "ContainersNotReady"
	reasonPodCompleted       = "PodCompleted"
)

// kubeletStatusSyncPeriod is how often the kubelet's status manager compares every pod's status
// in the API server with its own and writes its own back when another writer changed it
// (pkg/kubelet/status: syncPeriod, needsReconcile).
const kubeletStatusSyncPeriod = 10 * time.Second

// exitCodeSIGTERM is the exit code of a process ended by SIGTERM it does not handle.
const exitCodeSIGTERM = 128 + 15

// kubelet plays the parts of the kubelet that kwok's stages cannot, for pods on the cluster's
// fake nodes: Ready computed from readiness gates whenever they change, and the termination of
// a deleted pod (preStop hook, SIGTERM, final status, removal). kwok makes pods Running once;
// this loop is the only writer afterwards.
type kubelet struct {
	cs     kubernetes.Interface
	log    logr.Logger
	pods   cache.Indexer
	nodes  cache.Indexer
	queue  workqueue.TypedRateLimitingInterface[string]
	exit   func(*corev1.Pod) // ends the pod's process (the pod responder's Exit); nil without one
	now    func() time.Time
	cancel context.CancelFunc
	done   chan struct{}

	mu          sync.Mutex
	terminating map[types.UID]time.Time // deleted pod -> when the loop first saw the deletion
	// reconcileAt: pod without readiness gates whose Ready another writer changed -> when the
	// periodic status sync writes the kubelet's own view back.
	reconcileAt map[types.UID]time.Time
}

// startKubelet watches pods and nodes and returns once its caches are synced.
func startKubelet(ctx context.Context, cfg *rest.Config, log logr.Logger, exit func(*corev1.Pod)) (*kubelet, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubelet model: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	k := &kubelet{
		cs:          cs,
		log:         log,
		queue:       workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 5*time.Second)),
		exit:        exit,
		now:         time.Now,
		cancel:      cancel,
		done:        make(chan struct{}),
		terminating: map[types.UID]time.Time{},
		reconcileAt: map[types.UID]time.Time{},
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	podInf := factory.Core().V1().Pods().Informer()
	nodeInf := factory.Core().V1().Nodes().Informer()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				k.mu.Lock()
				delete(k.terminating, pod.UID)
				delete(k.reconcileAt, pod.UID)
				k.mu.Unlock()
			}
		},
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("kubelet model: %w", err)
	}
	if err := podInf.AddIndexers(cache.Indexers{byNode: func(obj any) ([]string, error) {
		return []string{obj.(*corev1.Pod).Spec.NodeName}, nil
	}}); err != nil {
		cancel()
		return nil, fmt.Errorf("kubelet model: %w", err)
	}
	// A node back to Ready has its kubelet back: look at its pods again.
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(old, obj any) {
		node := obj.(*corev1.Node)
		if nodeReady(node) && !nodeReady(old.(*corev1.Node)) {
			pods, _ := k.pods.ByIndex(byNode, node.Name)
			for _, pod := range pods {
				enqueue(pod)
			}
		}
	}}); err != nil {
		cancel()
		return nil, fmt.Errorf("kubelet model: %w", err)
	}
	k.pods, k.nodes = podInf.GetIndexer(), nodeInf.GetIndexer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, nodeInf.HasSynced) {
		cancel()
		factory.Shutdown()
		return nil, errors.New("kubelet model: caches did not sync")
	}
	go func() {
		defer close(k.done)
		defer factory.Shutdown()
		go func() { <-ctx.Done(); k.queue.ShutDown() }()
		// One worker: events are handled in the order they came, as tests that wait for one
		// pod's change to show that an earlier one was handled rely on.
		for k.processNext(ctx) {
		}
	}()
	return k, nil
}

func (k *kubelet) stop() {
	k.cancel()
	<-k.done
}

func (k *kubelet) processNext(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	if err := k.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			k.log.V(1).Info("pod sync failed, retrying", "pod", key, "err", err)
		}
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

func (k *kubelet) sync(ctx context.Context, key string) error {
	obj, exists, err := k.pods.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod)
	if !k.onFakeNode(pod) {
		return nil
	}
	if pod.DeletionTimestamp != nil {
		return k.terminate(ctx, key, pod)
	}
	return k.syncReady(ctx, pod)
}

// byNode indexes pods by spec.nodeName.
const byNode = "nodeName"

// onFakeNode reports whether the pod runs on a fake node whose "kubelet" is reachable: on a
// NotReady node the kubelet is cut off, the node lifecycle controller marks the pods not Ready
// and nobody else writes them (nor would a loop here undo that mark).
func (k *kubelet) onFakeNode(pod *corev1.Pod) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	obj, exists, err := k.nodes.GetByKey(pod.Spec.NodeName)
	if err != nil || !exists {
		return false
	}
	node := obj.(*corev1.Node)
	return node.Annotations[fakeNodeAnnotation] == "fake" && nodeReady(node)
}

// syncReady sets Ready as the kubelet computes it: its containers ready and every gate's
// condition True. For a pod with readiness gates the kubelet does so whenever the pod changes
// (HandlePodReconcile); for one without, Ready changes only with its containers, and when another
// writer changed it (the node lifecycle controller's MarkPodsNotReady) the kubelet writes its own
// view back at its next periodic status sync (kubeletStatusSyncPeriod).
func (k *kubelet) syncReady(ctx context.Context, pod *corev1.Pod) error {
	if terminal(pod) {
		return nil
	}
	containers, ok := conditionOf(pod, corev1.ContainersReady)
	if !ok {
		return nil // kwok has not started the pod yet
	}
	want, reason, message := corev1.ConditionTrue, "", ""
	if containers.Status != corev1.ConditionTrue {
		want, reason, message = corev1.ConditionFalse, reasonContainersNotReady, "containers with unready status"
	} else {
		for _, gate := range pod.Spec.ReadinessGates {
			c, ok := conditionOf(pod, gate.ConditionType)
			if !ok {
				want, reason, message = corev1.ConditionFalse, reasonGatesNotReady, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", gate.ConditionType)
				break
			}
			if c.Status != corev1.ConditionTrue {
				want, reason, message = corev1.ConditionFalse, reasonGatesNotReady, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", gate.ConditionType, c.Status)
				break
			}
		}
	}
	if ready, ok := conditionOf(pod, corev1.PodReady); ok && ready.Status == want {
		k.mu.Lock()
		delete(k.reconcileAt, pod.UID)
		k.mu.Unlock()
		return nil
	}
	if len(pod.Spec.ReadinessGates) == 0 {
		now := k.now()
		k.mu.Lock()
		at, ok := k.reconcileAt[pod.UID]
		if !ok {
			at = now.Add(kubeletStatusSyncPeriod)
			k.reconcileAt[pod.UID] = at
		}
		k.mu.Unlock()
		if now.Before(at) {
			key, _ := cache.MetaNamespaceKeyFunc(pod)
			k.queue.AddAfter(key, at.Sub(now))
			return nil
		}
		k.mu.Lock()
		delete(k.reconcileAt, pod.UID)
		k.mu.Unlock()
	}
	// A strategic merge patch of the one condition (conditions merge by type): gate conditions
	// written meanwhile by their controllers are left alone; null clears reason and message.
	cond := map[string]any{"type": corev1.PodReady, "status": want, "lastTransitionTime": metav1.NewTime(k.now()), "reason": nil, "message": nil}
	if reason != "" {
		cond["reason"], cond["message"] = reason, message
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{cond}}})
	if err != nil {
		return err
	}
	if _, err := k.cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("set Ready of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	k.log.V(1).Info("readiness", "pod", klogRef(pod), "ready", want, "reason", reason)
	return nil
}

// terminate plays the kubelet's part once a pod is deleted: the preStop hooks run (the pod's
// process keeps serving, its status is left as it is), then SIGTERM ends the process at once,
// the kubelet reports the containers stopped and removes the pod.
func (k *kubelet) terminate(ctx context.Context, key string, pod *corev1.Pod) error {
	now := k.now()
	k.mu.Lock()
	since, seen := k.terminating[pod.UID]
	if !seen {
		since = now
		k.terminating[pod.UID] = now
	}
	k.mu.Unlock()
	if !terminal(pod) && pod.Status.PodIP != "" {
		// A shorter grace period given later (a second delete) shortens the wait: PreStop
		// reads the pod's current deletionGracePeriodSeconds.
		if rest := since.Add(podresponder.PreStop(pod)).Sub(now); rest > 0 {
			k.queue.AddAfter(key, rest)
			return nil
		}
	}
	if k.exit != nil {
		k.exit(pod)
	}
	if !terminal(pod) {
		if _, err := k.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, stoppedStatus(pod, now), metav1.UpdateOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("report containers of pod %s/%s stopped: %w", pod.Namespace, pod.Name, err)
		}
	}
	// The object goes once the kubelet is done; finalizers, if any, still hold it.
	err := k.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("remove pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	k.log.V(1).Info("pod terminated", "pod", klogRef(pod), "after", now.Sub(since))
	return nil
}

// stoppedStatus is what the kubelet reports once a deleted pod's containers have exited: each
// ended by SIGTERM, the pod Failed (a non-zero exit), not ready.
func stoppedStatus(pod *corev1.Pod, now time.Time) *corev1.Pod {
	out := pod.DeepCopy()
	at := metav1.NewTime(now)
	out.Status.Phase = corev1.PodFailed
	for i := range out.Status.ContainerStatuses {
		cs := &out.Status.ContainerStatuses[i]
		var started metav1.Time
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt
		}
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCodeSIGTERM, Reason: "Error", StartedAt: started, FinishedAt: at}}
		cs.Ready, cs.Started = false, new(bool)
	}
	for i := range out.Status.Conditions {
		c := &out.Status.Conditions[i]
		if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status != corev1.ConditionFalse {
			c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionFalse, reasonPodCompleted, "", at
		}
	}
	return out
}

func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func conditionOf(pod *corev1.Pod, t corev1.PodConditionType) (corev1.PodCondition, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return corev1.PodCondition{}, false
}

func klogRef(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }
