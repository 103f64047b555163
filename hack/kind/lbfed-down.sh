#!/usr/bin/env bash
# Undoes what lbfed-up.sh changed outside the clusters (make down-kind runs it before deleting
# them): this machine's route to the simulated Alteon's VIPs. What it installed in the clusters
# goes with them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
if [ -f "$KIND_DIR/vip-route" ]; then
  ip route del "$(cat "$KIND_DIR/vip-route")" 2>/dev/null || true
  rm -f "$KIND_DIR/vip-route"
fi
