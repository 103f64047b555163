{{/* Names ---------------------------------------------------------------------------------- */}}

{{- define "lbfed.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lbfed.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* lbfed-controller in the host cluster (Deployment, Service, ServiceAccount). */}}
{{- define "lbfed.controller.name" -}}
{{- printf "%s-controller" (include "lbfed.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lbfed.interpreterSecretName" -}}
{{- if eq .Values.certificates.mode "existingSecret" }}
{{- .Values.certificates.existingSecret }}
{{- else }}
{{- printf "%s-interpreter-tls" (include "lbfed.fullname" .) }}
{{- end }}
{{- end }}

{{/* Cluster-scoped objects in karmada-apiserver and the members. */}}
{{- define "lbfed.clusterObjectName" -}}
{{- include "lbfed.fullname" . }}
{{- end }}

{{/* Member objects: namespaced ones are called member.name; cluster-scoped ones carry the prefix. */}}
{{- define "lbfed.member.clusterName" -}}
{{- printf "%s-%s" (include "lbfed.fullname" .) .Values.member.name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lbfed.member.secretName" -}}
{{- printf "%s-webhook-tls" .Values.member.name }}
{{- end }}

{{/* The member certificate's copy in the host cluster (karmada.apply=job), kept for upgrades. */}}
{{- define "lbfed.member.hostSecretName" -}}
{{- printf "%s-member-webhook-tls" (include "lbfed.fullname" .) }}
{{- end }}

{{/* The client certificate lbfed-controller presents to drivers (mutual TLS): the user's
controller.federation.driverTLS.clientCertSecret, or the chart's. */}}
{{- define "lbfed.driverClientSecretName" -}}
{{- with .Values.controller.federation.driverTLS.clientCertSecret }}
{{- . }}
{{- else }}
{{- printf "%s-driver-client-tls" (include "lbfed.fullname" .) }}
{{- end }}
{{- end }}

{{/* Subject common name of the chart's driver client certificate (elb-driver --client-allowed-names). */}}
{{- define "lbfed.driverClientName" -}}
{{- include "lbfed.controller.name" . }}
{{- end }}

{{/* Whether lbfed-controller here calls drivers (federation or admission) with the chart's
client certificate. */}}
{{- define "lbfed.chartDriverClient" -}}
{{- $c := .Values.controller }}
{{- if and $c.enabled (or $c.federation.enabled $c.admission.enabled) (not $c.federation.driverTLS.clientCertSecret) }}true{{ end }}
{{- end }}

{{- define "lbfed.karmadaManifestsName" -}}
{{- printf "%s-karmada-manifests" (include "lbfed.fullname" .) }}
{{- end }}

{{/*
lbfed.karmadaKubeconfig computes, once per render, the Secrets (release namespace) holding
karmada-apiserver's kubeconfig into .Values._karmadaKubeconfig: {controller, jobs}, each {name,
key}: lbfed-controller's and the tests' (karmada.kubeconfigSecret), and the apply Jobs'
(karmada.kubectl.kubeconfigSecret, else the same). With a cluster to look in (helm
install/upgrade, --dry-run=server), a missing Secret or key fails the render naming the value to
set: otherwise the apply Job's pod waits for its volume until helm times out. The Secret list
doubles as the sign of a cluster: lookup answers {} without one, and helm itself lists Secrets
here (its release storage), so the installer may.
*/}}
{{- define "lbfed.karmadaKubeconfig" -}}
{{- if not (hasKey .Values "_karmadaKubeconfig") }}
{{- $secrets := lookup "v1" "Secret" .Release.Namespace "" }}
{{- $data := dict }}
{{- range $secrets.items }}{{ $_ := set $data .metadata.name (.data | default dict) }}{{ end }}
{{- $args := dict "ns" .Release.Namespace "live" (hasKey $secrets "items") "data" $data }}
{{- $controller := include "lbfed.pickKubeconfig" (merge (dict "value" .Values.karmada.kubeconfigSecret "path" "karmada.kubeconfigSecret") $args) | fromJson }}
{{- $jobs := $controller }}
{{- if .Values.karmada.kubectl.kubeconfigSecret.name }}
{{- $jobs = include "lbfed.pickKubeconfig" (merge (dict "value" .Values.karmada.kubectl.kubeconfigSecret "path" "karmada.kubectl.kubeconfigSecret") $args) | fromJson }}
{{- end }}
{{- $_ := set .Values "_karmadaKubeconfig" (dict "controller" $controller "jobs" $jobs) }}
{{- end }}
{{- end }}

{{/*
lbfed.pickKubeconfig: (dict "value" {name, key} "path" "karmada.kubeconfigSecret" "ns" … "live"
bool "data" {secret name: data}) → JSON {name, key}. An empty name picks the first Secret
Karmada v1.18's installers make that exists (without a cluster: karmadactl init's).
*/}}
{{- define "lbfed.pickKubeconfig" -}}
{{- $v := .value }}
{{- $ns := .ns }}
{{- $data := .data }}
{{- $known := list
  (dict "name" "karmada-controller-manager-config" "key" "karmada.config" "by" "`karmadactl init`")
  (dict "name" "karmada-kubeconfig" "key" "kubeconfig" "by" "Karmada's Helm chart, release karmada") }}
{{- $candidates := $known }}
{{- if $v.name }}
{{- $candidates = list (dict "name" $v.name "key" ($v.key | default "kubeconfig")) }}
{{- end }}
{{- $chosen := first $candidates }}
{{- if .live }}
{{- $found := dict }}
{{- range $candidates }}
{{- if and (not $found) (hasKey $data .name) (hasKey (get $data .name) .key) }}{{ $found = . }}{{ end }}
{{- end }}
{{- if not $found }}
{{- if $v.name }}
{{- if not (hasKey $data $chosen.name) }}
{{- fail (printf "%s.name: no Secret %q in namespace %q. It must hold a kubeconfig for karmada-apiserver: `karmadactl init` makes karmada-controller-manager-config (key karmada.config), Karmada's Helm chart <release>-kubeconfig (key kubeconfig)" .path $chosen.name $ns) }}
{{- end }}
{{- fail (printf "%s.key: Secret %s/%s has no key %q (its keys: %s)" .path $ns $chosen.name $chosen.key (keys (get $data $chosen.name) | sortAlpha | join ", ")) }}
{{- end }}
{{- $tried := list }}
{{- range $known }}{{ $tried = append $tried (printf "%s (key %s, made by %s)" .name .key .by) }}{{ end }}
{{- fail (printf "no kubeconfig for karmada-apiserver in namespace %q: looked for %s. Create one there and set %s.name and %s.key" $ns (join " and " $tried) .path .path) }}
{{- end }}
{{- $chosen = $found }}
{{- end }}
{{- dict "name" $chosen.name "key" $chosen.key | toJson }}
{{- end }}

{{/* A kubeconfig Secret's volume: (dict "root" $ "name" "karmada-kubeconfig" "for" "controller"
or "jobs"). */}}
{{- define "lbfed.karmadaKubeconfigVolume" -}}
{{- include "lbfed.karmadaKubeconfig" .root }}
{{- $s := index .root.Values._karmadaKubeconfig .for -}}
- name: {{ .name }}
  secret:
    secretName: {{ $s.name }}
    items:
      - key: {{ $s.key }}
        path: kubeconfig
{{- end }}

{{/* Labels ---------------------------------------------------------------------------------- */}}

{{/* (dict "root" $ "component" "controller") */}}
{{- define "lbfed.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lbfed.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* (dict "root" $ "component" "controller" "target" "karmada-apiserver"); target defaults to host-cluster. */}}
{{- define "lbfed.labels" -}}
{{ include "lbfed.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: lbfed
lbfed.io/target: {{ .target | default "host-cluster" }}
{{- end }}

{{/* Pods ------------------------------------------------------------------------------------ */}}

{{/* (dict "root" $ "image" .Values.controller.image) */}}
{{- define "lbfed.image" -}}
{{- $repo := .image.repository }}
{{- with .root.Values.global.imageRegistry }}{{ $repo = printf "%s/%s" (trimSuffix "/" .) $repo }}{{ end }}
{{- printf "%s:%s" $repo (default .root.Chart.AppVersion .image.tag) }}
{{- end }}

{{/* The kubectl image of the apply Jobs and the tests. */}}
{{- define "lbfed.kubectlImage" -}}
{{- $i := .Values.karmada.kubectl.image }}
{{- $repo := $i.repository }}
{{- with $i.registry }}{{ $repo = printf "%s/%s" (trimSuffix "/" .) $repo }}{{ end }}
{{- printf "%s:%s" $repo $i.tag }}
{{- end }}

{{/* Names of the pull Secrets Karmada brings to the members (JSON list; [] for none). */}}
{{- define "lbfed.member.propagatedPullSecrets" -}}
{{- $names := list }}
{{- if and .Values.member.enabled .Values.member.imagePullSecrets.propagate }}
{{- range .Values.global.imagePullSecrets }}{{ $names = append $names .name }}{{ end }}
{{- end }}
{{- $names | toJson }}
{{- end }}

{{- define "lbfed.imagePullSecrets" -}}
{{- with .Values.global.imagePullSecrets }}
imagePullSecrets:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* (dict "root" $ "component" "controller" "values" .Values.controller) */}}
{{- define "lbfed.scheduling" -}}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .values.affinity }}
affinity:
  {{- toYaml .values.affinity | nindent 2 }}
{{- else if gt (int (default 1 .values.replicas)) 1 }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "lbfed.selectorLabels" . | nindent 14 }}
{{- end }}
{{- with .values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Certificates ---------------------------------------------------------------------------- */}}

{{/* DNS names of a Service: (dict "root" $ "service" "name" "namespace" "ns" "extra" list). */}}
{{- define "lbfed.serviceDNSNames" -}}
{{- $s := .service }}
{{- $ns := .namespace }}
{{- concat (list $s (printf "%s.%s" $s $ns) (printf "%s.%s.svc" $s $ns) (printf "%s.%s.svc.%s" $s $ns .root.Values.global.clusterDomain)) (.extra | default list) | toJson }}
{{- end }}

{{/*
Reads a kubernetes.io/tls Secret (namespace, name) for reuse: its PEM strings {ca, crt, key}, or
an empty dict when it is missing or incomplete (always under `helm template`).
*/}}
{{- define "lbfed.lookupTLS" -}}
{{- $data := (lookup "v1" "Secret" .namespace .name).data | default dict }}
{{- if and (index $data "ca.crt") (index $data "tls.crt") (index $data "tls.key") }}
{{- dict "ca" (index $data "ca.crt" | b64dec) "crt" (index $data "tls.crt" | b64dec) "key" (index $data "tls.key" | b64dec) | toJson }}
{{- else }}
{{- dict | toJson }}
{{- end }}
{{- end }}

{{/*
lbfed.tls computes, once per render, the self-signed certificates into .Values._tls:
  interpreter: {ca, crt, key}  (certificates.mode=selfSigned)
  member:      {ca, crt, key}  (member.enabled)
  driverClient: {ca, crt, key} (the chart's driver client certificate, unless cert-manager issues it)
Each reuses the Secret already in the cluster, so upgrades do not rotate certificates; a new one
gets its own CA (a CA key is never stored).
*/}}
{{- define "lbfed.tls" -}}
{{- if not (hasKey .Values "_tls") }}
{{- $tls := dict }}
{{- if and (eq .Values.certificates.mode "selfSigned") (include "lbfed.servesTLS" .) }}
{{- $cur := include "lbfed.lookupTLS" (dict "namespace" .Release.Namespace "name" (include "lbfed.interpreterSecretName" .)) | fromJson }}
{{- if not $cur }}
{{- $days := int .Values.certificates.selfSigned.validityDays }}
{{- $ca := genCA (printf "%s-interpreter-ca" (include "lbfed.fullname" .)) $days }}
{{- $svc := include "lbfed.controller.name" . }}
{{- $i := .Values.controller.interpreter }}
{{- $dns := include "lbfed.serviceDNSNames" (dict "root" . "service" $svc "namespace" .Release.Namespace "extra" $i.extraDNSNames) | fromJsonArray }}
{{- $cert := genSignedCert $svc $i.extraIPs $dns $days $ca }}
{{- $cur = dict "ca" $ca.Cert "crt" $cert.Cert "key" $cert.Key }}
{{- end }}
{{- $_ := set $tls "interpreter" $cur }}
{{- end }}
{{- if .Values.member.enabled }}
{{- $m := .Values.member }}
{{- $where := dict "namespace" .Release.Namespace "name" (include "lbfed.member.hostSecretName" .) }}
{{- if eq .Values.karmada.apply "manifests" }}
{{- $where = dict "namespace" $m.namespace "name" (include "lbfed.member.secretName" .) }}
{{- end }}
{{- $cur := include "lbfed.lookupTLS" $where | fromJson }}
{{- if not $cur }}
{{- $days := int $m.webhook.validityDays }}
{{- $ca := genCA (printf "%s-member-ca" (include "lbfed.fullname" .)) $days }}
{{- $dns := include "lbfed.serviceDNSNames" (dict "root" . "service" $m.name "namespace" $m.namespace "extra" $m.webhook.extraDNSNames) | fromJsonArray }}
{{- $cert := genSignedCert $m.name $m.webhook.extraIPs $dns $days $ca }}
{{- $cur = dict "ca" $ca.Cert "crt" $cert.Cert "key" $cert.Key }}
{{- end }}
{{- $_ := set $tls "member" $cur }}
{{- end }}
{{- if and (include "lbfed.chartDriverClient" .) (ne .Values.certificates.mode "certManager") }}
{{- $cur := include "lbfed.lookupTLS" (dict "namespace" .Release.Namespace "name" (include "lbfed.driverClientSecretName" .)) | fromJson }}
{{- if not $cur }}
{{- $days := int .Values.certificates.selfSigned.validityDays }}
{{- /* Its own CA: drivers given this CA accept lbfed-controller and nothing else of the chart. */}}
{{- $ca := genCA (printf "%s-driver-client-ca" (include "lbfed.fullname" .)) $days }}
{{- $cert := genSignedCert (include "lbfed.driverClientName" .) nil nil $days $ca }}
{{- $cur = dict "ca" $ca.Cert "crt" $cert.Cert "key" $cert.Key }}
{{- end }}
{{- $_ := set $tls "driverClient" $cur }}
{{- end }}
{{- $_ := set .Values "_tls" $tls }}
{{- end }}
{{- end }}

{{/* Whether the chart registers the interpreter webhook with Karmada: when lbfed-controller here
serves it, or when lbfed-controller runs elsewhere (controller.enabled=false); never with the Lua
customizations. */}}
{{- define "lbfed.interpreterRegistered" -}}
{{- if and (not .Values.luaInterpreter.enabled) (or (not .Values.controller.enabled) .Values.controller.interpreter.enabled) }}true{{ end }}
{{- end }}

{{/* Whether lbfed-controller here serves HTTPS (interpreter or admission) with the certificate of
`certificates`. */}}
{{- define "lbfed.servesTLS" -}}
{{- $c := .Values.controller }}
{{- if and $c.enabled (or $c.interpreter.enabled $c.admission.enabled) }}true{{ end }}
{{- end }}

{{/* The base URL karmada-apiserver calls for admission. */}}
{{- define "lbfed.admissionURL" -}}
{{- with .Values.controller.admission.url }}
{{- trimSuffix "/" . }}
{{- else }}
{{- printf "https://%s.%s.svc:%d" (include "lbfed.controller.name" .) .Release.Namespace (int .Values.controller.admission.port) }}
{{- end }}
{{- end }}

{{/* PEM of the CA that signed the interpreter's serving certificate. */}}
{{- define "lbfed.interpreterCA" -}}
{{- if eq .Values.certificates.mode "selfSigned" }}
{{- include "lbfed.tls" . }}
{{- .Values._tls.interpreter.ca }}
{{- else }}
{{- .Values.certificates.caBundle }}
{{- end }}
{{- end }}

{{/* The URL Karmada calls. */}}
{{- define "lbfed.interpreterURL" -}}
{{- with .Values.controller.interpreter.url }}
{{- . }}
{{- else }}
{{- printf "https://%s.%s.svc:443/interpret" (include "lbfed.controller.name" .) .Release.Namespace }}
{{- end }}
{{- end }}

{{/* Whether helm test's pods are rendered (templates/tests.yaml): they need lbfed-controller here. */}}
{{- define "lbfed.testsRendered" -}}
{{- if and .Values.tests.enabled .Values.controller.enabled (eq .Values.karmada.apply "job") }}true{{ end }}
{{- end }}

{{/* Checks ---------------------------------------------------------------------------------- */}}

{{- define "lbfed.validate" -}}
{{- $v := .Values }}
{{- if not (has $v.karmada.apply (list "job" "manifests")) }}
{{- fail (printf "karmada.apply must be job or manifests, not %q" $v.karmada.apply) }}
{{- end }}
{{- if not (has $v.certificates.mode (list "selfSigned" "certManager" "existingSecret")) }}
{{- fail (printf "certificates.mode must be selfSigned, certManager or existingSecret, not %q" $v.certificates.mode) }}
{{- end }}
{{- if ne $v.certificates.mode "selfSigned" }}
{{- if not (contains "-----BEGIN CERTIFICATE-----" $v.certificates.caBundle) }}
{{- fail (printf "certificates.caBundle (PEM) is required with certificates.mode=%s: Karmada needs the CA in the ResourceInterpreterWebhookConfiguration" $v.certificates.mode) }}
{{- end }}
{{- end }}
{{- if and (eq $v.certificates.mode "certManager") (not $v.certificates.certManager.issuerRef) }}
{{- fail "certificates.certManager.issuerRef is required: a CA issuer whose CA is certificates.caBundle" }}
{{- end }}
{{- if and (eq $v.certificates.mode "existingSecret") (not $v.certificates.existingSecret) }}
{{- fail "certificates.existingSecret is required with certificates.mode=existingSecret" }}
{{- end }}
{{- if and (eq $v.certificates.mode "selfSigned") (not $v.controller.enabled) }}
{{- fail "certificates.mode=selfSigned needs controller.enabled: with lbfed-controller elsewhere, give its CA as certificates.caBundle (mode existingSecret)" }}
{{- end }}
{{- if and (eq $v.karmada.apply "job") (not $v.controller.enabled) }}
{{- fail "karmada.apply=job installs into the host cluster and needs controller.enabled; use karmada.apply=manifests to install into karmada-apiserver alone" }}
{{- end }}
{{- if and $v.luaInterpreter.enabled $v.controller.enabled $v.controller.interpreter.enabled }}
{{- fail "luaInterpreter.enabled needs controller.interpreter.enabled=false: a Lua customization silently wins over the interpreter webhook, register one or the other" }}
{{- end }}
{{- if $v.controller.admission.enabled }}
{{- if and (not $v.controller.enabled) (not $v.controller.admission.url) }}
{{- fail "controller.admission.enabled with controller.enabled=false needs controller.admission.url (where lbfed-controller serves admission)" }}
{{- end }}
{{- with $v.controller.admission.url }}
{{- if not (hasPrefix "https://" .) }}{{ fail "controller.admission.url must be https (API servers call admission webhooks over TLS only)" }}{{ end }}
{{- end }}
{{- end }}
{{- if and $v.controller.enabled (not $v.controller.interpreter.enabled) (not $v.controller.federation.enabled) }}
{{- fail "controller.enabled needs controller.interpreter.enabled or controller.federation.enabled" }}
{{- end }}
{{- if and $v.controller.enabled $v.controller.federation.enabled (gt (int $v.controller.replicas) 1) (not $v.controller.federation.leaderElection.enabled) }}
{{- fail "controller.federation.leaderElection.enabled=false needs controller.replicas=1: two federation controllers would call every driver twice" }}
{{- end }}
{{- $t := int $v.controller.interpreter.timeoutSeconds }}
{{- if or (lt $t 1) (gt $t 30) }}
{{- fail "controller.interpreter.timeoutSeconds must be within 1..30 (Karmada's limit)" }}
{{- end }}
{{- with $v.controller.interpreter.url }}
{{- if not (hasPrefix "https://" .) }}{{ fail "controller.interpreter.url must be https (Karmada calls interpreters over TLS only)" }}{{ end }}
{{- end }}
{{- if $v.member.enabled }}
{{- if regexMatch "^(kube-|karmada-)" $v.member.namespace }}
{{- fail (printf "member.namespace %q: Karmada does not propagate kube-* and karmada-* namespaces" $v.member.namespace) }}
{{- end }}
{{- if not (has $v.member.conflictResolution (list "Abort" "Overwrite")) }}
{{- fail "member.conflictResolution must be Abort or Overwrite" }}
{{- end }}
{{- if and (gt (int $v.member.replicas) 1) (not $v.member.leaderElection.enabled) }}
{{- fail "member.leaderElection.enabled=false needs member.replicas=1" }}
{{- end }}
{{- range $cluster, $url := $v.member.webhook.clusterURLs }}
{{- if not (hasPrefix "https://" $url) }}{{ fail (printf "member.webhook.clusterURLs.%s must be https" $cluster) }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
