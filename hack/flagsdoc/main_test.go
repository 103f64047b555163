package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
)

// TestFlagsDocUpToDate fails when docs/flags.md differs from what the binaries print today.
func TestFlagsDocUpToDate(t *testing.T) {
	g := gomega.NewWithT(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	want, err := generate(ctx, root)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	got, err := os.ReadFile(filepath.Join(root, "docs", "flags.md"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	if string(got) != string(want) {
		t.Fatalf("docs/flags.md is stale: run `make docs` and commit it (first difference at line %d)", firstDiffLine(string(got), string(want)))
	}
}

func firstDiffLine(a, b string) int {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}

func TestParseHelp(t *testing.T) {
	help := "Usage of x:\n" +
		"  -addr string\n    \tlisten address (default \":80\")\n" +
		"  -on\n    \tturn it on (default true)\n" +
		"  -pw string\n    \tpassword file (default password: admin)\n" +
		"  -long duration\n    \tfirst line\n    \tsecond line (default 1m0s)\n" +
		"  -v value\n    \tverbosity\n"
	got, err := parseHelp([]byte(help))
	if err != nil {
		t.Fatal(err)
	}
	want := []flagDoc{
		{name: "addr", typ: "string", usage: "listen address", def: `":80"`},
		{name: "on", typ: "bool", usage: "turn it on", def: "true"},
		{name: "pw", typ: "string", usage: "password file (default password: admin)"},
		{name: "long", typ: "duration", usage: "first line second line", def: "1m0s"},
		{name: "v", typ: "value", usage: "verbosity"},
	}
	gomega.NewWithT(t).Expect(got).To(gomega.Equal(want))

	_, err = parseHelp([]byte("Usage of x:\nsomething else\n"))
	gomega.NewWithT(t).Expect(err).To(gomega.MatchError(gomega.ContainSubstring("unexpected line")))
}

func TestCellEscapes(t *testing.T) {
	gomega.NewWithT(t).Expect(cell("a|b <c>")).To(gomega.Equal(`a\|b &lt;c&gt;`))
}
