package charts

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/interpreter"
	"github.com/lbfed/lbfed/lbcf/api/crd"
)

// TestChartCRDsUpToDate: both charts ship exactly the generated CRDs (`make chart-crds`, run by
// `make generate`, copies them).
func TestChartCRDsUpToDate(t *testing.T) {
	want, err := fs.Glob(crd.FS, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(want)
	for _, dir := range []string{filepath.Join("lbcf", "crds"), filepath.Join("lbfed", "files", "crds")} {
		t.Run(dir, func(t *testing.T) {
			g := NewWithT(t)
			entries, err := os.ReadDir(dir)
			g.Expect(err).NotTo(HaveOccurred())
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			g.Expect(got).To(Equal(want), "run `make chart-crds`")
			for _, name := range want {
				src, err := crd.FS.ReadFile(name)
				g.Expect(err).NotTo(HaveOccurred())
				copied, err := os.ReadFile(filepath.Join(dir, name))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(string(copied)).To(Equal(string(src)), "%s/%s is stale: run `make chart-crds`", dir, name)
			}
		})
	}
}

// TestChartLuaCustomizationsUpToDate: the lbfed chart ships exactly interpreter's Lua
// customizations (`make chart-interpreter`, run by `make generate`, copies them).
func TestChartLuaCustomizationsUpToDate(t *testing.T) {
	g := NewWithT(t)
	copied, err := os.ReadFile(filepath.Join("lbfed", "files", "interpreter", "customizations.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(copied)).To(Equal(string(interpreter.CustomizationsYAML)), "lbfed/files/interpreter/customizations.yaml is stale: run `make chart-interpreter`")
}
