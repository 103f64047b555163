// Package servicechange holds the one filter of Service events that the engine, federation and
// the front doors share, so that a front door need not import the engine for it.
package servicechange

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Predicate passes the Service events that can change the groups selecting it or what
// drivers are sent of it: creation, deletion, and updates of its spec, labels or annotations or
// that start its deletion. Not the generation: the API server never moves a Service's
// metadata.generation. Status-only writes are dropped.
func Predicate() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Service)
		n, ok2 := e.ObjectNew.(*corev1.Service)
		if !ok1 || !ok2 {
			return true
		}
		return !equality.Semantic.DeepEqual(o.Spec, n.Spec) || !maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
	}}
}
