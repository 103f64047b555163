#!/usr/bin/env bash
# `make kind-load`: loads the images of app-images.sh (or those named as arguments) into every
# running cluster of the kind topology. `kind load docker-image` needs no registry: it streams
# `docker save` into each node's containerd.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
images=("$@")
if [ ${#images[@]} -eq 0 ]; then
  for b in "$REPO_ROOT"/cmd/*/; do images+=("$IMAGE_REGISTRY/$(basename "$b"):$APP_VERSION"); done
  images+=("$RESPONDER_IMAGE" "registry.k8s.io/kubectl:$K8S_VERSION")
fi
# The clusters load at once: each load is mostly docker save and the node's containerd import.
pids=()
for c in "${CLUSTERS[@]}"; do
  if "$KIND" get clusters 2>/dev/null | grep -qx "lbfed-$c"; then
    stage "kind load lbfed-$c" "$KIND" load docker-image --name "lbfed-$c" "${images[@]}" &
    pids+=($!)
  fi
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit "$rc"
