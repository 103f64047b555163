#!/usr/bin/env bash
# Creates the offline kind topology (make kind-up): clusters lbfed-karmada-host, lbfed-m1 and
# lbfed-m2 from $NODE_IMAGE, one node each, a static ptp CNI per node instead of kindnetd, routes
# between the clusters' pod networks, Karmada in lbfed-karmada-host by `karmadactl init` (images
# preloaded, nothing pulled) and m1, m2 joined in Push mode. Idempotent: what exists is kept.
# Needs host-up.sh and images.sh first (the Makefile orders them). Kubeconfigs: $KIND_DIR.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

docker info >/dev/null 2>&1 || die "no Docker engine: run make kind-host-up"
[ -x "$KIND" ] || die "$KIND missing: run make kind-tools"
image_exists "$NODE_IMAGE" || die "$NODE_IMAGE missing: run make kind-images"
KUBECTL=$(localup_bin kubectl)
KARMADACTL=$(localup_bin karmadactl)
mkdir -p "$KIND_DIR/cni"
KIND_DIR=$(cd "$KIND_DIR" && pwd)

# The clusters' subnets come from kind-config/<cluster>.yaml (shared with `make up-kind`).
subnet() { sed -n "s/^ *$2: *\([0-9./]*\).*/\1/p" "$REPO_ROOT/kind-config/$1.yaml"; }
# Every pod and Service range of the topology (10.10.0.0/16 … 10.15.0.0/16): traffic between them
# is routed unchanged, everything else leaving a pod is masqueraded to its node's address.
CLUSTER_RANGES=10.8.0.0/13

# karmadactl init asks https://myexternalip.com for this machine's public address, whatever the
# flags (Karmada pkg/karmadactl/cmdinit/utils.InternetIP), to put it in the API server's
# certificate. A proxy on a closed loopback port makes that fail at once, without a DNS lookup
# or a connection out of the machine; the topology's own addresses bypass it.
karmadactl() {
  local subnet
  subnet=$(docker network inspect -f '{{range .IPAM.Config}}{{.Subnet}},{{end}}' kind)
  HTTPS_PROXY=http://127.0.0.1:9 HTTP_PROXY=http://127.0.0.1:9 NO_PROXY="${subnet}127.0.0.1,localhost" \
    https_proxy=http://127.0.0.1:9 http_proxy=http://127.0.0.1:9 no_proxy="${subnet}127.0.0.1,localhost" \
    "$KARMADACTL" "$@"
}

node() { echo "lbfed-$1-control-plane"; }
node_ip() { docker inspect -f '{{.NetworkSettings.Networks.kind.IPAddress}}' "$(node "$1")"; }

# config CLUSTER: kind config and CNI conflist. One node: its podCIDR is the first /24 of the
# cluster's podSubnet (kube-controller-manager's allocation), and ptp+host-local use exactly it.
config() {
  local c=$1 pods services node_cidr
  pods=$(subnet "$c" podSubnet)
  services=$(subnet "$c" serviceSubnet)
  if [ -z "$pods" ] || [ -z "$services" ]; then die "no subnets in kind-config/$c.yaml"; fi
  node_cidr=${pods%.*.*/*}.0.0/24
  cat > "$KIND_DIR/cni/$c.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "lbfed-ptp",
  "plugins": [
    {"type": "ptp", "mtu": 1500, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$node_cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
  cat > "$KIND_DIR/$c.kind.yaml" <<YAML
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
name: lbfed-$c
networking:
  podSubnet: $pods
  serviceSubnet: $services
  disableDefaultCNI: true
nodes:
- role: control-plane
  labels:
    topology.kubernetes.io/zone: $c-a
  extraMounts:
  - hostPath: $KIND_DIR/cni/$c.conflist
    containerPath: /etc/cni/net.d/10-lbfed-ptp.conflist
    readOnly: true
YAML
}

create() {
  local c=$1 name=lbfed-$1 ip
  # A node container that is not running (the machine restarted, dockerd was killed) cannot be
  # resumed: its mounts, addresses and certificates belong to a $KIND_DIR that may be gone, and
  # Docker recreates a missing bind-mount source as a directory. Start it over.
  if "$KIND" get clusters 2>/dev/null | grep -qx "$name" \
    && [ "$(docker inspect -f '{{.State.Running}}' "$(node "$c")" 2>/dev/null)" != true ]; then
    log "cluster $name: node container not running; deleting it"
    "$KIND" delete cluster --name "$name"
  fi
  [ -d "$KIND_DIR/cni/$c.conflist" ] && rmdir "$KIND_DIR/cni/$c.conflist"
  config "$c"
  if ! "$KIND" get clusters 2>/dev/null | grep -qx "$name"; then
    "$KIND" create cluster --config "$KIND_DIR/$c.kind.yaml" --image "$NODE_IMAGE" \
      --kubeconfig "$KIND_DIR/$c.kubeconfig" --wait 4m
  fi
  "$KIND" get kubeconfig --name "$name" > "$KIND_DIR/$c.kubeconfig"
  # The API server by the node's address on the kind network (in its certificate): reachable
  # from this machine and from pods of the other clusters (Karmada's controllers).
  ip=$(node_ip "$c")
  "$KUBECTL" --kubeconfig "$KIND_DIR/$c.kubeconfig" config set-cluster "kind-$name" --server "https://$ip:6443" >/dev/null
  # CoreDNS: cluster names only. Without this it forwards every other name to the node's
  # resolver, i.e. out of the topology.
  "$KUBECTL" --kubeconfig "$KIND_DIR/$c.kubeconfig" -n kube-system get configmap coredns -o json \
    | jq '.data.Corefile |= (gsub("\\s*forward \\. /etc/resolv\\.conf \\{[^}]*\\}"; "") | gsub("\\n\\s*loop\\s*\\n"; "\n"))' \
    > "$KIND_DIR/$c.coredns.json"
  if ! "$KUBECTL" --kubeconfig "$KIND_DIR/$c.kubeconfig" -n kube-system get configmap coredns -o jsonpath='{.data.Corefile}' | grep -q 'lbfed: no forward'; then
    jq '.data.Corefile |= "# lbfed: no forward (hack/kind/cluster-up.sh)\n" + .' "$KIND_DIR/$c.coredns.json" \
      | "$KUBECTL" --kubeconfig "$KIND_DIR/$c.kubeconfig" replace -f - >/dev/null
    "$KUBECTL" --kubeconfig "$KIND_DIR/$c.kubeconfig" -n kube-system rollout restart deployment coredns >/dev/null
  fi
}

# routes: every node reaches the other clusters' pods through their nodes; pod traffic leaving
# the topology's ranges is masqueraded (ptp's own ipMasq would also hide pod addresses from
# the other clusters). Whatever else falls in those ranges (another cluster's Services, unused
# pod addresses) is unreachable in the node, so it is refused there instead of following the
# default route out of the machine; the node's own Service range keeps the default route, which
# kube-proxy's DNAT needs for connections from the node's own processes.
routes() {
  local c o pods gw
  for c in "${CLUSTERS[@]}"; do
    gw=$(docker exec "$(node "$c")" ip -4 route show default | awk '{print $3; exit}')
    docker exec "$(node "$c")" ip route replace unreachable "$CLUSTER_RANGES"
    docker exec "$(node "$c")" ip route replace "$(subnet "$c" serviceSubnet)" via "$gw"
    for o in "${CLUSTERS[@]}"; do
      [ "$o" = "$c" ] && continue
      docker exec "$(node "$c")" ip route replace "$(subnet "$o" podSubnet)" via "$(node_ip "$o")"
    done
    pods=$(subnet "$c" podSubnet)
    local rule=(POSTROUTING -s "$pods" ! -d "$CLUSTER_RANGES" -m comment --comment lbfed-pod-egress -j MASQUERADE)
    docker exec "$(node "$c")" iptables -t nat -C "${rule[@]}" 2>/dev/null \
      || docker exec "$(node "$c")" iptables -t nat -A "${rule[@]}"
  done
}

karmada_init() {
  local kc=$KIND_DIR/karmada/karmada-apiserver.config crds host=$KIND_DIR/karmada-host.kubeconfig
  # Karmada installed by an earlier run whose $KIND_DIR is gone (another checkout, a removed
  # .localup): its admin kubeconfig is in a Secret of the installation, addressed in-cluster.
  # Initialising again would replace its certificates under the running components.
  if [ ! -f "$kc" ] && "$KUBECTL" --kubeconfig "$host" -n karmada-system get deployment karmada-apiserver >/dev/null 2>&1; then
    mkdir -p "$KIND_DIR/karmada"
    "$KUBECTL" --kubeconfig "$host" -n karmada-system get secret karmada-controller-manager-config \
      -o jsonpath='{.data.karmada\.config}' | base64 -d > "$kc"
    "$KUBECTL" --kubeconfig "$kc" config set-cluster karmada-admin --server "https://$(node_ip karmada-host):32443" >/dev/null
    "$KUBECTL" --kubeconfig "$kc" get --raw /readyz >/dev/null 2>&1 \
      || die "Karmada is installed in lbfed-karmada-host but does not answer; make kind-down and retry"
    log "Karmada found installed; admin kubeconfig recovered into $kc"
  fi
  if [ -f "$kc" ] && "$KUBECTL" --kubeconfig "$kc" get --raw /readyz >/dev/null 2>&1; then
    log "Karmada already initialised"
    return
  fi
  local images=() comp
  for comp in "${KARMADA_COMPONENTS[@]}"; do
    [ "$comp" = karmada-agent ] && continue # Pull-mode members only
    images+=("$KARMADA_REGISTRY/$comp:$KARMADA_VERSION")
  done
  "$KIND" load docker-image --name lbfed-karmada-host "${images[@]}"
  # The CRD bundle `karmadactl init` would download: the Karmada module's charts/karmada/_crds
  # as crds/ in a tarball, as Karmada's release workflow packs it.
  crds=$KIND_CACHE/karmada-crds-$KARMADA_VERSION.tar.gz
  if [ ! -f "$crds" ]; then
    local tmp
    tmp=$(mktemp -d)
    cp -r "$(go_mod_dir "github.com/karmada-io/karmada@$KARMADA_VERSION")/charts/karmada/_crds" "$tmp/crds"
    chmod -R u+w "$tmp/crds"
    tar -C "$tmp" -czf "$crds.tmp" crds
    mv "$crds.tmp" "$crds"
    rm -rf "$tmp"
  fi
  rm -rf "$KIND_DIR/karmada"
  karmadactl init --kubeconfig "$KIND_DIR/karmada-host.kubeconfig" \
    --karmada-data "$KIND_DIR/karmada" --karmada-pki "$KIND_DIR/karmada/pki" \
    --crds "$crds" --image-pull-policy Never \
    --kube-image-registry registry.k8s.io --kube-image-tag "$K8S_VERSION" \
    --etcd-image "$ETCD_IMAGE" \
    --karmada-apiserver-image "registry.k8s.io/kube-apiserver:$K8S_VERSION" \
    --karmada-kube-controller-manager-image "registry.k8s.io/kube-controller-manager:$K8S_VERSION" \
    --karmada-scheduler-image "$KARMADA_REGISTRY/karmada-scheduler:$KARMADA_VERSION" \
    --karmada-controller-manager-image "$KARMADA_REGISTRY/karmada-controller-manager:$KARMADA_VERSION" \
    --karmada-webhook-image "$KARMADA_REGISTRY/karmada-webhook:$KARMADA_VERSION" \
    --karmada-aggregated-apiserver-image "$KARMADA_REGISTRY/karmada-aggregated-apiserver:$KARMADA_VERSION" \
    --wait-component-ready-timeout 300
}

join() {
  local kc=$KIND_DIR/karmada/karmada-apiserver.config m
  for m in m1 m2; do
    if ! "$KUBECTL" --kubeconfig "$kc" get cluster "$m" >/dev/null 2>&1; then
      karmadactl join "$m" --kubeconfig "$kc" \
        --cluster-kubeconfig "$KIND_DIR/$m.kubeconfig" --cluster-context "kind-lbfed-$m"
    fi
  done
  "$KUBECTL" --kubeconfig "$kc" wait --for=condition=Ready cluster/m1 cluster/m2 --timeout=3m
}

# Karmada initialises on the host cluster while the members are created (each step is mostly
# waiting); the members' output is shown once they are up.
stage "cluster karmada-host" create karmada-host
members_log=$KIND_DIR/members-create.log
(for m in m1 m2; do stage "cluster $m" create "$m"; done) > "$members_log" 2>&1 &
members=$!
stage "karmada init" karmada_init
members_rc=0
wait "$members" || members_rc=$?
cat "$members_log" >&2
[ "$members_rc" = 0 ] || die "creating the member clusters failed"
stage "routes" routes
stage "karmada join" join

cat <<EOF

Offline kind topology up: Karmada on lbfed-karmada-host, members m1 and m2 joined (Push).
  kubectl --kubeconfig $KIND_DIR/karmada/karmada-apiserver.config get clusters
  kubectl --kubeconfig $KIND_DIR/m1.kubeconfig get pods -A
Remove it with: make kind-down
EOF
