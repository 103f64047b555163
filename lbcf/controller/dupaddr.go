package controller

import (
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// Several backends may have one address on one load balancer: members with overlapping pod
// CIDRs, node addresses reused across clusters, two groups listing the same static address. The
// device holds the address once, so deregistering it for one record would take it away from the
// others, which still say Registered. Such records are reported (a record condition, events, a
// group condition), and a record going away skips deregisterBackend while another live record of
// the same load balancer holds the address registered: the last holder deregisters it.

const (
	// DuplicateAddress is a BackendRecord condition (lbfed's, beside LBCF's Registered): True
	// while other live records of the same load balancer hold the same address.
	DuplicateAddress lbcfv1beta1.BackendRecordConditionType = "DuplicateAddress"
	// GroupDuplicateAddresses is a BackendGroup condition: True while some of its records share
	// their address with other records of the same load balancer.
	GroupDuplicateAddresses = "DuplicateAddresses"
)

// recordAddr is the address a record holds (or will hold) on its load balancer, "" when unknown.
func recordAddr(br *lbcfv1beta1.BackendRecord) string {
	if br.Status.BackendAddr != "" {
		return br.Status.BackendAddr
	}
	if a := br.Annotations[AnnotationBackendAddr]; a != "" {
		return a
	}
	if br.Spec.StaticAddr != nil {
		return *br.Spec.StaticAddr
	}
	return ""
}

// lbAddrKey identifies an address on a load balancer: records of groups in several namespaces
// may use one shared ("lbcf-") load balancer.
func lbAddrKey(ns, lbName, addr string) string { return sharedKey(ns, lbName).String() + "|" + addr }

// recordLBAddrKey is the index key of a record, "" when it has no address yet.
func recordLBAddrKey(br *lbcfv1beta1.BackendRecord) string {
	addr := recordAddr(br)
	if addr == "" {
		return ""
	}
	return lbAddrKey(br.Namespace, br.Spec.LBName, addr)
}

// lbAddrBuckets is the number of values of the address index. Indexed by its own key, nearly
// every record had a set of its own in the cache's index, twice (controller-runtime also keeps
// an all-namespaces copy of every value): 200,000 one-key sets and their value strings, ≈ 55 MB
// of the controller's live heap at 100,000 records. In buckets, a lookup reads the bucket's
// records (≈ 25 at 100,000) and keeps those of the same key.
const lbAddrBuckets = 4096

// lbAddrSeed seeds the buckets' hash: the index lives in this process only.
var lbAddrSeed = maphash.MakeSeed()

// lbAddrBucket is the index value of an lbAddrKey: its hash modulo lbAddrBuckets, in hex.
func lbAddrBucket(key string) string {
	return strconv.FormatUint(maphash.String(lbAddrSeed, key)%lbAddrBuckets, 16)
}

// indexRecordLBAddr names the address index. Where the cache has one store for records (the
// cache of every namespace, as the controllers run), it is an index of the record informer's own
// store, read in place: a List by field index copied each of the bucket's records into a new list
// (by reflection, ≈ 11 KB a lookup at 100,000 records: 12 % of the CPU of a restart's resync
// there). A cache of some namespaces has a store per namespace: there it is a field index
// (IndexField, across namespaces), listed.
const indexRecordLBAddr = "lbfed.lbAddr"

// recordLBAddrIndex indexes every record with an address by the bucket of its lbAddrKey: records
// being deregistered delay a new registration of their address (addrBeingDeregistered), live
// ones keep it on the device.
func recordLBAddrIndex(o any) ([]string, error) {
	br, ok := o.(*lbcfv1beta1.BackendRecord)
	if !ok {
		return nil, nil
	}
	if key := recordLBAddrKey(br); key != "" {
		return []string{lbAddrBucket(key)}, nil
	}
	return nil, nil
}

// addrBuckets reads the records of an address bucket, read-only views of the cache.
type addrBuckets interface {
	bucket(ctx context.Context, name string) ([]*lbcfv1beta1.BackendRecord, error)
}

// storeBuckets reads the record informer's store.
type storeBuckets struct{ store toolscache.Indexer }

func (s storeBuckets) bucket(_ context.Context, name string) ([]*lbcfv1beta1.BackendRecord, error) {
	items, err := s.store.ByIndex(indexRecordLBAddr, name)
	if err != nil {
		return nil, err
	}
	out := make([]*lbcfv1beta1.BackendRecord, 0, len(items))
	for _, item := range items {
		if br, ok := item.(*lbcfv1beta1.BackendRecord); ok {
			out = append(out, br)
		}
	}
	return out, nil
}

// listBuckets lists by the field index (caches of some namespaces).
type listBuckets struct{ reader client.Reader }

func (l listBuckets) bucket(ctx context.Context, name string) ([]*lbcfv1beta1.BackendRecord, error) {
	list := &lbcfv1beta1.BackendRecordList{}
	if err := l.reader.List(ctx, list, client.MatchingFields{indexRecordLBAddr: name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*lbcfv1beta1.BackendRecord, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// addrIndex sets up the address index (once per manager, before it starts) and returns its reader.
func addrIndex(ctx context.Context, mgr ctrl.Manager) (addrBuckets, error) {
	inf, err := mgr.GetCache().GetInformer(ctx, &lbcfv1beta1.BackendRecord{})
	if err != nil {
		return nil, fmt.Errorf("record informer: %w", err)
	}
	if withStore, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
		if err := inf.AddIndexers(toolscache.Indexers{indexRecordLBAddr: recordLBAddrIndex}); err != nil {
			return nil, fmt.Errorf("index records by address: %w", err)
		}
		return storeBuckets{withStore.GetIndexer()}, nil
	}
	if err := IndexField(ctx, mgr.GetCache(), &lbcfv1beta1.BackendRecord{}, indexRecordLBAddr, AcrossNamespaceLookups, func(o client.Object) []string {
		keys, _ := recordLBAddrIndex(o)
		return keys
	}); err != nil {
		return nil, fmt.Errorf("index records by address: %w", err)
	}
	return listBuckets{mgr.GetClient()}, nil
}

// sameAddr lists the other records holding br's address on the same load balancer (same lbInfo:
// the same device), read-only views of the cache.
func (r *backendRecordReconciler) sameAddr(ctx context.Context, br *lbcfv1beta1.BackendRecord) ([]*lbcfv1beta1.BackendRecord, error) {
	key := recordLBAddrKey(br)
	if key == "" {
		return nil, nil
	}
	addr, lb := recordAddr(br), sharedKey(br.Namespace, br.Spec.LBName)
	bucket, err := r.addrs.bucket(ctx, lbAddrBucket(key))
	if err != nil {
		return nil, fmt.Errorf("records by address: %w", err)
	}
	var out []*lbcfv1beta1.BackendRecord
	for _, o := range bucket {
		if o.UID == br.UID || recordAddr(o) != addr || sharedKey(o.Namespace, o.Spec.LBName) != lb {
			continue // the bucket's other keys
		}
		if maps.Equal(o.Spec.LBInfo, br.Spec.LBInfo) {
			out = append(out, o)
		}
	}
	return out, nil
}

func live(list []*lbcfv1beta1.BackendRecord) []*lbcfv1beta1.BackendRecord {
	var out []*lbcfv1beta1.BackendRecord
	for _, o := range list {
		if o.DeletionTimestamp == nil {
			out = append(out, o)
		}
	}
	return out
}

// duplicateCondition returns br's DuplicateAddress condition when it must change (nil
// otherwise), and the live records it shares its address with. Records that never shared an
// address get no condition at all: no write for them.
func (r *backendRecordReconciler) duplicateCondition(ctx context.Context, br *lbcfv1beta1.BackendRecord) (*lbcfv1beta1.BackendRecordCondition, []*lbcfv1beta1.BackendRecord, error) {
	others, err := r.sameAddr(ctx, br)
	if err != nil {
		return nil, nil, err
	}
	others = live(others)
	cur := br.Status.Condition(DuplicateAddress)
	switch {
	case len(others) > 0:
		c := &lbcfv1beta1.BackendRecordCondition{Type: DuplicateAddress, Status: lbcfv1beta1.ConditionTrue, Reason: "SharedAddress",
			Message: fmt.Sprintf("address %s of load balancer %s is also held by %s; the last holder deregisters it", recordAddr(br), br.Spec.LBName, describe(others))}
		if cur != nil && cur.Status == c.Status && cur.Message == c.Message {
			return nil, others, nil
		}
		return c, others, nil
	case cur != nil && cur.Status != lbcfv1beta1.ConditionFalse:
		return &lbcfv1beta1.BackendRecordCondition{Type: DuplicateAddress, Status: lbcfv1beta1.ConditionFalse, Reason: "SoleHolder",
			Message: fmt.Sprintf("no other record holds address %s", recordAddr(br))}, nil, nil
	}
	return nil, nil, nil
}

// describe names records (and their member clusters), a few of them.
func describe(list []*lbcfv1beta1.BackendRecord) string {
	names := make([]string, 0, len(list))
	for _, o := range list {
		n := o.Namespace + "/" + o.Name
		if c := o.Labels[lbcfv1beta1.LabelCluster]; c != "" {
			n += " (cluster " + c + ")"
		}
		names = append(names, n)
	}
	sort.Strings(names)
	const most = 5
	if len(names) > most {
		return fmt.Sprintf("%s and %d more records", strings.Join(names[:most], ", "), len(names)-most)
	}
	return "record " + strings.Join(names, ", ")
}

// reportDuplicate tells a change of br's DuplicateAddress condition: events on the record and
// its group when the address becomes shared, and a wake-up of the other holders, so that their
// own condition follows.
func (r *backendRecordReconciler) reportDuplicate(ctx context.Context, br *lbcfv1beta1.BackendRecord, c *lbcfv1beta1.BackendRecordCondition, others []*lbcfv1beta1.BackendRecord) {
	if c.Status == lbcfv1beta1.ConditionTrue {
		r.Recorder.Eventf(br, nil, corev1.EventTypeWarning, "DuplicateAddress", "EnsureBackend", "%s", c.Message)
		if ref := metav1.GetControllerOf(br); ref != nil && ref.Kind == lbcfv1beta1.KindBackendGroup {
			bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: br.Namespace, Name: ref.Name, UID: ref.UID}}
			r.Recorder.Eventf(bg, nil, corev1.EventTypeWarning, "DuplicateAddress", "Sync", "record %s: %s", br.Name, c.Message)
		}
	}
	// A little later: br's address may have reached the cache they read only just now.
	time.AfterFunc(time.Second, func() { r.wakeAll(ctx, others) })
}

func (r *backendRecordReconciler) wakeAll(ctx context.Context, list []*lbcfv1beta1.BackendRecord) {
	for _, o := range list {
		r.wakeups.Wake(ctx, types.NamespacedName{Namespace: o.Namespace, Name: o.Name})
	}
}

// heldByAnother returns the live records that hold br's address registered on the same load
// balancer: while there is one, br's deregistration must not take the address off the device.
func (r *backendRecordReconciler) heldByAnother(ctx context.Context, br *lbcfv1beta1.BackendRecord) ([]*lbcfv1beta1.BackendRecord, []*lbcfv1beta1.BackendRecord, error) {
	others, err := r.sameAddr(ctx, br)
	if err != nil {
		return nil, nil, err
	}
	var holders []*lbcfv1beta1.BackendRecord
	for _, o := range live(others) {
		if o.IsRegistered() {
			holders = append(holders, o)
		}
	}
	return holders, live(others), nil
}
