package controller_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
)

func recordTransform(t testing.TB) cache.TransformFunc {
	for o, by := range controller.CacheOptions().ByObject {
		if _, ok := o.(*lbcfv1beta1.BackendRecord); ok {
			return by.Transform
		}
	}
	t.Fatal("no BackendRecord cache transform")
	return nil
}

// decoded returns a record as the informer would: freshly decoded from JSON.
func decoded(t *testing.T, pod, addr string, params map[string]string) *lbcfv1beta1.BackendRecord {
	in := &lbcfv1beta1.BackendRecord{
		ObjectMeta: metav1.ObjectMeta{Name: "r-" + pod, Namespace: "ns",
			Labels:        map[string]string{lbcfv1beta1.LabelLBName: "vip", lbcfv1beta1.LabelPodName: pod, lbcfv1beta1.LabelCluster: "m1"},
			Finalizers:    []string{lbcfv1beta1.FinalizerDeregisterBackend},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "lbfed"}},
		},
		Spec: lbcfv1beta1.BackendRecordSpec{LBName: "vip", LBDriver: "radware",
			LBInfo: map[string]string{"vip": "10.0.0.1", "port": "80"}, LBAttributes: map[string]string{},
			Parameters: params, PodBackendInfo: &lbcfv1beta1.PodBackendRecord{Name: pod, Port: lbcfv1beta1.PortSelector{Port: 80}}},
		Status: lbcfv1beta1.BackendRecordStatus{BackendAddr: addr,
			Conditions: []lbcfv1beta1.BackendRecordCondition{{Type: lbcfv1beta1.BackendRegistered, Status: lbcfv1beta1.ConditionTrue}}},
	}
	js, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := &lbcfv1beta1.BackendRecord{}
	if err := json.Unmarshal(js, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mapID(m map[string]string) uintptr { return reflect.ValueOf(m).Pointer() }

// groupOwner is the owner reference a group gives its records.
func groupOwner(group, uid string) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: lbcfv1beta1.APIVersion, Kind: "BackendGroup", Name: group, UID: types.UID(uid), Controller: &yes, BlockOwnerDeletion: &yes}}
}

func TestRecordCacheTransformSharesWithoutChanging(t *testing.T) {
	g := NewWithT(t)
	transform := recordTransform(t)
	a := decoded(t, "a", "10.1.0.1:80", map[string]string{"weight": "1", lbcfv1beta1.ParamCluster: "m1"})
	b := decoded(t, "b", "10.1.0.2:80", map[string]string{"weight": "1", lbcfv1beta1.ParamCluster: "m1"})
	c := decoded(t, "c", "10.1.0.3:80", map[string]string{"weight": "3", lbcfv1beta1.ParamCluster: "m1"})
	n := decoded(t, "n", "10.1.0.4:80", nil)
	// a and b belong to one group and registered in the same second; c to another, later.
	a.OwnerReferences, b.OwnerReferences, c.OwnerReferences = groupOwner("g1", "u1"), groupOwner("g1", "u1"), groupOwner("g2", "u2")
	at := metav1.NewTime(time.Unix(1764000000, 0).UTC())
	for _, r := range []*lbcfv1beta1.BackendRecord{a, b, c} {
		r.Status.Conditions[0].LastTransitionTime = at
	}
	c.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at.Add(time.Second))
	// a was created with its generated address, which its status now repeats.
	a.Annotations = map[string]string{controller.AnnotationBackendAddr: a.Status.BackendAddr, "note": "kept"}
	want, written := map[string]*lbcfv1beta1.BackendRecord{}, map[string]*lbcfv1beta1.BackendRecord{}
	for _, r := range []*lbcfv1beta1.BackendRecord{a, b, c, n} {
		w := r.DeepCopy()
		w.ManagedFields = nil
		written[r.Name] = w.DeepCopy()
		delete(w.Labels, lbcfv1beta1.LabelPodName)
		delete(w.Annotations, controller.AnnotationBackendAddr)
		delete(written[r.Name].Annotations, controller.AnnotationBackendAddr)
		want[r.Name] = w
	}
	for _, r := range []*lbcfv1beta1.BackendRecord{a, b, c, n} {
		got, err := transform(r)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want[r.Name]), "content unchanged but managed fields, the backend label and an address the status repeats")
		// What an update writes of a cached record (a deep copy) is the record as it was, but
		// for that address, which nothing reads once the status has one.
		upd := r.DeepCopy()
		controller.WithBackendLabel(upd)
		g.Expect(upd).To(Equal(written[r.Name]))
		g.Expect(r.Labels).NotTo(HaveKey(lbcfv1beta1.LabelPodName), "the cached labels are left alone")
	}
	g.Expect(mapID(a.Spec.Parameters)).To(Equal(mapID(b.Spec.Parameters)), "equal parameters are one map")
	g.Expect(mapID(a.Spec.Parameters)).NotTo(Equal(mapID(c.Spec.Parameters)))
	g.Expect(mapID(a.Spec.LBInfo)).To(Equal(mapID(c.Spec.LBInfo)))
	g.Expect(a.Spec.LBAttributes).To(BeEmpty())
	g.Expect(a.Spec.LBAttributes).NotTo(BeNil(), "empty stays empty, not absent")
	g.Expect(n.Spec.Parameters).To(BeNil(), "absent stays absent")
	g.Expect(mapID(a.Labels)).To(Equal(mapID(b.Labels)), "without the pod, the labels of a group's records on one load balancer are one map")
	g.Expect(&a.OwnerReferences[0]).To(BeIdenticalTo(&b.OwnerReferences[0]), "a group's records share their owner references")
	g.Expect(&a.OwnerReferences[0]).NotTo(BeIdenticalTo(&c.OwnerReferences[0]))
	g.Expect(&a.Finalizers[0]).To(BeIdenticalTo(&c.Finalizers[0]), "and their finalizers")
	g.Expect(&a.Status.Conditions[0]).To(BeIdenticalTo(&b.Status.Conditions[0]), "conditions alike to the nanosecond are one slice")
	g.Expect(&a.Status.Conditions[0]).NotTo(BeIdenticalTo(&c.Status.Conditions[0]))
	// A second pass (an informer's streamed initial list transforms every object twice) changes
	// nothing and keeps the sharing.
	for _, r := range []*lbcfv1beta1.BackendRecord{a, b, c, n} {
		again, err := transform(r.DeepCopy())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again).To(Equal(want[r.Name]))
		g.Expect(mapID(again.(*lbcfv1beta1.BackendRecord).Labels)).To(Equal(mapID(r.Labels)))
	}

	// Labels other than those the group writes are the record's own, kept whole.
	odd := decoded(t, "odd", "10.1.0.5:80", nil)
	odd.Labels[lbcfv1beta1.LabelPodName] = "another"
	oddWant := odd.Labels[lbcfv1beta1.LabelPodName]
	_, _ = transform(odd)
	g.Expect(odd.Labels).To(HaveKeyWithValue(lbcfv1beta1.LabelPodName, oddWant))
	long := decoded(t, strings.Repeat("p", 70), "10.1.0.6:80", nil)
	long.Labels[lbcfv1beta1.LabelPodName] = lbcfv1beta1.StaticAddrLabelValue(strings.Repeat("p", 70))
	_, _ = transform(long)
	g.Expect(long.Labels).NotTo(HaveKey(lbcfv1beta1.LabelPodName), "a long pod name's label is its hash, as the group writes it")
	controller.WithBackendLabel(long)
	g.Expect(long.Labels).To(HaveKeyWithValue(lbcfv1beta1.LabelPodName, lbcfv1beta1.StaticAddrLabelValue(strings.Repeat("p", 70))))

	// What callers get from the cache are deep copies: changing one leaves the shared map alone.
	cp := a.DeepCopy()
	cp.Spec.Parameters["weight"] = "9"
	cp.OwnerReferences[0].Name, cp.Status.Conditions[0].Reason = "other", "Changed"
	g.Expect(b.Spec.Parameters).To(HaveKeyWithValue("weight", "1"))
	g.Expect(b.OwnerReferences[0].Name).To(Equal("g1"))
	g.Expect(b.Status.Conditions[0].Reason).To(BeEmpty())

	// Ambiguous-looking contents stay apart.
	x := decoded(t, "x", "", map[string]string{"a:1": "b"})
	y := decoded(t, "y", "", map[string]string{"a": "1:b"})
	_, _ = transform(x)
	_, _ = transform(y)
	g.Expect(x.Spec.Parameters).To(Equal(map[string]string{"a:1": "b"}))
	g.Expect(y.Spec.Parameters).To(Equal(map[string]string{"a": "1:b"}))

	other := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: "bg"}}
	got, err := transform(other)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeIdenticalTo(other), "other kinds pass through")
}

// A fleet's records go on sharing their maps when they are updated, however many load balancers
// there are: each update decodes the record again, and a table that had started over since the
// record's creation gave it a copy of its own (10,000 load balancers: every update did); records'
// own annotation maps (their generated address) must not crowd the shared ones out.
func TestRecordCacheTransformSharesAcrossAFleet(t *testing.T) {
	g := NewWithT(t)
	transform := recordTransform(t)
	// 12,000 load balancers, 4 records each, every record created with its generated address (an
	// annotation of its own, as the group writes it).
	const lbs, perLB = 12000, 4
	lbInfo := func(i int) map[string]string {
		return map[string]string{"vip": fmt.Sprintf("10.%d.%d.1", i/250, i%250), "port": "80"}
	}
	first := make([]uintptr, lbs)
	for round := 0; round < 2; round++ {
		for i := 0; i < lbs*perLB; i++ {
			lb := i / perLB
			r := decoded(t, fmt.Sprintf("p%d", i), "", nil)
			r.Spec.LBInfo = lbInfo(lb)
			r.Annotations = map[string]string{controller.AnnotationBackendAddr: fmt.Sprintf("10.%d.%d.%d:80", i/62500, i/250%250, i%250)}
			_, err := transform(r)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Spec.LBInfo).To(Equal(lbInfo(lb)))
			g.Expect(r.Annotations).To(HaveLen(1))
			if round == 0 && i%perLB == 0 {
				first[lb] = mapID(r.Spec.LBInfo)
				continue
			}
			g.Expect(mapID(r.Spec.LBInfo)).To(Equal(first[lb]), "record %d (round %d): shares its load balancer's lbInfo", i, round)
		}
	}
}

// transformOf returns the engine's cache transform of obj's kind.
func transformOf(t *testing.T, obj any) cache.TransformFunc {
	for o, by := range controller.CacheOptions().ByObject {
		if reflect.TypeOf(o) == reflect.TypeOf(obj) {
			return by.Transform
		}
	}
	t.Fatalf("no cache transform for %T", obj)
	return nil
}

// roundTrip returns obj as the informer would have it: freshly decoded from JSON.
func roundTrip[T any](t *testing.T, obj *T) *T {
	js, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := json.Unmarshal(js, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Groups and load balancers are cached as they are but for their managed fields, sharing what
// they repeat; a second pass changes nothing.
func TestGroupAndLoadBalancerCacheTransforms(t *testing.T) {
	g := NewWithT(t)
	at := metav1.NewTime(time.Unix(1764000000, 0).UTC())
	group := func(name string) *lbcfv1beta1.BackendGroup {
		return roundTrip(t, &lbcfv1beta1.BackendGroup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Annotations: map[string]string{"lbfed.io/registered": name},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "lbfed"}}},
			Spec: lbcfv1beta1.BackendGroupSpec{LoadBalancers: []string{"lb-" + name}, Parameters: map[string]string{"weight": "1"},
				Pods: &lbcfv1beta1.PodBackend{Ports: []lbcfv1beta1.PortSelector{{Port: 80}}, ByLabel: &lbcfv1beta1.SelectPodByLabel{Selector: map[string]string{"app": "web"}}}},
			Status: lbcfv1beta1.BackendGroupStatus{Backends: 10,
				Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AllRegistered", Message: "10 backends registered", LastTransitionTime: at}},
				Members:    []lbcfv1beta1.MemberStatus{{Name: "m1", State: lbcfv1beta1.MemberContributing, Reason: "Reporting", Since: at, Message: "observed and reporting"}}},
		})
	}
	lbOf := func(name string) *lbcfv1beta1.LoadBalancer {
		return roundTrip(t, &lbcfv1beta1.LoadBalancer{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Finalizers: []string{lbcfv1beta1.FinalizerDeleteLB},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "lbfed"}}},
			Spec: lbcfv1beta1.LoadBalancerSpec{LBDriver: "radware", LBSpec: map[string]string{"vip": name}, Attributes: map[string]string{"mode": "nat"}},
			Status: lbcfv1beta1.LoadBalancerStatus{LBInfo: map[string]string{"vip": name}, LastSyncedAttributes: map[string]string{"mode": "nat"},
				Conditions: []lbcfv1beta1.LoadBalancerCondition{{Type: lbcfv1beta1.LBCreated, Status: lbcfv1beta1.ConditionTrue, LastTransitionTime: at}}},
		})
	}
	gt, lt := transformOf(t, &lbcfv1beta1.BackendGroup{}), transformOf(t, &lbcfv1beta1.LoadBalancer{})
	groups := []*lbcfv1beta1.BackendGroup{transformTwice(g, gt, group("a")), transformTwice(g, gt, group("b"))}
	g.Expect(mapID(groups[0].Spec.Pods.ByLabel.Selector)).To(Equal(mapID(groups[1].Spec.Pods.ByLabel.Selector)), "one selector map")
	g.Expect(mapID(groups[0].Spec.Parameters)).To(Equal(mapID(groups[1].Spec.Parameters)))
	lbs := []*lbcfv1beta1.LoadBalancer{transformTwice(g, lt, lbOf("a")), transformTwice(g, lt, lbOf("b"))}
	g.Expect(mapID(lbs[0].Spec.Attributes)).To(Equal(mapID(lbs[1].Status.LastSyncedAttributes)), "one attribute map")
	g.Expect(&lbs[0].Finalizers[0]).To(BeIdenticalTo(&lbs[1].Finalizers[0]))
	g.Expect(mapID(lbs[0].Spec.LBSpec)).NotTo(Equal(mapID(lbs[1].Spec.LBSpec)))
	// Deep copies, as the cache hands out, are the caller's own.
	cp := groups[0].DeepCopy()
	cp.Spec.Pods.ByLabel.Selector["app"] = "other"
	g.Expect(groups[1].Spec.Pods.ByLabel.Selector).To(HaveKeyWithValue("app", "web"))
	other := &lbcfv1beta1.BackendRecord{}
	for _, tf := range []cache.TransformFunc{gt, lt} {
		got, err := tf(other)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(BeIdenticalTo(other))
	}
}

// transformTwice passes obj through tf twice, as an informer's streamed list does, and checks
// that each pass leaves its content as it was but for the managed fields; obj is returned.
func transformTwice[T client.Object](g Gomega, tf cache.TransformFunc, obj T) T {
	want := obj.DeepCopyObject().(T)
	want.SetManagedFields(nil)
	for pass := 0; pass < 2; pass++ {
		got, err := tf(obj)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want))
	}
	return obj
}

// A record whose maps, slices and strings the cache already shares (a restart's resync: every
// record again, most of their content known) is transformed without allocating: keys are built
// in the interner's own buffer and looked up without becoming strings, and the labels are looked
// up without the backend label rather than cloned without it.
func TestKnownRecordTransformAllocatesNothing(t *testing.T) {
	transform := recordTransform(t)
	r := decoded(t, "a", "10.1.0.1:80", map[string]string{"weight": "1", lbcfv1beta1.ParamCluster: "m1"})
	r.OwnerReferences = groupOwner("g1", "u1")
	r.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Unix(1764000000, 0).UTC())
	// Each run transforms a copy of its own, as a decode gives: own maps, slices and strings.
	const runs = 50
	copies := make([]*lbcfv1beta1.BackendRecord, runs+2)
	for i := range copies {
		copies[i] = r.DeepCopy()
	}
	if _, err := transform(copies[runs+1]); err != nil { // the interner learns the content
		t.Fatal(err)
	}
	next := 0
	allocs := testing.AllocsPerRun(runs, func() {
		_, _ = transform(copies[next])
		next++
	})
	if allocs != 0 {
		t.Fatalf("a known record's transform allocated %.1f times", allocs)
	}
	NewWithT(t).Expect(mapID(copies[0].Spec.Parameters)).To(Equal(mapID(copies[runs+1].Spec.Parameters)), "and shared its content")
}
