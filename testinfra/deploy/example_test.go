package deploy

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestExampleObjects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shared bool
		want   []string
	}{
		{"namespaced driver only", false, []string{"Namespace/demo", "LoadBalancerDriver/radware", "LoadBalancer/web-vip", "Deployment/web", "BackendGroup/web", "PropagationPolicy/web"}},
		{"with the front doors' shared driver", true, []string{"Namespace/demo", "LoadBalancerDriver/radware", "LoadBalancerDriver/lbcf-radware", "LoadBalancer/web-vip", "Deployment/web", "BackendGroup/web", "PropagationPolicy/web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ex := Example{Namespace: "demo", VIP: "127.0.0.100", Port: 80, Replicas: 2, Members: []string{"m1", "m2"}, SharedDriver: tc.shared}
			objs, err := ex.Objects(&Deployment{DriverURL: "https://127.0.0.1:1"})
			g.Expect(err).NotTo(HaveOccurred())
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
				if o.GetKind() == "LoadBalancerDriver" {
					g.Expect(o.Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("url", "https://127.0.0.1:1")))
					g.Expect(o.Object["spec"].(map[string]any)["webhooks"]).To(HaveLen(8), o.GetName())
				}
			}
			g.Expect(got).To(Equal(tc.want))
			if tc.shared {
				g.Expect(objs[2].GetNamespace()).To(Equal("kube-system"))
			}
		})
	}
}

func TestDriverYAML(t *testing.T) {
	g := NewWithT(t)
	want := `---
apiVersion: lbcf.tkestack.io/v1beta1
kind: LoadBalancerDriver
metadata: {name: mem, namespace: ns1}
spec:
  driverType: Webhook
  url: http://127.0.0.1:1
  webhooks:
  - {name: validateLoadBalancer, timeout: 10s}
  - {name: createLoadBalancer, timeout: 30s}
  - {name: ensureLoadBalancer, timeout: 30s}
  - {name: deleteLoadBalancer, timeout: 30s}
  - {name: validateBackend, timeout: 10s}
  - {name: generateBackendAddr, timeout: 10s}
  - {name: ensureBackend, timeout: 30s}
  - {name: deregisterBackend, timeout: 30s}
`
	g.Expect(DriverYAML("ns1", "mem", "http://127.0.0.1:1", "30s")).To(Equal(want))
	g.Expect(DriverYAML("ns1", "mem", "http://127.0.0.1:1", "")).To(ContainSubstring("{name: ensureBackend, timeout: 1m}"))
}
