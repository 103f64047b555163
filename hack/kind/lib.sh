# Sourced by the hack/kind scripts: paths, pins and small helpers. See docs/kind-offline.md.
# shellcheck shell=bash disable=SC2034 # the settings are used by the scripts that source this file
KIND_HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$KIND_HACK_DIR/../.." && pwd)
LBFED_CACHE=${LBFED_CACHE:-$HOME/.cache/lbfed}
# Built rootfs tarballs, pause, CRD tarball: a cache (only makes a second run faster).
KIND_CACHE=${KIND_CACHE:-$LBFED_CACHE/kind}
# What host-up changed on this machine, for host-down to undo. Lost on reboot, as are the changes.
KIND_STATE=${KIND_STATE:-/run/lbfed-kind}
# Kubeconfigs and Karmada's PKI of the running topology.
KIND_DIR=${KIND_DIR:-$REPO_ROOT/.localup/kind}

KIND_VERSION=${KIND_VERSION:-v0.31.0}
KIND=${KIND:-$LBFED_CACHE/tools/kind-$KIND_VERSION}
K8S_VERSION=v1.35.3
KARMADA_VERSION=v1.18.2
NODE_IMAGE=${NODE_IMAGE:-lbfed/kind-node:$K8S_VERSION}
# The Debian root filesystem (rootfs.sh) and the node base image on it (node-image.sh).
ROOTFS_IMAGE_REPO=lbfed/debian-rootfs
BASE_IMAGE=lbfed/kind-base:bookworm
# Images kubeadm v1.35 and kind's containerd config ask for (k8s cmd/kubeadm/app/constants).
ETCD_IMAGE=registry.k8s.io/etcd:3.6.6-0
COREDNS_IMAGE=registry.k8s.io/coredns/coredns:v1.13.1
PAUSE_IMAGE=registry.k8s.io/pause:3.10
PAUSE_IMAGE_KUBEADM=registry.k8s.io/pause:3.10.1
KARMADA_REGISTRY=docker.io/karmada
KARMADA_COMPONENTS=(karmada-controller-manager karmada-scheduler karmada-webhook karmada-aggregated-apiserver karmada-agent)
CLUSTERS=(karmada-host m1 m2)
# The demo workload (e2e/kind/responder), built by app-images.sh.
RESPONDER_IMAGE=lbfed/responder:e2e
# lbfed's images as the charts name them: <global.imageRegistry>/<binary>:<appVersion>.
IMAGE_REGISTRY=${IMAGE_REGISTRY:-$(sed -n 's/^ *imageRegistry: *//p' "$REPO_ROOT/charts/lbfed/values.yaml")}
APP_VERSION=${APP_VERSION:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$REPO_ROOT/charts/lbfed/Chart.yaml")}
# The simulated Alteon's VIPs (lbfed-up.sh): local addresses of the host cluster's node, routed
# there from this machine. Outside every cluster's pod and Service range (10.8.0.0/13).
VIP_RANGE=10.20.0.0/24
DEMO_VIP=10.20.0.100

# The legacy builder: Debian's dockerd 20.10 has no BuildKit for the newer CLI.
export DOCKER_BUILDKIT=0

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# stage NAME CMD...: runs CMD and logs how long it took (the figures of docs/kind-offline.md).
stage() {
  local name=$1 start rc=0 ms
  shift
  start=${EPOCHREALTIME/./}
  log "== $name"
  "$@" || rc=$?
  ms=$(((${EPOCHREALTIME/./} - start) / 1000))
  log "== $name: $((ms / 1000)).$((ms % 1000 / 100))s$([ "$rc" = 0 ] || echo " (exit $rc)")"
  return "$rc"
}

# localup_bin NAME: path of a binary of the kind set (built by `localup build --set=kind`).
localup_bin() {
  "$REPO_ROOT/bin/localup" bin --set=kind "$1"
}

# go_mod_dir MODULE@VERSION: the module's folder in the Go module cache (downloaded if missing).
go_mod_dir() {
  (cd "$REPO_ROOT" && GOFLAGS=-mod=mod GOWORK=off go mod download -json "$1" | jq -r .Dir)
}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# content_tag FILE...: a short hash of files' contents, for cache keys and image labels.
content_tag() { cat "$@" | sha256sum | cut -c1-12; }

# dbuild ARGS...: docker build, quiet, without the legacy builder's deprecation banner.
dbuild() {
  docker build -q "$@" 2> >(grep -v -E 'DEPRECATED: The legacy builder|BuildKit is currently disabled|environment-variable\.$|^$' >&2) >/dev/null
}
