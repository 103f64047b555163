package deploy

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WaitRBAC waits until the API server behind c authorizes the ServiceAccount namespace/sa for
// every rule the chart's bindings (in objs) grant it. Bindings reach members through Karmada
// propagation and the authorizer's informers lag behind writes, so a process started earlier
// would log "forbidden" for a while — a kubelet-started pod would too, but the tests read those
// lines as missing permissions.
func WaitRBAC(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, namespace, sa string) error {
	reviews, err := grantedReviews(objs, namespace, sa)
	if err != nil {
		return err
	}
	if len(reviews) == 0 {
		return fmt.Errorf("the chart binds no role to ServiceAccount %s/%s", namespace, sa)
	}
	return poll(ctx, 4*time.Minute, func() error {
		for _, r := range reviews {
			sar := r.DeepCopy()
			if err := c.Create(ctx, sar); err != nil {
				return fmt.Errorf("SubjectAccessReview: %w", err)
			}
			if !sar.Status.Allowed {
				a := sar.Spec.ResourceAttributes
				return fmt.Errorf("%s may not yet %s %s.%s in %q", sar.Spec.User, a.Verb, a.Resource, a.Group, a.Namespace)
			}
		}
		return nil
	})
}

// grantedReviews turns every (group, resource, verb) the chart's roles grant the ServiceAccount
// into a SubjectAccessReview; wildcard and resourceNames rules are checked through one concrete
// request each.
func grantedReviews(objs []*unstructured.Unstructured, namespace, sa string) ([]*authorizationv1.SubjectAccessReview, error) {
	user := "system:serviceaccount:" + namespace + ":" + sa
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	roles := map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			r := &rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, r); err != nil {
				return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
			}
			roles[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = r.Rules
		}
	}
	var out []*authorizationv1.SubjectAccessReview
	for _, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
			continue
		}
		b := &rbacv1.RoleBinding{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, b); err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		bound := false
		for _, s := range b.Subjects {
			bound = bound || (s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == namespace)
		}
		if !bound {
			continue
		}
		roleNS := ""
		if b.RoleRef.Kind == "Role" {
			roleNS = o.GetNamespace()
		}
		rules, ok := roles[b.RoleRef.Kind+"/"+roleNS+"/"+b.RoleRef.Name]
		if !ok {
			continue // a role the chart does not render (e.g. a built-in one)
		}
		for _, rule := range rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, verb := range rule.Verbs {
						resource, sub, _ := strings.Cut(res, "/")
						a := &authorizationv1.ResourceAttributes{Namespace: o.GetNamespace(), Group: g, Resource: resource, Subresource: sub, Verb: verb}
						if len(rule.ResourceNames) > 0 {
							a.Name = rule.ResourceNames[0]
						}
						out = append(out, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
							User: user, Groups: groups, ResourceAttributes: a,
						}})
					}
				}
			}
		}
	}
	return out, nil
}
