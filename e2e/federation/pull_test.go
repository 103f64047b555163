//go:build e2e

package federation_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
)

// TestPullMemberPods: the pods drivers get for a Pull member's backends (lbfed-controller
// --federation-member-pods). Karmada's cluster proxy reaches a Pull member at the
// spec.apiEndpoint its karmada-agent registered (--cluster-api-endpoint; karmadactl register
// gives the member kubeconfig's server) with the impersonator token the agent reported, as it
// reaches a Push member. Where the control plane cannot reach that endpoint — often why a member
// is in Pull mode — or the agent registered none, the read fails and the driver gets the
// synthetic pod, annotated with the reason; the backend is registered all the same. The time
// from the pod being Ready to its registration is logged for each case, against the reachable
// member as the baseline.
func TestPullMemberPods(t *testing.T) {
	p := newParityEnv(t)
	var pull *localup.Cluster
	for _, m := range p.topo.Members() {
		if m.SyncMode() == localup.SyncModePull {
			pull = m
		}
	}
	if pull == nil {
		t.Skip("no Pull member in this topology")
	}
	cluster := &unstructured.Unstructured{}
	cluster.SetAPIVersion("cluster.karmada.io/v1alpha1")
	cluster.SetKind("Cluster")
	cluster.SetName(pull.Name())
	setEndpoint := func(g Gomega, endpoint string) {
		value := "null"
		if endpoint != "" {
			value = fmt.Sprintf("%q", endpoint)
		}
		g.Expect(p.karmada.Patch(p.ctx, cluster, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"apiEndpoint":`+value+`}}`)))).To(Succeed())
	}
	t.Cleanup(func() { setEndpoint(NewWithT(t), pull.Host()) })
	// An endpoint that accepts connections and never answers, as a firewall that swallows
	// packets does: each read waits for a timeout.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()

	for i, tc := range []struct {
		name, endpoint string
		reachable      bool
	}{
		{"the API endpoint the agent registered: the member's own pod", pull.Host(), true},
		{"an API endpoint the control plane cannot reach: a synthetic pod, registered", "https://192.0.2.1:6443", false},
		{"no API endpoint: a synthetic pod, registered", "", false},
		{"an API endpoint that never answers: a synthetic pod, registered", "https://" + silent.Addr().String(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			setEndpoint(g, tc.endpoint)
			d := p.serveDriver(t)
			ns := p.namespace(t, fmt.Sprintf("pull-pod%d", i))
			p.apply(g, deploy.DriverYAML(ns, "mem", d.URL, "30s")+memLBYAML(ns, "pp-lb", "mem")+
				podGroupYAML(ns, "pp", "pp", []string{"pp-lb"}, "")+placementYAML(ns, "pp", []string{pull.Name()}, "pp"))
			lbID := p.memLBID(g, ns, "pp-lb")
			// Several pods at once: a read that waits costs each of them.
			const pods = 4
			var want []string
			ready := map[string]*corev1.Pod{}
			for j := 1; j <= pods; j++ {
				p.createPod(g, pull.Name(), ns, fmt.Sprintf("pp-%d", j), map[string]string{"app": "pp"}, map[string]string{"parity.lbfed.io/note": "real"})
			}
			for j := 1; j <= pods; j++ {
				pod := p.readyPod(g, pull.Name(), ns, fmt.Sprintf("pp-%d", j))
				ready[pod.Name] = pod
				want = append(want, addr8080(pod))
			}
			start := time.Now()
			g.Eventually(d.BackendAddrs, parityWait, 100*time.Millisecond).WithArguments(lbID).Should(Equal(sortedAddrs(want...)))
			t.Logf("figure: Pull member, %s: %d pods Ready -> all registered in %s", tc.name, pods, time.Since(start).Round(100*time.Millisecond))
			for name, pod := range ready {
				sent := podSentToDriver(d, name)
				g.Expect(sent).NotTo(BeNil(), "generateBackendAddr was called for %s", name)
				if name == "pp-1" {
					t.Logf("pod sent to generateBackendAddr: source %q, reason %q", sent.Annotations[podSource], sent.Annotations[podSourceReason])
				}
				if tc.reachable {
					requireRealPods(t, g, sent)
					g.Expect(sent.Annotations).To(HaveKeyWithValue("parity.lbfed.io/note", "real"), "the member pod's annotations")
					g.Expect(sent.UID).To(Equal(pod.UID))
					continue
				}
				g.Expect(sent.Annotations).To(HaveKeyWithValue(podSource, "synthetic"))
				g.Expect(sent.Annotations).To(HaveKeyWithValue(podSourceReason, ContainSubstring("member pod unreadable")))
				g.Expect(sent.Name).To(Equal(name))
				g.Expect(sent.Status.PodIP).To(Equal(pod.Status.PodIP), "the synthetic pod carries what the report knows")
			}
			// The driver has them all: the records' Registered status follows the calls' answers.
			g.Eventually(func(g Gomega) []string { return p.registeredAddrs(g, ns, nil) }, parityWait, 100*time.Millisecond).
				Should(Equal(sortedAddrs(want...)), "the records are Registered")
		})
	}
}
