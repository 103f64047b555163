package soak

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
)

// PreStop is the soak pods' preStop sleep (as the demo's): a deleted pod serves that long while
// lbfed drains it from the device.
const PreStop = 10

// App is one application of the workload: a Deployment over every member with a gated
// BackendGroup on its LoadBalancer web-vip (always), a second LoadBalancer web-extra the group
// is given and taken, and — for the first app — a Service whose MultiClusterService front door
// is created and deleted.
type App struct {
	Index     int
	Namespace string
	VIP       string // web-vip: "ip:80"
	ExtraVIP  string // web-extra
	MCSVIP    string // the MultiClusterService's, "" when the app has none
	Example   deploy.Example

	mu sync.Mutex
	// What the soak has asked for: the group has web-extra, the MCS exists, per-member weights
	// from the OverridePolicy (nil: the group's own, 1).
	extra   bool
	mcs     bool
	weights map[string]int
	// bfe: the app's pods are also behind the BFE route (group web-bfe).
	bfe bool
}

// Groups are the app's BackendGroups.
func (a *App) Groups() []string {
	if a.bfe {
		return []string{"web", "web-bfe"}
	}
	return []string{"web"}
}

// NewApps lays out n applications on 127.7.<i>.x (pod networks take 127.16.0.0 and above).
func NewApps(n int, members []string, driverURL string) []*App {
	var out []*App
	for i := range n {
		a := &App{Index: i, Namespace: fmt.Sprintf("soak-%d", i),
			VIP: fmt.Sprintf("127.7.%d.1:80", i), ExtraVIP: fmt.Sprintf("127.7.%d.2:80", i)}
		if i == 0 {
			a.MCSVIP = fmt.Sprintf("127.7.%d.3:80", i)
		}
		a.Example = deploy.Example{Namespace: a.Namespace, VIP: strings.TrimSuffix(a.VIP, ":80"), Port: 80, Replicas: 4, Members: members,
			ReadinessGate: true, PreStopSeconds: PreStop, SharedDriver: i == 0, DriverURL: driverURL, DriverTimeout: "15s"}
		out = append(out, a)
	}
	return out
}

// extraObjects are the app's objects besides the example's: web-extra, and for the front door
// the Service web and its PropagationPolicy.
func (a *App) extraObjects() ([]*unstructured.Unstructured, error) {
	s := fmt.Sprintf(`
apiVersion: lbcf.tkestack.io/v1beta1
kind: LoadBalancer
metadata: {name: web-extra, namespace: %s}
spec:
  lbDriver: radware
  lbSpec: {vip: "%s", port: "80", protocol: TCP, method: rr}
`, a.Namespace, strings.TrimSuffix(a.ExtraVIP, ":80"))
	if a.MCSVIP != "" {
		s += fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: %[1]s}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web-service, namespace: %[1]s}
spec:
  resourceSelectors:
  - {apiVersion: v1, kind: Service, name: web}
  placement: {}
`, a.Namespace)
	}
	return localup.DecodeManifests([]byte(s))
}

// mcsObject is the app's MultiClusterService.
func (a *App) mcsObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	_ = yaml.Unmarshal([]byte(fmt.Sprintf(`
apiVersion: networking.karmada.io/v1alpha1
kind: MultiClusterService
metadata:
  name: web
  namespace: %s
  annotations: {lb.zdns.cn/vip: "%s", lb.zdns.cn/method: rr}
spec:
  types: [LoadBalancer]
`, a.Namespace, strings.TrimSuffix(a.MCSVIP, ":80"))), &u.Object)
	return u
}

// weightsObject is the OverridePolicy giving the group per-member weights.
func (a *App) weightsObject(weights map[string]int) *unstructured.Unstructured {
	var rules strings.Builder
	members := make([]string, 0, len(weights))
	for m := range weights {
		members = append(members, m)
	}
	sort.Strings(members)
	for _, m := range members {
		fmt.Fprintf(&rules, `
  - targetCluster: {clusterNames: [%s]}
    overriders:
      plaintext:
      - {path: /spec/parameters/weight, operator: replace, value: "%d"}`, m, weights[m])
	}
	u := &unstructured.Unstructured{}
	_ = yaml.Unmarshal([]byte(fmt.Sprintf(`
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata: {name: web-weights, namespace: %s}
spec:
  resourceSelectors:
  - {apiVersion: lbcf.tkestack.io/v1beta1, kind: BackendGroup, name: web}
  overrideRules:%s
`, a.Namespace, rules.String())), &u.Object)
	return u
}

// LoadBalancers maps the app's LoadBalancer names to their "vip:port" (the MCS's generated one
// while the front door exists).
func (a *App) LoadBalancers() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]string{"web-vip": a.VIP, "web-extra": a.ExtraVIP}
	if a.mcs {
		out["mcs-web-tcp-80"] = a.MCSVIP
	}
	if a.bfe {
		out["web-bfe"] = bfeService
	}
	return out
}

// sync reads back what the app declares on Karmada — the group's LoadBalancers, the front door,
// the OverridePolicy's weights — so that a change whose answer was lost (Karmada's API server
// killed mid-call) is not mistaken for one not made, or the reverse.
func (a *App) sync(ctx context.Context, karmada client.Client) error {
	bg := &unstructured.Unstructured{}
	bg.SetAPIVersion("lbcf.tkestack.io/v1beta1")
	bg.SetKind("BackendGroup")
	if err := karmada.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: "web"}, bg); err != nil {
		return err
	}
	lbs, _, _ := unstructured.NestedStringSlice(bg.Object, "spec", "loadBalancers")
	mcs := false
	if a.MCSVIP != "" {
		u := a.mcsObject()
		err := karmada.Get(ctx, client.ObjectKeyFromObject(u), u)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		mcs = err == nil && u.GetDeletionTimestamp() == nil
	}
	op := a.weightsObject(nil)
	var weights map[string]int
	switch err := karmada.Get(ctx, client.ObjectKeyFromObject(op), op); {
	case err == nil:
		rules, _, _ := unstructured.NestedSlice(op.Object, "spec", "overrideRules")
		weights = map[string]int{}
		for _, rule := range rules {
			names, _, _ := unstructured.NestedStringSlice(rule.(map[string]any), "targetCluster", "clusterNames")
			texts, _, _ := unstructured.NestedSlice(rule.(map[string]any), "overriders", "plaintext")
			if len(names) == 1 && len(texts) == 1 {
				v, _ := strconv.Atoi(fmt.Sprint(texts[0].(map[string]any)["value"]))
				weights[names[0]] = v
			}
		}
	case !apierrors.IsNotFound(err):
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.extra = slices.Contains(lbs, "web-extra")
	a.mcs = mcs
	a.weights = weights
	return nil
}

// want adds what the device must hold for the app, given each member's Ready pods.
func (a *App) want(into Want, ready map[string][]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var weighted, plain []Member
	for m, addrs := range ready {
		w := 1
		if a.weights != nil {
			w = a.weights[m]
		}
		for _, addr := range addrs {
			ip, _, _ := strings.Cut(addr, ":")
			weighted = append(weighted, Member{IP: ip, Port: 8080, Weight: w, Enabled: true})
			plain = append(plain, Member{IP: ip, Port: 8080, Weight: 1, Enabled: true})
		}
	}
	into[a.VIP] = weighted
	into[a.ExtraVIP] = nil
	if a.extra {
		into[a.ExtraVIP] = weighted
	}
	if a.mcs {
		into[a.MCSVIP] = plain
	}
	if a.bfe {
		into[bfeService] = plain
	}
}
