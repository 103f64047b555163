#!/usr/bin/env bash
# `make images`: one small image per lbfed binary in cmd/, FROM scratch, static, USER 65532,
# ENTRYPOINT the binary, tagged $IMAGE_REGISTRY/<binary>:<chart appVersion> as the charts name
# them; registry.k8s.io/kubectl:v1.35.3 (ENTRYPOINT kubectl), which the lbfed chart's apply Jobs
# run; and $RESPONDER_IMAGE, the demo workload (e2e/kind/responder). Needs a Docker engine
# (make kind-host-up) and, for kubectl, `localup build` (make tools).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if [ -z "$IMAGE_REGISTRY" ] || [ -z "$APP_VERSION" ]; then die "no global.imageRegistry or appVersion in charts/lbfed"; fi
docker info >/dev/null 2>&1 || die "no Docker engine: run make kind-host-up"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# image NAME BINARY: FROM scratch, /etc/passwd with nonroot, CA certificates, the binary.
image() {
  local name=$1 binary=$2 ctx
  ctx=$work/ctx-${name//[\/:]/_}
  mkdir -p "$ctx/root/etc/ssl/certs" "$ctx/root/tmp"
  chmod 1777 "$ctx/root/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$ctx/root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$ctx/root/etc/group"
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/root/etc/ssl/certs/"
  cp "$binary" "$ctx/root/$(basename "$binary")"
  cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY root/ /
USER 65532:65532
ENTRYPOINT ["/$(basename "$binary")"]
LABEL io.lbfed.image=app
DOCKERFILE
  dbuild -t "$name" "$ctx"
  log "built $name ($(docker image inspect -f '{{.Size}}' "$name" | numfmt --to=iec))"
}

build_binaries() {
  (cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/bin/" ./cmd/... ./e2e/kind/responder)
}
stage "go build ./cmd/... (static)" build_binaries
for b in "$REPO_ROOT"/cmd/*/; do
  b=$(basename "$b")
  image "$IMAGE_REGISTRY/$b:$APP_VERSION" "$work/bin/$b"
done
image "$RESPONDER_IMAGE" "$work/bin/responder"
image "registry.k8s.io/kubectl:$K8S_VERSION" "$("$REPO_ROOT/bin/localup" bin kubectl)"
# Earlier builds of these images, now untagged.
docker image prune -f --filter label=io.lbfed.image=app >/dev/null
