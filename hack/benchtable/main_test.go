package main

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const sample = `goos: linux
pkg: github.com/lbfed/lbfed/lbcf/controller
BenchmarkRegister5000Pods-2   	       1	24000000000 ns/op	         2.000 api-writes/backend	        20.83 x-faster-than-floor	       500.0 s/lbcf-floor	        24.00 s/5000-registered
    bench_test.go:60: BenchmarkRegister5000Pods 3 log lines are not results
PASS
pkg: github.com/lbfed/lbfed/elb/radware
BenchmarkBackendChanges/coalesced-2         	       1	 1000 ns/op	         4.000 applies/op
BenchmarkBackendChanges/per-call-2          	       1	 9000 ns/op	      1000 applies/op
pkg: github.com/lbfed/lbfed/federation
BenchmarkRestartResync-2   1   5 ns/op   0 driver-calls   30.5 s-to-resynced   610 s-to-registered-first
BenchmarkSomethingNew-2    1   7 ns/op
BenchmarkTwentyMembers/20-members-2   1   670.0 ns/op   1155 KiB-binding   0 candidates-truncated   238.0 s-to-registered
BenchmarkTwentyMembers/4-members-2    1   1071 ns/op    1160 KiB-binding   0 candidates-truncated   137.4 s-to-registered
pkg: github.com/lbfed/lbfed/e2e/scale
BenchmarkCandidatesAcrossMembers-2   1   9 ns/op   20000 candidates   0 truncated   1200 KiB-binding   12 s-to-registered   60 s-created-to-registered
`

func TestTable(t *testing.T) {
	g := NewWithT(t)
	figs, err := parse(strings.NewReader(sample))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(figs).To(HaveLen(28), "every value of every result line, no log line")
	rows := table(figs, targets)
	get := func(pkg, bench, unit string) row {
		for _, r := range rows {
			if r.pkg == pkg && r.bench == bench && r.unit == unit {
				return r
			}
		}
		t.Fatalf("no row %s %s %s", pkg, bench, unit)
		return row{}
	}
	for _, tc := range []struct {
		pkg, bench, unit          string
		target, verdict, baseline string
		ratio                     string
	}{
		{"lbcf/controller", "BenchmarkRegister5000Pods", "s/5000-registered", "<= 20", "MISSED", "s/lbcf-floor = 500", "0.048"},
		{"lbcf/controller", "BenchmarkRegister5000Pods", "api-writes/backend", "<= 2", "met", "-", "-"},
		{"elb/radware", "BenchmarkBackendChanges/coalesced", "applies/op", "-", "", "BackendChanges/per-call applies/op = 1000", "0.004"},
		{"elb/radware", "BenchmarkBackendChanges/per-call", "applies/op", "-", "", "-", "-"},
		{"federation", "BenchmarkRestartResync", "driver-calls", "== 0", "met", "-", "-"},
		{"federation", "BenchmarkRestartResync", "s-to-resynced", "< 60", "met", "s-to-registered-first = 610", "0.05"},
		{"federation", "BenchmarkSomethingNew", "ns/op", "-", "", "-", "-"},
		{"federation", "BenchmarkTwentyMembers/20-members", "KiB-binding", "< 1536", "met", "TwentyMembers/4-members KiB-binding = 1160", "0.996"},
		{"federation", "BenchmarkTwentyMembers/20-members", "candidates-truncated", "== 0", "met", "-", "-"},
		{"federation", "BenchmarkTwentyMembers/20-members", "s-to-registered", "-", "", "TwentyMembers/4-members s-to-registered = 137.4", "1.73"},
		{"federation", "BenchmarkTwentyMembers/4-members", "KiB-binding", "< 1536", "met", "-", "-"},
		{"e2e/scale", "BenchmarkCandidatesAcrossMembers", "candidates", ">= 20000", "met", "-", "-"},
		{"e2e/scale", "BenchmarkCandidatesAcrossMembers", "truncated", "== 0", "met", "-", "-"},
		{"e2e/scale", "BenchmarkCandidatesAcrossMembers", "KiB-binding", "< 1536", "met", "-", "-"},
		{"e2e/scale", "BenchmarkCandidatesAcrossMembers", "s-to-registered", "-", "", "s-created-to-registered = 60", "0.2"},
	} {
		r := get(tc.pkg, tc.bench, tc.unit)
		g.Expect([]string{r.target, r.verdict, r.baseline, r.ratio}).To(Equal([]string{tc.target, tc.verdict, tc.baseline, tc.ratio}), "%s %s", tc.bench, tc.unit)
	}
	var out strings.Builder
	g.Expect(write(&out, rows)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("Register5000Pods"))
}

func TestBaselineNotRun(t *testing.T) {
	g := NewWithT(t)
	figs, err := parse(strings.NewReader("pkg: github.com/lbfed/lbfed/elb/radware\nBenchmarkBackendChanges/coalesced-2 1 3 applies/op\n"))
	g.Expect(err).NotTo(HaveOccurred())
	rows := table(figs, targets)
	g.Expect(rows).To(HaveLen(1))
	g.Expect(rows[0].baseline).To(Equal("not run"))
	g.Expect(rows[0].ratio).To(Equal("-"))
}
