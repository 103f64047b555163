package testenv

import (
	"fmt"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UnchangedCache returns opts with every transform (each kind's, and the default one of the kinds
// without their own) wrapped to keep each object the cache takes in, with a copy of it as it went
// in, and fails t when it ends if one of them changed. The controllers read cached objects in
// place (client.UnsafeDisableDeepCopy, and the record reconciler until it copies a record to
// change it), and the record interner shares maps between records: a write into any of them would
// corrupt what every other reader sees, silently. Register the check before the manager's stop,
// so that it runs after the manager stopped (t.Cleanup runs last-registered first).
//
// Benchmarks are left unchecked (opts returned as they are): the copies would be measured with
// the controller.
func UnchangedCache(t testing.TB, opts cache.Options) cache.Options {
	if _, ok := t.(*testing.B); ok {
		return opts
	}
	k := &keptObjects{kept: map[runtime.Object]runtime.Object{}}
	byObject := make(map[client.Object]cache.ByObject, len(opts.ByObject))
	for obj, bo := range opts.ByObject {
		if bo.Transform == nil {
			bo.Transform = opts.DefaultTransform
		}
		bo.Transform = k.keep(bo.Transform)
		byObject[obj] = bo
	}
	opts.ByObject = byObject
	opts.DefaultTransform = k.keep(opts.DefaultTransform)
	t.Cleanup(func() {
		for _, msg := range k.changed() {
			t.Error(msg)
		}
	})
	return opts
}

// keptObjects are the objects a cache took in, each with a copy as it went in (an object
// transformed again is kept once).
type keptObjects struct {
	mu   sync.Mutex
	kept map[runtime.Object]runtime.Object
}

// keep wraps transform (nil: none) to keep every object it returns.
func (k *keptObjects) keep(transform func(any) (any, error)) func(any) (any, error) {
	return func(in any) (any, error) {
		out := in
		if transform != nil {
			var err error
			if out, err = transform(in); err != nil {
				return out, err
			}
		}
		if obj, ok := out.(runtime.Object); ok {
			k.mu.Lock()
			if _, ok := k.kept[obj]; !ok {
				k.kept[obj] = obj.DeepCopyObject()
			}
			k.mu.Unlock()
		}
		return out, nil
	}
}

// changed says which kept objects differ from their copies.
func (k *keptObjects) changed() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for obj, was := range k.kept {
		if equality.Semantic.DeepEqual(obj, was) {
			continue
		}
		name := fmt.Sprintf("%T", obj)
		if m, err := meta.Accessor(was); err == nil {
			name = fmt.Sprintf("%s %s/%s@%s", name, m.GetNamespace(), m.GetName(), m.GetResourceVersion())
		}
		out = append(out, fmt.Sprintf("cached %s changed in the cache:\nwas %+v\nnow %+v", name, was, obj))
	}
	return out
}
