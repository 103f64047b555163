package controller

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

type fetchFunc func(ctx context.Context, cluster, namespace, name string) (*corev1.Pod, error)

func (f fetchFunc) MemberPod(ctx context.Context, cluster, namespace, name string) (*corev1.Pod, error) {
	return f(ctx, cluster, namespace, name)
}

func TestMemberPodFallsBackToSynthetic(t *testing.T) {
	b := &Backend{Kind: lbcfv1beta1.CandidatePod, Name: "web-0", UID: "0a1b2c3d", Cluster: "m1", IPs: []string{"10.0.0.1"}, Ready: true, HasIP: true}
	real := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", UID: "0a1b2c3d-0000-4000-8000-000000000000", Labels: map[string]string{"app": "web"}}}
	other := real.DeepCopy()
	other.UID = "ffffffff-0000-4000-8000-000000000000"
	cases := []struct {
		name   string
		fetch  MemberPodFetcher
		source string
		reason string
	}{
		{"no fetcher", nil, PodSourceSynthetic, ""},
		{"member read", fetchFunc(func(context.Context, string, string, string) (*corev1.Pod, error) { return real, nil }), PodSourceMember, ""},
		{"member unreachable", fetchFunc(func(context.Context, string, string, string) (*corev1.Pod, error) {
			return nil, errors.New("dial tcp: refused")
		}), PodSourceSynthetic, "refused"},
		{"another incarnation", fetchFunc(func(context.Context, string, string, string) (*corev1.Pod, error) { return other, nil }), PodSourceSynthetic, "another incarnation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := memberPod(context.Background(), tc.fetch, b.Cluster, b.PodObject("ns"))
			g.Expect(p.Annotations).To(HaveKeyWithValue(AnnotationPodSource, tc.source))
			g.Expect(p.Labels).To(HaveKeyWithValue(lbcfv1beta1.LabelCluster, "m1"))
			if tc.reason != "" {
				g.Expect(p.Annotations[AnnotationPodSourceReason]).To(ContainSubstring(tc.reason))
			}
			if tc.source == PodSourceMember {
				g.Expect(p.UID).To(Equal(real.UID))
				g.Expect(p.Labels).To(HaveKeyWithValue("app", "web"))
				g.Expect(real.Labels).NotTo(HaveKey(lbcfv1beta1.LabelCluster), "the fetched (cached) pod is not changed")
			} else {
				g.Expect(string(p.UID)).To(Equal("0a1b2c3d"))
				g.Expect(p.Status.PodIP).To(Equal("10.0.0.1"))
			}
		})
	}
}
