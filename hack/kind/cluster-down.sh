#!/usr/bin/env bash
# Deletes the offline kind topology (make kind-down runs it before host-down.sh): the three
# clusters, the "kind" Docker network once nothing else is attached to it, and $KIND_DIR.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
if docker info >/dev/null 2>&1; then
  for c in "${CLUSTERS[@]}"; do
    if [ -x "$KIND" ]; then
      "$KIND" delete cluster --name "lbfed-$c"
    else
      docker rm -f -v "lbfed-$c-control-plane" >/dev/null 2>&1 || true
    fi
  done
  if docker network inspect kind >/dev/null 2>&1; then
    if [ -z "$(docker network inspect -f '{{range .Containers}}{{.Name}} {{end}}' kind)" ]; then
      docker network rm kind >/dev/null
    else
      log "kind network still in use; left in place"
    fi
  fi
fi
rm -rf "$KIND_DIR"
