package federation_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/lbcf/servicechange"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestServiceWatchPassesSpecChanges: the federation maps Service events to the service-backend
// BackendGroups through servicechange.Predicate. A Service's metadata.generation never moves
// (the API server does not bump it for Services), so a predicate on the generation dropped every
// update: a changed selector, ports or type did not re-trigger the groups. The updates here are
// real ones from the API server; a status-only write must still be dropped (it changes nothing a
// group reads).
func TestServiceWatchPassesSpecChanges(t *testing.T) {
	e := newEnvWithoutController(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "web"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	e.g.Expect(e.c.Create(e.ctx, svc)).To(Succeed())

	cases := []struct {
		name   string
		change func(*corev1.Service)
		status bool
		passes bool
	}{
		{"selector", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "web2"} }, false, true},
		{"ports", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)})
		}, false, true},
		{"type", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }, false, true},
		{"annotations", func(s *corev1.Service) { s.Annotations = map[string]string{"example.com/x": "1"} }, false, true},
		{"status only", func(s *corev1.Service) {
			s.Status.Conditions = []metav1.Condition{{Type: "Example", Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}
		}, true, false},
	}
	for _, tc := range cases {
		old := &corev1.Service{}
		e.g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(svc), old)).To(Succeed())
		upd := old.DeepCopy()
		tc.change(upd)
		if tc.status {
			e.g.Expect(e.c.Status().Update(e.ctx, upd)).To(Succeed())
		} else {
			e.g.Expect(e.c.Update(e.ctx, upd)).To(Succeed())
		}
		cur := &corev1.Service{}
		e.g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(svc), cur)).To(Succeed())
		e.g.Expect(cur.ResourceVersion).NotTo(Equal(old.ResourceVersion), "%s: the API server took the update", tc.name)
		got := servicechange.Predicate().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur})
		e.g.Expect(got).To(Equal(tc.passes), "%s: generation %d -> %d", tc.name, old.Generation, cur.Generation)
	}
}
