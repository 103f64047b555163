// Package intern makes cached objects share the content they repeat. Tens of thousands of
// BackendRecords, and the groups and load balancers they come from, repeat the same maps,
// strings and slices; decoded separately, those copies were most of the controller's live heap.
// RecordInterner supplies the cache transforms that share them (lbcf/controller's CacheOptions
// installs them), MapInterner shares string maps for other holders that only read them. What
// the tables keep alive themselves is bounded: two generations of entries.
package intern

import (
	"slices"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Generation sizes of the intern tables (see internTable): a value goes on being shared while
// it is met again within about two generations; past that it is copied again, which costs
// sharing, never correctness. A fleet's working set is a few maps per load balancer and per
// group and member (lbInfo, lbAttributes, parameters): 10,000 load balancers and groups over two
// members are ≈ 40,000 maps. With one table of 4,096 that started over, every record update
// re-copied its maps (43 MB of the controller's 510 MB live heap at 70,000 of 100,000 records).
const (
	internedMapsGeneration    = 1 << 15
	internedStringsGeneration = 1 << 16
)

// internTable maps keys to shared values in two generations: a hit in the older one moves the
// entry to the current one, and a full current generation becomes the older one (dropping the
// one before). What the table alone keeps alive is bounded by two generations.
type internTable[V any] struct {
	size     int
	cur, old map[string]V
}

func (t *internTable[V]) get(k string) (V, bool) {
	if v, ok := t.cur[k]; ok {
		return v, true
	}
	v, ok := t.old[k]
	if ok {
		t.put(k, v)
	}
	return v, ok
}

// getKey is get for a key being built: looked up without becoming a string (the compiler does
// not allocate for a map index by string(k)).
func (t *internTable[V]) getKey(k []byte) (V, bool) {
	if v, ok := t.cur[string(k)]; ok {
		return v, true
	}
	if _, ok := t.old[string(k)]; !ok {
		var zero V
		return zero, false
	}
	return t.get(string(k)) // moves the entry to the current generation
}

func (t *internTable[V]) put(k string, v V) {
	if t.cur == nil || len(t.cur) >= t.size {
		t.old, t.cur = t.cur, make(map[string]V)
	}
	t.cur[k] = v
}

// RecordInterner makes cached BackendRecords share what they have in common. Tens of thousands
// of records repeat the same lbInfo, lbAttributes and parameters maps and the same label keys,
// names and condition strings; decoded separately, those copies were most of the controller's
// live heap (30,000 records: see BenchmarkControllerRSS in package federation). Sharing is safe
// because cached objects are read-only: Get and List hand out deep copies, and the callers that
// read with UnsafeDisableDeepCopy (lists, the owner check, the record reconciler until it copies
// the record to change it) only read; the test suites check every cached object unchanged at the
// end of every test (testenv.UnchangedCache).
type RecordInterner struct {
	// backendLabel is the label naming a record's backend and the value its group gives it
	// ("" for a record that names no backend); addrAnnotation the annotation holding the address
	// a record was created with. Both are the engine's, which creates the records.
	backendLabel   func(*lbcfv1beta1.BackendRecord) (key, value string)
	addrAnnotation string

	mu      sync.Mutex
	scratch keyScratch
	maps    internTable[map[string]string]
	strs    internTable[string]
	// Whole slices the records of a group (owner), of a driver (finalizers) or of one burst of
	// registrations (conditions alike to the nanosecond: see conditions) have in common:
	// ≈ 210 bytes a record decoded separately (BenchmarkCachedRecordBytes).
	refs  internTable[[]metav1.OwnerReference]
	fins  internTable[[]string]
	conds internTable[[]lbcfv1beta1.BackendRecordCondition]
}

// NewRecordInterner returns an interner for records whose backend label backendLabel names and
// whose creation address annotation is addrAnnotation.
func NewRecordInterner(backendLabel func(*lbcfv1beta1.BackendRecord) (key, value string), addrAnnotation string) *RecordInterner {
	return &RecordInterner{backendLabel: backendLabel, addrAnnotation: addrAnnotation,
		maps:  internTable[map[string]string]{size: internedMapsGeneration},
		strs:  internTable[string]{size: internedStringsGeneration},
		refs:  internTable[[]metav1.OwnerReference]{size: internedMapsGeneration},
		fins:  internTable[[]string]{size: internedMapsGeneration},
		conds: internTable[[]lbcfv1beta1.BackendRecordCondition]{size: internedMapsGeneration}}
}

// keyOf appends parts to key as one unambiguous key: each length-prefixed.
func keyOf(key []byte, parts ...string) []byte {
	for _, s := range parts {
		key = strconv.AppendInt(key, int64(len(s)), 10)
		key = append(key, ':')
		key = append(key, s...)
	}
	return key
}

// keyScratch holds the buffers keys are built in, reused under the interner's lock: a key is
// looked up without being allocated, and only a new entry's key becomes a string. Built as new
// strings, the keys of 100,000 records' maps and slices were 182 MB of the 2.9 GB a restart's
// resync allocated (heap profile of BenchmarkRestartResync's shape), each a collection's worth
// of garbage under a GOMEMLIMIT near the live heap.
type keyScratch struct {
	key   []byte
	names []string
}

// skipped tells whether k is the key skip names ("" names none: a map may have an empty key).
func skipped(k, skip string) bool { return skip != "" && k == skip }

// mapKey is m's content without the key skip ("" skips nothing) as one key: its pairs in key
// order, each string length-prefixed so that the key is unambiguous whatever the strings
// contain. The key is valid until the next call.
func (s *keyScratch) mapKey(m map[string]string, skip string) []byte {
	s.names = s.names[:0]
	for k := range m {
		if !skipped(k, skip) {
			s.names = append(s.names, k)
		}
	}
	slices.Sort(s.names)
	s.key = s.key[:0]
	for _, k := range s.names {
		s.key = keyOf(s.key, k, m[k])
	}
	clear(s.names) // holds no map's strings past the call
	return s.key
}

// boolKey tells nil, false and true apart.
func boolKey(p *bool) string {
	switch {
	case p == nil:
		return ""
	case *p:
		return "t"
	}
	return "f"
}

// shareSlice returns t's shared copy of s (nil and empty stay as they are). key appends an
// element's content to the slice's key (built in scratch); own interns an element's strings the
// first time s is kept.
func shareSlice[T any](t *internTable[[]T], scratch *keyScratch, s []T, key func([]byte, *T) []byte, own func(*T)) []T {
	if len(s) == 0 {
		return s
	}
	scratch.key = scratch.key[:0]
	for i := range s {
		scratch.key = key(scratch.key, &s[i])
	}
	if v, ok := t.getKey(scratch.key); ok {
		return v
	}
	for i := range s {
		own(&s[i])
	}
	t.put(string(scratch.key), s)
	return s
}

// ownerRefs returns the shared copy of refs.
func (in *RecordInterner) ownerRefs(refs []metav1.OwnerReference) []metav1.OwnerReference {
	return shareSlice(&in.refs, &in.scratch, refs, func(b []byte, r *metav1.OwnerReference) []byte {
		return keyOf(b, r.APIVersion, r.Kind, r.Name, string(r.UID), boolKey(r.Controller), boolKey(r.BlockOwnerDeletion))
	}, func(r *metav1.OwnerReference) {
		r.APIVersion, r.Kind, r.Name = in.str(r.APIVersion), in.str(r.Kind), in.str(r.Name)
		r.UID = types.UID(in.str(string(r.UID)))
	})
}

// finalizers returns the shared copy of fins.
func (in *RecordInterner) finalizers(fins []string) []string {
	return shareSlice(&in.fins, &in.scratch, fins, func(b []byte, f *string) []byte { return keyOf(b, *f) },
		func(f *string) { *f = in.str(*f) })
}

// conditions returns the shared copy of conds. Times are compared to the nanosecond and by
// location: a shared copy reads exactly as the record's own.
func (in *RecordInterner) conditions(conds []lbcfv1beta1.BackendRecordCondition) []lbcfv1beta1.BackendRecordCondition {
	return shareSlice(&in.conds, &in.scratch, conds, func(b []byte, c *lbcfv1beta1.BackendRecordCondition) []byte {
		t := c.LastTransitionTime.Time
		b = keyOf(b, string(c.Type), string(c.Status), t.Location().String(), strconv.FormatBool(t.IsZero()), c.Reason, c.Message)
		return append(strconv.AppendInt(b, t.UnixNano(), 10), ';') // a number ends at ';'
	}, func(c *lbcfv1beta1.BackendRecordCondition) {
		c.Type = lbcfv1beta1.BackendRecordConditionType(in.str(string(c.Type)))
		c.Status = lbcfv1beta1.ConditionStatus(in.str(string(c.Status)))
		c.Reason, c.Message = in.str(c.Reason), in.str(c.Message)
	})
}

// str returns the shared copy of s.
func (in *RecordInterner) str(s string) string {
	if s == "" {
		return s
	}
	if v, ok := in.strs.get(s); ok {
		return v
	}
	in.strs.put(s, s)
	return s
}

// stringMap returns the shared copy of m (nil stays nil: "absent" and "empty" differ on the wire).
func (in *RecordInterner) stringMap(m map[string]string) map[string]string {
	return in.stringMapWithout(m, "")
}

// stringMapWithout returns the shared copy of m without the key skip ("" skips nothing; nil
// stays nil). m itself is left as it is.
func (in *RecordInterner) stringMapWithout(m map[string]string, skip string) map[string]string {
	if m == nil {
		return nil
	}
	key := in.scratch.mapKey(m, skip)
	if v, ok := in.maps.getKey(key); ok {
		return v
	}
	shared := make(map[string]string, len(m))
	for k, v := range m {
		if !skipped(k, skip) {
			shared[in.str(k)] = in.str(v)
		}
	}
	in.maps.put(string(key), shared)
	return shared
}

// MapInterner shares equal string maps among the holders that only read them (safe for
// concurrent use). What it keeps alive itself is bounded (two generations of size maps; see
// internTable); a map met again after that is shared anew, which costs sharing, never
// correctness.
type MapInterner struct {
	mu      sync.Mutex
	scratch keyScratch
	maps    internTable[map[string]string]
}

// NewMapInterner returns an interner whose generations hold size maps.
func NewMapInterner(size int) *MapInterner {
	return &MapInterner{maps: internTable[map[string]string]{size: size}}
}

// Share returns the shared map equal to m (m itself the first time; nil stays nil). The caller
// must not change m afterwards, nor the map returned.
func (in *MapInterner) Share(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	key := in.scratch.mapKey(m, "")
	if v, ok := in.maps.getKey(key); ok {
		return v
	}
	in.maps.put(string(key), m)
	return m
}

// labels keeps the map (a record's labels include its own pod or address) but shares the keys
// and the values that repeat: driver, load balancer, group and cluster names.
func (in *RecordInterner) labels(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		switch k {
		case lbcfv1beta1.LabelPodName, lbcfv1beta1.LabelStaticAddr, lbcfv1beta1.LabelServiceName:
			out[in.str(k)] = v
		default:
			out[in.str(k)] = in.str(v)
		}
	}
	return out
}

// sharedLabels returns the labels a cached record keeps when its backend label is the one the
// group gives it (backendLabel), or is absent: the others, shared with every record of the same
// driver, load balancer, group and cluster. Nothing reads the backend label from the cache, and a
// record's own map was ≈ 330 bytes of every cached record. ok is false for other labels.
//
// The transform must be idempotent: an informer's streamed initial list passes every object
// through it twice (client-go's watch-list store, then the queue's Replace).
func (in *RecordInterner) sharedLabels(br *lbcfv1beta1.BackendRecord) (map[string]string, bool) {
	k, v := in.backendLabel(br)
	if have, ok := br.Labels[k]; k == "" || ok && have != v {
		return nil, false
	}
	// Looked up without the backend label, m unchanged: no clone of m for a known map.
	return in.stringMapWithout(br.Labels, k), true
}

// Transform is a cache transform for BackendRecords; other objects pass unchanged.
func (in *RecordInterner) Transform(o any) (any, error) {
	br, ok := o.(*lbcfv1beta1.BackendRecord)
	if !ok {
		return o, nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	br.ManagedFields = nil
	br.APIVersion, br.Kind = in.str(br.APIVersion), in.str(br.Kind)
	br.Namespace = in.str(br.Namespace)
	if shared, ok := in.sharedLabels(br); ok {
		br.Labels = shared
	} else {
		br.Labels = in.labels(br.Labels)
	}
	// The address a record was created with (addrAnnotation) is read only until the status
	// names one (the engine's recordAddr): from then on the cache does not keep it, nor its map
	// (≈ 330 bytes a record). Otherwise the annotation map is the record's own, kept as it is:
	// interned, every such map was a new entry (100,000 records: as many), which pushed the maps
	// that are shared out of the table.
	if a := br.Annotations[in.addrAnnotation]; a != "" && a == br.Status.BackendAddr {
		delete(br.Annotations, in.addrAnnotation)
	}
	switch _, own := br.Annotations[in.addrAnnotation]; {
	case len(br.Annotations) == 0:
		br.Annotations = nil
	case !own:
		br.Annotations = in.stringMap(br.Annotations)
	}
	br.Finalizers = in.finalizers(br.Finalizers)
	br.OwnerReferences = in.ownerRefs(br.OwnerReferences)
	s := &br.Spec
	s.LBName, s.LBDriver = in.str(s.LBName), in.str(s.LBDriver)
	s.LBInfo = in.stringMap(s.LBInfo)
	s.LBAttributes = in.stringMap(s.LBAttributes)
	s.Parameters = in.stringMap(s.Parameters)
	if s.EnsurePolicy != nil {
		s.EnsurePolicy.Policy = lbcfv1beta1.EnsurePolicyType(in.str(string(s.EnsurePolicy.Policy)))
	}
	if s.PodBackendInfo != nil {
		// The pod name label and the spec name are the same string: keep one.
		if v := br.Labels[lbcfv1beta1.LabelPodName]; v == s.PodBackendInfo.Name {
			s.PodBackendInfo.Name = v
		}
	}
	br.Status.Conditions = in.conditions(br.Status.Conditions)
	// InjectedInfo is left alone: drivers usually answer per backend, so it rarely repeats.
	return br, nil
}

// GroupTransform is a cache transform for BackendGroups: their managed fields are dropped and
// what groups repeat — pod selectors, parameters, condition and member strings — is shared.
// Measured on 100 groups of BenchmarkRestartResync's shape from the test API server, decoded 20
// times each: 2,136 bytes a group with managed fields dropped alone, 1,575 with this transform.
// Other objects pass unchanged.
func (in *RecordInterner) GroupTransform(o any) (any, error) {
	bg, ok := o.(*lbcfv1beta1.BackendGroup)
	if !ok {
		return o, nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	bg.ManagedFields = nil
	bg.APIVersion, bg.Kind, bg.Namespace = in.str(bg.APIVersion), in.str(bg.Kind), in.str(bg.Namespace)
	if p := bg.Spec.Pods; p != nil && p.ByLabel != nil {
		p.ByLabel.Selector = in.stringMap(p.ByLabel.Selector)
	}
	bg.Spec.Parameters = in.stringMap(bg.Spec.Parameters)
	for i := range bg.Status.Conditions {
		c := &bg.Status.Conditions[i]
		c.Type, c.Reason, c.Message = in.str(c.Type), in.str(c.Reason), in.str(c.Message)
		c.Status = metav1.ConditionStatus(in.str(string(c.Status)))
	}
	for i := range bg.Status.Members {
		m := &bg.Status.Members[i]
		m.Name, m.Reason, m.Message = in.str(m.Name), in.str(m.Reason), in.str(m.Message)
		m.State = lbcfv1beta1.MemberState(in.str(string(m.State)))
	}
	return bg, nil
}

// LoadBalancerTransform is a cache transform for LoadBalancers: managed fields dropped, their
// repeated strings and attribute maps shared. Other objects pass unchanged.
func (in *RecordInterner) LoadBalancerTransform(o any) (any, error) {
	lb, ok := o.(*lbcfv1beta1.LoadBalancer)
	if !ok {
		return o, nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	lb.ManagedFields = nil
	lb.APIVersion, lb.Kind, lb.Namespace = in.str(lb.APIVersion), in.str(lb.Kind), in.str(lb.Namespace)
	lb.Finalizers = in.finalizers(lb.Finalizers)
	lb.Spec.LBDriver = in.str(lb.Spec.LBDriver)
	lb.Spec.Attributes = in.stringMap(lb.Spec.Attributes)
	lb.Status.LastSyncedAttributes = in.stringMap(lb.Status.LastSyncedAttributes)
	for i := range lb.Status.Conditions {
		c := &lb.Status.Conditions[i]
		c.Type = lbcfv1beta1.LoadBalancerConditionType(in.str(string(c.Type)))
		c.Status = lbcfv1beta1.ConditionStatus(in.str(string(c.Status)))
		c.Reason, c.Message = in.str(c.Reason), in.str(c.Message)
	}
	return lb, nil
}
