{{/* Names ---------------------------------------------------------------------------------- */}}

{{- define "lbcf.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release-wide prefix: the release name, with the chart name unless it already has it. */}}
{{- define "lbcf.fullname" -}}
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

{{/* Name of one component: (dict "root" $ "component" "controller"). */}}
{{- define "lbcf.componentName" -}}
{{- printf "%s-%s" (include "lbcf.fullname" .root) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lbcf.controller.name" -}}
{{- include "lbcf.componentName" (dict "root" . "component" "controller") }}
{{- end }}

{{- define "lbcf.elbDriver.name" -}}
{{- include "lbcf.componentName" (dict "root" . "component" "elb-driver") }}
{{- end }}

{{- define "lbcf.elbController.name" -}}
{{- include "lbcf.componentName" (dict "root" . "component" "elb-controller") }}
{{- end }}

{{- define "lbcf.controller.serviceAccountName" -}}
{{- default (include "lbcf.controller.name" .) .Values.controller.serviceAccount.name }}
{{- end }}

{{- define "lbcf.elbController.serviceAccountName" -}}
{{- default (include "lbcf.elbController.name" .) .Values.elbController.serviceAccount.name }}
{{- end }}

{{/* Secrets holding the serving certificates (type kubernetes.io/tls, with ca.crt). */}}
{{- define "lbcf.webhookSecretName" -}}
{{- printf "%s-webhook-tls" (include "lbcf.fullname" .) }}
{{- end }}

{{- define "lbcf.elbDriverSecretName" -}}
{{- printf "%s-elb-driver-tls" (include "lbcf.fullname" .) }}
{{- end }}

{{/* The client certificate lbcf-controller presents to drivers (mutual TLS): the user's
controller.driverTLS.clientCertSecret, or the chart's. */}}
{{- define "lbcf.driverClientSecretName" -}}
{{- with .Values.controller.driverTLS.clientCertSecret }}
{{- . }}
{{- else }}
{{- printf "%s-driver-client-tls" (include "lbcf.fullname" .) }}
{{- end }}
{{- end }}

{{/* Subject common name of the chart's driver client certificate. */}}
{{- define "lbcf.driverClientName" -}}
{{- include "lbcf.controller.name" . }}
{{- end }}

{{/* Whether the chart issues the driver client certificate (for its lbcf-controller). */}}
{{- define "lbcf.chartDriverClient" -}}
{{- if and .Values.controller.enabled (not .Values.controller.driverTLS.clientCertSecret) }}true{{ end }}
{{- end }}

{{/* Whether elb-driver authenticates its callers (mutual TLS). */}}
{{- define "lbcf.driverClientAuth" -}}
{{- if and .Values.elbDriver.enabled .Values.elbDriver.tls.enabled .Values.elbDriver.clientAuth.enabled }}true{{ end }}
{{- end }}

{{/* Labels ---------------------------------------------------------------------------------- */}}

{{/* (dict "root" $ "component" "controller") */}}
{{- define "lbcf.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lbcf.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "lbcf.labels" -}}
{{ include "lbcf.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: lbcf
{{- end }}

{{/* Pods ------------------------------------------------------------------------------------ */}}

{{/* (dict "root" $ "image" .Values.controller.image) */}}
{{- define "lbcf.image" -}}
{{- $repo := .image.repository }}
{{- with .root.Values.global.imageRegistry }}{{ $repo = printf "%s/%s" (trimSuffix "/" .) $repo }}{{ end }}
{{- printf "%s:%s" $repo (default .root.Chart.AppVersion .image.tag) }}
{{- end }}

{{/* The kubectl image of the tests. */}}
{{- define "lbcf.kubectlImage" -}}
{{- $i := .Values.tests.kubectl.image }}
{{- $repo := $i.repository }}
{{- with $i.registry }}{{ $repo = printf "%s/%s" (trimSuffix "/" .) $repo }}{{ end }}
{{- printf "%s:%s" $repo $i.tag }}
{{- end }}

{{- define "lbcf.imagePullSecrets" -}}
{{- with .Values.global.imagePullSecrets }}
imagePullSecrets:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Scheduling of a component's pods: (dict "root" $ "component" "controller" "values" .Values.controller).
Without an explicit affinity, replicas prefer different nodes.
*/}}
{{- define "lbcf.scheduling" -}}
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
              {{- include "lbcf.selectorLabels" . | nindent 14 }}
{{- end }}
{{- with .values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Certificates ---------------------------------------------------------------------------- */}}

{{/* DNS names of a Service: (dict "root" $ "service" "name"). */}}
{{- define "lbcf.serviceDNSNames" -}}
{{- $ns := .root.Release.Namespace }}
{{- list .service (printf "%s.%s" .service $ns) (printf "%s.%s.svc" .service $ns) (printf "%s.%s.svc.%s" .service $ns .root.Values.global.clusterDomain) | toJson }}
{{- end }}

{{/* elb-driver's serving certificate names, as JSON {dns, ips}: its Service's, and those callers
outside the cluster use. */}}
{{- define "lbcf.elbDriverCertNames" -}}
{{- $d := .Values.elbDriver }}
{{- $dns := concat (include "lbcf.serviceDNSNames" (dict "root" . "service" (include "lbcf.elbDriver.name" .)) | fromJsonArray) $d.tls.extraDNSNames }}
{{- $ips := $d.tls.extraIPs }}
{{- with $d.service.loadBalancerIP }}{{ if not (has . $ips) }}{{ $ips = append $ips . }}{{ end }}{{ end }}
{{- dict "dns" $dns "ips" $ips | toJson }}
{{- end }}

{{/*
lbcf.selfSignedTLS computes, once per render, the self-signed CA and the certificates the
release needs into .Values._selfSignedTLS, as PEM strings: {ca, webhookCrt, webhookKey (with
controller.enabled), driverCrt, driverKey (elb-driver serving TLS), clientCrt, clientKey
(lbcf-controller's driver client certificate, unless controller.driverTLS.clientCertSecret)}.
Certificates already in the cluster are reused when every needed one is complete, they share one
CA and the driver's still has the names asked for (annotation lbfed.io/certificate-names), so
upgrades do not rotate them; anything else regenerates the whole set (a CA key is never stored in
the cluster).
*/}}
{{- define "lbcf.selfSignedTLS" -}}
{{- if not (hasKey .Values "_selfSignedTLS") }}
{{- $ns := .Release.Namespace }}
{{- $needWebhook := .Values.controller.enabled }}
{{- $needDriver := and .Values.elbDriver.enabled .Values.elbDriver.tls.enabled }}
{{- $needClient := include "lbcf.chartDriverClient" . }}
{{- $names := include "lbcf.elbDriverCertNames" . | fromJson }}
{{- $tls := dict }}
{{- $wh := (lookup "v1" "Secret" $ns (include "lbcf.webhookSecretName" .)).data | default dict }}
{{- $drvSecret := lookup "v1" "Secret" $ns (include "lbcf.elbDriverSecretName" .) }}
{{- $drv := $drvSecret.data | default dict }}
{{- $cl := (lookup "v1" "Secret" $ns (include "lbcf.driverClientSecretName" .)).data | default dict }}
{{- $needed := list }}
{{- if $needWebhook }}{{ $needed = append $needed $wh }}{{ end }}
{{- if $needDriver }}{{ $needed = append $needed $drv }}{{ end }}
{{- if $needClient }}{{ $needed = append $needed $cl }}{{ end }}
{{- /* The CA of the existing set: the first needed Secret's; every other must have it too. */}}
{{- $ca := "" }}
{{- with $needed }}{{ $ca = index (first .) "ca.crt" | default "" }}{{ end }}
{{- $ok := true }}
{{- range $data := $needed }}
{{- if not (and $ca (index $data "tls.crt") (index $data "tls.key") (eq (index $data "ca.crt" | default "") $ca)) }}{{ $ok = false }}{{ end }}
{{- end }}
{{- if and $ok $needDriver }}
{{- $had := (($drvSecret.metadata | default dict).annotations | default dict) | dig "lbfed.io/certificate-names" "" }}
{{- if not $had }}
{{- /* A Secret from before the annotation holds the Service's names only. */}}
{{- $had = include "lbcf.certNamesAnnotation" (dict "dns" (include "lbcf.serviceDNSNames" (dict "root" . "service" (include "lbcf.elbDriver.name" .)) | fromJsonArray) "ips" list) }}
{{- end }}
{{- if ne $had (include "lbcf.certNamesAnnotation" $names) }}{{ $ok = false }}{{ end }}
{{- end }}
{{- if not $needed }}{{ $ok = false }}{{ end }}
{{- if $ok }}
{{- $_ := set $tls "ca" ($ca | b64dec) }}
{{- if $needWebhook }}
{{- $_ := set $tls "webhookCrt" (index $wh "tls.crt" | b64dec) }}
{{- $_ := set $tls "webhookKey" (index $wh "tls.key" | b64dec) }}
{{- end }}
{{- if $needDriver }}
{{- $_ := set $tls "driverCrt" (index $drv "tls.crt" | b64dec) }}
{{- $_ := set $tls "driverKey" (index $drv "tls.key" | b64dec) }}
{{- end }}
{{- if $needClient }}
{{- $_ := set $tls "clientCrt" (index $cl "tls.crt" | b64dec) }}
{{- $_ := set $tls "clientKey" (index $cl "tls.key" | b64dec) }}
{{- end }}
{{- else }}
{{- $days := int .Values.webhook.certificates.selfSigned.validityDays }}
{{- $newCA := genCA (printf "%s-ca" (include "lbcf.fullname" .)) $days }}
{{- $_ := set $tls "ca" $newCA.Cert }}
{{- if $needWebhook }}
{{- $svc := include "lbcf.controller.name" . }}
{{- $cert := genSignedCert $svc nil (include "lbcf.serviceDNSNames" (dict "root" . "service" $svc) | fromJsonArray) $days $newCA }}
{{- $_ := set $tls "webhookCrt" $cert.Cert }}
{{- $_ := set $tls "webhookKey" $cert.Key }}
{{- end }}
{{- if $needDriver }}
{{- $dcert := genSignedCert (include "lbcf.elbDriver.name" .) $names.ips $names.dns $days $newCA }}
{{- $_ := set $tls "driverCrt" $dcert.Cert }}
{{- $_ := set $tls "driverKey" $dcert.Key }}
{{- end }}
{{- if $needClient }}
{{- /* Helm's genSignedCert marks certificates for server and client use; drivers accept this
one by its subject name (elb-driver --client-allowed-names). */}}
{{- $ccert := genSignedCert (include "lbcf.driverClientName" .) nil nil $days $newCA }}
{{- $_ := set $tls "clientCrt" $ccert.Cert }}
{{- $_ := set $tls "clientKey" $ccert.Key }}
{{- end }}
{{- end }}
{{- $_ := set .Values "_selfSignedTLS" $tls }}
{{- end }}
{{- end }}

{{/* The value of the driver Secret's lbfed.io/certificate-names annotation: (dict "dns" … "ips" …). */}}
{{- define "lbcf.certNamesAnnotation" -}}
{{- concat .dns .ips | join "," }}
{{- end }}

{{/* The caBundle of the webhook configurations (base64 PEM), empty under cert-manager. */}}
{{- define "lbcf.webhookCABundle" -}}
{{- if eq .Values.webhook.certificates.mode "selfSigned" }}
{{- include "lbcf.selfSignedTLS" . }}
{{- .Values._selfSignedTLS.ca | b64enc }}
{{- end }}
{{- end }}

{{/* The issuer of the serving certificates under cert-manager. */}}
{{- define "lbcf.certManagerIssuerRef" -}}
{{- with .Values.webhook.certificates.certManager.issuerRef }}
{{- toYaml . }}
{{- else }}
kind: Issuer
name: {{ include "lbcf.fullname" . }}-ca
group: cert-manager.io
{{- end }}
{{- end }}

{{/* Values checks, run by every template that depends on them. */}}
{{- define "lbcf.validate" -}}
{{- $mode := .Values.webhook.certificates.mode }}
{{- if not (has $mode (list "selfSigned" "certManager")) }}
{{- fail (printf "webhook.certificates.mode must be selfSigned or certManager, not %q" $mode) }}
{{- end }}
{{- if and (gt (int .Values.controller.replicas) 1) (not .Values.controller.leaderElection.enabled) }}
{{- fail "controller.leaderElection.enabled=false needs controller.replicas=1: two leaders would call every driver twice" }}
{{- end }}
{{- if .Values.elbDriver.enabled }}
{{- if not (has .Values.elbDriver.backend (list "radware" "bfe")) }}
{{- fail (printf "elbDriver.backend must be radware or bfe, not %q" .Values.elbDriver.backend) }}
{{- end }}
{{- if eq .Values.elbDriver.backend "radware" }}
{{- if not .Values.elbDriver.radware.urls }}{{ fail "elbDriver.radware.urls: one or two Alteon URLs are required" }}{{ end }}
{{- if gt (len .Values.elbDriver.radware.urls) 2 }}{{ fail "elbDriver.radware.urls: at most two Alteon units (an HA pair)" }}{{ end }}
{{- if not .Values.elbDriver.radware.passwordSecret.name }}{{ fail "elbDriver.radware.passwordSecret.name is required" }}{{ end }}
{{- end }}
{{- if and (eq .Values.elbDriver.backend "bfe") (not (isAbs .Values.elbDriver.bfe.dataDir)) }}
{{- fail "elbDriver.bfe.dataDir must be an absolute path" }}
{{- end }}
{{- end }}
{{- if not (or .Values.controller.enabled .Values.elbDriver.enabled .Values.elbController.enabled) }}
{{- fail "controller.enabled=false needs elbDriver.enabled or elbController.enabled: nothing would be installed" }}
{{- end }}
{{- if .Values.elbDriver.enabled }}
{{- $d := .Values.elbDriver }}
{{- if and (not .Values.controller.enabled) $d.tls.enabled $d.clientAuth.enabled (not $d.clientAuth.extraCASecrets) }}
{{- fail "elbDriver.clientAuth.extraCASecrets: without controller.enabled the driver accepts only callers of these CAs; give at least one (e.g. a copy of lbfed's driver client CA, see the README), or turn clientAuth off" }}
{{- end }}
{{- if not (has $d.service.type (list "ClusterIP" "NodePort" "LoadBalancer")) }}
{{- fail (printf "elbDriver.service.type must be ClusterIP, NodePort or LoadBalancer, not %q" $d.service.type) }}
{{- end }}
{{- if and (int $d.service.nodePort) (eq $d.service.type "ClusterIP") }}
{{- fail "elbDriver.service.nodePort needs elbDriver.service.type NodePort or LoadBalancer" }}
{{- end }}
{{- if and (or $d.service.loadBalancerIP $d.service.loadBalancerClass $d.service.loadBalancerSourceRanges) (ne $d.service.type "LoadBalancer") }}
{{- fail "elbDriver.service.loadBalancerIP, loadBalancerClass and loadBalancerSourceRanges need elbDriver.service.type LoadBalancer" }}
{{- end }}
{{- end }}
{{- if .Values.elbController.enabled }}
{{- if not .Values.elbController.alteon.urls }}{{ fail "elbController.alteon.urls: one or two Alteon URLs are required" }}{{ end }}
{{- if gt (len .Values.elbController.alteon.urls) 2 }}{{ fail "elbController.alteon.urls: at most two Alteon units (an HA pair)" }}{{ end }}
{{- if not .Values.elbController.alteon.passwordSecret.name }}{{ fail "elbController.alteon.passwordSecret.name is required" }}{{ end }}
{{- end }}
{{- /* One writer per Alteon pair: the pending configuration is global to a unit. */}}
{{- if and .Values.elbDriver.enabled (eq .Values.elbDriver.backend "radware") .Values.elbController.enabled }}
{{- range $d := .Values.elbDriver.radware.urls }}
{{- range $c := $.Values.elbController.alteon.urls }}
{{- if eq (trimSuffix "/" $d | lower) (trimSuffix "/" $c | lower) }}
{{- fail (printf "elbDriver.radware.urls and elbController.alteon.urls both name %s: one writer per Alteon pair (an apply commits every writer's pending edits, a revert discards them); give each its own pair" $d) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
