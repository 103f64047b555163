package federation_test

import (
	"fmt"
	"testing"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/federation"
	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// etcdRequestLimit is etcd's default --max-request-bytes (the test etcd runs with it).
const etcdRequestLimit = 3 << 19 // 1.5 MiB

// TestMembersWithinBudgetFitTheBinding: twenty members each report a DaemonSet's 1,000 pods
// (one per node, nodes with a cloud's usual addresses) within the share of the group's budget the
// federation tells them. Their reports together must fit the ResourceBinding — one etcd object
// — or Karmada cannot write it and the group never converges. The node table used to be outside
// the budget: 1,000 long node entries beside the 1,000 items, ≈ 200 kB per member, a ≈ 4 MB
// binding that the API server refused before etcd could ("Request entity too large: limit is
// 3145728"; etcd's own limit is 1.5 MiB).
func TestMembersWithinBudgetFitTheBinding(t *testing.T) {
	const members, perMember = 20, 1000
	e := newEnvWithoutController(t)
	bg := &lbcfv1beta1.BackendGroup{ObjectMeta: metav1.ObjectMeta{Name: "ingress", Namespace: e.ns}, Spec: lbcfv1beta1.BackendGroupSpec{
		LoadBalancers: []string{"vip"},
		Pods:          &lbcfv1beta1.PodBackend{Ports: []lbcfv1beta1.PortSelector{{Port: 80, Protocol: "TCP"}}, ByLabel: &lbcfv1beta1.SelectPodByLabel{Selector: map[string]string{"app": "ingress"}}},
	}}
	e.g.Expect(e.c.Create(e.ctx, bg)).To(Succeed())
	rb := &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "ingress-backendgroup", Namespace: e.ns}, Spec: workv1alpha2.ResourceBindingSpec{
		Resource: workv1alpha2.ObjectReference{APIVersion: lbcfv1beta1.APIVersion, Kind: "BackendGroup", Namespace: e.ns, Name: bg.Name, UID: bg.UID}}}
	for m := 0; m < members; m++ {
		rb.Spec.Clusters = append(rb.Spec.Clusters, workv1alpha2.TargetCluster{Name: fmt.Sprintf("%s-m%02d", e.ns, m)})
	}
	e.g.Expect(e.c.Create(e.ctx, rb)).To(Succeed())

	budget := federation.DefaultCandidatesBudget / members // what the federation tells each member
	reported := 0
	for m := 0; m < members; m++ {
		cands := make([]lbcfv1beta1.Candidate, 0, perMember)
		for i := 0; i < perMember; i++ {
			host := fmt.Sprintf("ip-10-%d-%d-%d.eu-west-1.compute.internal", m, i/250, i%250+1)
			cands = append(cands, lbcfv1beta1.Candidate{Kind: lbcfv1beta1.CandidatePod, Name: fmt.Sprintf("ingress-nginx-controller-%s", uuid.NewUUID()[:5]),
				UID: lbcfv1beta1.ShortUID(uuid.NewUUID()), IPs: []string{fmt.Sprintf("10.%d.%d.%d", 100+m, i/250, i%250+1)}, Port: 80, Protocol: corev1.ProtocolTCP,
				Phase: corev1.PodRunning, Ready: true, NodeName: host, NodeAddresses: []corev1.NodeAddress{
					{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", m, i/250, i%250+1)},
					{Type: corev1.NodeHostName, Address: host}, {Type: corev1.NodeInternalDNS, Address: host}}})
		}
		raw, items, cut := encodeMemberReport(cands, budget)
		e.g.Expect(cut).To(BeTrue(), "member %d: 1,000 pods with their nodes exceed a twentieth of the budget", m)
		e.g.Expect(items).To(BeNumerically(">", perMember/4), "member %d still reports a good part of its pods", m)
		reported += items
		rb.Status.AggregatedStatus = append(rb.Status.AggregatedStatus, workv1alpha2.AggregatedStatusItem{
			ClusterName: rb.Spec.Clusters[m].Name, Status: raw, Applied: true, Health: workv1alpha2.ResourceHealthy})
	}
	e.g.Expect(e.c.Status().Update(e.ctx, rb)).To(Succeed(), "Karmada writes every member's report into the binding")
	size := bindingBytes(t, e.cfg, e.ns, rb.Name)
	t.Logf("%d members: %d of %d candidates reported, binding %d bytes", members, reported, members*perMember, size)
	e.g.Expect(size).To(BeNumerically("<", etcdRequestLimit))
	got := &workv1alpha2.ResourceBinding{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(rb), got)).To(Succeed())
	e.g.Expect(got.Status.AggregatedStatus).To(HaveLen(members))
}
