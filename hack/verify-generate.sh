#!/usr/bin/env bash
# Fails when the deepcopy code or the CRDs under lbcf/api are stale, i.e. differ from what
# `make generate` produces. The working tree is left exactly as it was.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CONTROLLER_GEN:?set CONTROLLER_GEN to the controller-gen binary}"
snap=$(mktemp -d)
trap 'rm -rf "$snap"' EXIT
cp -a lbcf/api "$snap/before"
"$CONTROLLER_GEN" object:headerFile=hack/boilerplate.go.txt paths=./lbcf/api/...
"$CONTROLLER_GEN" crd:crdVersions=v1 paths=./lbcf/api/... output:crd:artifacts:config=lbcf/api/crd
cp -a lbcf/api "$snap/after"
rm -rf lbcf/api && cp -a "$snap/before" lbcf/api
if ! diff -ru "$snap/before" "$snap/after"; then
  echo "generated files under lbcf/api are stale: run 'make generate' and commit the result" >&2
  exit 1
fi
echo "generated files are up to date"
