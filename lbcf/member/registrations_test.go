package member

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/controller"
)

// The gate of a member's pod follows the federation's answer about one of the member's own
// recent reports; anything else leaves it as it is. (The reconcilers around it run in
// lbcf/controller's tests, on the engine's test environment.)
func TestRegistrationsReadTheAnswerToOwnReports(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	pod := func(name, uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}}
	}
	item := func(name, uid, ip string) string { return fmt.Sprintf("p|%s|%s|%s|80t|0|Rr", name, uid, ip) }
	report := []string{item("web-0", "aaaaaaaa", "10.0.0.1"), item("web-1", "bbbbbbbb", "10.0.0.2")}
	// Older reports: web-0 alone, each with another address (another digest).
	var older [][]string
	for i := range reportHistoryDepth {
		older = append(older, []string{item("web-0", "aaaaaaaa", fmt.Sprintf("10.1.0.%d", i))})
	}
	answer := func(items []string, registered ...bool) string {
		return lbcfv1beta1.Registration{"m1": lbcfv1beta1.NewMemberRegistration(items, func(i int) bool { return registered[i] })}.String()
	}

	for _, tc := range []struct {
		name       string
		reports    [][]string // oldest first; the last is the latest
		annotation string
		pod        *corev1.Pod
		want       controller.GateState
	}{
		{name: "no answer yet", reports: [][]string{report}, pod: pod("web-0", "aaaaaaaa"),
			want: controller.GateState{}},
		{name: "an answer about someone else's report", reports: [][]string{report},
			annotation: answer([]string{item("other", "cccccccc", "10.9.9.9")}, true), pod: pod("web-0", "aaaaaaaa"),
			want: controller.GateState{}},
		{name: "registered", reports: [][]string{report}, annotation: answer(report, true, false), pod: pod("web-0", "aaaaaaaa"),
			want: controller.GateState{Known: true, Registered: true}},
		{name: "not registered yet", reports: [][]string{report}, annotation: answer(report, true, false), pod: pod("web-1", "bbbbbbbb"),
			want: controller.GateState{Known: true, Message: "waiting for the federation to register it"}},
		{name: "another incarnation of the pod", reports: [][]string{report}, annotation: answer(report, true, true), pod: pod("web-0", "dddddddd"),
			want: controller.GateState{Known: true, Message: "not in this member's report the federation answered yet"}},
		{name: "an answer about an older report, still remembered", reports: append([][]string{report}, older[:reportHistoryDepth-1]...),
			annotation: answer(report, true, true), pod: pod("web-1", "bbbbbbbb"),
			want: controller.GateState{Known: true, Registered: true}},
		{name: "an answer about a report forgotten", reports: append([][]string{report}, older...),
			annotation: answer(report, true, true), pod: pod("web-1", "bbbbbbbb"),
			want: controller.GateState{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := &reportHistory{}
			for _, r := range tc.reports {
				h.Add(key, r)
			}
			bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
				Annotations: map[string]string{lbcfv1beta1.AnnotationRegistered: tc.annotation}}}
			if tc.annotation == "" {
				bg.Annotations = nil
			}
			st, err := (&registrations{History: h}).PodRegistered(context.Background(), bg, tc.pod)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st).To(Equal(tc.want))
		})
	}
}

func TestReportHistoryForgetsDeletedGroups(t *testing.T) {
	g := NewWithT(t)
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	items := []string{"p|web-0|aaaaaaaa|10.0.0.1|80t|0|Rr"}
	h := &reportHistory{}
	h.Add(key, items)
	_, ok := h.find(key, lbcfv1beta1.ReportDigest(items))
	g.Expect(ok).To(BeTrue())
	h.Forget(key)
	_, ok = h.find(key, lbcfv1beta1.ReportDigest(items))
	g.Expect(ok).To(BeFalse())
}
