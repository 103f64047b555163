package main

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/lbfed/lbfed/lbcf/api/crd"
	"github.com/lbfed/lbfed/testinfra/localup"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// A plain API server stands for karmada-apiserver before the chart installed the CRDs.
func TestMain(m *testing.M) { testenv.Main(m, localup.ClusterOptions{Name: "lbfedctl"}) }

// TestComponentsWaitForTheirCRDs: before karmada-apiserver serves the LBCF kinds (the chart's apply
// Job installs them after lbfed-controller), the federation's runnable waits instead of failing,
// which made the process exit and crash-loop through `helm install --wait`; once the CRDs are
// served it goes on.
func TestComponentsWaitForTheirCRDs(t *testing.T) {
	g := NewWithT(t)
	cfg := testenv.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	built := make(chan struct{})
	started := make(chan error, 1)
	r := &afterCRDs{cfg: cfg, log: klog.Background(), every: 100 * time.Millisecond, build: func() (runnable, error) {
		close(built)
		return runFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }), nil
	}}
	go func() { started <- r.Start(ctx) }()
	g.Consistently(built, 2*time.Second).ShouldNot(BeClosed(), "no manager is built without the CRDs")
	g.Expect(started).NotTo(Receive(), "nor does the runnable give up")

	crds, err := crd.CRDs()
	g.Expect(err).NotTo(HaveOccurred())
	cs, err := apiextensionsclient.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range crds {
		_, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, c, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred())
		}
		t.Cleanup(func() {
			_ = cs.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), c.Name, metav1.DeleteOptions{})
		})
	}
	g.Eventually(built, 30*time.Second).Should(BeClosed(), "built once the CRDs are served")
	cancel()
	g.Eventually(started, 10*time.Second).Should(Receive(BeNil()))
}

type runFunc func(ctx context.Context) error

func (f runFunc) Start(ctx context.Context) error { return f(ctx) }
