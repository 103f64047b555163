#!/usr/bin/env bash
# `make fuzz`: every native Go fuzz target of the repository (func Fuzz* in *_test.go), each for
# FUZZTIME (10s by default; CI runs them briefly, a longer run: make fuzz FUZZTIME=10m). A crasher
# is written by `go test` under the package's testdata/fuzz/<target>/, where it stays as a
# regression case of the plain test run; the script fails on the first one.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
targets=$(grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
  pkg=./$(dirname "${f#./}")
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed "s|^func |$pkg |"
done)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
n=0
while read -r pkg target; do
  [ -n "$target" ] || continue
  n=$((n + 1))
  echo "== $pkg $target ($FUZZTIME)"
  corpus="$pkg/testdata/fuzz/$target"
  before=$(ls "$corpus" 2>/dev/null | wc -l || true)
  if ! go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" >"$out" 2>&1; then
    after=$(ls "$corpus" 2>/dev/null | wc -l || true)
    # Go's fuzzing coordinator before go1.27 can report its own -fuzztime deadline as a failure,
    # with no input written (golang/go#75804): that is not a finding. Anything else is.
    if [ "$after" = "$before" ] && grep -qx '    context deadline exceeded' "$out" && ! grep -q 'Failing input written' "$out"; then
      echo "fuzz: $pkg $target: the toolchain's fuzztime deadline race (golang/go#75804), no input found; not a failure"
      grep -E '^fuzz: elapsed: [0-9]+s, execs' "$out" | tail -1
      continue
    fi
    # The whole failure: the message, the input's file and how to rerun it.
    sed -n '/^--- FAIL/,$p' "$out" | head -60
    echo "fuzz: $pkg $target failed (the input is under $corpus)" >&2
    exit 1
  fi
  grep -E '^(fuzz: elapsed: [0-9]+s, execs|ok|PASS)' "$out" | tail -3
done <<< "$targets"
echo "fuzz: $n targets, $FUZZTIME each"
