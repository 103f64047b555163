package main

import (
	"fmt"
	"path"
)

// target is what one figure should reach, and what it is compared with in the same run.
type target struct {
	Pkg, Bench, Unit string // Bench is a path.Match pattern ("*" stops at "/")
	Op               string // "<", "<=", "==", ">=", ">" or "" (no target, baseline only)
	Value            float64
	// BaselineBench names the benchmark whose figure of the same unit (or BaselineUnit) is the
	// baseline; empty: the same benchmark (with BaselineUnit).
	BaselineBench, BaselineUnit string
}

// The figures of issue 17 (fleet scale) and the baselines each benchmark measures beside itself.
var targets = []target{
	{Pkg: "lbcf/controller", Bench: "BenchmarkRegister5000Pods", Unit: "s/5000-registered", Op: "<=", Value: 20, BaselineUnit: "s/lbcf-floor"},
	{Pkg: "lbcf/controller", Bench: "BenchmarkRegister5000Pods", Unit: "api-writes/backend", Op: "<=", Value: 2},
	{Pkg: "lbcf/controller", Bench: "BenchmarkRegister5000Pods", Unit: "record-writes/backend", Op: "<=", Value: 2},
	{Pkg: "lbcf/controller", Bench: "BenchmarkRegister5000Pods", Unit: "cp-cpu-ms/backend", BaselineUnit: "bare-cp-cpu-ms/backend"},
	// The same record writes replayed by a bare client in the same run: the API server's floor
	// for the figure above (the controller cannot be faster than its own writes).
	{Pkg: "lbcf/controller", Bench: "BenchmarkRegister5000Pods", Unit: "s-bare-writes", Op: "<=", Value: 20},
	{Pkg: "lbcf/controller", Bench: "BenchmarkHealthyDriverBesideHangingOne", Unit: "ms-p99-beside-hanging", BaselineUnit: "ms-p99-alone"},
	{Pkg: "federation", Bench: "BenchmarkFederatedBackendChanges", Unit: "applies", Op: "<=", Value: 5},
	{Pkg: "federation", Bench: "BenchmarkFederatedBackendChanges", Unit: "s-to-programmed", Op: "<", Value: 5, BaselineUnit: "s-bare-writes"},
	{Pkg: "federation", Bench: "BenchmarkFederatedBackendChanges", Unit: "cp-cpu-ms/change", BaselineUnit: "bare-cp-cpu-ms/change"},
	// The same record writes replayed by a bare client in the same run (testenv.Replay).
	{Pkg: "federation", Bench: "BenchmarkFederatedBackendChanges", Unit: "s-bare-writes", Op: "<", Value: 5},
	{Pkg: "federation", Bench: "BenchmarkControllerRSS/default-GC", Unit: "s-to-registered", Op: "<", Value: 120, BaselineUnit: "s-bare-writes"},
	// The same 30,000 records written by a bare client in the same run (testenv.Replay).
	{Pkg: "federation", Bench: "BenchmarkControllerRSS/*", Unit: "s-bare-writes", Op: "<", Value: 120},
	{Pkg: "federation", Bench: "BenchmarkControllerRSS/*", Unit: "cp-cpu-ms/record", BaselineUnit: "bare-cp-cpu-ms/record"},
	{Pkg: "federation", Bench: "BenchmarkControllerRSS/default-GC", Unit: "MiB-peak-RSS", Op: "<", Value: 256},
	{Pkg: "federation", Bench: "BenchmarkControllerRSS/GOMEMLIMIT-*", Unit: "s-to-registered", Op: "<", Value: 120, BaselineBench: "BenchmarkControllerRSS/default-GC"},
	{Pkg: "federation", Bench: "BenchmarkControllerRSS/GOMEMLIMIT-*", Unit: "MiB-peak-RSS", Op: "<", Value: 256, BaselineBench: "BenchmarkControllerRSS/default-GC"},
	{Pkg: "federation", Bench: "BenchmarkRestartResync", Unit: "s-to-resynced", Op: "<", Value: 60, BaselineUnit: "s-to-registered-first"},
	{Pkg: "federation", Bench: "BenchmarkRestartResync", Unit: "driver-calls", Op: "==", Value: 0},
	{Pkg: "federation", Bench: "BenchmarkRestartResync", Unit: "MiB-peak-RSS", Op: "<", Value: 512},
	// An API server rollout under the resynced controller: every informer lists again.
	{Pkg: "federation", Bench: "BenchmarkRestartResync", Unit: "MiB-peak-RSS-rollout", Op: "<", Value: 512},
	{Pkg: "federation", Bench: "BenchmarkRestartResync", Unit: "driver-calls-rollout", Op: "==", Value: 0},
	{Pkg: "federation", Bench: "BenchmarkRestartResync", Unit: "s-to-relisted", BaselineUnit: "s-to-resynced"},
	// "≈ 0": under 1 % of a core (10 ms of CPU per second), and no reconcile, while nothing changes.
	// Baseline: a restart on the same world with the runtime's forced collections
	// (--suspend-idle-gc=false).
	{Pkg: "federation", Bench: "BenchmarkRestartResync", Unit: "cpu-ms/s-idle", Op: "<", Value: 10, BaselineUnit: "cpu-ms/s-idle-forced-gc"},
	{Pkg: "federation", Bench: "BenchmarkRestartResync", Unit: "gcs-idle", BaselineUnit: "gcs-idle-forced-gc"},
	{Pkg: "federation", Bench: "BenchmarkRestartResync", Unit: "reconciles-idle-forced-gc", Op: "==", Value: 0},
	{Pkg: "federation", Bench: "BenchmarkRestartResync", Unit: "reconciles-idle", Op: "==", Value: 0},
	// One group on 20 members × 1,000 candidates against the same 20,000 from 4 × 5,000.
	{Pkg: "federation", Bench: "BenchmarkTwentyMembers/20-members", Unit: "KiB-binding", Op: "<", Value: 1536, BaselineBench: "BenchmarkTwentyMembers/4-members"},
	{Pkg: "federation", Bench: "BenchmarkTwentyMembers/20-members", Unit: "candidates-truncated", Op: "==", Value: 0},
	{Pkg: "federation", Bench: "BenchmarkTwentyMembers/20-members", Unit: "*", BaselineBench: "BenchmarkTwentyMembers/4-members"},
	{Pkg: "federation", Bench: "BenchmarkTwentyMembers/4-members", Unit: "KiB-binding", Op: "<", Value: 1536},
	// 20,000 candidates in one group across 4 real members (go test -tags e2e ./e2e/scale): all
	// registered, CandidatesTruncated only beyond the budget, never a stall; the binding under
	// etcd's 1.5 MiB object limit.
	{Pkg: "e2e/scale", Bench: "BenchmarkCandidatesAcrossMembers", Unit: "candidates", Op: ">=", Value: 20000},
	{Pkg: "e2e/scale", Bench: "BenchmarkCandidatesAcrossMembers", Unit: "truncated", Op: "==", Value: 0},
	{Pkg: "e2e/scale", Bench: "BenchmarkCandidatesAcrossMembers", Unit: "s-to-registered", BaselineUnit: "s-created-to-registered"},
	{Pkg: "e2e/scale", Bench: "BenchmarkCandidatesAcrossMembers", Unit: "KiB-binding", Op: "<", Value: 1536},
	{Pkg: "e2e/scale", Bench: "BenchmarkCandidatesAcrossMembers", Unit: "controller-restarts", Op: "==", Value: 0},
	// The lbfed chart's memory limit for lbfed-controller (controller.resources.limits.memory).
	{Pkg: "e2e/scale", Bench: "BenchmarkCandidatesAcrossMembers", Unit: "MiB-peak-RSS", Op: "<", Value: 1024},
	{Pkg: "e2e/scale", Bench: "BenchmarkCandidatesAcrossMembers", Unit: "reported-over-budget", BaselineUnit: "pods-over-budget"},
	{Pkg: "e2e/scale", Bench: "BenchmarkCandidatesAcrossMembers", Unit: "registered-over-budget", BaselineUnit: "pods-over-budget"},
	{Pkg: "elb/radware", Bench: "BenchmarkBackendChanges/coalesced", Unit: "*", BaselineBench: "BenchmarkBackendChanges/per-call"},
	{Pkg: "elb/radware", Bench: "BenchmarkPoisonedBatch/isolated/*", Unit: "*", BaselineBench: "BenchmarkPoisonedBatch/legacy/poison-retried"},
	{Pkg: "elb/radware/alteonsim", Bench: "BenchmarkConfigClone/rows-shared", Unit: "*", BaselineBench: "BenchmarkConfigClone/rows-copied"},
	{Pkg: "elb/bfe", Bench: "BenchmarkGenerateValidate/*", Unit: "ns/op", BaselineBench: "BenchmarkGenerateValidate/baseline-marshal-model"},
	{Pkg: "lbcf/driver", Bench: "BenchmarkServerCall/*", Unit: "ns/op", BaselineBench: "BenchmarkServerCall/http"},
	{Pkg: "watchdecode", Bench: "BenchmarkWatchDecode/watchdecode", Unit: "us/event", BaselineBench: "BenchmarkWatchDecode/client-go"},
	{Pkg: "watchdecode", Bench: "BenchmarkWatchDecode/without-managed-fields", Unit: "us/event", BaselineBench: "BenchmarkWatchDecode/watchdecode"},
}

// find returns the first target a figure matches.
func find(ts []target, f figure) (target, bool) {
	for _, t := range ts {
		if t.Pkg != f.pkg || (t.Unit != "*" && t.Unit != f.unit) {
			continue
		}
		if ok, _ := path.Match(t.Bench, f.bench); ok {
			return t, true
		}
	}
	return target{}, false
}

func (t target) met(v float64) bool {
	switch t.Op {
	case "<":
		return v < t.Value
	case "<=":
		return v <= t.Value
	case "==":
		return v == t.Value
	case ">=":
		return v >= t.Value
	case ">":
		return v > t.Value
	}
	return true
}

type baseline struct {
	label string
	value float64
}

// baselineOf finds the figure f is compared with; a benchmark is never its own baseline.
func (t target) baselineOf(f figure, byKey map[string]figure) (baseline, bool) {
	if t.BaselineBench == "" && t.BaselineUnit == "" {
		return baseline{}, false
	}
	b := figure{pkg: f.pkg, bench: f.bench, unit: f.unit}
	if t.BaselineBench != "" {
		b.bench = t.BaselineBench
	}
	if t.BaselineUnit != "" {
		b.unit = t.BaselineUnit
	}
	if b.key() == f.key() {
		return baseline{}, false
	}
	got, ok := byKey[b.key()]
	if !ok {
		return baseline{label: "not run"}, true
	}
	label := got.unit
	if got.bench != f.bench {
		label = fmt.Sprintf("%s %s", got.bench[len("Benchmark"):], got.unit)
	}
	return baseline{label: fmt.Sprintf("%s = %.4g", label, got.value), value: got.value}, true
}
