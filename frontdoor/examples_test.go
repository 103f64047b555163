package frontdoor_test

import (
	"os"
	"strings"
	"testing"

	networkingv1alpha1 "github.com/karmada-io/karmada/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/lbfed/lbfed/frontdoor"
	"github.com/lbfed/lbfed/frontdoor/service"
)

// The quick-start files of examples/ decode strictly into the kinds they name and carry what the
// front doors accept (make up applies nothing of them: a typo would only show to a reader).
func TestQuickStartExamples(t *testing.T) {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = frontdoor.AddToScheme(s)
	dec := serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
	for _, tc := range []struct {
		file string
		vip  string
	}{
		{"mcs-loadbalancer.yaml", "127.0.0.101"},
		{"service-loadbalancer.yaml", "127.0.0.102"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			g := NewWithT(t)
			b, err := os.ReadFile("../examples/" + tc.file)
			g.Expect(err).NotTo(HaveOccurred())
			var svc *corev1.Service
			var door map[string]string
			policies := 0
			for _, doc := range strings.Split(string(b), "\n---\n") {
				obj, _, err := dec.Decode([]byte(doc), nil, nil)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(obj.(interface{ GetNamespace() string }).GetNamespace()).To(Equal("demo"), "make up's demo namespace")
				switch o := obj.(type) {
				case *corev1.Service:
					svc = o
				case *networkingv1alpha1.MultiClusterService:
					g.Expect(o.Spec.Types).To(ConsistOf(networkingv1alpha1.ExposureTypeLoadBalancer))
					door = o.Annotations
				case *policyv1alpha1.PropagationPolicy:
					policies++
					g.Expect(o.Spec.ResourceSelectors).To(ContainElement(HaveField("Kind", "Service")))
				default:
					t.Fatalf("unexpected %T", obj)
				}
			}
			g.Expect(svc).NotTo(BeNil())
			g.Expect(svc.Spec.Selector).To(Equal(map[string]string{"app": "web"}), "the demo's pods")
			g.Expect(policies).To(Equal(1), "the Service is propagated")
			if door == nil { // the Service is the front door
				g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeLoadBalancer))
				g.Expect(svc.Spec.LoadBalancerClass).To(HaveValue(Equal(service.DefaultLoadBalancerClass)))
				door = svc.Annotations
			}
			vip, _, err := frontdoor.VIPAndMethod(door, "")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(vip.String()).To(Equal(tc.vip))
		})
	}
}
