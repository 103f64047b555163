package watchdecode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/lbfed/lbfed/e2e/localup"
	"github.com/lbfed/lbfed/e2e/localup/testenv"
	"github.com/lbfed/lbfed/lbcf/api/crd"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

func TestMain(m *testing.M) {
	crds, err := crd.CRDs()
	if err != nil {
		panic(err)
	}
	testenv.Main(m, localup.ClusterOptions{Name: "watchdecode", CRDs: crds})
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = lbcfv1beta1.AddToScheme(s)
	return s
}()

// event is one decoded watch event, or the error that ended the stream.
type event struct {
	typ watch.EventType
	obj runtime.Object
	err error
}

// decodeAll reads a watch stream through a negotiator's JSON stream decoders, assembled as
// client-go's rest.Request.Watch assembles them.
func decodeAll(t testing.TB, n runtime.NegotiatedSerializer, stream io.Reader) []event {
	t.Helper()
	objects, events, framer, err := runtime.NewClientNegotiator(n, lbcfv1beta1.SchemeGroupVersion).StreamDecoder(runtime.ContentTypeJSON, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(io.NopCloser(stream)), events), objects)
	var out []event
	for {
		typ, obj, err := d.Decode()
		if errors.Is(err, io.EOF) {
			return out
		}
		out = append(out, event{typ, obj, err})
		if err != nil {
			return out
		}
	}
}

func standard() runtime.NegotiatedSerializer {
	return serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}
}

// capture records a watch stream of BackendRecords from the test API server: the initial
// events of records written as the controller writes them (create, status, finalizer: several
// managed-fields entries), a change, a deletion and whatever bookmarks come.
func capture(t testing.TB, records int) []byte {
	t.Helper()
	ctx := context.Background()
	cfg := testenv.Config(t)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("wd-%d", time.Now().UnixNano()%1000000)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < records; i++ {
		br := newRecord(ns, i)
		if err := c.Create(ctx, br); err != nil {
			t.Fatal(err)
		}
		br.Status = lbcfv1beta1.BackendRecordStatus{BackendAddr: fmt.Sprintf("10.1.%d.%d:80", i/250, i%250), Conditions: []lbcfv1beta1.BackendRecordCondition{
			{Type: lbcfv1beta1.BackendRegistered, Status: lbcfv1beta1.ConditionTrue, LastTransitionTime: metav1.Now(), Message: `registered "as asked"`}},
			InjectedInfo: map[string]string{"backendID": fmt.Sprintf("lb/%d", i)}}
		if err := c.Status().Update(ctx, br); err != nil {
			t.Fatal(err)
		}
	}
	// RESTClientFor: the bytes as the API server sends them, whatever the decoders.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := apiutil.RESTClientForGVK(lbcfv1beta1.SchemeGroupVersion.WithKind("BackendRecord"), true, false, cfg, serializer.NewCodecFactory(scheme), hc)
	if err != nil {
		t.Fatal(err)
	}
	body, err := rc.Get().Namespace(ns).Resource("backendrecords").
		Param("watch", "true").Param("resourceVersion", "0").Param("allowWatchBookmarks", "true").Param("timeoutSeconds", "3").
		SetHeader("Accept", runtime.ContentTypeJSON).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	go func() {
		time.Sleep(time.Second)
		br := &lbcfv1beta1.BackendRecord{}
		if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "r-0"}, br) == nil {
			br.Labels["changed"] = "yes"
			_ = c.Update(ctx, br)
			_ = c.Delete(ctx, br)
		}
	}()
	data, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDecodersAgree(t *testing.T) {
	g := NewWithT(t)
	stream := capture(t, 20)
	frames := bytes.Split(bytes.TrimSpace(stream), []byte("\n"))
	g.Expect(len(frames)).To(BeNumerically(">=", 22), "20 records, a change and a deletion")

	// Variants that the fast paths do not take, each through both decoders.
	pretty := &bytes.Buffer{}
	for _, f := range frames {
		g.Expect(json.Indent(pretty, f, "", "  ")).To(Succeed())
		pretty.WriteString("\n")
	}
	kindLast := strings.NewReplacer(`"object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendRecord",`, `"object":{`,
		`}}`, `,"kind":"BackendRecord","apiVersion":"lbcf.tkestack.io/v1beta1"}}`).Replace(string(stream))
	escaped := strings.ReplaceAll(string(stream), `"kind":"BackendRecord"`, `"kind":"Backend\u0052ecord"`)
	repeated := strings.ReplaceAll(string(stream), `"spec":{`, `"kind":"BackendGroup","spec":{`)
	// Larger than the frame reader's first buffer (32 kB), with escapes and brackets in strings.
	big := newRecord("ns", 1)
	big.TypeMeta = metav1.TypeMeta{APIVersion: lbcfv1beta1.SchemeGroupVersion.String(), Kind: "BackendRecord"}
	big.Annotations["big"] = strings.Repeat(`{"[\\x}]" `, 10000)
	bigObj, err := json.Marshal(big)
	g.Expect(err).NotTo(HaveOccurred())
	bigEvent, err := json.Marshal(metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: bigObj}})
	g.Expect(err).NotTo(HaveOccurred())
	cases := []struct {
		name   string
		stream string
		// fast: objects this package decodes itself in the stream
		fast bool
	}{
		{"as the API server sends it", string(stream), true},
		{"without separators", string(bytes.Join(frames, nil)), true},
		{"indented", pretty.String(), false},
		{"kind last", kindLast, false},
		{"kind escaped", escaped, false},
		{"kind repeated", repeated, false},
		{"error event", `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}` + "\n", true},
		{"unknown kind", `{"type":"ADDED","object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"Nothing","metadata":{"name":"x"}}}`, false},
		{"invalid object", `{"type":"ADDED","object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendRecord","metadata":{"name":}}}`, false},
		{"invalid event type", `{"type":"NONSENSE","object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendRecord"}}`, false},
		{"extra field after the object", `{"type":"ADDED","object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendRecord"},"x":{}}`, false},
		{"cut short", string(stream[:len(stream)/2]), true},
		{"larger than the read buffer", string(frames[0]) + "\n" + string(bigEvent) + "\n" + string(frames[1]), true},
		{"not an object", `"ADDED"`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			want := decodeAll(t, standard(), strings.NewReader(tc.stream))
			before := decoded.Load()
			got := decodeAll(t, newNegotiator(scheme), strings.NewReader(tc.stream))
			if tc.fast {
				g.Expect(decoded.Load()).To(BeNumerically(">", before), "decoded by this package")
			}
			// Read a byte at a time: objects span reads, and frames longer than the
			// streaming decoder's first buffer (1 kB) come in parts.
			oneByte := decodeAll(t, newNegotiator(scheme), iotest.OneByteReader(strings.NewReader(tc.stream)))
			for _, g2 := range [][]event{got, oneByte} {
				g.Expect(g2).To(HaveLen(len(want)))
				for i := range want {
					g.Expect(g2[i].typ).To(Equal(want[i].typ), "event %d", i)
					g.Expect(g2[i].err != nil).To(Equal(want[i].err != nil), "event %d: %v / %v", i, g2[i].err, want[i].err)
					g.Expect(equality.Semantic.DeepEqual(g2[i].obj, want[i].obj)).To(BeTrue(), "event %d: %#v\n%#v", i, g2[i].obj, want[i].obj)
				}
			}
		})
	}
}

func newRecord(ns string, i int) *lbcfv1beta1.BackendRecord {
	return &lbcfv1beta1.BackendRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("r-%d", i), Finalizers: []string{"lbcf.tkestack.io/deregister-backend"},
			Labels:      map[string]string{"lbcf.tkestack.io/backend-group": "bg", "lbcf.tkestack.io/lb-name": "lb"},
			Annotations: map[string]string{"lbfed.io/backend-addr": fmt.Sprintf("10.1.%d.%d:80", i/250, i%250)}},
		Spec: lbcfv1beta1.BackendRecordSpec{LBName: "lb", LBDriver: "mem", LBInfo: map[string]string{"vip": "10.250.0.1"},
			PodBackendInfo: &lbcfv1beta1.PodBackendRecord{Name: fmt.Sprintf("p-%d", i), Port: lbcfv1beta1.PortSelector{Port: 80, Protocol: "TCP"}}},
	}
}

// BenchmarkWatchDecode: a watch stream of 1,000 BackendRecords as the test API server sends them
// (each with its managed fields, ≈ 2 kB), read through client-go's JSON stream decoders and
// through this package's.
//
//	go test ./watchdecode -run XXX -bench WatchDecode
func BenchmarkWatchDecode(b *testing.B) {
	var frames [][]byte
	for _, f := range bytes.Split(bytes.TrimSpace(capture(b, 50)), []byte("\n")) {
		if bytes.HasPrefix(f, []byte(`{"type":"ADDED"`)) {
			frames = append(frames, f)
		}
	}
	stream := &bytes.Buffer{}
	for stream.Len() == 0 || len(bytes.Split(stream.Bytes(), []byte("\n"))) <= 1000 {
		for _, f := range frames {
			stream.Write(f)
			stream.WriteString("\n")
		}
	}
	events := bytes.Count(stream.Bytes(), []byte("\n"))
	for _, n := range []struct {
		name string
		n    runtime.NegotiatedSerializer
	}{{"client-go", standard()}, {"watchdecode", newNegotiator(scheme)}} {
		b.Run(n.name, func(b *testing.B) {
			b.SetBytes(int64(stream.Len()))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if got := decodeAll(b, n.n, bytes.NewReader(stream.Bytes())); len(got) != events || got[len(got)-1].err != nil {
					b.Fatalf("%d events decoded of %d", len(got), events)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*events), "us/event")
		})
	}
}

// TestCacheWatchesThroughDecoders: a cache of every namespace fills and follows its
// BackendRecord informer through this package's decoders, with the objects the API server
// holds; a cache of some namespaces is the standard one.
func TestCacheWatchesThroughDecoders(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := testenv.Config(t)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	ns := fmt.Sprintf("wdc-%d", time.Now().UnixNano()%1000000)
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for i := 0; i < 5; i++ {
		g.Expect(c.Create(ctx, newRecord(ns, i))).To(Succeed())
	}
	newCache := func(ctx context.Context, opts cache.Options) cache.Cache {
		hc, err := rest.HTTPClientFor(cfg)
		g.Expect(err).NotTo(HaveOccurred())
		mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
		g.Expect(err).NotTo(HaveOccurred())
		opts.Scheme, opts.Mapper, opts.HTTPClient = scheme, mapper, hc
		ca, err := NewCache(cfg, opts)
		g.Expect(err).NotTo(HaveOccurred())
		go func() { _ = ca.Start(ctx) }()
		return ca
	}
	direct := func() []lbcfv1beta1.BackendRecord {
		list := &lbcfv1beta1.BackendRecordList{}
		g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		return list.Items
	}
	cached := func(ca cache.Cache) func() []lbcfv1beta1.BackendRecord {
		return func() []lbcfv1beta1.BackendRecord {
			list := &lbcfv1beta1.BackendRecordList{}
			if err := ca.List(ctx, list, client.InNamespace(ns)); err != nil {
				return nil
			}
			sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name }) // as the API server lists
			return list.Items
		}
	}

	before := decoded.Load()
	allCtx, stopAll := context.WithCancel(ctx)
	all := newCache(allCtx, cache.Options{})
	g.Eventually(cached(all), 30*time.Second).Should(Equal(direct()))
	g.Expect(decoded.Load()-before).To(BeNumerically(">=", 5), "the initial events went through the decoders")
	// Followed: a new record, a change, a deletion.
	g.Expect(c.Create(ctx, newRecord(ns, 5))).To(Succeed())
	br := &lbcfv1beta1.BackendRecord{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "r-1"}, br)).To(Succeed())
	br.Spec.LBInfo = map[string]string{"vip": "10.250.0.2"}
	g.Expect(c.Update(ctx, br)).To(Succeed())
	g.Expect(c.Delete(ctx, &lbcfv1beta1.BackendRecord{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r-2"}})).To(Succeed())
	g.Eventually(func() []string { return versions(cached(all)()) }, 30*time.Second).Should(Equal(versions(direct())))
	g.Expect(cached(all)()).To(Equal(direct()))
	g.Expect(direct()).To(HaveLen(6), "r-2 waits on its finalizer")

	// Stopped, and quiet (its bookmarks are decoded too), before the next cache starts.
	stopAll()
	g.Eventually(func() bool { n := decoded.Load(); time.Sleep(time.Second); return decoded.Load() == n }, 30*time.Second).Should(BeTrue())
	before = decoded.Load()
	some := newCache(ctx, cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}})
	g.Eventually(cached(some), 30*time.Second).Should(Equal(direct()))
	g.Expect(decoded.Load()).To(Equal(before), "a cache of some namespaces is the standard one")
}

func versions(items []lbcfv1beta1.BackendRecord) (out []string) {
	for _, br := range items {
		out = append(out, br.Name+"@"+br.ResourceVersion)
	}
	return out
}
