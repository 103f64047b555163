package testenv_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// recordingTB keeps what UnchangedCache reports and the cleanups it registers.
type recordingTB struct {
	testing.TB
	errs     []string
	cleanups []func()
}

func (r *recordingTB) Error(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }
func (r *recordingTB) Cleanup(f func())  { r.cleanups = append(r.cleanups, f) }

func (r *recordingTB) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestUnchangedCacheNamesWhatChanged: objects of a kind with its own transform, of a kind left to
// the default transform and of one without any go through the wrapped transforms; the check
// names exactly the ones changed after they went in, and the kinds' own transforms still run.
func TestUnchangedCacheNamesWhatChanged(t *testing.T) {
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "7", Labels: map[string]string{"app": "a"}}}
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}
	podTransformed, defaulted := 0, 0
	opts := cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:     {Transform: func(o any) (any, error) { podTransformed++; return o, nil }},
			&corev1.Service{}: {}, // the default transform's
		},
		DefaultTransform: func(o any) (any, error) { defaulted++; return o, nil },
	}
	for _, tc := range []struct {
		name   string
		change func(a, b *corev1.Pod, s *corev1.Service)
		want   []string
	}{
		{"nothing changed", func(a, b *corev1.Pod, s *corev1.Service) {}, nil},
		{"a label of one pod", func(a, b *corev1.Pod, s *corev1.Service) { b.Labels["app"] = "b" }, []string{"*v1.Pod ns/b@7"}},
		{"the service's status, and a pod's", func(a, b *corev1.Pod, s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.0.1"}}
			a.Status.Phase = corev1.PodRunning
		}, []string{"*v1.Pod ns/a@7", "*v1.Service ns/s@"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			podTransformed, defaulted = 0, 0
			rec := &recordingTB{TB: t}
			got := testenv.UnchangedCache(rec, opts)
			a, b, s := pod("a"), pod("b"), svc.DeepCopy()
			// The map's keys are pointers: each kind's entry is found by its type.
			for obj, bo := range got.ByObject {
				for _, o := range []client.Object{a, b, s} {
					if fmt.Sprintf("%T", obj) != fmt.Sprintf("%T", o) {
						continue
					}
					if _, err := bo.Transform(o); err != nil {
						t.Fatal(err)
					}
				}
			}
			// A kind the options do not name, and something that is no object.
			if _, err := got.DefaultTransform(&corev1.ConfigMap{}); err != nil {
				t.Fatal(err)
			}
			if _, err := got.DefaultTransform("not an object"); err != nil {
				t.Fatal(err)
			}
			if podTransformed != 2 || defaulted != 3 {
				t.Fatalf("the options' own transforms ran %d (pods) and %d (default) times, want 2 and 3", podTransformed, defaulted)
			}
			tc.change(a, b, s)
			rec.end()
			if len(rec.errs) != len(tc.want) {
				t.Fatalf("reported %d changes, want %d: %q", len(rec.errs), len(tc.want), rec.errs)
			}
			// The kinds went in in the map's order: the reports' order is not the cases'.
			all := strings.Join(rec.errs, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, "cached "+w+" changed") {
					t.Errorf("no report names %s: %s", w, all)
				}
			}
		})
	}
}
