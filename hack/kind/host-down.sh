#!/usr/bin/env bash
# Undoes host-up.sh (make kind-host-down): stops the dockerd it started (and so every container
# of that daemon), removes the iptables rules and chains and the docker0 bridge that daemon
# created, and restores the sysctls it raised. Packages, images (/var/lib/docker) and
# ~/.cache/lbfed stay: they are caches. Does nothing when host-up did not run.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ -d "$KIND_STATE" ] || { log "nothing to undo ($KIND_STATE absent)"; exit 0; }

if [ -f "$KIND_STATE/dockerd.pid" ]; then
  pid=$(cat "$KIND_STATE/dockerd.pid")
  if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then
    log "stopping dockerd (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
      log "dockerd still running after 60s; killing it"
      kill -KILL "$pid"
    fi
  fi
  # Docker leaves its chains, their jumps and the docker0 bridge behind when it stops. Remove
  # the rules that are Docker's (they name a DOCKER chain, docker0 or a Docker bridge br-…) and
  # were not there before host-up, then the chains.
  for table in filter nat; do
    before=$(sed -n "/^\*$table\$/,/^COMMIT/p" "$KIND_STATE/iptables.before" 2>/dev/null || true)
    iptables -t "$table" -S | grep '^-A ' | grep -E 'DOCKER|docker0|br-[0-9a-f]{12}' | while read -r rule; do
      if ! grep -qxF -- "$rule" <<<"$before"; then
        eval "iptables -t $table -D ${rule#-A }"
      fi
    done
    iptables -t "$table" -S | sed -n 's/^-N \(DOCKER[A-Z0-9-]*\)$/\1/p' | while read -r chain; do
      if ! grep -qx -- "-N $chain\|:$chain .*" <<<"$before"; then
        iptables -t "$table" -F "$chain"
        iptables -t "$table" -X "$chain"
      fi
    done
  done
  if ip link show docker0 >/dev/null 2>&1 && ! grep -q docker0 "$KIND_STATE/iptables.before" 2>/dev/null; then
    ip link delete docker0
  fi
fi

for f in "$KIND_STATE"/sysctl.*; do
  [ -f "$f" ] || continue
  name=${f##*/sysctl.}
  cat "$f" > "/proc/sys/${name//.//}"
  log "sysctl $name restored to $(cat "$f")"
done
rm -rf "$KIND_STATE"
