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

	"github.com/lbfed/lbfed/lbcf/api/crd"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
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
	// Each object's kind and apiVersion moved to its end (the event's last "}}").
	kindLast := &strings.Builder{}
	for _, f := range frames {
		first := `"object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendRecord",`
		if rest, ok := strings.CutSuffix(string(f), "}}"); ok && strings.Contains(rest, first) {
			f = []byte(strings.Replace(rest, first, `"object":{`, 1) + `,"kind":"BackendRecord","apiVersion":"lbcf.tkestack.io/v1beta1"}}`)
		}
		kindLast.Write(f)
		kindLast.WriteString("\n")
	}
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
		// fast: objects this package decodes itself in the stream; valid: every event decodes
		fast, valid bool
	}{
		{"as the API server sends it", string(stream), true, true},
		{"without separators", string(bytes.Join(frames, nil)), true, true},
		{"indented", pretty.String(), false, true},
		{"kind last", kindLast.String(), false, true},
		{"kind escaped", escaped, false, true},
		{"kind repeated", repeated, false, true},
		{"error event", `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}` + "\n", true, false},
		{"unknown kind", `{"type":"ADDED","object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"Nothing","metadata":{"name":"x"}}}`, false, false},
		{"invalid object", `{"type":"ADDED","object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendRecord","metadata":{"name":}}}`, false, false},
		{"invalid event type", `{"type":"NONSENSE","object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendRecord"}}`, false, false},
		{"extra field after the object", `{"type":"ADDED","object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendRecord"},"x":{}}`, false, false},
		{"cut short", string(stream[:len(stream)/2]), true, false},
		{"larger than the read buffer", string(frames[0]) + "\n" + string(bigEvent) + "\n" + string(frames[1]), true, true},
		{"not an object", `"ADDED"`, false, false},
		// Managed fields as NewCacheWithoutManagedFields' decoders find them, or not.
		{"managed fields alone in metadata", `{"type":"ADDED","object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendRecord","metadata":{"managedFields":[{"manager":"m"}]}}}`, true, true},
		{"managed fields last", `{"type":"ADDED","object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendRecord","metadata":{"name":"x","managedFields":[{"manager":"m"}]},"spec":{"lbName":"lb"}}}`, true, true},
		{"managed fields before a trailing comma", `{"type":"ADDED","object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendRecord","metadata":{"managedFields":[],}}}`, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			want := decodeAll(t, standard(), strings.NewReader(tc.stream))
			if tc.valid {
				g.Expect(want[len(want)-1].err).NotTo(HaveOccurred(), "a stream of valid events")
			}
			before := decoded.Load()
			got := decodeAll(t, newNegotiator(scheme, false), strings.NewReader(tc.stream))
			if tc.fast {
				g.Expect(decoded.Load()).To(BeNumerically(">", before), "decoded by this package")
			}
			// Read a byte at a time: objects span reads, and frames longer than the
			// streaming decoder's first buffer (1 kB) come in parts.
			oneByte := decodeAll(t, newNegotiator(scheme, false), iotest.OneByteReader(strings.NewReader(tc.stream)))
			agree := func(want []event, got ...[]event) {
				for _, g2 := range got {
					g.Expect(g2).To(HaveLen(len(want)))
					for i := range want {
						g.Expect(g2[i].typ).To(Equal(want[i].typ), "event %d", i)
						g.Expect(g2[i].err != nil).To(Equal(want[i].err != nil), "event %d: %v / %v", i, g2[i].err, want[i].err)
						g.Expect(equality.Semantic.DeepEqual(g2[i].obj, want[i].obj)).To(BeTrue(), "event %d: %#v\n%#v", i, g2[i].obj, want[i].obj)
					}
				}
			}
			agree(want, got, oneByte)
			// Without managed fields: the same events, every object's managed fields left out.
			for _, ev := range want {
				if m, ok := ev.obj.(metav1.Object); ok {
					m.SetManagedFields(nil)
				}
			}
			before = cut.Load()
			agree(want, decodeAll(t, newNegotiator(scheme, true), strings.NewReader(tc.stream)),
				decodeAll(t, newNegotiator(scheme, true), iotest.OneByteReader(strings.NewReader(tc.stream))))
			if tc.fast && strings.Contains(tc.stream, `"managedFields":[`) {
				g.Expect(cut.Load()).To(BeNumerically(">", before), "managed fields cut before the decode")
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
// through this package's, with and without the managed fields.
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
	}{{"client-go", standard()}, {"watchdecode", newNegotiator(scheme, false)}, {"without-managed-fields", newNegotiator(scheme, true)}} {
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
	newCache := func(ctx context.Context, opts cache.Options, newCache ...cache.NewCacheFunc) cache.Cache {
		ca, err := append(newCache, NewCache)[0](cfg, withClients(g, cfg, opts))
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

	// Without managed fields: the same objects, their managed fields left out before the decode.
	before = cut.Load()
	without := newCache(ctx, cache.Options{}, NewCacheWithoutManagedFields)
	stripped := direct()
	for i := range stripped {
		g.Expect(stripped[i].ManagedFields).NotTo(BeEmpty())
		stripped[i].ManagedFields = nil
	}
	g.Eventually(cached(without), 30*time.Second).Should(Equal(stripped))
	g.Expect(cut.Load() - before).To(BeNumerically(">=", 6))
}

// withClients is opts with the scheme, an HTTP client and a REST mapper for cfg, as a manager
// gives its cache (this package's decoders need all three).
func withClients(g Gomega, cfg *rest.Config, opts cache.Options) cache.Options {
	hc, err := rest.HTTPClientFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	g.Expect(err).NotTo(HaveOccurred())
	opts.Scheme, opts.Mapper, opts.HTTPClient = scheme, mapper, hc
	return opts
}

func versions(items []lbcfv1beta1.BackendRecord) (out []string) {
	for _, br := range items {
		out = append(out, br.Name+"@"+br.ResourceVersion)
	}
	return out
}

// TestManagedFieldsLeftOutUnread: the one way the decoders without managed fields differ from
// client-go's. Managed fields left out are framed, not decoded, so a value of the wrong type or
// invalid within its brackets is no error (the API server validates them on every write and
// never sends one); the rest of the object is decoded and validated as before.
func TestManagedFieldsLeftOutUnread(t *testing.T) {
	for _, value := range []string{`"none"`, `[{"manager":}]`, `[{"time":"not a time"}]`} {
		g := NewWithT(t)
		stream := `{"type":"ADDED","object":{"apiVersion":"lbcf.tkestack.io/v1beta1","kind":"BackendRecord","metadata":{"managedFields":` + value + `,"name":"x"}}}`
		g.Expect(decodeAll(t, standard(), strings.NewReader(stream))[0].err).To(HaveOccurred(), value)
		got := decodeAll(t, newNegotiator(scheme, true), strings.NewReader(stream))
		g.Expect(got).To(HaveLen(1))
		g.Expect(got[0].err).NotTo(HaveOccurred(), value)
		g.Expect(got[0].obj.(*lbcfv1beta1.BackendRecord).Name).To(Equal("x"))
	}
}

// TestManagedFieldsSpan: metadata.managedFields are cut, with one comma, from objects written as
// the API server writes them, and only there.
func TestManagedFieldsSpan(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     string // "" when nothing is cut
	}{
		{"between members", `{"kind":"K","metadata":{"labels":{"a":"{[\"}"},"managedFields":[{"f":{"x":{}}}],"name":"n"},"spec":{}}`,
			`{"kind":"K","metadata":{"labels":{"a":"{[\"}"},"name":"n"},"spec":{}}`},
		{"first", `{"metadata":{"managedFields":[],"name":"n"}}`, `{"metadata":{"name":"n"}}`},
		{"last", `{"metadata":{"generation":2,"managedFields":null}}`, `{"metadata":{"generation":2}}`},
		{"alone", `{"metadata":{"managedFields":[{}]},"spec":1}`, `{"metadata":{},"spec":1}`},
		{"after spec", `{"spec":{"managedFields":[]},"metadata":{"managedFields":[]}}`, `{"spec":{"managedFields":[]},"metadata":{}}`},
		{"only in spec", `{"metadata":{"name":"n"},"spec":{"managedFields":[]}}`, ""},
		{"no metadata", `{"kind":"K"}`, ""},
		{"metadata not an object", `{"metadata":[{"managedFields":[]}]}`, ""},
		{"spaces", `{"metadata": {"managedFields":[]}}`, ""},
		{"escaped key", `{"metadata":{"managed\u0046ields":[]}}`, ""},
		{"unbalanced value", `{"metadata":{"managedFields":[{]}`, ""},
		{"value only framed", `{"metadata":{"managedFields":[{"a"}]}}`, `{"metadata":{}}`},
		{"trailing comma", `{"metadata":{"managedFields":[],}}`, ""},
		{"cut short", `{"metadata":{"managedFields":[]`, ""},
		{"empty", ``, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if from, to, ok := managedFieldsSpan([]byte(tc.in)); ok {
				got = tc.in[:from] + tc.in[to:]
				if !json.Valid([]byte(got)) {
					t.Errorf("cut to invalid JSON %s", got)
				}
			}
			if got != tc.want {
				t.Errorf("cut %s\n to %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
