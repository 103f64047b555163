package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/memdriver"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// laggingReader serves the record's reads from a snapshot while one is set: a cache that does
// not show the reconciler's last write yet.
type laggingReader struct {
	client.Client
	mu    sync.Mutex
	snap  *lbcfv1beta1.BackendRecord
	first *lbcfv1beta1.BackendRecord // as the reconciler's first status write left it
}

func (l *laggingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	l.mu.Lock()
	snap := l.snap
	l.mu.Unlock()
	if br, ok := obj.(*lbcfv1beta1.BackendRecord); ok && snap != nil && key == client.ObjectKeyFromObject(snap) {
		snap.DeepCopyInto(br)
		return nil
	}
	return l.Client.Get(ctx, key, obj, opts...)
}

// Status keeps a copy of the record as its first status write left it (for a cache that shows
// that write but not the next).
func (l *laggingReader) Status() client.SubResourceWriter {
	return firstWrite{l.Client.Status(), l}
}

type firstWrite struct {
	client.SubResourceWriter
	l *laggingReader
}

func (f firstWrite) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	err := f.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	f.l.noteFirst(obj, err)
	return err
}

func (f firstWrite) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	err := f.SubResourceWriter.Update(ctx, obj, opts...)
	f.l.noteFirst(obj, err)
	return err
}

func (l *laggingReader) noteFirst(obj client.Object, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if br, ok := obj.(*lbcfv1beta1.BackendRecord); ok && err == nil && l.first == nil {
		l.first = br.DeepCopy()
	}
}

// podAddr builds generateBackendAddr requests for a pod at ip.
type podAddr struct{ ip string }

func (p podAddr) GenerateRequest(_ context.Context, br *lbcfv1beta1.BackendRecord) (*driver.PodBackendInRequest, *driver.ServiceBackendInRequest, bool, error) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: br.Spec.PodBackendInfo.Name, Namespace: br.Namespace},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: p.ip, PodIPs: []corev1.PodIP{{IP: p.ip}}}}
	return &driver.PodBackendInRequest{Pod: pod, Port: br.Spec.PodBackendInfo.Port}, nil, true, nil
}

func (l *laggingReader) lag(br *lbcfv1beta1.BackendRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.snap = br
}

// A record reconciled again before the cache shows its last write (requeued meanwhile: a
// wake-up, its safety-net requeue) neither calls the driver again nor writes the same outcome
// again — for ensureBackend and its status as for deregisterBackend and the finalizer — whether
// the cache shows the version the reconcile read or the one its address write made.
func TestStaleRecordIsNotActedOnTwice(t *testing.T) {
	cases := []struct {
		name string
		// record sets the backend of the record; its address is written by the record's
		// reconcile (generated: one status write more) or not.
		record       func(br *lbcfv1beta1.BackendRecord)
		generated    bool
		statusWrites int
	}{
		{"static address: the cache shows the version read", func(br *lbcfv1beta1.BackendRecord) {
			addr := "10.9.0.1:80"
			br.Spec.StaticAddr = &addr
		}, false, 1},
		{"generated address: the cache shows the address write", func(br *lbcfv1beta1.BackendRecord) {
			br.Spec.PodBackendInfo = &lbcfv1beta1.PodBackendRecord{Name: "p", Port: lbcfv1beta1.PortSelector{Port: 80, Protocol: "TCP"}}
		}, true, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			s := runtime.NewScheme()
			g.Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
			g.Expect(lbcfv1beta1.AddToScheme(s)).To(Succeed())
			var mu sync.Mutex
			writes := map[string]int{}
			cfg := testenv.Config(t)
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				return roundTripFunc(func(req *http.Request) (*http.Response, error) {
					rsp, err := rt.RoundTrip(req)
					if req.Method != http.MethodGet {
						mu.Lock()
						writes[req.Method+" "+testenv.APIResource(req)]++
						mu.Unlock()
					}
					return rsp, err
				})
			})
			c, err := client.New(cfg, client.Options{Scheme: s})
			g.Expect(err).NotTo(HaveOccurred())
			ns := fmt.Sprintf("stale-%d", time.Now().UnixNano()%1000000)
			g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

			drv := memdriver.New()
			srv := httptest.NewServer(drv.Handler(driver.HandlerOptions{}))
			t.Cleanup(srv.Close)
			g.Expect(c.Create(ctx, &lbcfv1beta1.LoadBalancerDriver{ObjectMeta: metav1.ObjectMeta{Name: "mem", Namespace: ns},
				Spec: lbcfv1beta1.LoadBalancerDriverSpec{DriverType: "Webhook", URL: srv.URL}})).To(Succeed())
			lb, err := drv.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{RequestForRetryHooks: driver.RequestForRetryHooks{RecordID: "lb1"}})
			g.Expect(err).NotTo(HaveOccurred())
			lbID := lb.LBInfo[memdriver.LBIDKey]
			br := &lbcfv1beta1.BackendRecord{
				ObjectMeta: metav1.ObjectMeta{Name: "rec", Namespace: ns, Finalizers: []string{lbcfv1beta1.FinalizerDeregisterBackend}},
				Spec:       lbcfv1beta1.BackendRecordSpec{LBName: "lb1", LBDriver: "mem", LBInfo: lb.LBInfo},
			}
			tc.record(br)
			g.Expect(c.Create(ctx, br)).To(Succeed())

			// The reconciler reads through a cache with the engine's indexes, as in the controller.
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Cache: testenv.UnchangedCache(t, CacheOptions())})
			g.Expect(err).NotTo(HaveOccurred())
			mctx, cancel := context.WithCancel(ctx)
			g.Expect(setupIndexes(mctx, mgr)).To(Succeed())
			done := make(chan error, 1)
			go func() { done <- mgr.Start(mctx) }()
			t.Cleanup(func() { cancel(); <-done })
			g.Expect(mgr.GetCache().WaitForCacheSync(mctx)).To(BeTrue())
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(br)}
			cached := func() *lbcfv1beta1.BackendRecord {
				cur := &lbcfv1beta1.BackendRecord{}
				_ = mgr.GetClient().Get(ctx, req.NamespacedName, cur)
				return cur
			}
			g.Eventually(func() string { return cached().Name }).Should(Equal("rec"))
			reader := &laggingReader{Client: mgr.GetClient()}
			addrs, err := addrIndex(mctx, mgr)
			g.Expect(err).NotTo(HaveOccurred())
			r := &backendRecordReconciler{Client: reader, APIReader: c, Addr: podAddr{"10.9.0.2"}, addrs: addrs, Options: Options{
				Invoker: driver.NewClient(driver.ClientOptions{}), Recorder: events.NewFakeRecorder(100),
			}}
			r.init()
			get := func() *lbcfv1beta1.BackendRecord {
				cur := &lbcfv1beta1.BackendRecord{}
				g.Expect(c.Get(ctx, req.NamespacedName, cur)).To(Succeed())
				return cur
			}
			count := func(w string) int {
				mu.Lock()
				defer mu.Unlock()
				return writes[w]
			}

			stale := get()
			_, err = r.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(get().IsRegistered()).To(BeTrue())
			g.Expect(drv.BackendAddrs(lbID)).To(HaveLen(1))
			if tc.generated {
				stale = reader.first
				g.Expect(stale.Status.BackendAddr).To(Equal("10.9.0.2:80"))
				g.Expect(stale.IsRegistered()).To(BeFalse())
			}
			reader.lag(stale)
			_, err = r.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(drv.CountCalls(driver.EnsureBackend)).To(Equal(1), "ensureBackend calls")
			g.Expect(count("PATCH backendrecords/status")+count("PUT backendrecords/status")).To(Equal(tc.statusWrites), "status writes")

			// The cache caught up: the record's newer version is reconciled as usual (idle).
			reader.lag(nil)
			g.Eventually(func() bool { return cached().IsRegistered() }).Should(BeTrue())
			_, err = r.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(drv.CountCalls(driver.EnsureBackend)).To(Equal(1))

			g.Expect(c.Delete(ctx, get())).To(Succeed())
			deleting := get()
			g.Expect(deleting.DeletionTimestamp).NotTo(BeNil())
			g.Eventually(func() *metav1.Time { return cached().DeletionTimestamp }).ShouldNot(BeNil())
			_, err = r.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(drv.BackendAddrs(lbID)).To(BeEmpty())
			g.Expect(c.Get(ctx, req.NamespacedName, &lbcfv1beta1.BackendRecord{})).NotTo(Succeed(), "the record is gone")
			reader.lag(deleting)
			_, err = r.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(drv.CountCalls(driver.DeregisterBackend)).To(Equal(1), "deregisterBackend calls")
			g.Expect(count("PATCH backendrecords")+count("PUT backendrecords")).To(Equal(1), "finalizer writes")
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
