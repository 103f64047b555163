#!/usr/bin/env bash
# Prepares this machine for kind (make kind-host-up): Debian packages, inotify limits, IPv4
# forwarding, and a Docker engine whose default runtime is runc-capstrip. Records what it
# changed in $KIND_STATE so that host-down.sh undoes exactly that. Idempotent: a second run
# changes nothing. Needs root. See docs/kind-offline.md ("The machine").
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || die "needs root"
mkdir -p "$KIND_STATE"

# --- Debian packages (kept installed on down, as a cache: a reinstall is the slow part) -----------
# docker.io: the engine; debootstrap: the node rootfs; libseccomp-dev and pkg-config: runc's cgo
# build; jq: runc-capstrip; iptables: docker.io pulls it in, host-down uses it.
pkgs=(docker.io debootstrap libseccomp-dev pkg-config jq iptables)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  # Keep the packages' maintainer scripts from starting docker/containerd through init scripts:
  # this script starts the daemon itself, with its own flags.
  policy_added=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    policy_added=1
  fi
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  if [ -n "$policy_added" ]; then rm -f /usr/sbin/policy-rc.d; fi
fi

# --- sysctls: record the first value seen, so repeated runs restore the original ----------------
set_sysctl() { # NAME MIN: raise NAME to at least MIN
  local name=$1 min=$2 cur file
  file=/proc/sys/${name//.//}
  cur=$(cat "$file")
  if [ "$cur" -lt "$min" ]; then
    [ -f "$KIND_STATE/sysctl.$name" ] || echo "$cur" > "$KIND_STATE/sysctl.$name"
    echo "$min" > "$file"
    log "sysctl $name: $cur -> $min"
  fi
}
# kind's known issue "too many open files": three clusters exhaust 128 inotify instances.
set_sysctl fs.inotify.max_user_instances 512
set_sysctl fs.inotify.max_user_watches 524288
# dockerd sets the FORWARD policy to DROP only when IT turns forwarding on: turned on first,
# the policy stays as it is (ACCEPT), so nothing but Docker's own bridges is affected.
set_sysctl net.ipv4.ip_forward 1

# --- the Docker engine ---------------------------------------------------------------------------
if docker info >/dev/null 2>&1; then
  if [ -f "$KIND_STATE/dockerd.pid" ] && kill -0 "$(cat "$KIND_STATE/dockerd.pid")" 2>/dev/null; then
    log "dockerd already running (started by host-up, pid $(cat "$KIND_STATE/dockerd.pid"))"
  else
    log "warning: a Docker engine not started by host-up is running; using it as it is (host-down leaves it)"
  fi
  exit 0
fi

install -m 755 "$KIND_HACK_DIR/runc-capstrip" "$KIND_STATE/runc-capstrip"
# The rules before the first start, so that host-down removes only what Docker added (kept
# across restarts of a daemon that died, whose rules are still there).
[ -f "$KIND_STATE/iptables.before" ] || iptables-save > "$KIND_STATE/iptables.before" 2>/dev/null || true
log "starting dockerd (log $KIND_STATE/dockerd.log)"
# setsid: the daemon outlives this script and its make; host-down stops it by the recorded pid.
setsid dockerd \
  --add-runtime "lbfed-capstrip=$KIND_STATE/runc-capstrip" --default-runtime lbfed-capstrip \
  --pidfile "$KIND_STATE/dockerd.pid" --log-level warn \
  </dev/null >"$KIND_STATE/dockerd.log" 2>&1 &
pid=$!
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { tail -20 "$KIND_STATE/dockerd.log"; die "dockerd exited"; }
  sleep 0.5
done
docker info >/dev/null 2>&1 || { tail -20 "$KIND_STATE/dockerd.log"; die "dockerd did not answer in 30s"; }
log "dockerd up: $(docker version -f '{{.Server.Version}}'), default runtime $(docker info -f '{{.DefaultRuntime}}'), FORWARD policy $(iptables -S FORWARD | head -1)"
