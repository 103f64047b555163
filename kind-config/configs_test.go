// Package kindconfig_test keeps the kind cluster configs of `make up-kind` from rotting: they are
// decoded strictly with kind's own v1alpha4 types, as `kind create cluster --config` does, and
// checked against what hack/kind/cluster-up.sh takes from them (name, subnets) and assumes.
package kindconfig_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	yaml "go.yaml.in/yaml/v3"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// clusters are the configs cluster-up.sh creates, by file name without .yaml.
var clusters = []string{"karmada-host", "m1", "m2"}

// decode mirrors kind's loader: YAML v3, unknown fields rejected.
func decode(data []byte) (*kindv1alpha4.Cluster, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	c := &kindv1alpha4.Cluster{}
	if err := dec.Decode(c); err != nil {
		return nil, err
	}
	return c, nil
}

// check validates what kind would and what cluster-up.sh relies on.
func check(c *kindv1alpha4.Cluster, file string) error {
	if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
		return fmt.Errorf("%s: kind/apiVersion %s/%s", file, c.Kind, c.APIVersion)
	}
	if want := "lbfed-" + strings.TrimSuffix(filepath.Base(file), ".yaml"); c.Name != want {
		return fmt.Errorf("%s: name %q, cluster-up.sh expects %q", file, c.Name, want)
	}
	controlPlanes := 0
	for _, n := range c.Nodes {
		switch n.Role {
		case kindv1alpha4.ControlPlaneRole:
			controlPlanes++
		case kindv1alpha4.WorkerRole:
			// The static ptp CNI (no kindnetd offline) routes the pods of one node per cluster.
			return fmt.Errorf("%s: a worker node: cluster-up.sh runs one node per cluster", file)
		default:
			return fmt.Errorf("%s: unknown node role %q", file, n.Role)
		}
	}
	// cluster-up.sh addresses the single "<name>-control-plane" container.
	if controlPlanes != 1 {
		return fmt.Errorf("%s: %d control-plane nodes, want 1", file, controlPlanes)
	}
	for _, s := range []string{c.Networking.PodSubnet, c.Networking.ServiceSubnet} {
		if _, err := netip.ParsePrefix(s); err != nil {
			return fmt.Errorf("%s: subnet: %w", file, err)
		}
	}
	return nil
}

func TestConfigs(t *testing.T) {
	g := NewWithT(t)
	files, err := filepath.Glob("*.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(f, ".yaml"))
	}
	sort.Strings(names)
	g.Expect(names).To(ConsistOf(clusters), "every config is used by cluster-up.sh and the other way round")

	script, err := os.ReadFile("../hack/kind/lib.sh")
	g.Expect(err).NotTo(HaveOccurred())
	type subnet struct {
		prefix netip.Prefix
		owner  string
	}
	var subnets []subnet
	for _, name := range clusters {
		file := name + ".yaml"
		data, err := os.ReadFile(file)
		g.Expect(err).NotTo(HaveOccurred())
		c, err := decode(data)
		g.Expect(err).NotTo(HaveOccurred(), file)
		g.Expect(check(c, file)).To(Succeed())
		g.Expect(string(script)).To(ContainSubstring(name), "hack/kind/lib.sh lists %s in CLUSTERS", name)
		for _, s := range []string{c.Networking.PodSubnet, c.Networking.ServiceSubnet} {
			p := netip.MustParsePrefix(s)
			for _, other := range subnets {
				g.Expect(p.Overlaps(other.prefix)).To(BeFalse(), "%s %s overlaps %s %s", file, p, other.owner, other.prefix)
			}
			subnets = append(subnets, subnet{p, file})
		}
		kindv1alpha4.SetDefaultsCluster(c) // what kind applies next must accept the config
		g.Expect(c.Nodes).NotTo(BeEmpty())
	}
}

// TestChecksCatchMistakes shows the checks above fail on the mistakes they exist for.
func TestChecksCatchMistakes(t *testing.T) {
	base := "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nname: lbfed-m1\nnetworking: {podSubnet: 10.12.0.0/16, serviceSubnet: 10.13.0.0/16}\nnodes:\n- role: control-plane\n"
	tests := []struct {
		name, yaml, wantErr string
	}{
		{"valid", base, ""},
		{"misspelt field", strings.Replace(base, "podSubnet", "podSubnets", 1), "field podSubnets not found"},
		{"old apiVersion", strings.Replace(base, "v1alpha4", "v1alpha3", 1), "kind/apiVersion"},
		{"wrong name", strings.Replace(base, "lbfed-m1", "m1", 1), "cluster-up.sh expects"},
		{"a worker", base + "- role: worker\n", "one node per cluster"},
		{"two control planes", base + "- role: control-plane\n", "2 control-plane nodes"},
		{"bad role", base + "- role: master\n", "unknown node role"},
		{"bad subnet", strings.Replace(base, "10.12.0.0/16", "10.12.0.0/33", 1), "subnet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c, err := decode([]byte(tc.yaml))
			if err == nil {
				err = check(c, "m1.yaml")
			}
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}
