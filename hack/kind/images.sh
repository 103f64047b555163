#!/usr/bin/env bash
# Builds, from the binaries of `localup build --set=kind` and the Debian rootfs of rootfs.sh, every
# image the offline kind topology needs (make kind-images):
#   - registry.k8s.io/{kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy}:v1.35.3,
#     etcd:3.6.6-0, coredns/coredns:v1.13.1, pause:3.10 (+3.10.1): the names kubeadm and kind's
#     containerd config ask for, FROM scratch except kube-proxy (needs iptables/nft userland);
#   - $BASE_IMAGE: the rootfs with containerd, runc, crictl, the CNI plugins and kind v0.31.0's
#     node files (read from the kind module in the Go module cache), set up as kind's base image;
#   - $NODE_IMAGE: the base plus kubeadm/kubelet/kubectl and the images above preloaded in its
#     containerd (what `kind build node-image` does, which cannot run offline);
#   - docker.io/karmada/<component>:v1.18.2 for karmadactl init and register.
# Each image carries a label with the hash of its inputs and is rebuilt only when they change.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# This script is an input of every image; lib.sh is not (its pins are in the image names).
SELF_HASH=$(content_tag "$0")
KEY_LABEL=io.lbfed.kind.inputs

[ -x "$REPO_ROOT/bin/localup" ] || die "bin/localup missing: run make kind-tools"
rootfs=$("$KIND_HACK_DIR/rootfs.sh")
bin() { localup_bin "$1"; }

# current IMAGE KEY: true when IMAGE exists and was built from the inputs KEY.
current() {
  [ "$(docker image inspect -f "{{index .Config.Labels \"$KEY_LABEL\"}}" "$1" 2>/dev/null)" = "$2" ]
}
# key WORD...: the inputs' hash: this script, the words (binary paths carry their group's pin
# key, image IDs their content).
key() { echo "$SELF_HASH $*" | sha256sum | cut -c1-16; }

# A root for FROM scratch images: /tmp, and users root and nonroot (65532).
skeleton() {
  mkdir -p "$1/etc" "$1/tmp"
  chmod 1777 "$1/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$1/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$1/etc/group"
}

# scratch_image IMAGE ENTRYPOINT_JSON BINARY...: FROM scratch, binaries in /usr/local/bin
# (NAME=PATH installs PATH as NAME).
scratch_image() {
  local image=$1 entry=$2 k ctx b
  shift 2
  k=$(key "$image" "$entry" "$@")
  if current "$image" "$k"; then return; fi
  ctx=$(mktemp -d)
  skeleton "$ctx/root"
  mkdir -p "$ctx/root/usr/local/bin"
  for b in "$@"; do
    if [[ $b == *=* ]]; then cp "${b#*=}" "$ctx/root/usr/local/bin/${b%%=*}"; else cp "$b" "$ctx/root/usr/local/bin/"; fi
  done
  cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY root/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin
ENTRYPOINT $entry
LABEL $KEY_LABEL=$k
DOCKERFILE
  dbuild -t "$image" "$ctx"
  rm -rf "$ctx"
  log "built $image"
}

pause_binary() {
  local src out
  src=$(go_mod_dir "k8s.io/kubernetes@$K8S_VERSION")/build/pause/linux/pause.c
  out=$KIND_CACHE/pause-$(content_tag "$src")
  if [ ! -x "$out" ]; then
    mkdir -p "$KIND_CACHE"
    gcc -Os -static -DVERSION=3.10-lbfed -o "$out.tmp" "$src"
    strip "$out.tmp"
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}

core_images() {
  local b
  for b in kube-apiserver kube-controller-manager kube-scheduler; do
    scratch_image "registry.k8s.io/$b:$K8S_VERSION" "[\"/usr/local/bin/$b\"]" "$(bin "$b")"
  done
  scratch_image "$ETCD_IMAGE" '["/usr/local/bin/etcd"]' "$(bin etcd)"
  scratch_image "$COREDNS_IMAGE" '["/usr/local/bin/coredns"]' "$(bin coredns)"
  local pause
  pause=$(pause_binary)
  scratch_image "$PAUSE_IMAGE" '["/usr/local/bin/pause"]' "pause=$pause"
  docker tag "$PAUSE_IMAGE" "$PAUSE_IMAGE_KUBEADM"

  # kube-proxy runs iptables/nft: Debian's (1.8.9, nft by default, as the node picks).
  local image=registry.k8s.io/kube-proxy:$K8S_VERSION k ctx
  k=$(key "$image" "$(docker image inspect -f '{{.Id}}' "$rootfs")" "$(bin kube-proxy)")
  if ! current "$image" "$k"; then
    ctx=$(mktemp -d)
    cp "$(bin kube-proxy)" "$ctx/"
    cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM $rootfs
COPY kube-proxy /usr/local/bin/kube-proxy
ENTRYPOINT ["/usr/local/bin/kube-proxy"]
LABEL $KEY_LABEL=$k
DOCKERFILE
    dbuild -t "$image" "$ctx"
    rm -rf "$ctx"
    log "built $image"
  fi
}

# The node base: kind v0.31.0's images/base, rebuilt on our rootfs and binaries. The kind files
# come from the kind module in the Go module cache; the machine-specific changes are the three
# edits after the systemd set-up (docs/kind-offline.md).
base_image() {
  local kindsrc k ctx b
  kindsrc=$(go_mod_dir "sigs.k8s.io/kind@$KIND_VERSION")/images/base
  k=$(key "$BASE_IMAGE" "$KIND_VERSION" "$(docker image inspect -f '{{.Id}}' "$rootfs")" \
    "$(bin containerd)" "$(bin runc)" "$(bin crictl)" "$(bin ptp)")
  if current "$BASE_IMAGE" "$k"; then return; fi
  ctx=$(mktemp -d)
  cp -r "$kindsrc/files" "$ctx/files"
  chmod -R u+w,go-w,a+rX "$ctx/files"
  rm -f "$ctx/files/etc/systemd/system/containerd-fuse-overlayfs.service" # no fuse-overlayfs here
  chmod 755 "$ctx/files/usr/local/bin/"* "$ctx/files/kind/bin/"*
  mkdir -p "$ctx/bin/usr/local/bin" "$ctx/bin/usr/local/sbin" "$ctx/bin/opt/cni/bin"
  for b in containerd containerd-shim-runc-v2 ctr crictl; do cp "$(bin "$b")" "$ctx/bin/usr/local/bin/"; done
  cp "$(bin runc)" "$ctx/bin/usr/local/sbin/runc"
  for b in ptp host-local loopback portmap; do cp "$(bin "$b")" "$ctx/bin/opt/cni/bin/"; done
  cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM $rootfs
COPY files/ /
COPY bin/ /
RUN find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete \\
 && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \\
      /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \\
      /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \\
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \\
 && ln -sf /lib/systemd/systemd /sbin/init \\
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \\
 && systemctl mask systemd-binfmt.service \\
 && mkdir -p /etc/kubernetes/manifests \\
 && ctr oci spec \\
    | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \\
    | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json \\
 && sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' /etc/containerd/config.toml \\
 && grep -q 'restrict_oom_score_adj = true' /etc/containerd/config.toml \\
 && sed -i 's/^KUBELET_EXTRA_ARGS=.*/& --fail-cgroupv1=false/' /etc/default/kubelet \\
 && grep -q -- '--fail-cgroupv1=false' /etc/default/kubelet \\
 && containerd --version && runc --version && crictl --version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
LABEL $KEY_LABEL=$k
DOCKERFILE
  dbuild -t "$BASE_IMAGE" "$ctx" || { rm -rf "$ctx"; die "base image build failed"; }
  rm -rf "$ctx"
  log "built $BASE_IMAGE"
}

# The node image, as kind's node-image build makes it: a container of the base image gets
# kubeadm, kubelet, kubectl and /kind/version, its containerd imports the core images (pinned,
# not unpacked), and the container is committed with kind's entrypoint.
CORE_IMAGES=(
  "registry.k8s.io/kube-apiserver:$K8S_VERSION" "registry.k8s.io/kube-controller-manager:$K8S_VERSION"
  "registry.k8s.io/kube-scheduler:$K8S_VERSION" "registry.k8s.io/kube-proxy:$K8S_VERSION"
  "$ETCD_IMAGE" "$COREDNS_IMAGE" "$PAUSE_IMAGE" "$PAUSE_IMAGE_KUBEADM"
)
node_image() {
  local k ids c b
  ids=$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE" "${CORE_IMAGES[@]}" | tr '\n' ' ')
  k=$(key "$NODE_IMAGE" "$ids" "$(bin kubeadm)" "$(bin kubelet)" "$(bin kubectl)")
  if current "$NODE_IMAGE" "$k"; then return; fi
  c=lbfed-node-build-$$
  docker rm -f "$c" >/dev/null 2>&1 || true
  docker run -d --name "$c" --entrypoint sleep "$BASE_IMAGE" infinity >/dev/null
  # shellcheck disable=SC2064 # expand now
  trap "docker rm -f -v $c >/dev/null 2>&1 || true" RETURN
  for b in kubeadm kubelet kubectl; do docker cp "$(bin "$b")" "$c:/usr/bin/$b"; done
  docker exec "$c" sh -c "echo $K8S_VERSION > /kind/version"
  docker exec "$c" bash -c 'nohup containerd > /tmp/containerd.log 2>&1 &'
  docker exec "$c" bash -c 'for i in $(seq 1 100); do [ -S /run/containerd/containerd.sock ] && ctr info >/dev/null 2>&1 && exit 0; sleep 0.1; done; cat /tmp/containerd.log; exit 1'
  docker save "${CORE_IMAGES[@]}" | docker exec -i "$c" ctr --namespace=k8s.io images import \
    --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null
  docker exec "$c" ctr --namespace=k8s.io images ls -q | grep -v '^sha256:' | sort > "$KIND_CACHE/node-images.txt"
  for b in "${CORE_IMAGES[@]}"; do
    grep -qxF "$b" "$KIND_CACHE/node-images.txt" || die "$b missing from the node's containerd after import"
  done
  docker exec "$c" bash -c 'pkill containerd; for i in $(seq 1 50); do pgrep containerd >/dev/null || exit 0; sleep 0.1; done; exit 1'
  docker exec "$c" rm -rf /tmp/containerd.log /run/containerd
  docker commit \
    --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' --change 'CMD []' \
    --change "LABEL $KEY_LABEL=$k" "$c" "$NODE_IMAGE" >/dev/null
  log "built $NODE_IMAGE"
}

# Karmada's images, named as karmadactl init and register expect them (FROM scratch, /bin/<name>).
karmada_images() {
  local comp k ctx
  for comp in "${KARMADA_COMPONENTS[@]}"; do
    local image=$KARMADA_REGISTRY/$comp:$KARMADA_VERSION
    k=$(key "$image" "$(bin "$comp")")
    if current "$image" "$k"; then continue; fi
    ctx=$(mktemp -d)
    skeleton "$ctx/root"
    mkdir -p "$ctx/root/bin"
    cp "$(bin "$comp")" "$ctx/root/bin/"
    cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY root/ /
ENV PATH=/bin
ENTRYPOINT ["/bin/$comp"]
LABEL $KEY_LABEL=$k
DOCKERFILE
    dbuild -t "$image" "$ctx"
    rm -rf "$ctx"
    log "built $image"
  done
}

mkdir -p "$KIND_CACHE"
stage "core images" core_images
stage "node base image" base_image
stage "node image" node_image
stage "karmada images" karmada_images
# Earlier builds of these images, now untagged: only ours carry the label.
docker image prune -f --filter "label=$KEY_LABEL" >/dev/null
