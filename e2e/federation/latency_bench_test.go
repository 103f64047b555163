//go:build e2e

package federation_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// BenchmarkPodReadyToRegistered: pods appear one by one in member m1 (kwok makes them Running
// and Ready); for each, the time from its Ready condition showing on m1's API server to its
// BackendRecord on the Karmada API server turning Registered — which happens when the Radware
// driver answered ensureBackend, i.e. after the simulated Alteon committed the real server
// (apply + save). The path: member controller → status → Karmada's InterpretStatus → binding →
// federation → driver → device. Targets: p50 < 0.5 s, p99 < 2 s (Karmada itself moves a member
// status to the binding in ≈ 50 ms).
//
//	LBFED_REQUIRE_INTEGRATION=1 go test -tags e2e ./e2e/federation -run XXX -bench PodReadyToRegistered -benchtime 1x
func BenchmarkPodReadyToRegistered(b *testing.B) {
	const pods = 100
	topo := testenv.Topology(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	karmada, err := client.NewWithWatch(topo.KarmadaConfig(), client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	ex := deploy.Example{Namespace: fmt.Sprintf("bench-%d", rand.IntN(100000)), VIP: fmt.Sprintf("127.4.%d.%d", rand.IntN(250), rand.IntN(250)+1),
		Port: 80, Replicas: 0, Members: []string{"m1"}}
	if err := ex.Apply(ctx, karmada, lbfed); err != nil {
		b.Fatal(err)
	}
	m1 := topo.Member("m1")
	kube, err := kubernetes.NewForConfig(m1.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	mc, err := client.New(m1.RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	// Wait for the namespace and the group to reach the member.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		bg := &lbcfv1beta1.BackendGroup{}
		if mc.Get(ctx, client.ObjectKey{Namespace: ex.Namespace, Name: "web"}, bg) == nil && bg.Status.Candidates != nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the BackendGroup did not reach m1")
		}
		time.Sleep(200 * time.Millisecond)
	}

	var mu sync.Mutex
	// Stages: Ready on m1 → record on Karmada (member status, binding, federation) → address
	// written → Registered (driver and device).
	readyAt, createdAt, addrAt, registeredAt := map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	podWatch, err := kube.CoreV1().Pods(ex.Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for ev := range podWatch.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					mu.Lock()
					if _, seen := readyAt[p.Name]; !seen {
						readyAt[p.Name] = time.Now()
					}
					mu.Unlock()
				}
			}
		}
	}()
	recWatch, err := karmadaWatch(ctx, karmada, ex.Namespace)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		first := func(m map[string]time.Time, name string, now time.Time) {
			if _, seen := m[name]; !seen {
				m[name] = now
			}
		}
		for br := range recWatch {
			if br.Spec.PodBackendInfo == nil {
				continue
			}
			now, name := time.Now(), br.Spec.PodBackendInfo.Name
			mu.Lock()
			first(createdAt, name, now)
			if br.Status.BackendAddr != "" {
				first(addrAt, name, now)
			}
			if br.IsRegistered() {
				first(registeredAt, name, now)
			}
			mu.Unlock()
		}
	}()

	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		b.Fatalf("nodes of m1: %v", err)
	}
	b.ResetTimer()
	for i := 0; i < pods; i++ {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-bench-%03d", i), Namespace: ex.Namespace, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{NodeName: nodes.Items[i%len(nodes.Items)].Name,
				Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
		}
		if _, err := kube.CoreV1().Pods(ex.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // one at a time, as pods of a rollout come
	}
	deadline = time.Now().Add(3 * time.Minute)
	for {
		mu.Lock()
		n := len(registeredAt)
		mu.Unlock()
		if n >= pods || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	var lat []time.Duration
	for name, r := range readyAt {
		if reg, ok := registeredAt[name]; ok {
			lat = append(lat, reg.Sub(r))
		}
	}
	if len(lat) < pods {
		b.Fatalf("%d of %d pods registered", len(lat), pods)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	b.ReportMetric(pct(0.5).Seconds(), "s-p50")
	b.ReportMetric(pct(0.99).Seconds(), "s-p99")
	b.ReportMetric(lat[len(lat)-1].Seconds(), "s-max")
	stage := func(from, to map[string]time.Time, unit string) {
		var d []time.Duration
		for name, t := range from {
			if u, ok := to[name]; ok {
				d = append(d, u.Sub(t))
			}
		}
		if len(d) > 0 {
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
			b.ReportMetric(d[len(d)/2].Seconds(), unit)
		}
	}
	stage(readyAt, createdAt, "s-p50-to-record")
	stage(createdAt, addrAt, "s-p50-record-to-addr")
	stage(addrAt, registeredAt, "s-p50-addr-to-registered")
}

// karmadaWatch streams the BackendRecords of a namespace on the Karmada API server.
func karmadaWatch(ctx context.Context, wc client.WithWatch, ns string) (<-chan *lbcfv1beta1.BackendRecord, error) {
	wt, err := wc.Watch(ctx, &lbcfv1beta1.BackendRecordList{}, client.InNamespace(ns))
	if err != nil {
		return nil, err
	}
	out := make(chan *lbcfv1beta1.BackendRecord, 1024)
	go func() {
		defer close(out)
		for ev := range wt.ResultChan() {
			if br, ok := ev.Object.(*lbcfv1beta1.BackendRecord); ok && ev.Type != watch.Deleted {
				out <- br
			}
		}
	}()
	return out, nil
}
