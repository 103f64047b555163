#!/usr/bin/env bash
# Builds the Debian bookworm root filesystem of the node image (and of kube-proxy's image) with
# debootstrap from Debian's mirror, imports it as $ROOTFS_IMAGE and keeps the tarball in
# $KIND_CACHE, keyed by the package list: a second run re-imports or reuses it in seconds.
# Bookworm, not trixie: its systemd 252 still boots on cgroup v1 (256 refuses).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# kind v0.31.0's base image packages (images/base/Dockerfile) less fuse-overlayfs, nfs-common and
# open-iscsi, which a node on overlayfs without storage drivers does not use.
ROOTFS_PACKAGES=systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,curl,jq,procps
ROOTFS_MIRROR=${ROOTFS_MIRROR:-http://deb.debian.org/debian}
key=$(echo "bookworm $ROOTFS_PACKAGES v1" | sha256sum | cut -c1-12)
tarball=$KIND_CACHE/rootfs-bookworm-$key.tar
image=$ROOTFS_IMAGE_REPO:bookworm-$key

if image_exists "$image"; then
  log "rootfs image $image present"
elif [ -f "$tarball" ]; then
  log "importing $tarball"
  docker import "$tarball" "$image" >/dev/null
else
  mkdir -p "$KIND_CACHE"
  work=$(mktemp -d "$KIND_CACHE/.rootfs-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  log "debootstrap bookworm ($ROOTFS_PACKAGES)"
  debootstrap --variant=minbase --include="$ROOTFS_PACKAGES" bookworm "$work/root" "$ROOTFS_MIRROR" \
    > "$work/debootstrap.log" 2>&1 || { tail -30 "$work/debootstrap.log"; die "debootstrap failed"; }
  # What an image does not need: package caches and lists, logs, docs.
  rm -rf "$work/root"/var/cache/apt/archives/*.deb "$work/root"/var/lib/apt/lists/* \
    "$work/root"/var/log/*.log "$work/root"/usr/share/doc/* "$work/root"/usr/share/man/*
  tar -C "$work/root" --numeric-owner -cf "$work/rootfs.tar" .
  mv "$work/rootfs.tar" "$tarball"
  docker import "$tarball" "$image" >/dev/null
fi
docker tag "$image" "$ROOTFS_IMAGE_REPO:bookworm"
echo "$image"
