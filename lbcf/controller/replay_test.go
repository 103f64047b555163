package controller_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// TestReplayWritesWhatWasStored: the benchmarks' floor (testenv.Replay) writes records as they
// were stored — labels, annotations, finalizers, owners, spec and status — and deletes the ones
// named, finalizers and all, so that what it measures is the controller's writes.
func TestReplayWritesWhatWasStored(t *testing.T) {
	e := newEnv(t)
	g := e.g
	var stored []*lbcfv1beta1.BackendRecord
	for i := 0; i < 4; i++ {
		br := &lbcfv1beta1.BackendRecord{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r%d", i), Namespace: e.ns,
				Labels: map[string]string{lbcfv1beta1.LabelPodName: fmt.Sprintf("p%d", i)}, Annotations: map[string]string{"a": "b"},
				Finalizers:      []string{lbcfv1beta1.FinalizerDeregisterBackend},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: lbcfv1beta1.APIVersion, Kind: lbcfv1beta1.KindBackendGroup, Name: "web", UID: "u1"}}},
			Spec: lbcfv1beta1.BackendRecordSpec{LBName: "lb1", LBDriver: "mem", LBInfo: map[string]string{"id": "x"},
				PodBackendInfo: &lbcfv1beta1.PodBackendRecord{Name: fmt.Sprintf("p%d", i), Port: lbcfv1beta1.PortSelector{Port: 80, Protocol: "TCP"}}},
		}
		g.Expect(e.c.Create(e.ctx, br)).To(Succeed())
		br.Status = lbcfv1beta1.BackendRecordStatus{BackendAddr: fmt.Sprintf("10.0.0.%d:80", i), Conditions: []lbcfv1beta1.BackendRecordCondition{
			{Type: lbcfv1beta1.BackendRegistered, Status: lbcfv1beta1.ConditionTrue, LastTransitionTime: metav1.Now(), Message: "ok"}}}
		g.Expect(e.c.Status().Update(e.ctx, br)).To(Succeed())
		stored = append(stored, br)
	}
	ns := e.ns + "-replay"
	elapsed, _ := testenv.Replay{Config: e.cfg, Scheme: scheme, Namespace: ns, InFlight: 2}.Run(t,
		[]client.Object{stored[0], stored[1], stored[2]}, []client.Object{stored[3]}, []client.Object{stored[0]})
	g.Expect(elapsed).To(BeNumerically(">", 0))

	list := &lbcfv1beta1.BackendRecordList{}
	g.Expect(e.c.List(e.ctx, list, client.InNamespace(ns))).To(Succeed())
	got := map[string]lbcfv1beta1.BackendRecord{}
	for _, br := range list.Items {
		got[br.Name] = br
	}
	g.Expect(got).To(HaveLen(3), "r0 deleted, its finalizer removed")
	for _, was := range stored[1:] {
		br, ok := got[was.Name]
		g.Expect(ok).To(BeTrue(), was.Name)
		g.Expect(br.Labels).To(Equal(was.Labels))
		g.Expect(br.Annotations).To(Equal(was.Annotations))
		g.Expect(br.Finalizers).To(Equal(was.Finalizers))
		g.Expect(br.OwnerReferences).To(Equal(was.OwnerReferences))
		g.Expect(br.Spec).To(Equal(was.Spec))
		g.Expect(br.Status.BackendAddr).To(Equal(was.Status.BackendAddr))
		g.Expect(br.Status.Conditions).To(HaveLen(1))
		g.Expect(br.Status.Conditions[0].Message).To(Equal("ok"))
	}
}
