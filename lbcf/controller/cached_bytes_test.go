package controller_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
)

// fleetRecordJSON is record i of a fleet as the API server sends it: 10 records per load balancer
// and group, 5 pods on each of two members.
func fleetRecordJSON(tb testing.TB, i int) []byte {
	lb, grp := fmt.Sprintf("lb-%04d", i/10), fmt.Sprintf("bg-%04d", i/10)
	pod, addr := fmt.Sprintf("g%d-p%d", i/10, i%5), fmt.Sprintf("10.%d.%d.%d:80", 100+i%10/5, i/250%250, i%250)
	now := metav1.NewTime(time.Unix(1764000000, 0))
	in := &lbcfv1beta1.BackendRecord{
		TypeMeta: metav1.TypeMeta{APIVersion: lbcfv1beta1.APIVersion, Kind: "BackendRecord"},
		ObjectMeta: metav1.ObjectMeta{Name: lbcfv1beta1.PodRecordName(lb, grp, pod, 80, "TCP"), Namespace: "ns-fleet",
			UID: types.UID(fmt.Sprintf("0b4d8f2e-6f1c-4c1e-9d8a-%012d", i)), ResourceVersion: fmt.Sprint(1000000 + i), Generation: 1,
			CreationTimestamp: now,
			Labels: map[string]string{lbcfv1beta1.LabelDriverName: "mem", lbcfv1beta1.LabelLBName: lb, lbcfv1beta1.LabelGroupName: grp,
				lbcfv1beta1.LabelCluster: "ns-fleet-m1", lbcfv1beta1.LabelPodName: pod},
			Annotations:     map[string]string{controller.AnnotationBackendAddr: addr},
			Finalizers:      []string{lbcfv1beta1.FinalizerDeregisterBackend},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: lbcfv1beta1.APIVersion, Kind: "BackendGroup", Name: grp, UID: types.UID(fmt.Sprintf("7a1d8f2e-6f1c-4c1e-9d8a-%012d", i/10)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "lbfed", Operation: "Update", APIVersion: lbcfv1beta1.APIVersion, Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}}}`)}}},
		},
		Spec: lbcfv1beta1.BackendRecordSpec{LBName: lb, LBDriver: "mem",
			LBInfo: map[string]string{"vip": fmt.Sprintf("10.250.%d.%d", i/2500, i/10%250+1)}, Parameters: map[string]string{lbcfv1beta1.ParamCluster: "ns-fleet-m1"},
			PodBackendInfo: &lbcfv1beta1.PodBackendRecord{Name: pod, Port: lbcfv1beta1.PortSelector{Port: 80, Protocol: "TCP"}}},
		Status: lbcfv1beta1.BackendRecordStatus{BackendAddr: addr, InjectedInfo: map[string]string{"backendID": lb + "/" + addr}, ObservedGeneration: 1,
			Conditions: []lbcfv1beta1.BackendRecordCondition{{Type: lbcfv1beta1.BackendRegistered, Status: lbcfv1beta1.ConditionTrue, LastTransitionTime: now, Reason: "Registered", Message: "ensureBackend succeeded"}}},
	}
	js, err := json.Marshal(in)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}

// BenchmarkCachedRecordBytes: what the record cache keeps per BackendRecord (the object after the
// cache's transform, its store entry and namespace index; the address and group indexes are not
// in it) for records in BenchmarkRestartResync's shape: a federated pod backend, registered, with
// its generated address and the memdriver's injectedInfo. Measured: 1,103 bytes a record, 1,738
// without the transform (managed fields kept); of the 1,103, the three small maps each record
// has of its own (labels, the address annotation, injectedInfo) are ≈ 170-190 bytes each.
// Without the backend label (shared labels) and the address the status repeats: 787 bytes
// (0.71×, same run: 1,102).
func BenchmarkCachedRecordBytes(b *testing.B) {
	const n = 20000
	s := k8sruntime.NewScheme()
	if err := lbcfv1beta1.AddToScheme(s); err != nil {
		b.Fatal(err)
	}
	dec := serializer.NewCodecFactory(s).UniversalDeserializer()
	docs := make([][]byte, n)
	for i := range docs {
		docs[i] = fleetRecordJSON(b, i)
	}
	for range b.N {
		transform := recordTransform(b)
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for _, d := range docs {
			o, _, err := dec.Decode(d, nil, &lbcfv1beta1.BackendRecord{})
			if err != nil {
				b.Fatal(err)
			}
			t, _ := transform(o)
			_ = idx.Add(t)
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/n, "B/record")
		runtime.KeepAlive(idx)
	}
}
