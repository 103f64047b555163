#!/usr/bin/env bash
# `make up-kind`: Karmada on a kind "host" cluster plus two kind member clusters joined in Push
# mode, with lbfed's CRDs installed — for users with Docker on Linux. CI has no Docker and runs
# `make up` (plain processes) instead; kind-config's unit test keeps these configs valid.
#
# Needs: docker, network access for kind's node image and `karmadactl init`'s Karmada images and
# CRD bundle. The Makefile passes KIND, KUBECTL and KARMADACTL (built from pinned versions).
#   KIND_NODE_IMAGE  node image for all three clusters (default: kind's; kindest/node:v1.35.x
#                    matches the Kubernetes version of `make up`)
#   KIND_DIR         where kubeconfigs go (default .localup/kind)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KIND:?}" "${KUBECTL:?}" "${KARMADACTL:?}"
OUT=${KIND_DIR:-.localup/kind}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
image=()
if [ -n "${KIND_NODE_IMAGE:-}" ]; then image=(--image "$KIND_NODE_IMAGE"); fi

for c in karmada-host m1 m2; do
  name=lbfed-$c
  if ! $KIND get clusters 2>/dev/null | grep -qx "$name"; then
    $KIND create cluster --config "kind-config/$c.yaml" "${image[@]}" --kubeconfig "$OUT/$c.kubeconfig" --wait 3m
  else
    $KIND get kubeconfig --name "$name" > "$OUT/$c.kubeconfig"
  fi
  # Address the API server by the node's IP on the "kind" Docker network (in its certificate):
  # reachable both from this host (Linux) and from Karmada's controllers in the host cluster,
  # whereas the default 127.0.0.1:<port> is only reachable from this host.
  ip=$(docker inspect -f '{{.NetworkSettings.Networks.kind.IPAddress}}' "$name-control-plane")
  $KUBECTL --kubeconfig "$OUT/$c.kubeconfig" config set-cluster "kind-$name" --server "https://$ip:6443" >/dev/null
done

KARMADA_KC=$OUT/karmada/karmada-apiserver.config
if [ ! -f "$KARMADA_KC" ]; then
  $KARMADACTL init --kubeconfig "$OUT/karmada-host.kubeconfig" \
    --karmada-data "$OUT/karmada" --karmada-pki "$OUT/karmada/pki"
fi

# lbfed's CRDs go into the members before they join: Karmada's scheduler only places a kind on
# members whose API lists it.
for m in m1 m2; do
  $KUBECTL --kubeconfig "$OUT/$m.kubeconfig" apply --server-side -f lbcf/api/crd/ >/dev/null
done
for m in m1 m2; do
  if ! $KUBECTL --kubeconfig "$KARMADA_KC" get cluster "$m" >/dev/null 2>&1; then
    $KARMADACTL join "$m" --kubeconfig "$KARMADA_KC" \
      --cluster-kubeconfig "$OUT/$m.kubeconfig" --cluster-context "kind-lbfed-$m"
  fi
done
$KUBECTL --kubeconfig "$KARMADA_KC" apply --server-side -f lbcf/api/crd/ >/dev/null
$KUBECTL --kubeconfig "$KARMADA_KC" wait --for=condition=Ready cluster/m1 cluster/m2 --timeout=3m

cat <<EOF

Karmada (on kind) and members m1, m2 are up.

  export KUBECONFIG=$KARMADA_KC    # Karmada API server
  kubectl get clusters
  kubectl --kubeconfig=$OUT/m1.kubeconfig get nodes
  kubectl --kubeconfig=$OUT/m2.kubeconfig get nodes

Remove everything with: make down-kind
EOF
