#!/usr/bin/env bash
# `make kind-verify`: checks the running offline topology end to end. The responder image
# (make images) runs in m1 and m2; a responder pod in lbfed-karmada-host fetches from both pod
# IPs across the clusters' routes; Karmada reports m1 and m2 Ready; no pod in any cluster
# restarts or waits in CrashLoopBackOff/ImagePullBackOff. Exits non-zero on the first failure.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
KUBECTL=$(localup_bin kubectl)
k() { local c=$1; shift; "$KUBECTL" --kubeconfig "$KIND_DIR/$c.kubeconfig" "$@"; }
image_exists "$RESPONDER_IMAGE" || die "$RESPONDER_IMAGE missing: run make images"
"$KIND_HACK_DIR/load-images.sh" "$RESPONDER_IMAGE"

# The demo: one responder pod per member, as the local topology's demo answers.
for m in m1 m2; do
  k "$m" apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: responder, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: responder}}
  template:
    metadata: {labels: {app: responder}}
    spec:
      containers:
      - name: responder
        image: $RESPONDER_IMAGE
        imagePullPolicy: Never
        ports: [{containerPort: 8080}]
        env:
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
        - {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 2}
        securityContext: {runAsNonRoot: true, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
YAML
done
urls=()
for m in m1 m2; do
  k "$m" rollout status deployment/responder --timeout=120s >/dev/null
  ip=$(k "$m" get pods -l app=responder -o jsonpath='{.items[0].status.podIP}')
  urls+=(-get "http://$ip:8080/from-karmada-host")
  log "$m responder pod at $ip"
done

# From a pod of the Karmada host cluster, across the routes, to both members' pods.
k karmada-host delete pod responder-probe --ignore-not-found --wait=true >/dev/null
k karmada-host run responder-probe --image "$RESPONDER_IMAGE" --image-pull-policy Never --restart Never \
  --command -- /responder "${urls[@]}" >/dev/null
timeout 120 bash -c "until [ \"\$(\"$KUBECTL\" --kubeconfig \"$KIND_DIR/karmada-host.kubeconfig\" get pod responder-probe -o jsonpath='{.status.phase}')\" = Succeeded ]; do
  case \$(\"$KUBECTL\" --kubeconfig \"$KIND_DIR/karmada-host.kubeconfig\" get pod responder-probe -o jsonpath='{.status.phase}') in Failed) exit 1;; esac; sleep 1; done" \
  || { k karmada-host logs responder-probe || true; die "probe pod in karmada-host failed"; }
out=$(k karmada-host logs responder-probe)
echo "$out"
for m in m1 m2; do grep -q "\"cluster\":\"$m\"" <<<"$out" || die "no answer from $m"; done
k karmada-host delete pod responder-probe --wait=false >/dev/null

"$KUBECTL" --kubeconfig "$KIND_DIR/karmada/karmada-apiserver.config" wait --for=condition=Ready cluster/m1 cluster/m2 --timeout=60s
"$KUBECTL" --kubeconfig "$KIND_DIR/karmada/karmada-apiserver.config" get clusters

bad=0
for c in "${CLUSTERS[@]}"; do
  rows=$(k "$c" get pods -A --no-headers -o custom-columns='NS:.metadata.namespace,NAME:.metadata.name,PHASE:.status.phase,RESTARTS:.status.containerStatuses[*].restartCount,WAIT:.status.containerStatuses[*].state.waiting.reason')
  echo "== $c"
  echo "$rows"
  if awk '$3 != "Running" && $3 != "Succeeded" {exit 1} {n=split($4, r, ","); for (i = 1; i <= n; i++) if (r[i] > 0) exit 1} $5 != "<none>" {exit 1}' <<<"$rows"; then :; else
    log "$c: a pod is not running cleanly"
    bad=1
  fi
done
[ "$bad" = 0 ] || die "pods not healthy"
log "verify: OK"
