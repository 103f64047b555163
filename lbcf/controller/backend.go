package controller

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/lbcf/driver"
)

// Backend is one candidate backend of a BackendGroup (a pod × port, a node × Service nodePort,
// or a static address), whatever cluster it comes from.
type Backend struct {
	Kind lbcfv1beta1.CandidateKind
	// Name is the pod name (Pod), the Service name (Node), or the address (Static).
	Name string
	// UID is the pod UID (the full UID locally, lbcfv1beta1.ShortUID in federated reports).
	UID string
	// Port is the pod port or the Service port.
	Port lbcfv1beta1.PortSelector
	// NodeName is the pod's node, or the node of a Service backend.
	NodeName string
	// NodePort is the Service's nodePort (Node).
	NodePort int32
	// IPs are the pod IPs (Pod).
	IPs []string
	// NodeAddresses are the addresses of NodeName, when known.
	NodeAddresses []corev1.NodeAddress
	// Cluster is the member cluster of a federated backend ("" locally).
	Cluster string
	// Parameters override the group's spec.parameters (federation: the member's effective ones).
	Parameters map[string]string

	// Pod state (Pod): what registration and the deregister policies look at.
	Phase    corev1.PodPhase
	Ready    bool
	HasIP    bool
	Deleting bool
	// ReadinessUnobserved (Pod): not Ready on control-plane evidence alone (its node's kubelet
	// unheard, or Ready cleared by the node lifecycle controller while its containers are ready):
	// registration keeps it for a grace period and a floor, as a member that cannot be observed
	// (see keptPods).
	ReadinessUnobserved bool
	// Pod is the pod object when the source has it (local pods); see PodObject.
	Pod *corev1.Pod
}

// PodObject is the pod sent to drivers (generateBackendAddr, judgePodDeregister): the real pod
// when the source has one, otherwise one rebuilt from what the backend knows — name, namespace,
// UID, IPs, node, phase, readiness and the member cluster — built only when needed, so that
// tens of thousands of federated backends do not each carry a pod object.
func (b *Backend) PodObject(namespace string) *corev1.Pod {
	if b.Pod != nil {
		return b.Pod
	}
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: namespace, UID: types.UID(b.UID),
			Annotations: map[string]string{AnnotationPodSource: PodSourceSynthetic}},
		Spec:   corev1.PodSpec{NodeName: b.NodeName},
		Status: corev1.PodStatus{Phase: b.Phase},
	}
	if b.Cluster != "" {
		p.Labels = map[string]string{lbcfv1beta1.LabelCluster: b.Cluster}
	}
	ready := corev1.ConditionFalse
	if b.Ready {
		ready = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
	for _, ip := range b.IPs {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(b.IPs) > 0 {
		p.Status.PodIP = b.IPs[0]
	}
	for _, a := range b.NodeAddresses {
		if a.Type == corev1.NodeInternalIP {
			p.Status.HostIP = a.Address
			break
		}
	}
	if b.Deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

// Candidate converts the backend to the compact form member clusters report.
func (b *Backend) Candidate() lbcfv1beta1.Candidate {
	c := lbcfv1beta1.Candidate{Kind: b.Kind, NodeName: b.NodeName, NodeAddresses: b.NodeAddresses, Deleting: b.Deleting}
	switch b.Kind {
	case lbcfv1beta1.CandidatePod:
		c.Name, c.UID, c.IPs, c.Phase, c.Ready = b.Name, lbcfv1beta1.ShortUID(types.UID(b.UID)), b.IPs, b.Phase, b.Ready
		c.Unobserved = b.ReadinessUnobserved && !b.Ready
		c.Port, c.Protocol = b.Port.GetPort(), corev1.Protocol(b.Port.GetProtocol())
	case lbcfv1beta1.CandidateNode:
		c.Port, c.Protocol, c.NodePort, c.Ready = b.Port.GetPort(), corev1.Protocol(b.Port.GetProtocol()), b.NodePort, b.Ready
	default:
		c.Name, c.Ready = b.Name, true
	}
	return c
}

// Eligible reports whether the backend may be registered: pods must be Ready, have an IP and
// not be terminating; nodes must not be terminating; static addresses always are.
func (b *Backend) Eligible() bool {
	switch b.Kind {
	case lbcfv1beta1.CandidatePod:
		return b.Ready && b.HasIP && !b.Deleting
	case lbcfv1beta1.CandidateNode:
		return !b.Deleting
	}
	return true
}

// RecordName is the deterministic name of the backend's record for one LoadBalancer: the
// original's names locally; federated backends add the cluster so members never collide.
func (b *Backend) RecordName(lbName, groupName string) string {
	proto := b.Port.GetProtocol()
	if b.Cluster != "" {
		var s string
		switch b.Kind {
		case lbcfv1beta1.CandidatePod:
			s = fmt.Sprintf("%s_%s_%s_%s_%s_%d_%s", lbName, groupName, b.Cluster, b.Name, b.UID, b.Port.GetPort(), proto)
		case lbcfv1beta1.CandidateNode:
			s = fmt.Sprintf("%s_%s_%s_%s_%d_%s_%s", lbName, groupName, b.Cluster, b.Name, b.Port.GetPort(), proto, b.NodeName)
		default:
			s = fmt.Sprintf("%s_%s_%s_%s", lbName, groupName, b.Cluster, b.Name)
		}
		sum := md5.Sum([]byte(s))
		return hex.EncodeToString(sum[:])
	}
	switch b.Kind {
	case lbcfv1beta1.CandidatePod:
		return lbcfv1beta1.PodRecordName(lbName, groupName, b.UID, b.Port.GetPort(), proto)
	case lbcfv1beta1.CandidateNode:
		return lbcfv1beta1.ServiceRecordName(lbName, groupName, b.Name, b.Port.GetPort(), proto, b.NodeName)
	}
	return lbcfv1beta1.StaticRecordName(lbName, groupName, b.Name)
}

// BackendSource lists a BackendGroup's candidate backends.
type BackendSource interface {
	// Backends returns every candidate of bg that is known. authoritative tells, for an existing
	// record, whether the source knows enough to deregister it when its backend is not listed
	// (a federation member whose report is truncated or unknown is not authoritative: its records
	// are kept). A nil authoritative means the list is complete.
	Backends(ctx context.Context, bg *lbcfv1beta1.BackendGroup) (backends []Backend, authoritative func(*lbcfv1beta1.BackendRecord) bool, err error)
}

// Requeuer is implemented by sources whose answer changes with time alone (e.g. a member's
// grace period running out): the group is reconciled again after the returned delay (0: never).
type Requeuer interface {
	RequeueAfter(bg *lbcfv1beta1.BackendGroup) time.Duration
}

// StatusContributor is implemented by sources that own part of a group's status (the
// federation's per-member state and conditions). It is called before every status write of the
// group, with the object about to be written.
type StatusContributor interface {
	ContributeStatus(ctx context.Context, bg *lbcfv1beta1.BackendGroup) error
}

// AddrRequestBuilder fills the pod or Service part of a record's generateBackendAddr request.
type AddrRequestBuilder interface {
	// GenerateRequest returns the pod (or Service) backend of br. ok is false when the backend is
	// gone or not eligible any more: no address is generated, and the BackendGroup reconciler will
	// delete the record.
	GenerateRequest(ctx context.Context, br *lbcfv1beta1.BackendRecord) (pod *driver.PodBackendInRequest, svc *driver.ServiceBackendInRequest, ok bool, err error)
}
