package localup

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// TestRestartAPIServer: the apiserver comes back on the same address with what etcd held, its
// clients' watches end and an informer catches up with a write made after the restart; the
// stopped process is not reported as an unexpected exit.
func TestRestartAPIServer(t *testing.T) {
	bins := requireBinaries(t)
	g := NewWithT(t)
	ctx := context.Background()
	c, err := StartCluster(ctx, ClusterOptions{Name: "restart", Binaries: bins})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { c.KeepRunDir(); _ = c.Stop() })
	cs := kubernetes.NewForConfigOrDie(c.RESTConfig())
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	}
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, cm("before"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	seen := make(chan string, 16)
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", "default", fields.Everything())
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: &corev1.ConfigMap{},
		Handler: cache.ResourceEventHandlerFuncs{AddFunc: func(o any) { seen <- o.(*corev1.ConfigMap).Name }},
	})
	stop := make(chan struct{})
	defer close(stop)
	go informer.Run(stop)
	g.Eventually(seen, 30*time.Second).Should(Receive(Equal("before")))

	host, old := c.Host(), c.apiserver
	g.Expect(c.RestartAPIServer(ctx)).To(Succeed())
	exited, _ := old.Exited() // killed if it had not stopped in time
	g.Expect(exited).To(BeTrue(), "the first apiserver stopped")
	g.Expect(c.apiserver.PID()).NotTo(Equal(old.PID()))
	g.Expect(c.Host()).To(Equal(host))
	g.Expect(c.CheckProcesses()).To(Succeed(), "a restarted apiserver is no unexpected exit")

	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "before", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "etcd's objects are served again")
	g.Expect(got.Name).To(Equal("before"))
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, cm("after"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(seen, 60*time.Second).Should(Receive(Equal("after")), "the informer watches the new apiserver")
}
