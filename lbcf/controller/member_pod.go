package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// AnnotationPodSource on a pod sent to a driver (generateBackendAddr, judgePodDeregister) says
// where it comes from: "member" (the member cluster's own Pod, read through Karmada's cluster
// proxy) or "synthetic" (rebuilt from the member's compact report: name, namespace, a short UID,
// IPs, node, phase and readiness — no labels, annotations or container statuses). A pod is
// synthetic when no member fetcher is configured, the member cannot be reached, or its pod is
// not the one the record was made for.
const AnnotationPodSource = "lbfed.io/pod-source"

// Values of AnnotationPodSource.
const (
	PodSourceMember    = "member"
	PodSourceSynthetic = "synthetic"
)

// MemberPodFetcher reads a member cluster's Pod. In federated mode the engine gives drivers the
// real pod when it can, and the synthetic one otherwise.
type MemberPodFetcher interface {
	// MemberPod returns the pod, or an error when the member or the pod cannot be read.
	MemberPod(ctx context.Context, cluster, namespace, name string) (*corev1.Pod, error)
}

// memberPod returns the pod to send for a federated backend: the member's own Pod when fetch
// can read it and it is the incarnation the backend names (same short UID), with the cluster
// label added; otherwise synthetic, annotated as such.
func memberPod(ctx context.Context, fetch MemberPodFetcher, cluster string, synthetic *corev1.Pod) *corev1.Pod {
	if fetch == nil || cluster == "" || synthetic == nil {
		return synthetic
	}
	p, err := fetch.MemberPod(ctx, cluster, synthetic.Namespace, synthetic.Name)
	switch {
	case err != nil:
		return markSynthetic(synthetic, fmt.Sprintf("member pod unreadable: %v", err))
	case lbcfv1beta1.ShortUID(p.UID) != lbcfv1beta1.ShortUID(synthetic.UID):
		return markSynthetic(synthetic, "the member's pod of that name is another incarnation")
	}
	p = p.DeepCopy()
	p.TypeMeta.APIVersion, p.TypeMeta.Kind = "v1", "Pod"
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[lbcfv1beta1.LabelCluster] = cluster
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[AnnotationPodSource] = PodSourceMember
	return p
}

// AnnotationPodSourceReason tells why a pod sent to a driver is synthetic.
const AnnotationPodSourceReason = "lbfed.io/pod-source-reason"

func markSynthetic(p *corev1.Pod, reason string) *corev1.Pod {
	p = p.DeepCopy()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[AnnotationPodSource] = PodSourceSynthetic
	p.Annotations[AnnotationPodSourceReason] = reason
	return p
}
