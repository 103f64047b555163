package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
	"github.com/lbfed/lbfed/testinfra/deploy"
	"github.com/lbfed/lbfed/testinfra/localup"
)

// The demo of `make up`: lbfed on the topology, and an example application whose pods in every
// member (Push and Pull) are registered on one VIP of the simulated Alteon pair.
func init() { afterReady = append(afterReady, startDemo) }

// demoInfo is what the demo leaves in the run folder for printUsage.
type demoInfo struct {
	Namespace string `json:"namespace"`
	VIP       string `json:"vip"`
	Port      int    `json:"port"`
	DriverURL string `json:"driverURL"`
	Alteon    string `json:"alteonControl"`
}

func demoPath(dir string) string { return filepath.Join(dir, "lbfed", "demo.json") }

func startDemo(ctx context.Context, t *localup.Topology) error {
	fmt.Println("building lbfed, then installing it from its Helm chart (lbfed-controller; lbcf-controller in every member) with elb-driver and alteon-sim ...")
	d, err := deploy.BuildAndStart(ctx, t, deploy.Options{})
	if err != nil {
		return err
	}
	var members []string
	for _, m := range t.Members() {
		members = append(members, m.Name())
	}
	// Gated and with a preStop sleep: `kubectl rollout restart` on the demo drops no request.
	ex := deploy.Example{Namespace: "demo", VIP: "127.0.0.100", Port: 80, Replicas: 4, Members: members, ReadinessGate: true, PreStopSeconds: 10,
		SharedDriver: true} // the front doors' driver: examples/ work as they are
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = lbcfv1beta1.AddToScheme(scheme)
	kc, err := client.New(t.KarmadaConfig(), client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	fmt.Println("creating the example: LoadBalancer on 127.0.0.100:80, Deployment + BackendGroup in every member ...")
	if err := ex.Apply(ctx, kc, d); err != nil {
		return err
	}
	if err := waitRegistered(ctx, kc, ex); err != nil {
		return err
	}
	if err := waitEveryMemberServes(ctx, ex, members); err != nil {
		return err
	}
	info := demoInfo{Namespace: ex.Namespace, VIP: ex.VIP, Port: ex.Port, DriverURL: d.DriverURL, Alteon: d.AlteonControl}
	b, _ := json.MarshalIndent(info, "", "  ")
	return os.WriteFile(demoPath(t.Dir()), b, 0o644)
}

// waitEveryMemberServes waits until requests through the VIP are answered by every member.
func waitEveryMemberServes(ctx context.Context, ex deploy.Example, members []string) error {
	// One connection per request: an L4 balancer sends a whole connection to one backend.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(4 * time.Minute)
	seen := map[string]bool{}
	for time.Now().Before(deadline) {
		rsp, err := hc.Get(fmt.Sprintf("http://%s:%d/", ex.VIP, ex.Port))
		if err == nil {
			var a struct {
				Cluster string `json:"cluster"`
			}
			_ = json.NewDecoder(rsp.Body).Decode(&a)
			rsp.Body.Close()
			seen[a.Cluster] = true
			if len(seen) == len(members) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("the VIP %s:%d did not reach every member in time (answered by %v)", ex.VIP, ex.Port, seen)
}

// printDemo tells how to reach the demo, and shows its LoadBalancer and BackendGroup.
func printDemo(dir, kubectl, karmadaKubeconfig string) {
	b, err := os.ReadFile(demoPath(dir))
	if err != nil {
		return // no demo in this run
	}
	var d demoInfo
	if json.Unmarshal(b, &d) != nil {
		return
	}
	fmt.Printf("lbfed is running: pods of every member are registered on one VIP of a simulated Alteon pair.\n")
	fmt.Printf("Each request below opens a new connection; answers come from pods of every member:\n\n")
	fmt.Printf("  for i in 1 2 3 4 5 6; do curl -s http://%s:%d/; echo; done\n\n", d.VIP, d.Port)
	fmt.Printf("The LBCF objects on Karmada (kubectl get lb,bg -n %s):\n\n", d.Namespace)
	out, _ := exec.Command(kubectl, "--kubeconfig="+karmadaKubeconfig, "get", "lb,bg", "-n", d.Namespace, "-o", "wide").CombinedOutput()
	fmt.Printf("  %s\n", strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "\n  "))
	fmt.Printf("\nBackend records, one per pod and load balancer: kubectl get br -n %s -o wide\n", d.Namespace)
	fmt.Printf("Each member's part in the group (Contributing, Unobserved, Held, Withdrawn, Recovering; see README \"Member loss\"):\n")
	fmt.Printf("  kubectl get bg -n %s -o custom-columns=GROUP:.metadata.name,MEMBER:.status.members[*].name,STATE:.status.members[*].state,REASON:.status.members[*].reason\n", d.Namespace)
	fmt.Printf("Karmada-native front doors over the same pods (README quick start): kubectl apply -f examples/mcs-loadbalancer.yaml\n")
	fmt.Printf("  (MultiClusterService, VIP 127.0.0.101) or examples/service-loadbalancer.yaml (Service type=LoadBalancer, VIP 127.0.0.102)\n")
	fmt.Printf("Alteon simulator control API (failover, faults): %s\n\n", d.Alteon)
}

// waitRegistered waits until every replica of the example is registered on the front end.
func waitRegistered(ctx context.Context, kc client.Client, ex deploy.Example) error {
	deadline := time.Now().Add(4 * time.Minute)
	bg := &lbcfv1beta1.BackendGroup{}
	for time.Now().Before(deadline) {
		err := kc.Get(ctx, client.ObjectKey{Namespace: ex.Namespace, Name: "web"}, bg)
		if err == nil && bg.Status.Backends == int32(ex.Replicas) && bg.Status.RegisteredBackends == bg.Status.Backends {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("the example's %d pods were not all registered in time (status: %d of %d)", ex.Replicas, bg.Status.RegisteredBackends, bg.Status.Backends)
}
