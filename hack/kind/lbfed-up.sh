#!/usr/bin/env bash
# `make up-kind` after the topology (cluster-up.sh) and lbfed's images (app-images.sh,
# load-images.sh): lbfed installed the way charts/lbfed/README.md and charts/lbcf/README.md tell a
# user, and the demo of `make up` on real kubelets:
#   1. helm install lbfed charts/lbfed into the Karmada host cluster (namespace karmada-system):
#      lbfed-controller there, the member side propagated by Karmada to m1 and m2;
#   2. the simulated Alteon pair, standing in for the appliance (lbfed-driver namespace of the
#      host cluster, host network: it holds the VIPs of $VIP_RANGE on the node, and reaches the
#      members' pods through the node's routes to their pod networks, as a flat network or routes
#      do for a real Alteon), its management certificate from the CA made here;
#   3. helm install lbcf charts/lbcf with the Radware elb-driver alone (same namespace), mutual TLS
#      with lbfed-controller (the chart README's "Driver authentication" steps, then a helm
#      upgrade of lbfed with the driver's CA);
#   4. the demo on Karmada: a Deployment of the responder in m1 and m2, its BackendGroup, and a
#      LoadBalancer on the VIP; this machine reaches $VIP_RANGE through the host cluster's node.
# Idempotent: helm upgrade --install, kubectl apply. Undone by lbfed-down.sh (make down-kind).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

KUBECTL=$(localup_bin kubectl)
HELM=${HELM:?the Makefile passes HELM}
HOST_KC=$KIND_DIR/karmada-host.kubeconfig
KARMADA_KC=$KIND_DIR/karmada/karmada-apiserver.config
[ -f "$HOST_KC" ] && [ -f "$KARMADA_KC" ] || die "no kind topology: run make kind-up"
host() { "$KUBECTL" --kubeconfig "$HOST_KC" "$@"; }
karmada() { "$KUBECTL" --kubeconfig "$KARMADA_KC" "$@"; }
helm_host() { "$HELM" --kubeconfig "$HOST_KC" "$@"; }

HOST_NODE=lbfed-karmada-host-control-plane
HOST_NODE_IP=$(docker inspect -f '{{.NetworkSettings.Networks.kind.IPAddress}}' "$HOST_NODE")
DRIVER_NS=lbfed-driver
PKI=$KIND_DIR/pki-lbfed
mkdir -p "$PKI"

# --- 1. lbfed, as charts/lbfed/README.md installs it. karmadactl init left the kubeconfig Secret
# the chart finds by default (karmada-controller-manager-config). --wait: the apply Job registers
# the interpreter and admission only once lbfed-controller is ready.
install_lbfed() {
  local extra=()
  if host -n karmada-system get secret lbfed-driver-ca >/dev/null 2>&1; then
    extra+=(--set controller.federation.driverTLS.caSecret=lbfed-driver-ca)
  fi
  helm_host upgrade --install lbfed "$REPO_ROOT/charts/lbfed" --namespace karmada-system \
    --wait --timeout 10m "${extra[@]}"
}
stage "helm install lbfed" install_lbfed

# --- 2. The simulated Alteon pair. Its management certificate, from a CA of ours, names its Service.
sim_pki() {
  [ -f "$PKI/alteon-tls.crt" ] && return 0
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 -subj "/CN=lbfed-kind-alteon-ca" \
    -keyout "$PKI/alteon-ca.key" -out "$PKI/alteon-ca.crt" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=alteon-sim" \
    -keyout "$PKI/alteon-tls.key" -out "$PKI/alteon-tls.csr" 2>/dev/null
  openssl x509 -req -in "$PKI/alteon-tls.csr" -CA "$PKI/alteon-ca.crt" -CAkey "$PKI/alteon-ca.key" -CAcreateserial -days 365 \
    -extfile <(printf 'subjectAltName=DNS:alteon-sim.%s.svc,DNS:alteon-sim.%s.svc.cluster.local\n' "$DRIVER_NS" "$DRIVER_NS") \
    -out "$PKI/alteon-tls.crt" 2>/dev/null
  head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$PKI/alteon-password"
}
stage "Alteon simulator certificate" sim_pki

apply_sim() {
  host create namespace "$DRIVER_NS" --dry-run=client -o yaml | host apply -f - >/dev/null
  host -n "$DRIVER_NS" create secret generic alteon-sim-tls --from-file=tls.crt="$PKI/alteon-tls.crt" \
    --from-file=tls.key="$PKI/alteon-tls.key" --from-file=ca.crt="$PKI/alteon-ca.crt" --dry-run=client -o yaml | host apply -f - >/dev/null
  host -n "$DRIVER_NS" create secret generic alteon-password --from-file=password="$PKI/alteon-password" \
    --dry-run=client -o yaml | host apply -f - >/dev/null
  host -n "$DRIVER_NS" create secret generic alteon-ca --from-file=ca.crt="$PKI/alteon-ca.crt" \
    --dry-run=client -o yaml | host apply -f - >/dev/null
  # The VIPs are the node's: the sim's data plane binds them (port 80 too, as non-root).
  docker exec "$HOST_NODE" sh -c "ip addr show dev lo | grep -q ' $VIP_RANGE ' || ip addr add $VIP_RANGE dev lo; sysctl -qw net.ipv4.ip_unprivileged_port_start=0"
  host apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: alteon-sim, namespace: $DRIVER_NS, labels: {app: alteon-sim}}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector: {matchLabels: {app: alteon-sim}}
  template:
    metadata: {labels: {app: alteon-sim}}
    spec:
      hostNetwork: true
      dnsPolicy: ClusterFirstWithHostNet
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532}
      containers:
      - name: alteon-sim
        image: $IMAGE_REGISTRY/alteon-sim:$APP_VERSION
        imagePullPolicy: IfNotPresent
        args: [--listen-a=:8443, --listen-b=:8444, --control=:8440, --tls-dir=/etc/alteon/tls,
               --password-file=/etc/alteon/password/password]
        ports: [{name: unit-a, containerPort: 8443}, {name: unit-b, containerPort: 8444}, {name: control, containerPort: 8440}]
        readinessProbe: {tcpSocket: {port: 8443}, periodSeconds: 2}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
        volumeMounts:
        - {name: tls, mountPath: /etc/alteon/tls, readOnly: true}
        - {name: password, mountPath: /etc/alteon/password, readOnly: true}
      volumes:
      - {name: tls, secret: {secretName: alteon-sim-tls}}
      - {name: password, secret: {secretName: alteon-password}}
---
apiVersion: v1
kind: Service
metadata: {name: alteon-sim, namespace: $DRIVER_NS}
spec:
  selector: {app: alteon-sim}
  ports:
  - {name: unit-a, port: 8443}
  - {name: unit-b, port: 8444}
  - {name: control, port: 8440}
YAML
  host -n "$DRIVER_NS" rollout status deploy/alteon-sim --timeout=3m
}
stage "Alteon simulator" apply_sim

# --- 3. The Radware elb-driver alone (charts/lbcf), accepting lbfed-controller's client
# certificate (charts/lbfed/README.md "Driver authentication").
install_driver() {
  host -n karmada-system get secret lbfed-driver-client-tls -o jsonpath='{.data.ca\.crt}' | base64 -d > "$PKI/lbfed-client-ca.crt"
  host -n "$DRIVER_NS" create secret generic lbfed-driver-client-ca --from-file=ca.crt="$PKI/lbfed-client-ca.crt" \
    --dry-run=client -o yaml | host apply -f - >/dev/null
  helm_host upgrade --install lbcf "$REPO_ROOT/charts/lbcf" --namespace "$DRIVER_NS" --wait --timeout 5m \
    --set controller.enabled=false --set elbDriver.enabled=true --set elbDriver.backend=radware \
    --set "elbDriver.radware.urls={https://alteon-sim.$DRIVER_NS.svc:8443,https://alteon-sim.$DRIVER_NS.svc:8444}" \
    --set elbDriver.radware.passwordSecret.name=alteon-password --set elbDriver.radware.caSecret=alteon-ca \
    --set "elbDriver.clientAuth.extraCASecrets={lbfed-driver-client-ca}" --set "elbDriver.clientAuth.allowedNames={lbfed-controller}"
  # The driver's serving CA, for lbfed-controller's calls.
  host -n "$DRIVER_NS" get secret lbcf-elb-driver-tls -o jsonpath='{.data.ca\.crt}' | base64 -d > "$PKI/driver-ca.crt"
  if ! host -n karmada-system get secret lbfed-driver-ca -o jsonpath='{.data.ca\.crt}' 2>/dev/null | base64 -d | cmp -s - "$PKI/driver-ca.crt"; then
    host -n karmada-system create secret generic lbfed-driver-ca --from-file=ca.crt="$PKI/driver-ca.crt" \
      --dry-run=client -o yaml | host apply -f - >/dev/null
  fi
}
stage "helm install lbcf (elb-driver)" install_driver
if [ "$(host -n karmada-system get deploy lbfed-controller -o jsonpath='{.spec.template.spec.volumes[?(@.name=="driver-ca")].secret.secretName}')" != lbfed-driver-ca ]; then
  stage "helm upgrade lbfed (the driver's CA)" install_lbfed
fi

# --- 4. The demo on Karmada, as `make up` has it: gated pods with a preStop sleep, divided
# between m1 and m2, one VIP (examples/kind-demo; its values are DRIVER_NS, DEMO_VIP and
# RESPONDER_IMAGE of lib.sh).
apply_demo() {
  karmada apply -f "$REPO_ROOT/examples/kind-demo/backendgroup.yaml" >/dev/null
  # The group reaches the members before the Deployment: their webhook gives lbfed's readiness
  # gate only to pods a BackendGroup there selects.
  local m
  for m in m1 m2; do
    timeout 120 sh -c "until '$KUBECTL' --kubeconfig '$KIND_DIR/$m.kubeconfig' -n demo get bg web >/dev/null 2>&1; do sleep 1; done" ||
      die "BackendGroup demo/web did not reach $m"
  done
  karmada apply -f "$REPO_ROOT/examples/kind-demo/deployment.yaml" >/dev/null
}
stage "demo on Karmada" apply_demo

# This machine reaches the VIPs through the host cluster's node, as routes to a load balancer's
# VIP range do (recorded for lbfed-down.sh).
route_vips() {
  ip route replace "$VIP_RANGE" via "$HOST_NODE_IP"
  echo "$VIP_RANGE" > "$KIND_DIR/vip-route"
}
stage "route $VIP_RANGE via $HOST_NODE_IP" route_vips

wait_demo() {
  timeout 300 sh -c "until [ \"\$('$KUBECTL' --kubeconfig '$KARMADA_KC' -n demo get bg web -o jsonpath='{.status.registeredBackends}')\" = 4 ]; do sleep 2; done" ||
    die "the demo's 4 backends are not registered: kubectl --kubeconfig $KARMADA_KC -n demo get bg web -o yaml"
  timeout 60 sh -c "until curl -s -m 2 -o /dev/null http://$DEMO_VIP/; do sleep 1; done" || die "http://$DEMO_VIP/ does not answer"
}
stage "demo registered and answering" wait_demo

cat <<EOF

lbfed is installed with Helm on Karmada on kind; pods of m1 and m2 (real containers) answer on
one VIP of the simulated Alteon pair:

  for i in 1 2 3 4 5 6; do curl -s http://$DEMO_VIP/; echo; done

$(for i in 1 2 3 4; do curl -s -m 2 "http://$DEMO_VIP/"; echo; done)

  export KUBECONFIG=$KARMADA_KC    # Karmada API server
  kubectl -n demo get lb,bg
$(karmada -n demo get lb,bg 2>&1 | sed 's/^/  /')

  helm --kubeconfig $HOST_KC -n karmada-system status lbfed
  kubectl --kubeconfig $KIND_DIR/m1.kubeconfig -n demo get pods -o wide

Remove everything with: make down-kind
EOF
