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
	// Both members name their pods alike; the federated record name tells them apart.
	cluster := fmt.Sprintf("ns-fleet-m%d", 1+i%10/5)
	b := controller.Backend{Kind: lbcfv1beta1.CandidatePod, Cluster: cluster, Name: pod, UID: fmt.Sprintf("%08x", i),
		Port: lbcfv1beta1.PortSelector{Port: 80, Protocol: "TCP"}}
	now := metav1.NewTime(time.Unix(1764000000, 0))
	in := &lbcfv1beta1.BackendRecord{
		TypeMeta: metav1.TypeMeta{APIVersion: lbcfv1beta1.APIVersion, Kind: "BackendRecord"},
		ObjectMeta: metav1.ObjectMeta{Name: b.RecordName(lb, grp), Namespace: "ns-fleet",
			UID: types.UID(fmt.Sprintf("0b4d8f2e-6f1c-4c1e-9d8a-%012d", i)), ResourceVersion: fmt.Sprint(1000000 + i), Generation: 1,
			CreationTimestamp: now,
			Labels: map[string]string{lbcfv1beta1.LabelDriverName: "mem", lbcfv1beta1.LabelLBName: lb, lbcfv1beta1.LabelGroupName: grp,
				lbcfv1beta1.LabelCluster: cluster, lbcfv1beta1.LabelPodName: pod},
			Annotations:     map[string]string{controller.AnnotationBackendAddr: addr},
			Finalizers:      []string{lbcfv1beta1.FinalizerDeregisterBackend},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: lbcfv1beta1.APIVersion, Kind: "BackendGroup", Name: grp, UID: types.UID(fmt.Sprintf("7a1d8f2e-6f1c-4c1e-9d8a-%012d", i/10)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "lbfed", Operation: "Update", APIVersion: lbcfv1beta1.APIVersion, Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}}}`)}}},
		},
		Spec: lbcfv1beta1.BackendRecordSpec{LBName: lb, LBDriver: "mem",
			LBInfo: map[string]string{"vip": fmt.Sprintf("10.250.%d.%d", i/2500, i/10%250+1)}, Parameters: map[string]string{lbcfv1beta1.ParamCluster: cluster},
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
// its generated address and the memdriver's injectedInfo. The figures measured with this
// fixture before it named each member's records apart (its two members' records had one name, so
// half of them replaced the others in the store and the figure was half the true one) were
// 1,103 and then 787 bytes; with distinct names, 1,477 bytes a record, and 1,251 (0.85×, same
// session) once a group's records share their owner reference, a driver's their finalizer and
// a burst of registrations its condition. Of the rest, injectedInfo (a map of its own per record,
// as the memdriver answers; lbfed's own drivers inject nothing) is ≈ 370 bytes, the object
// itself 416 and its store entry and namespace index ≈ 200.
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
		if got := len(idx.ListKeys()); got != n {
			b.Fatalf("%d records cached, want %d: the fixture's names collide", got, n)
		}
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/n, "B/record")
		runtime.KeepAlive(idx)
	}
}
