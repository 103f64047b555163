package controller

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller/internal/intern"
)

// MapInterner shares equal string maps among the holders that only read them (safe for
// concurrent use). What it keeps alive itself is bounded (two generations of size maps); a map
// met again after that is shared anew, which costs sharing, never correctness.
type MapInterner = intern.MapInterner

// NewMapInterner returns an interner whose generations hold size maps.
func NewMapInterner(size int) *MapInterner { return intern.NewMapInterner(size) }

// backendLabel is the label naming a record's backend and the value the group gives it
// (newRecord); "" for a record that names no backend.
func backendLabel(br *lbcfv1beta1.BackendRecord) (key, value string) {
	s := &br.Spec
	switch {
	case s.PodBackendInfo != nil:
		return lbcfv1beta1.LabelPodName, labelValue(s.PodBackendInfo.Name)
	case s.ServiceBackendInfo != nil:
		return lbcfv1beta1.LabelServiceName, labelValue(s.ServiceBackendInfo.Name)
	case s.StaticAddr != nil:
		return lbcfv1beta1.LabelStaticAddr, lbcfv1beta1.StaticAddrLabelValue(*s.StaticAddr)
	}
	return "", ""
}

// withBackendLabel gives br (a copy of a cached record, about to be written whole by an update)
// back the backend label the cache does not keep (see intern.RecordInterner): a whole-object
// write from the cached form would remove it from the record. Patches computed between two
// cached copies leave it alone, and status writes do not touch labels.
func withBackendLabel(br *lbcfv1beta1.BackendRecord) {
	k, v := backendLabel(br)
	if _, ok := br.Labels[k]; k == "" || ok {
		return
	}
	labels := make(map[string]string, len(br.Labels)+1)
	maps.Copy(labels, br.Labels)
	labels[k] = v
	br.Labels = labels
}

// ClientOptions are the client settings of every manager running the engine. Its writes are
// built from Go types of the API they write, so the API server's strict decoding of each write
// (field validation Warn, the default) finds nothing and costs it a second decode: 2 % of its CPU
// while 5,000 records registered (the benchmark's API-server profile). Ignore skips it.
func ClientOptions() client.Options {
	return client.Options{FieldValidation: metav1.FieldValidationIgnore}
}

// CacheOptions are the cache settings of every manager running the engine: managed fields,
// never read here and half of a cached pod, are dropped from everything; BackendRecords,
// BackendGroups and LoadBalancers also share their repeated content (see intern.RecordInterner:
// its transforms are given backendLabel and AnnotationBackendAddr, the engine's; a ByObject
// transform replaces the default one, so each drops managed fields itself).
func CacheOptions() cache.Options {
	in := intern.NewRecordInterner(backendLabel, AnnotationBackendAddr)
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&lbcfv1beta1.BackendRecord{}: {Transform: in.Transform},
			&lbcfv1beta1.BackendGroup{}:  {Transform: in.GroupTransform},
			&lbcfv1beta1.LoadBalancer{}:  {Transform: in.LoadBalancerTransform},
		},
	}
}
