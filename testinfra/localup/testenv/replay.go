package testenv

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Replay writes again, with a bare client, the objects a controller wrote in a benchmark: the
// API server's floor for the controller's figure, measured in the same run. The objects are
// written into a namespace of their own, as stored (labels, annotations, finalizers, owners,
// spec; metadata the server sets left out), while an informer follows them as the controller's
// cache does.
type Replay struct {
	Config *rest.Config // the controller's credentials and client rate
	Scheme *runtime.Scheme
	// Namespace is created for the replay.
	Namespace string
	// InFlight bounds the objects written at a time (default 64).
	InFlight int
}

// Run writes initial first (created, then their status written; not measured), then measured:
// created the same way, and deleted deleted and their finalizers removed, all at once. It
// returns the measured phase's time and the control plane's CPU over it. The objects are all of
// one kind; deleted are among initial.
func (r Replay) Run(tb testing.TB, initial, created, deleted []client.Object) (elapsed, cpu time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := client.New(r.Config, client.Options{Scheme: r.Scheme})
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Namespace}}); err != nil {
		tb.Fatal(err)
	}
	kind := firstOf(initial, created, deleted)
	if kind == nil {
		tb.Fatal("replay: no objects")
	}
	gvk, err := apiutil.GVKForObject(kind, r.Scheme)
	if err != nil {
		tb.Fatal(err)
	}
	// An informer lists and watches again when the API server drops its watch, as it does a
	// watcher that falls behind while the cores are saturated.
	cc, err := cache.New(r.Config, cache.Options{Scheme: r.Scheme, DefaultNamespaces: map[string]cache.Config{r.Namespace: {}}})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := cc.GetInformer(ctx, kind); err != nil {
		tb.Fatal(err)
	}
	go func() { _ = cc.Start(ctx) }()
	if !cc.WaitForCacheSync(ctx) {
		tb.Fatal("replay: the informer did not sync")
	}
	if err := r.write(ctx, c, gvk, initial, nil); err != nil {
		tb.Fatalf("replay, initial objects: %v", err)
	}
	// The informer's backlog of the initial writes is not the measured phase's.
	obj, err := r.Scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		tb.Fatal(err)
	}
	list := obj.(client.ObjectList)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if err := cc.List(ctx, list); err != nil {
			tb.Fatal(err)
		}
		if meta.LenList(list) >= len(initial) {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("replay: the informer has %d of the %d initial objects", meta.LenList(list), len(initial))
		}
	}
	start, cpu0 := time.Now(), ControlPlaneCPU(tb)
	err = r.write(ctx, c, gvk, created, deleted)
	elapsed, cpu = time.Since(start), ControlPlaneCPU(tb)-cpu0
	if err != nil {
		tb.Fatalf("replay: %v", err)
	}
	return elapsed, cpu
}

func firstOf(lists ...[]client.Object) client.Object {
	for _, l := range lists {
		if len(l) > 0 {
			return l[0]
		}
	}
	return nil
}

// write creates created (then writes their status) and deletes deleted (then removes their
// finalizers), InFlight at a time, creations and deletions in turn.
func (r Replay) write(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, created, deleted []client.Object) error {
	inFlight := r.InFlight
	if inFlight <= 0 {
		inFlight = 64
	}
	var ops []func() error
	for i := 0; i < max(len(created), len(deleted)); i++ {
		if i < len(created) {
			was := created[i]
			ops = append(ops, func() error { return r.create(ctx, c, gvk, was) })
		}
		if i < len(deleted) {
			was := deleted[i]
			ops = append(ops, func() error { return r.delete(ctx, c, gvk, was) })
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, inFlight)
	errs := make(chan error, len(ops))
	for _, op := range ops {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := op(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// create creates was as stored in r's namespace, then writes its status.
func (r Replay) create(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, was client.Object) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(was)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	status, hasStatus := m["status"]
	delete(m, "status")
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(r.Namespace)
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(m, "metadata", f)
	}
	if err := c.Create(ctx, u); err != nil {
		return fmt.Errorf("create %s: %w", u.GetName(), err)
	}
	if !hasStatus {
		return nil
	}
	u.Object["status"] = status
	if err := c.Status().Update(ctx, u); err != nil {
		return fmt.Errorf("status of %s: %w", u.GetName(), err)
	}
	return nil
}

// delete deletes was from r's namespace, then removes its finalizers.
func (r Replay) delete(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, was client.Object) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(r.Namespace)
	u.SetName(was.GetName())
	if err := c.Delete(ctx, u); err != nil {
		return fmt.Errorf("delete %s: %w", u.GetName(), err)
	}
	if len(was.GetFinalizers()) == 0 {
		return nil
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	if err := c.Patch(ctx, u, patch); err != nil {
		return fmt.Errorf("finalizers of %s: %w", u.GetName(), err)
	}
	return nil
}
