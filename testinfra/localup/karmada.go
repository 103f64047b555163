package localup

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lbfed/lbfed/testinfra/localup/binaries"
)

// KarmadaName is the name of the Karmada control plane's cluster (kubeconfig, logs).
const KarmadaName = "karmada"

// karmadaHostControllers is upstream's kube-controller-manager controller list for the Karmada
// apiserver (artifacts/deploy/kube-controller-manager.yaml): the garbage collector matters most,
// since bindings are owned by their resource template.
const karmadaHostControllers = "namespace,garbagecollector,serviceaccount-token,ttl-after-finished,bootstrapsigner,tokencleaner,csrcleaner,csrsigning,clusterrole-aggregation"

// karmadaPorts are the loopback ports of the Karmada components besides the apiserver.
type karmadaPorts struct {
	aggregated                    int
	webhook, webhookMetrics       int
	webhookHealth                 int
	controllerMetrics, controller int // controller: health probe
	schedulerMetrics, scheduler   int // scheduler: health probe
}

// karmadaSetup is the part of the Karmada control plane started while its apiserver's
// kube-controller-manager comes up: aggregated apiserver, webhook and manifests.
type karmadaSetup struct {
	t     *Topology
	ports karmadaPorts
	crds  []*apiextensionsv1.CustomResourceDefinition
}

func newKarmadaSetup(t *Topology, crds []*apiextensionsv1.CustomResourceDefinition) (*karmadaSetup, error) {
	p, err := allocatePorts(9)
	if err != nil {
		return nil, err
	}
	return &karmadaSetup{t: t, crds: crds, ports: karmadaPorts{
		aggregated: p[0], webhook: p[1], webhookMetrics: p[2], webhookHealth: p[3],
		controllerMetrics: p[4], controller: p[5], schedulerMetrics: p[6], scheduler: p[7],
	}}, nil
}

// onAPIServerReady starts karmada-aggregated-apiserver and karmada-webhook, installs Karmada's
// CRDs, webhook configurations and APIService (plus the caller's CRDs), and waits for both
// components. It runs as the karmada cluster's apiserverReady hook.
func (k *karmadaSetup) onAPIServerReady(ctx context.Context, c *Cluster) error {
	kc := c.kubeconfig
	pki := c.pki
	aggregated, err := c.sup.start(ProcessSpec{
		Name: "karmada-aggregated-apiserver",
		Path: c.bins.Path(binaries.KarmadaAggregatedAPIServer),
		Tier: TierAggregated,
		Args: []string{
			"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--etcd-servers=" + k.t.etcd.clientURL,
			// Upstream it shares karmada-apiserver's storage; here the same prefix does.
			"--etcd-prefix=/" + KarmadaName,
			"--tls-cert-file=" + pki.ServingCert, "--tls-private-key-file=" + pki.ServingKey,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(k.ports.aggregated), // default 443
			"--tls-min-version=VersionTLS13",
		},
	})
	if err != nil {
		return err
	}
	webhook, err := c.sup.start(ProcessSpec{
		Name: "karmada-webhook",
		Path: c.bins.Path(binaries.KarmadaWebhook),
		Tier: TierClient,
		Args: []string{
			"--kubeconfig=" + kc,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(k.ports.webhook),
			"--cert-dir=" + pki.WebhookCertDir,
			"--metrics-bind-address=" + loopback(k.ports.webhookMetrics),
			"--health-probe-bind-address=" + loopback(k.ports.webhookHealth),
		},
	})
	if err != nil {
		return err
	}
	objs, err := k.manifests(c)
	if err != nil {
		return err
	}
	cl, err := newClient(c.RESTConfig())
	if err != nil {
		return err
	}
	if err := applyAll(ctx, cl, objs); err != nil {
		return fmt.Errorf("install karmada manifests: %w", err)
	}
	if err := waitCRDsEstablished(ctx, cl, objs); err != nil {
		return err
	}
	if err := waitFor(ctx, c.timeout, "APIService v1alpha1.cluster.karmada.io Available", []*Process{aggregated}, func(ctx context.Context) error {
		return apiServiceAvailable(ctx, cl, "v1alpha1.cluster.karmada.io")
	}); err != nil {
		return err
	}
	return waitFor(ctx, c.timeout, "karmada-webhook /readyz", []*Process{webhook}, httpOK(c.httpClient, fmt.Sprintf("https://127.0.0.1:%d/readyz/", k.ports.webhook)))
}

// manifests renders everything Karmada needs installed, in apply order.
func (k *karmadaSetup) manifests(c *Cluster) ([]*unstructured.Unstructured, error) {
	dir := c.bins.KarmadaManifests
	caB64 := base64.StdEncoding.EncodeToString(c.pki.CAPEM())
	webhookURL := "https://" + loopback(k.ports.webhook)
	// Karmada's manifests address karmada-webhook by Service; here it listens on loopback and is
	// registered by URL, so no Service (and no DNS) is needed.
	render := func(s string) string {
		return strings.NewReplacer(
			"https://karmada-webhook.karmada-system.svc:443", webhookURL,
			"https://{{name}}.{{namespace}}.svc:443", webhookURL,
			"{{caBundle}}", caB64,
		).Replace(s)
	}
	var out []*unstructured.Unstructured
	add := func(rel string) error {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			return fmt.Errorf("read karmada manifest: %w", err)
		}
		objs, err := DecodeManifests([]byte(render(string(b))))
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		out = append(out, objs...)
		return nil
	}
	if err := add("artifacts/deploy/namespace.yaml"); err != nil {
		return nil, err
	}
	crds, err := kustomizeCRDs(filepath.Join(dir, "charts/karmada/_crds"), render)
	if err != nil {
		return nil, err
	}
	out = append(out, crds...)
	for _, crd := range k.crds {
		u, err := crdToUnstructured(crd)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	for _, rel := range []string{
		"artifacts/deploy/webhook-configuration.yaml",
		"artifacts/deploy/admin-clusterrole-aggregation.yaml",
		"artifacts/deploy/cluster-proxy-admin-rbac.yaml",
	} {
		if err := add(rel); err != nil {
			return nil, err
		}
	}
	// The aggregated apiserver is reached through an ExternalName Service to localhost; the
	// aggregator then verifies its certificate against the Service's DNS name, which the shared
	// serving certificate carries.
	apiService, err := DecodeManifests([]byte(fmt.Sprintf(`
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1alpha1.cluster.karmada.io
  labels: {app: karmada-aggregated-apiserver, apiserver: "true"}
spec:
  caBundle: %s
  group: cluster.karmada.io
  groupPriorityMinimum: 2000
  version: v1alpha1
  versionPriority: 10
  service: {name: karmada-aggregated-apiserver, namespace: karmada-system, port: %d}
---
apiVersion: v1
kind: Service
metadata: {name: karmada-aggregated-apiserver, namespace: karmada-system}
spec:
  type: ExternalName
  externalName: localhost
`, caB64, k.ports.aggregated)))
	if err != nil {
		return nil, err
	}
	return append(out, apiService...), nil
}

// kustomizeCRDs does what `kubectl apply -k charts/karmada/_crds` does for that folder: read the
// listed resources and apply each patch (there: the bindings' conversion webhook) as a merge
// patch onto the CRD of the same name. It fails on any kustomization feature it does not
// implement rather than silently ignoring it.
func kustomizeCRDs(dir string, render func(string) string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, fmt.Errorf("read karmada CRDs kustomization: %w", err)
	}
	var kust struct {
		Resources []string `json:"resources"`
		Patches   []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	if err := yaml.UnmarshalStrict(b, &kust); err != nil {
		return nil, fmt.Errorf("karmada CRDs kustomization uses more than resources and patches: %w", err)
	}
	byName := map[string]*unstructured.Unstructured{}
	var out []*unstructured.Unstructured
	for _, r := range kust.Resources {
		b, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			return nil, fmt.Errorf("read karmada CRD: %w", err)
		}
		objs, err := DecodeManifests(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r, err)
		}
		for _, o := range objs {
			byName[o.GetName()] = o
			out = append(out, o)
		}
	}
	for _, p := range kust.Patches {
		b, err := os.ReadFile(filepath.Join(dir, p.Path))
		if err != nil {
			return nil, fmt.Errorf("read karmada CRD patch: %w", err)
		}
		patches, err := DecodeManifests([]byte(render(string(b))))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Path, err)
		}
		for _, patch := range patches {
			target, ok := byName[patch.GetName()]
			if !ok {
				return nil, fmt.Errorf("%s patches %s, which is not among the resources", p.Path, patch.GetName())
			}
			target.Object = mergeMaps(target.Object, patch.Object)
		}
	}
	return out, nil
}

// mergeMaps applies patch onto base with JSON merge-patch semantics for maps (lists replace).
func mergeMaps(base, patch map[string]any) map[string]any {
	for k, pv := range patch {
		if pm, ok := pv.(map[string]any); ok {
			if bm, ok := base[k].(map[string]any); ok {
				base[k] = mergeMaps(bm, pm)
				continue
			}
		}
		if pv == nil {
			delete(base, k)
			continue
		}
		base[k] = pv
	}
	return base
}

func apiServiceAvailable(ctx context.Context, c client.Client, name string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"})
	if err := c.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		return err
	}
	if status, msg := condition(u, "Available"); status != "True" {
		return fmt.Errorf("APIService %s Available=%s: %s", name, status, msg)
	}
	return nil
}

// condition returns status and message of the condition of type typ in an object's
// status.conditions.
func condition(u *unstructured.Unstructured, typ string) (string, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ {
			status, _ := m["status"].(string)
			msg, _ := m["message"].(string)
			return status, msg
		}
	}
	return "Unknown", "no " + typ + " condition"
}

// startKarmadaControllers starts karmada-controller-manager and karmada-scheduler, once the
// manifests are in place, and waits for their health probes.
func (k *karmadaSetup) startControllers(ctx context.Context, c *Cluster) error {
	kc := c.kubeconfig
	ctrl, err := c.sup.start(ProcessSpec{
		Name: "karmada-controller-manager",
		Path: c.bins.Path(binaries.KarmadaControllerManager),
		Tier: TierClient,
		Args: []string{
			"--kubeconfig=" + kc,
			"--cluster-status-update-frequency=10s",
			"--metrics-bind-address=" + loopback(k.ports.controllerMetrics),
			"--health-probe-bind-address=" + loopback(k.ports.controller),
			"--leader-elect=false",
		},
	})
	if err != nil {
		return err
	}
	sched, err := c.sup.start(ProcessSpec{
		Name: "karmada-scheduler",
		Path: c.bins.Path(binaries.KarmadaScheduler),
		Tier: TierClient,
		Args: []string{
			"--kubeconfig=" + kc,
			"--metrics-bind-address=" + loopback(k.ports.schedulerMetrics),
			"--health-probe-bind-address=" + loopback(k.ports.scheduler),
			"--enable-scheduler-estimator=false",
			"--leader-elect=false",
		},
	})
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	for _, w := range []struct {
		p    *Process
		port int
	}{{ctrl, k.ports.controller}, {sched, k.ports.scheduler}} {
		if err := waitFor(ctx, c.timeout, w.p.Name+" /healthz", []*Process{w.p}, httpOK(hc, fmt.Sprintf("http://%s/healthz", loopback(w.port)))); err != nil {
			return err
		}
	}
	return nil
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
