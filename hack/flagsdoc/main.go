// Command flagsdoc writes docs/flags.md, the flag reference of every binary under cmd/, from the
// binaries' own --help output, so the reference cannot drift from the code: `make docs` writes
// it and the package test fails when the committed file is stale.
//
// Each binary is built once into a temporary folder and run with -help. The logging flags that
// klog adds to every binary are listed once, in their own section.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

func main() {
	out := flag.String("out", "docs/flags.md", "file to write (- for standard output)")
	root := flag.String("root", ".", "repository root (holds cmd/)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	doc, err := generate(ctx, *root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flagsdoc:", err)
		os.Exit(1)
	}
	if *out == "-" {
		_, err = os.Stdout.Write(doc)
	} else {
		err = os.WriteFile(*out, doc, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flagsdoc:", err)
		os.Exit(1)
	}
}

// flagDoc is one flag as printed by the flag package's PrintDefaults.
type flagDoc struct {
	name, typ, usage, def string
}

// binary is one command under cmd/.
type binary struct {
	name    string
	summary string
	flags   []flagDoc
}

// generate builds every command under root/cmd and renders the reference.
func generate(ctx context.Context, root string) ([]byte, error) {
	names, err := commands(root)
	if err != nil {
		return nil, err
	}
	binDir, err := os.MkdirTemp("", "flagsdoc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	goTool := os.Getenv("GO")
	if goTool == "" {
		goTool = "go"
	}
	build := exec.CommandContext(ctx, goTool, "build", "-o", binDir+string(filepath.Separator), "./cmd/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/...: %w\n%s", err, out)
	}
	var bins []binary
	for _, n := range names {
		summary, err := packageSummary(filepath.Join(root, "cmd", n))
		if err != nil {
			return nil, err
		}
		help, err := helpOutput(ctx, filepath.Join(binDir, n))
		if err != nil {
			return nil, fmt.Errorf("%s -help: %w", n, err)
		}
		flags, err := parseHelp(help)
		if err != nil {
			return nil, fmt.Errorf("%s -help: %w", n, err)
		}
		bins = append(bins, binary{name: n, summary: summary, flags: flags})
	}
	return render(bins, klogFlagNames()), nil
}

// commands lists the folders under root/cmd, sorted.
func commands(root string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		return nil, fmt.Errorf("list commands: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no commands under cmd/")
	}
	sort.Strings(names)
	return names, nil
}

// packageSummary is the first paragraph of the command's package comment, on one line.
func packageSummary(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", path, err)
		}
		if f.Doc == nil {
			continue
		}
		para, _, _ := strings.Cut(strings.TrimSpace(f.Doc.Text()), "\n\n")
		return strings.Join(strings.Fields(para), " "), nil
	}
	return "", fmt.Errorf("%s: no package comment", dir)
}

// helpOutput runs bin -help; the flag package prints usage on standard error and exits 0.
func helpOutput(ctx context.Context, bin string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, "-help")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no KUBECONFIG or other settings leak into defaults
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	return out, nil
}

var (
	flagLine   = regexp.MustCompile(`^  -(\S+)(?: (\S+))?$`)
	defaultEnd = regexp.MustCompile(` \(default (.*)\)$`)
)

// parseHelp reads the flag package's PrintDefaults format:
//
//	-name type
//	  	usage, continued on further
//	  	lines (default value)
func parseHelp(help []byte) ([]flagDoc, error) {
	var (
		out []flagDoc
		cur *flagDoc
	)
	sc := bufio.NewScanner(bytes.NewReader(help))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Usage of "):
		case flagLine.MatchString(line):
			m := flagLine.FindStringSubmatch(line)
			typ := m[2]
			if typ == "" {
				typ = "bool"
			}
			out = append(out, flagDoc{name: m[1], typ: typ})
			cur = &out[len(out)-1]
		case strings.HasPrefix(line, "    \t") && cur != nil:
			text := strings.TrimPrefix(line, "    \t")
			if cur.usage != "" {
				cur.usage += " "
			}
			cur.usage += strings.TrimSpace(text)
		case strings.TrimSpace(line) == "":
		default:
			return nil, fmt.Errorf("unexpected line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no flags found")
	}
	for i := range out {
		m := defaultEnd.FindStringSubmatchIndex(out[i].usage)
		// The flag package quotes string defaults, so an unquoted "(default …)" after a string
		// flag is the author's own words.
		if m != nil && (out[i].typ != "string" || strings.HasPrefix(out[i].usage[m[2]:m[3]], `"`)) {
			out[i].def = out[i].usage[m[2]:m[3]]
			out[i].usage = out[i].usage[:m[0]]
		}
	}
	return out, nil
}

// klogFlagNames are the flags klog.InitFlags registers.
func klogFlagNames() map[string]bool {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { names[f.Name] = true })
	return names
}

// render writes the Markdown reference.
func render(bins []binary, klogNames map[string]bool) []byte {
	var b bytes.Buffer
	b.WriteString("# Command-line flags\n\n")
	b.WriteString("<!-- Generated by `make docs` (hack/flagsdoc) from each binary's -help output. Do not edit. -->\n\n")
	b.WriteString("Every binary accepts `-flag value`, `-flag=value`, `--flag value` and `--flag=value`.\n")
	b.WriteString("Boolean flags are set with `--flag` or `--flag=false`. The [logging flags](#logging-flags) are\n")
	b.WriteString("accepted by every binary that lists them.\n\n")
	for _, bin := range bins {
		fmt.Fprintf(&b, "- [%s](#%s)\n", bin.name, bin.name)
	}
	b.WriteString("- [Logging flags](#logging-flags)\n")

	var logging []flagDoc // klog's flags, taken from the first binary that has them
	for _, bin := range bins {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", bin.name, bin.summary)
		var own, klogFlags []flagDoc
		for _, f := range bin.flags {
			if klogNames[f.name] {
				klogFlags = append(klogFlags, f)
			} else {
				own = append(own, f)
			}
		}
		writeTable(&b, own)
		if len(klogFlags) > 0 {
			b.WriteString("\nAlso accepts the [logging flags](#logging-flags).\n")
			if logging == nil {
				logging = klogFlags
			}
		}
	}
	b.WriteString("\n## Logging flags\n\nklog's flags, the same in every binary. Logs go to standard error by default.\n\n")
	writeTable(&b, logging)
	return b.Bytes()
}

func writeTable(b *bytes.Buffer, flags []flagDoc) {
	b.WriteString("| Flag | Type | Default | Description |\n|---|---|---|---|\n")
	for _, f := range flags {
		def := ""
		if f.def != "" {
			def = "`" + f.def + "`"
		}
		fmt.Fprintf(b, "| `--%s` | %s | %s | %s |\n", f.name, f.typ, cell(def), cell(f.usage))
	}
}

// cell escapes what would break a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}
