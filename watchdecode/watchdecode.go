// Package watchdecode decodes the API server's JSON watch streams of typed objects for the
// informers of a controller-runtime cache with one validation and one decode of each object,
// where client-go makes about nine passes over an event's bytes before the object's own decode.
//
// client-go frames an event with encoding/json's scanner and copies it through a
// json.RawMessage, searches the event for apiVersion and kind (SimpleMetaFactory.Interpret: an
// encoding/json decode that skips every other field), decodes it as a metav1.WatchEvent
// (validated again, the object skipped and copied), then searches the object the same way
// before it decodes it. The federation's cache is filled from such streams — 100,000
// BackendRecords with their managed fields at a restart —, one informer goroutine each: a CPU
// profile of BenchmarkRestartResync's first seconds had 60 % of the controller's CPU in the
// watch decoders, a quarter of it in the two searches, on two cores it shares with the API
// server.
//
// Here an event is framed by a scan of its brackets and strings, split into type and object by
// its fixed envelope (as the API server writes it: {"type":"…","object":{…}}), and the object's
// kind read from its first two keys (apiVersion and kind, in either order, as the API server
// writes them), then decoded by sigs.k8s.io/json as the standard serializer decodes it.
// Whatever does not have that shape goes through the standard decoders (TestDecodersAgree).
// NewCacheWithoutManagedFields also cuts the objects' managed fields out of their bytes before
// the decode, for caches that drop them anyway: they are half of a BackendRecord's bytes on the
// wire, and BenchmarkWatchDecode's records decode in 0.7x the time and allocations without them.
// Only structured kinds that client-go does not serve in protobuf are concerned, in caches of
// every namespace without selectors; every other informer is the standard one.
package watchdecode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kjson "sigs.k8s.io/json"
)

// NewCache is a controller-runtime NewCacheFunc (manager.Options.NewCache): cache.New, whose
// informers of the kinds this package decodes read their watch streams with its decoders. A
// cache restricted to namespaces, or with default selectors, is the standard one; so are the
// informers of kinds whose ByObject settings restrict or change them.
func NewCache(config *rest.Config, opts cache.Options) (cache.Cache, error) {
	return newCache(config, opts, false)
}

// NewCacheWithoutManagedFields is NewCache whose decoders leave every object's managed fields
// (metadata.managedFields) out: for caches whose transforms strip them from every object, as
// lbfed's managers' do, which need not decode them first. The informers this package does not
// decode keep them until the transforms.
func NewCacheWithoutManagedFields(config *rest.Config, opts cache.Options) (cache.Cache, error) {
	return newCache(config, opts, true)
}

func newCache(config *rest.Config, opts cache.Options, dropManagedFields bool) (cache.Cache, error) {
	if opts.NewInformer != nil || len(opts.DefaultNamespaces) > 0 || opts.DefaultLabelSelector != nil ||
		opts.DefaultFieldSelector != nil || opts.Scheme == nil || opts.Mapper == nil || opts.HTTPClient == nil {
		return cache.New(config, opts)
	}
	w := &watches{config: config, scheme: opts.Scheme, mapper: opts.Mapper, httpClient: opts.HTTPClient,
		bookmarks: ptr.Deref(opts.DefaultEnableWatchBookmarks, true), standard: map[schema.GroupVersionKind]bool{}}
	for obj, bo := range opts.ByObject {
		if bo.Namespaces == nil && bo.Label == nil && bo.Field == nil && bo.EnableWatchBookmarks == nil {
			continue
		}
		gvk, err := apiutil.GVKForObject(obj, opts.Scheme)
		if err != nil {
			return nil, fmt.Errorf("watchdecode: %w", err)
		}
		w.standard[gvk] = true
	}
	w.negotiator = newNegotiator(opts.Scheme, dropManagedFields)
	opts.NewInformer = w.newInformer
	return cache.New(config, opts)
}

// watches makes the informers of a cache of every namespace.
type watches struct {
	config     *rest.Config
	scheme     *runtime.Scheme
	mapper     meta.RESTMapper
	httpClient *http.Client
	bookmarks  bool
	negotiator runtime.NegotiatedSerializer
	// standard are the kinds whose ByObject settings this package does not reproduce.
	standard map[schema.GroupVersionKind]bool
}

// newInformer is the cache's NewInformer: the informer of obj's kind, whose watches are this
// package's when the kind is one it decodes; lists stay the cache's own (the reflector lists
// only when the API server cannot stream a watch's initial events).
func (w *watches) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if watch := w.watchFunc(obj); watch != nil {
		lw = &toolscache.ListWatch{ListWithContextFunc: toolscache.ToListerWatcherWithContext(lw).ListWithContext, WatchFuncWithContext: watch}
	}
	inf := &reusingInformer{SharedIndexInformer: toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)}
	_ = inf.SetTransform(nil) // cannot fail before the informer runs; the cache sets its own next
	return inf
}

// reusingInformer hands back the object its store holds when the API server sends one again
// unchanged (same key, same resourceVersion), before the cache's transform: as every object of
// a relist is. An informer lists again whenever its watch cannot resume (an API server restart
// or rollout, a watcher dropped for falling behind: "too old resource version"), and client-go
// builds the new list beside the store it replaces, so at 100,000 records the controller held
// two caches at once (BenchmarkRestartResync's rollout: 528.5 MiB, over the 512 MiB it is
// sized for). With the held objects reused the relist's copy is the store's own pointers; only
// what changed is decoded into new objects and transformed again.
type reusingInformer struct {
	toolscache.SharedIndexInformer
}

func (i *reusingInformer) SetTransform(transform toolscache.TransformFunc) error {
	store := i.GetStore()
	return i.SharedIndexInformer.SetTransform(func(in any) (any, error) {
		if held := heldUnchanged(store, in); held != nil {
			return held, nil
		}
		if transform == nil {
			return in, nil
		}
		return transform(in)
	})
}

// heldUnchanged is the object store holds under in's key if it has in's resourceVersion, or nil.
func heldUnchanged(store toolscache.Store, in any) any {
	o, ok := in.(metav1.Object)
	if !ok || o.GetResourceVersion() == "" {
		return nil
	}
	held, exists, err := store.GetByKey(toolscache.MetaObjectToName(o).String())
	if err != nil || !exists {
		return nil
	}
	if h, ok := held.(metav1.Object); ok && h.GetResourceVersion() == o.GetResourceVersion() {
		return held
	}
	return nil
}

// watchFunc returns the watch of obj's kind across namespaces through this package's decoders,
// or nil when the kind keeps the standard ones.
func (w *watches) watchFunc(obj runtime.Object) func(context.Context, metav1.ListOptions) (watch.Interface, error) {
	if _, ok := obj.(runtime.Unstructured); ok {
		return nil
	}
	if _, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return nil
	}
	gvk, err := apiutil.GVKForObject(obj, w.scheme)
	// Kinds client-go knows are served in protobuf, which controller-runtime asks for: cheaper
	// to decode than any JSON.
	if err != nil || w.standard[gvk] || clientgoscheme.Scheme.Recognizes(gvk) {
		return nil
	}
	mapping, err := w.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil
	}
	cfg := rest.CopyConfig(w.config)
	gv := gvk.GroupVersion()
	cfg.GroupVersion, cfg.APIPath = &gv, "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = w.negotiator
	rc, err := rest.RESTClientForConfigAndClient(cfg, w.httpClient)
	if err != nil {
		return nil
	}
	resource := mapping.Resource.Resource
	return func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.Watch, opts.AllowWatchBookmarks = true, w.bookmarks
		return rc.Get().Resource(resource).VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
	}
}

// negotiator is the codec factory of scheme without conversion (as controller-runtime's
// clients use it), with this package's decoders for JSON.
type negotiator struct {
	serializer.WithoutConversionCodecFactory
	types []runtime.SerializerInfo
}

func newNegotiator(scheme *runtime.Scheme, dropManagedFields bool) runtime.NegotiatedSerializer {
	n := negotiator{WithoutConversionCodecFactory: serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}}
	for _, info := range n.CodecFactory.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON && info.StreamSerializer != nil {
			info.Serializer = &objectDecoder{Serializer: info.Serializer, scheme: scheme, dropManagedFields: dropManagedFields}
			stream := *info.StreamSerializer
			stream.Serializer, stream.Framer = &eventDecoder{Serializer: stream.Serializer}, framer{}
			info.StreamSerializer = &stream
		}
		n.types = append(n.types, info)
	}
	return n
}

func (n negotiator) SupportedMediaTypes() []runtime.SerializerInfo { return n.types }

// objectDecoder decodes an object whose first two keys name its kind without searching its
// bytes for them first; other input, and decoding into a given object, are the standard
// serializer's.
type objectDecoder struct {
	runtime.Serializer
	scheme *runtime.Scheme
	// dropManagedFields: the objects' managed fields are left out, cut from their bytes where
	// the object has the API server's compact shape, else cleared after the decode.
	dropManagedFields bool
}

func (d *objectDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if !d.dropManagedFields {
		return d.decode(data, defaults, into)
	}
	if buf, ok := cutManagedFields(data); ok {
		defer scratch.Put(buf) // the decoders copy what they keep
		data = *buf
	}
	obj, gvk, err := d.decode(data, defaults, into)
	if m, ok := obj.(metav1.Object); ok && err == nil {
		m.SetManagedFields(nil)
	}
	return obj, gvk, err
}

func (d *objectDecoder) decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if defaults != nil || into != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	gvk, ok := leadingKind(data)
	if !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	obj, err := d.scheme.New(gvk)
	if err != nil { // a kind the scheme does not know: the standard error
		return d.Serializer.Decode(data, defaults, into)
	}
	// As the standard serializer decodes when not strict.
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, obj); err != nil {
		return nil, &gvk, err
	}
	if obj.GetObjectKind().GroupVersionKind() != gvk {
		// A key repeated later in the object: what the standard search finds wins.
		return d.Serializer.Decode(data, defaults, into)
	}
	decoded.Add(1)
	return obj, &gvk, nil
}

// decoded counts the objects this package decoded itself (tests).
var decoded atomic.Int64

// leadingKind reads apiVersion and kind when they are the object's first two keys, written
// without spaces or escapes.
func leadingKind(data []byte) (schema.GroupVersionKind, bool) {
	rest, ok := bytes.CutPrefix(data, []byte("{"))
	if !ok {
		return schema.GroupVersionKind{}, false
	}
	var apiVersion, kind string
	for i := 0; i < 2; i++ {
		if i == 1 {
			if rest, ok = bytes.CutPrefix(rest, []byte(",")); !ok {
				return schema.GroupVersionKind{}, false
			}
		}
		var key, value string
		if key, rest, ok = leadingString(rest); !ok {
			return schema.GroupVersionKind{}, false
		}
		if rest, ok = bytes.CutPrefix(rest, []byte(":")); !ok {
			return schema.GroupVersionKind{}, false
		}
		if value, rest, ok = leadingString(rest); !ok {
			return schema.GroupVersionKind{}, false
		}
		switch {
		case key == "apiVersion" && apiVersion == "":
			apiVersion = value
		case key == "kind" && kind == "":
			kind = value
		default:
			return schema.GroupVersionKind{}, false
		}
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" || gv.Version == "" {
		return schema.GroupVersionKind{}, false
	}
	return gv.WithKind(kind), true
}

// leadingString reads the JSON string data starts with when it has no escape.
func leadingString(data []byte) (string, []byte, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(`"`))
	if !ok {
		return "", nil, false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", nil, false
	}
	return string(rest[:end]), rest[end+1:], true
}

// scratch holds the buffers objects are copied into without their managed fields.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// cutManagedFields copies data without metadata.managedFields into a buffer of scratch, when
// data has them (see managedFieldsSpan).
func cutManagedFields(data []byte) (*[]byte, bool) {
	from, to, ok := managedFieldsSpan(data)
	if !ok {
		return nil, false
	}
	buf := scratch.Get().(*[]byte)
	*buf = append(append((*buf)[:0], data[:from]...), data[to:]...)
	cut.Add(1)
	return buf, true
}

// cut counts the objects whose managed fields were cut out before their decode (tests).
var cut atomic.Int64

// managedFieldsSpan is where metadata.managedFields is, with one comma beside it, in the
// object data when data is written as the API server writes it (no spaces between tokens), so
// that data[:from]+data[to:] is the same object without them. Their value is only framed (its
// brackets and strings), never decoded nor validated: that is the work saved, and the API
// server validates managed fields on every write.
func managedFieldsSpan(data []byte) (from, to int, ok bool) {
	meta, ok := findMember(data, 0, "metadata")
	if !ok {
		return 0, 0, false
	}
	m, ok := findMember(data, meta.value, "managedFields")
	if !ok {
		return 0, 0, false
	}
	// The cut takes one comma and leaves one object: a member after it, or the end of the object.
	switch {
	case data[m.end] == ',' && m.end+1 < len(data) && data[m.end+1] == '"':
		return m.start, m.end + 1, true
	case data[m.end] == '}' && !m.first:
		return m.start - 1, m.end, true
	case data[m.end] == '}':
		return m.start, m.end, true
	}
	return 0, 0, false
}

// member is where a member of a JSON object is: its key at start, its value at value, up to end.
type member struct {
	start, value, end int
	first             bool
}

// findMember finds the member key of the object at data[obj] by skipping the ones before it;
// false when the object has no such member or is not written as the API server writes it.
// The key is compared as written, so an escaped one is not found.
func findMember(data []byte, obj int, key string) (member, bool) {
	if obj >= len(data) || data[obj] != '{' {
		return member{}, false
	}
	for i, first := obj+1, true; i < len(data); first = false {
		if first && data[i] == '}' {
			return member{}, false
		}
		keyEnd := stringEnd(data, i)
		if keyEnd < 0 || keyEnd >= len(data) || data[keyEnd] != ':' {
			return member{}, false
		}
		end := valueEnd(data, keyEnd+1)
		if end < 0 || end >= len(data) {
			return member{}, false
		}
		if keyEnd-i == len(key)+2 && string(data[i+1:keyEnd-1]) == key {
			return member{start: i, value: keyEnd + 1, end: end, first: first}, true
		}
		if data[end] != ',' {
			return member{}, false
		}
		i = end + 1
	}
	return member{}, false
}

// stringEnd is the end of the JSON string at data[i], or -1.
func stringEnd(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd is the end of the JSON value at data[i] by its brackets and strings (a scalar ends
// where its object or array goes on), or -1.
func valueEnd(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		if n := objectEnd(data[i:]); n > 0 {
			return i + n
		}
		return -1
	}
	j := i
	for j < len(data) && data[j] != ',' && data[j] != '}' && data[j] != ']' && !isSpace(data[j]) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// eventDecoder splits a watch event into its type and its object's bytes (left to the object
// decoder, which validates them) when the event has the API server's shape; other input is the
// standard serializer's.
type eventDecoder struct {
	runtime.Serializer
}

var (
	eventPrefix = []byte(`{"type":"`)
	eventObject = []byte(`,"object":`)
)

func (d *eventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok || defaults != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(data), eventPrefix)
	end := bytes.IndexByte(rest, '"')
	if !ok || end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return d.Serializer.Decode(data, defaults, into)
	}
	typ := string(rest[:end])
	obj, ok := bytes.CutPrefix(rest[end+1:], eventObject)
	if ok {
		obj, ok = bytes.CutSuffix(obj, []byte("}"))
	}
	obj = bytes.TrimSpace(obj)
	if !ok || objectEnd(obj) != len(obj) { // one object, the envelope's last value
		return d.Serializer.Decode(data, defaults, into)
	}
	// The bytes are the stream's buffer, read again only after the object is decoded
	// (rest/watch.Decoder decodes it before it reads the next event).
	ev.Type, ev.Object = typ, runtime.RawExtension{Raw: obj}
	return ev, nil, nil
}

// framer frames a stream of JSON objects by a byte scan of their brackets and strings: the
// standard JSON framer runs encoding/json's scanner over each object and then copies it.
type framer struct{}

func (framer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &frameReader{r: r, buf: make([]byte, 0, 32<<10)}
}

// NewFrameWriter: JSON objects written one after the other need no framing.
func (framer) NewFrameWriter(w io.Writer) io.Writer { return w }

// frameReader returns one JSON object a Read, or the start of it with io.ErrShortBuffer when p
// is too small and the rest on the next Reads (the contract of the standard framer).
type frameReader struct {
	r io.ReadCloser
	// buf[start:] is read and not returned yet; pos is where the scan of the object starting at
	// start goes on.
	buf        []byte
	start, pos int
	scan       objectScan
	pending    []byte // the part of the last object not returned yet
}

func (f *frameReader) Read(p []byte) (int, error) {
	if len(f.pending) == 0 {
		frame, err := f.next()
		if err != nil {
			return 0, err
		}
		f.pending = frame
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	if len(f.pending) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

func (f *frameReader) Close() error { return f.r.Close() }

// next returns the next object; its bytes stay valid until the next call.
func (f *frameReader) next() ([]byte, error) {
	for {
		if f.pos == f.start { // between objects
			for f.start < len(f.buf) && isSpace(f.buf[f.start]) {
				f.start++
			}
			f.pos = f.start
		}
		if f.pos < len(f.buf) {
			n, done, err := f.scan.feed(f.buf[f.pos:])
			if err != nil {
				return nil, fmt.Errorf("watch stream: %w", err)
			}
			f.pos += n
			if done {
				frame := f.buf[f.start:f.pos]
				f.start, f.scan = f.pos, objectScan{}
				return frame, nil
			}
		}
		if err := f.fill(); err != nil {
			if err == io.EOF && f.start < len(f.buf) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// fill reads more of the stream, keeping the unreturned bytes at the front of buf.
func (f *frameReader) fill() error {
	if f.start > 0 {
		n := copy(f.buf, f.buf[f.start:])
		f.buf, f.pos, f.start = f.buf[:n], f.pos-f.start, 0
	}
	if len(f.buf) == cap(f.buf) {
		f.buf = append(f.buf, make([]byte, cap(f.buf))...)[:len(f.buf)]
	}
	for tries := 0; tries < 100; tries++ { // as bufio.Reader tolerates empty reads
		n, err := f.r.Read(f.buf[len(f.buf):cap(f.buf)])
		f.buf = f.buf[:len(f.buf)+n]
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// objectScan finds where a JSON object (or array) ends by its brackets and strings alone; the
// JSON decoder validates the rest.
type objectScan struct {
	depth             int
	inString, escaped bool
}

// feed scans the next bytes of the object: n bytes are consumed, all of them unless the object
// ends in data (done).
func (s *objectScan) feed(data []byte) (n int, done bool, err error) {
	i := 0
	for i < len(data) {
		if s.inString {
			if s.escaped {
				s.escaped, i = false, i+1
				continue
			}
			// Most of an object's bytes are in its strings, and short ones: a table lookup a
			// byte (neither a branch per character nor a call per string).
			for i < len(data) && !stringStop[data[i]] {
				i++
			}
			if i < len(data) {
				s.escaped, s.inString = data[i] == '\\', data[i] != '"'
				i++
			}
			continue
		}
		c := data[i]
		if s.depth == 0 && c != '{' && c != '[' {
			return i, false, fmt.Errorf("want a JSON object, found %q", c)
		}
		switch c {
		case '"':
			s.inString = true
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth == 0 {
				return i + 1, true, nil
			}
		}
		i++
	}
	return len(data), false, nil
}

// stringStop are the bytes that end a scan inside a JSON string.
var stringStop = [256]bool{'"': true, '\\': true}

// objectEnd is the length of the JSON object data starts with, or -1.
func objectEnd(data []byte) int {
	var s objectScan
	if n, done, err := s.feed(data); done && err == nil {
		return n
	}
	return -1
}
