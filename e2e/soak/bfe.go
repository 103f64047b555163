package soak

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/lbfed/lbfed/elb/bfe"
	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
)

// BFE front end of the soak (with BFE_BIN): the first app's pods also behind one BFE route,
// host BFEHost, through a BackendGroup web-bfe of their own.
const (
	BFEHost    = "soak.bfe.test"
	BFECluster = "soakweb"
	// bfeService keys the BFE route among the "vip:port" of the Alteon's.
	bfeService = "bfe:" + BFEHost
)

// BFE is a real BFE on loopback with its driver (elb-driver --backend=bfe).
type BFE struct {
	*deploy.BFE
	store   *bfe.Store
	monitor *bfe.Monitor
}

// StartBFE runs BFE (binary bin) and its driver as processes of the topology, as e2e/federation
// does, and waits until both serve.
func StartBFE(ctx context.Context, topo *localup.Topology, lbfed *deploy.Deployment, bin string) (*BFE, error) {
	b, err := lbfed.StartBFE(ctx, topo, bin, "bfe")
	if err != nil {
		return nil, err
	}
	store, err := bfe.OpenStore(b.DataDir)
	if err != nil {
		return nil, err
	}
	return &BFE{BFE: b, store: store, monitor: &bfe.Monitor{BaseURL: b.MonitorURL}}, nil
}

// Objects are the first app's BFE route: its driver, the LoadBalancer, a group of the app's pods
// and the policy that propagates the group to every member.
func (b *BFE) Objects(ns string) ([]byte, error) {
	return []byte(deploy.DriverYAML(ns, "bfe", b.DriverURL, "15s") + fmt.Sprintf(`---
apiVersion: lbcf.tkestack.io/v1beta1
kind: LoadBalancer
metadata: {name: web-bfe, namespace: %[1]s}
spec:
  lbDriver: bfe
  lbSpec: {host: %[2]s, path: "/*", name: %[3]s}
---
apiVersion: lbcf.tkestack.io/v1beta1
kind: BackendGroup
metadata: {name: web-bfe, namespace: %[1]s}
spec:
  loadBalancers: [web-bfe]
  pods:
    byLabel: {selector: {app: web}}
    ports: [{port: 8080, protocol: TCP}]
  parameters: {weight: "1"}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web-bfe, namespace: %[1]s}
spec:
  resourceSelectors:
  - {apiVersion: lbcf.tkestack.io/v1beta1, kind: BackendGroup, name: web-bfe}
  placement: {}
`, ns, BFEHost, BFECluster)), nil
}

// Unit reads what BFE routes for the soak's host as a Unit: the driver's current configuration
// (every sub-cluster's instances of the route's cluster), after checking that BFE serves that
// configuration's version of the cluster table.
func (b *BFE) Unit(ctx context.Context) (Unit, error) {
	u := Unit{Name: "bfe", Members: map[string][]Member{}, Services: map[string]int{}}
	snap, err := b.store.Current()
	if err != nil || snap == nil {
		return u, fmt.Errorf("bfe configuration: %v", err)
	}
	var table bfeconf.ClusterTableConf
	if err := json.Unmarshal(snap.Files[bfeconf.ClusterTablePath], &table); err != nil {
		return u, fmt.Errorf("bfe cluster table: %w", err)
	}
	active, err := b.monitor.Versions(ctx)
	if err != nil {
		return u, err
	}
	if active.ClusterTable != table.Version {
		u.Orphans = append(u.Orphans, fmt.Sprintf("BFE serves cluster table %q, the configuration is %q", active.ClusterTable, table.Version))
	}
	for cluster, subs := range table.Config {
		if cluster != BFECluster {
			u.Orphans = append(u.Orphans, "cluster "+cluster)
			continue
		}
		u.Services[bfeService] = 1
		for _, instances := range subs {
			for _, in := range instances {
				u.Members[bfeService] = append(u.Members[bfeService], Member{IP: in.Addr, Port: in.Port, Weight: in.Weight, Enabled: true})
			}
		}
		SortMembers(u.Members[bfeService])
	}
	return u, nil
}
