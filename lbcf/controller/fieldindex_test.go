package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/localup/testenv"
)

// TestFieldIndexServesCacheLookups: IndexField's indexes answer the cache's List(MatchingFields)
// of their scope, in a cache of every namespace and in one of some namespaces, with one key per
// value where controller-runtime's IndexField keeps two; and its keys are among those
// controller-runtime's own index computes for the same values (its key format is internal to
// controller-runtime: a change there fails here).
func TestFieldIndexServesCacheLookups(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = lbcfv1beta1.AddToScheme(s)
	cfg := testenv.Config(t)
	c, err := client.New(cfg, client.Options{Scheme: s})
	g.Expect(err).NotTo(HaveOccurred())
	var nss []string
	for range 2 {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fieldindex-"}}
		g.Expect(c.Create(ctx, ns)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
		nss = append(nss, ns.Name)
	}
	for _, r := range []struct{ ns, name, group string }{{nss[0], "a", "g"}, {nss[1], "b", "g"}, {nss[0], "c", "h"}, {nss[1], "d", ""}} {
		br := &lbcfv1beta1.BackendRecord{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.ns},
			Spec: lbcfv1beta1.BackendRecordSpec{LBName: "lb", LBDriver: "drv"}}
		if r.group != "" {
			br.Labels = map[string]string{lbcfv1beta1.LabelGroupName: r.group}
		}
		g.Expect(c.Create(ctx, br)).To(Succeed())
	}
	group := func(o client.Object) []string {
		if v := o.GetLabels()[lbcfv1beta1.LabelGroupName]; v != "" {
			return []string{v}
		}
		return nil
	}

	for _, tc := range []struct {
		name     string
		opts     cache.Options
		oneStore bool
	}{
		{"every namespace", cache.Options{}, true},
		{"some namespaces", cache.Options{DefaultNamespaces: map[string]cache.Config{nss[0]: {}, nss[1]: {}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.opts.Scheme = s
			ca, err := cache.New(cfg, tc.opts)
			g.Expect(err).NotTo(HaveOccurred())
			obj := &lbcfv1beta1.BackendRecord{}
			g.Expect(IndexField(ctx, ca, obj, "test.in", InNamespaceLookups, group)).To(Succeed())
			g.Expect(IndexField(ctx, ca, obj, "test.across", AcrossNamespaceLookups, group)).To(Succeed())
			g.Expect(ca.IndexField(ctx, obj, "test.theirs", group)).To(Succeed())
			cctx, stop := context.WithCancel(ctx)
			defer stop()
			go func() { _ = ca.Start(cctx) }()
			g.Expect(ca.WaitForCacheSync(cctx)).To(BeTrue())

			names := func(opts ...client.ListOption) []string {
				list := &lbcfv1beta1.BackendRecordList{}
				g.Expect(ca.List(ctx, list, opts...)).To(Succeed())
				var out []string
				for i := range list.Items {
					out = append(out, list.Items[i].Name)
				}
				return out
			}
			g.Expect(names(client.InNamespace(nss[0]), client.MatchingFields{"test.in": "g"})).To(ConsistOf("a"))
			g.Expect(names(client.InNamespace(nss[1]), client.MatchingFields{"test.in": "g"})).To(ConsistOf("b"))
			g.Expect(names(client.InNamespace(nss[0]), client.MatchingFields{"test.in": "h"})).To(ConsistOf("c"))
			g.Expect(names(client.MatchingFields{"test.across": "g"})).To(ConsistOf("a", "b"))
			g.Expect(names(client.MatchingFields{"test.across": "h"})).To(ConsistOf("c"))
			// Each index answers its own kind of lookup only.
			g.Expect(names(client.MatchingFields{"test.in": "g"})).To(BeEmpty())
			g.Expect(names(client.InNamespace(nss[0]), client.MatchingFields{"test.across": "g"})).To(BeEmpty())

			if !tc.oneStore {
				return // a store per namespace, not shown by the cache's informer
			}
			// Keys: one per value, each one of controller-runtime's own index.
			inf, err := ca.GetInformer(ctx, obj)
			g.Expect(err).NotTo(HaveOccurred())
			store := inf.(interface{ GetIndexer() toolscache.Indexer }).GetIndexer()
			in, across := store.ListIndexFuncValues("field:test.in"), store.ListIndexFuncValues("field:test.across")
			theirs := store.ListIndexFuncValues("field:test.theirs")
			g.Expect(in).To(ConsistOf(nss[0]+"/g", nss[1]+"/g", nss[0]+"/h"))
			g.Expect(across).To(ConsistOf("__all_namespaces/g", "__all_namespaces/h"))
			g.Expect(theirs).To(ConsistOf(append(in, across...)))
		})
	}
}
