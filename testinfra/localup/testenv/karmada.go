package testenv

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The one loader of Karmada's CRDs for tests on a plain API server: the pinned release's own
// (KarmadaCRDs) where a test wants their schemas to check what it writes, schema-less stand-ins
// (KarmadaStandIns) where it only needs the kinds served.

//go:embed karmada-standins.yaml
var karmadaStandIns []byte

var karmadaDir = sync.OnceValues(func() (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/karmada-io/karmada")
	cmd.Stderr = &stderr
	dir, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locate the karmada module: %w: %s", err, stderr.String())
	}
	return strings.TrimSpace(string(dir)), nil
})

// KarmadaCRDs reads CRDs of the pinned Karmada release: charts/karmada/_crds/bases/<file> of the
// karmada module in go.mod (the release localup installs), e.g.
// "policy/policy.karmada.io_propagationpolicies.yaml".
func KarmadaCRDs(files ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir, err := karmadaDir()
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, "charts", "karmada", "_crds", "bases", f))
		if err != nil {
			return nil, err
		}
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, c); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// KarmadaStandIns returns stand-ins for Karmada kinds (same group, version, kind and scope, no
// schema) by CRD name, e.g. "clusters.cluster.karmada.io"; no name: all of them (ResourceBinding,
// Cluster, MultiClusterService, PropagationPolicy). Cluster has no CRD in Karmada
// (karmada-aggregated-apiserver serves it), so a plain API server needs its stand-in.
func KarmadaStandIns(names ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(karmadaStandIns), 4096)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(c); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		if len(names) == 0 || slices.Contains(names, c.Name) {
			out = append(out, c)
		}
	}
	if len(names) > 0 && len(out) != len(names) {
		return nil, fmt.Errorf("karmada stand-ins: asked for %v, have %d of them", names, len(out))
	}
	return out, nil
}
