// Command benchtable reads `go test -bench` output and prints one table: each figure of the
// project's benchmarks, its target, and its ratio to the baseline measured in the same run.
//
// Targets and baselines are listed in targets.go; a figure without an entry is printed with its
// value only, so a new benchmark shows up before anyone writes its target. The input is the plain
// text format of `go test -bench` ("pkg:" lines, then "BenchmarkName-N  iters  value unit ...");
// golang.org/x/perf/benchfmt reads it too, but that module has no release and the format needs
// a dozen lines here.
//
//	go test -run '^$' -bench . -benchtime 1x ./... | go run ./hack/benchtable
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// figure is one value a benchmark reported.
type figure struct {
	pkg, bench, unit string
	value            float64
}

func (f figure) key() string { return f.pkg + " " + f.bench + " " + f.unit }

// The GOMAXPROCS suffix ("-2") is not part of a benchmark's name.
var procSuffix = regexp.MustCompile(`-\d+$`)

// parse reads go test -bench output; other lines (logs, PASS, ok) are passed over.
func parse(r io.Reader) ([]figure, error) {
	var out []figure
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimPrefix(strings.TrimSpace(p), "github.com/lbfed/lbfed/")
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(fields[1]); err != nil {
			continue // a log line that happens to start with a benchmark's name
		}
		name := procSuffix.ReplaceAllString(fields[0], "")
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark %s: value %q: %w", name, fields[i], err)
			}
			out = append(out, figure{pkg: pkg, bench: name, unit: fields[i+1], value: v})
		}
	}
	return out, sc.Err()
}

// row is one line of the table.
type row struct {
	figure
	target, verdict, baseline, ratio string
}

func table(figs []figure, targets []target) []row {
	byKey := map[string]figure{}
	for _, f := range figs {
		byKey[f.key()] = f // with -count > 1 the last run stands
	}
	var rows []row
	seen := map[string]bool{}
	for _, f := range figs {
		if seen[f.key()] {
			continue
		}
		seen[f.key()] = true
		r := row{figure: f, target: "-", verdict: "", baseline: "-", ratio: "-"}
		if t, ok := find(targets, f); ok {
			if t.Op != "" {
				r.target = fmt.Sprintf("%s %g", t.Op, t.Value)
				if t.met(f.value) {
					r.verdict = "met"
				} else {
					r.verdict = "MISSED"
				}
			}
			if b, ok := t.baselineOf(f, byKey); ok {
				r.baseline = b.label
				if b.value != 0 {
					r.ratio = fmt.Sprintf("%.3g", f.value/b.value)
				}
			}
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].pkg != rows[j].pkg {
			return rows[i].pkg < rows[j].pkg
		}
		return rows[i].bench < rows[j].bench
	})
	return rows
}

func write(w io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "package\tbenchmark\tfigure\tvalue\ttarget\t\tbaseline (same run)\tratio")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.pkg, strings.TrimPrefix(r.bench, "Benchmark"), r.unit,
			strconv.FormatFloat(r.value, 'g', 4, 64), r.target, r.verdict, r.baseline, r.ratio)
	}
	return tw.Flush()
}

func main() {
	strict := flag.Bool("fail-on-missed", false, "exit 1 when a figure misses its target")
	flag.Parse()
	figs, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(2)
	}
	if len(figs) == 0 {
		fmt.Fprintln(os.Stderr, "benchtable: no benchmark results in the input")
		os.Exit(2)
	}
	rows := table(figs, targets)
	if err := write(os.Stdout, rows); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(2)
	}
	for _, r := range rows {
		if *strict && r.verdict == "MISSED" {
			os.Exit(1)
		}
	}
}
