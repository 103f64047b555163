package watchdecode

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// TestRelistReusesUnchangedObjects: the API server restarted under a cache, its informer lists
// again; each record the API server sends unchanged is the object the cache already held (the
// informer's update has the same object as old and new) and is not transformed again, while a
// record changed meanwhile is decoded and transformed anew.
func TestRelistReusesUnchangedObjects(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := testenv.Config(t)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	ns := fmt.Sprintf("wdr-%d", time.Now().UnixNano()%1000000)
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for i := 0; i < 3; i++ {
		g.Expect(c.Create(ctx, newRecord(ns, i))).To(Succeed())
	}

	var mu sync.Mutex
	transformed := map[string]int{}  // name: transforms
	sameObject := map[string]bool{}  // name: an update whose old and new were one object
	updatedTo := map[string]string{} // name: resourceVersion of its last update
	ca, err := NewCacheWithoutManagedFields(cfg, withClients(g, cfg, cache.Options{
		DefaultTransform: func(in any) (any, error) {
			if br, ok := in.(*lbcfv1beta1.BackendRecord); ok && br.Namespace == ns {
				mu.Lock()
				transformed[br.Name]++
				mu.Unlock()
			}
			return in, nil
		}}))
	g.Expect(err).NotTo(HaveOccurred())
	inf, err := ca.GetInformer(ctx, &lbcfv1beta1.BackendRecord{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(old, new any) {
		br := new.(*lbcfv1beta1.BackendRecord)
		if br.Namespace != ns {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		sameObject[br.Name] = sameObject[br.Name] || old == new
		updatedTo[br.Name] = br.ResourceVersion
	}})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = ca.Start(ctx) }()
	g.Expect(ca.WaitForCacheSync(ctx)).To(BeTrue())
	mu.Lock()
	// Once or twice each: client-go transforms a watch list's objects in its temporary store and
	// again as they enter the informer's queue.
	g.Expect(transformed).To(HaveLen(3))
	clear(transformed)
	mu.Unlock()

	// A write of another kind moves etcd's revision past the informer's last one, so the new
	// API server's watch cache cannot resume the informer's watch: it lists again.
	g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moves-the-revision"}})).To(Succeed())
	g.Expect(testenv.Cluster(t).RestartAPIServer(ctx)).To(Succeed())
	br := &lbcfv1beta1.BackendRecord{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "r-1"}, br)).To(Succeed())
	br.Spec.LBInfo = map[string]string{"vip": "10.250.0.2"}
	g.Expect(c.Update(ctx, br)).To(Succeed())

	g.Eventually(func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		return map[string]bool{"r-0": sameObject["r-0"], "r-2": sameObject["r-2"], "r-1 changed": updatedTo["r-1"] == br.ResourceVersion}
	}, 2*time.Minute, 100*time.Millisecond).Should(Equal(map[string]bool{"r-0": true, "r-2": true, "r-1 changed": true}),
		"the relist hands the held objects back for the unchanged records")
	mu.Lock()
	defer mu.Unlock()
	g.Expect(transformed).To(HaveKey("r-1"), "the changed record is transformed")
	g.Expect(transformed).To(HaveLen(1), "only the changed record is transformed again")
	g.Expect(sameObject["r-1"]).To(BeFalse(), "the changed record is a new object")
	cached := &lbcfv1beta1.BackendRecord{}
	g.Expect(ca.Get(ctx, client.ObjectKey{Namespace: ns, Name: "r-1"}, cached)).To(Succeed())
	g.Expect(cached.Spec.LBInfo).To(Equal(map[string]string{"vip": "10.250.0.2"}))
}
