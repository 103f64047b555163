{{/*
Objects for karmada-apiserver, as multi-document YAML. templates/karmada.yaml renders them as
documents (karmada.apply=manifests) or packs them into a Secret that the apply Jobs use
(karmada.apply=job):
  lbfed.karmada.crds         the LBCF CRDs (files/crds, copied from lbcf/api/crd by make)
  lbfed.karmada.objects      RBAC for lbfed-controller, the member components and their policies
  lbfed.karmada.interpreter  what calls lbfed-controller or replaces it, applied last and deleted
                             first, so nothing calls a lbfed-controller that is not there yet or any
                             more: the ResourceInterpreterWebhookConfiguration (or the Lua
                             ResourceInterpreterCustomizations, files/interpreter, copied from
                             interpreter/ by make) and the admission webhook configurations
*/}}

{{- define "lbfed.karmada.crds" -}}
{{- $labels := include "lbfed.labels" (dict "root" . "component" "crds" "target" "karmada-apiserver") | fromYaml }}
{{- range $path, $_ := .Files.Glob "files/crds/*.yaml" }}
{{- $crd := $.Files.Get $path | fromYaml }}
{{- $_ := set $crd.metadata "labels" (merge (dict) ($crd.metadata.labels | default dict) $labels) }}
---
{{ toYaml $crd }}
{{- end }}
{{- end }}

{{- define "lbfed.karmada.interpreter" -}}
{{- if include "lbfed.interpreterRegistered" . }}
{{- $labels := include "lbfed.labels" (dict "root" . "component" "interpreter" "target" "karmada-apiserver") }}
---
# Karmada calls lbfed-controller for these operations on LoadBalancer and BackendGroup (the
# same rules as interpreter.WebhookConfiguration in the code; the chart test compares them).
apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterWebhookConfiguration
metadata:
  name: {{ include "lbfed.clusterObjectName" . }}-interpreter
  labels:
    {{- $labels | nindent 4 }}
webhooks:
  - name: interpreter.lbfed.io
    clientConfig:
      url: {{ include "lbfed.interpreterURL" . }}
      caBundle: {{ include "lbfed.interpreterCA" . | b64enc }}
    rules:
      - operations: [InterpretStatus, InterpretHealth, AggregateStatus, Retain, InterpretDependency]
        apiGroups: [lbcf.tkestack.io]
        apiVersions: [v1beta1]
        kinds: [BackendGroup]
      - operations: [InterpretStatus, InterpretHealth, InterpretDependency]
        apiGroups: [lbcf.tkestack.io]
        apiVersions: [v1beta1]
        kinds: [LoadBalancer]
    timeoutSeconds: {{ .Values.controller.interpreter.timeoutSeconds }}
    interpreterContextVersions: [v1alpha1]
{{- end }}
{{- if .Values.luaInterpreter.enabled }}
{{- $labels := include "lbfed.labels" (dict "root" . "component" "interpreter" "target" "karmada-apiserver") | fromYaml }}
{{- range $doc := regexSplit "(?m)^---\\s*$" (.Files.Get "files/interpreter/customizations.yaml") -1 }}
{{- $ric := fromYaml $doc }}
{{- if $ric.kind }}
{{- $_ := set $ric.metadata "labels" (merge (dict) ($ric.metadata.labels | default dict) $labels) }}
---
{{ toYaml $ric }}
{{- end }}
{{- end }}
{{- end }}
{{- include "lbfed.karmada.admission" . }}
{{- end }}

{{/*
lbfed.karmada.unregister: what lbfed.karmada.interpreter registers under other values and does
not under these, by name only, for the apply Job to delete: an upgrade or a rollback that turns
admission or the interpreter off, or swaps the Lua customizations for the webhook (or back),
must not leave a registration calling a server that no longer serves it (admission fails closed)
or winning over the new one (a customization wins over the webhook).
*/}}
{{- define "lbfed.karmada.unregister" -}}
{{- $name := include "lbfed.clusterObjectName" . }}
{{- $labels := include "lbfed.labels" (dict "root" . "component" "interpreter" "target" "karmada-apiserver") }}
{{- if not (include "lbfed.interpreterRegistered" .) }}
---
apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterWebhookConfiguration
metadata:
  name: {{ $name }}-interpreter
  labels:
    {{- $labels | nindent 4 }}
{{- end }}
{{- if not .Values.luaInterpreter.enabled }}
{{- range $doc := regexSplit "(?m)^---\\s*$" (.Files.Get "files/interpreter/customizations.yaml") -1 }}
{{- $ric := fromYaml $doc }}
{{- if $ric.kind }}
---
apiVersion: {{ $ric.apiVersion }}
kind: {{ $ric.kind }}
metadata:
  name: {{ $ric.metadata.name }}
  labels:
    {{- $labels | nindent 4 }}
{{- end }}
{{- end }}
{{- end }}
{{- if not .Values.controller.admission.enabled }}
{{- range $kind := list "Mutating" "Validating" }}
---
apiVersion: admissionregistration.k8s.io/v1
kind: {{ $kind }}WebhookConfiguration
metadata:
  name: {{ $name }}-admission
  labels:
    {{- include "lbfed.labels" (dict "root" $ "component" "admission" "target" "karmada-apiserver") | nindent 4 }}
{{- end }}
{{- end }}
{{- end }}

{{/*
lbfed's admission for the templates in karmada-apiserver, served by lbfed-controller: the webhooks
of lbcf/admission.ConfigurationsWith (SpecUpdatesOnly, the exempt users and groups; the chart test
compares them).
*/}}
{{- define "lbfed.karmada.admission" -}}
{{- $a := .Values.controller.admission }}
{{- if $a.enabled }}
{{- $labels := include "lbfed.labels" (dict "root" . "component" "admission" "target" "karmada-apiserver") }}
{{- $base := include "lbfed.admissionURL" . }}
{{- $caBundle := include "lbfed.interpreterCA" . | b64enc }}
{{- $conditions := list (dict "name" "spec-changed" "expression" "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec") }}
{{- with $a.exemptUsers }}
{{- $conditions = append $conditions (dict "name" "exempt-users" "expression" (printf "request.operation != 'UPDATE' || !(request.userInfo.username in %s)" (toJson .))) }}
{{- end }}
{{- with $a.exemptGroups }}
{{- $conditions = append $conditions (dict "name" "exempt-groups" "expression" (printf "request.operation != 'UPDATE' || !has(request.userInfo.groups) || !request.userInfo.groups.exists(g, g in %s)" (toJson .))) }}
{{- end }}
{{- $hooks := dict
  "Mutating" (list
    (list "mutate-driver" "/mutate-load-balancer-driver" "loadbalancerdrivers" (list "CREATE"))
    (list "mutate-lb" "/mutate-load-balancer" "loadbalancers" (list "CREATE"))
    (list "mutate-bg" "/mutate-backend-group" "backendgroups" (list "CREATE" "UPDATE")))
  "Validating" (list
    (list "validate-driver" "/validate-load-balancer-driver" "loadbalancerdrivers" (list "CREATE" "UPDATE" "DELETE"))
    (list "validate-lb" "/validate-load-balancer" "loadbalancers" (list "CREATE" "UPDATE" "DELETE"))
    (list "validate-bg" "/validate-backend-group" "backendgroups" (list "CREATE" "UPDATE" "DELETE"))) }}
{{- range $kind := list "Mutating" "Validating" }}
---
# karmada-apiserver calls lbfed-controller for the LBCF templates (not for their status
# subresource, nor for updates that leave the spec alone: Karmada's own writes always pass).
apiVersion: admissionregistration.k8s.io/v1
kind: {{ $kind }}WebhookConfiguration
metadata:
  name: {{ include "lbfed.clusterObjectName" $ }}-admission
  labels:
    {{- $labels | nindent 4 }}
webhooks:
  {{- range $h := index $hooks $kind }}
  - name: {{ index $h 0 }}.lbcf.tkestack.io
    clientConfig:
      url: {{ printf "%s%s" $base (index $h 1) }}
      caBundle: {{ $caBundle }}
    rules:
      - operations: {{ index $h 3 | toJson }}
        apiGroups: [lbcf.tkestack.io]
        apiVersions: [v1beta1]
        resources: [{{ index $h 2 }}]
    matchConditions:
      {{- toYaml $conditions | nindent 6 }}
    failurePolicy: Fail
    sideEffects: None
    admissionReviewVersions: [v1]
    # A validation calls the driver, whose own timeout defaults to 10s.
    timeoutSeconds: 15
  {{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "lbfed.karmada.objects" -}}
{{- if .Values.karmada.rbac.create }}
{{- include "lbfed.karmada.controllerRBAC" . }}
{{- end }}
{{- if .Values.member.enabled }}
{{- include "lbfed.karmada.member" . }}
{{- end }}
{{- end }}

{{/* What lbfed-controller does in karmada-apiserver: the LBCF kinds (templates and the
BackendRecords of the federation), the ResourceBindings carrying the members' reports, the
Clusters' readiness, the Services of service backends, events and its lease. */}}
{{- define "lbfed.karmada.controllerRBAC" -}}
{{- $r := .Values.karmada.rbac }}
{{- $ns := .Values.karmada.namespace }}
{{- $name := include "lbfed.controller.name" . }}
{{- $labels := include "lbfed.labels" (dict "root" . "component" "controller" "target" "karmada-apiserver") }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $r.serviceAccountName }}
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- $labels | nindent 4 }}
rules:
  # What the federation and admission call: informers (get, list, watch), merge patches
  # (LoadBalancer finalizers, the template annotations members read), and the BackendRecords it
  # keeps.
  - apiGroups: [lbcf.tkestack.io]
    resources: [loadbalancerdrivers]
    verbs: [get, list, watch]
  # create, update, delete: the front doors' generated LoadBalancers and BackendGroups.
  - apiGroups: [lbcf.tkestack.io]
    resources: [loadbalancers, backendgroups]
    verbs: [get, list, watch, create, update, patch, delete]
  - apiGroups: [lbcf.tkestack.io]
    resources: [backendrecords]
    verbs: [get, list, watch, create, update, patch, delete]
  - apiGroups: [lbcf.tkestack.io]
    resources:
      - loadbalancerdrivers/status
      - loadbalancers/status
      - backendgroups/status
    verbs: [patch]
  # update: a record's Registered status is written at the cached resourceVersion (cheaper for
  # the API server than a patch), falling back to a merge patch on a conflict.
  - apiGroups: [lbcf.tkestack.io]
    resources: [backendrecords/status]
    verbs: [update, patch]
  - apiGroups: [work.karmada.io]
    resources: [resourcebindings]
    verbs: [get, list, watch]
  - apiGroups: [cluster.karmada.io]
    resources: [clusters]
    verbs: [get, list, watch]
  # Members' pods for the drivers (generateBackendAddr, judgePodDeregister), read through
  # Karmada's cluster proxy; Karmada's unified auth lets this identity through to the members.
  - apiGroups: [cluster.karmada.io]
    resources: [clusters/proxy]
    verbs: [get]
  # patch: the Service front door's annotation lbfed.io/load-balancer-ingress on the template.
  - apiGroups: [""]
    resources: [services]
    verbs: [get, list, watch, patch]
  # The front doors: MultiClusterServices (status: VIP and condition), the PropagationPolicies
  # placing their BackendGroups, owner references blocking deletion (finalizers), and the
  # workloads' pod templates that resolve a named target port.
  - apiGroups: [networking.karmada.io]
    resources: [multiclusterservices]
    verbs: [get, list, watch]
  - apiGroups: [networking.karmada.io]
    resources: [multiclusterservices/status]
    verbs: [update, patch]
  - apiGroups: [networking.karmada.io]
    resources: [multiclusterservices/finalizers]
    verbs: [update]
  - apiGroups: [""]
    resources: [services/finalizers]
    verbs: [update]
  - apiGroups: [policy.karmada.io]
    resources: [propagationpolicies]
    verbs: [get, list, watch, create, update, patch, delete]
  - apiGroups: [apps]
    resources: [deployments, statefulsets, daemonsets]
    verbs: [list]
  - apiGroups: [""]
    resources: [events]
    verbs: [create, patch]
  - apiGroups: [events.k8s.io]
    resources: [events]
    verbs: [create, patch]
  {{- if .Values.controller.multiClusterIngress.enabled }}
  # The MultiClusterIngress front door: reads MultiClusterIngresses, writes lbfed.io/conditions
  # (merge patch) and the status address, and keeps the LBCF objects and PropagationPolicies it
  # generates (Services and ResourceBindings are read as above).
  - apiGroups: [networking.karmada.io]
    resources: [multiclusteringresses]
    verbs: [get, list, watch, patch]
  - apiGroups: [networking.karmada.io]
    resources: [multiclusteringresses/status]
    verbs: [patch]
  - apiGroups: [lbcf.tkestack.io]
    resources: [loadbalancers, backendgroups]
    verbs: [create, update, delete]
  - apiGroups: [policy.karmada.io]
    resources: [propagationpolicies]
    verbs: [get, list, watch, create, update, delete]
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- $labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $r.serviceAccountName }}
    namespace: {{ $ns }}
  {{- with $r.extraSubjects }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}-leader-election
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}-leader-election
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}-leader-election
subjects:
  - kind: ServiceAccount
    name: {{ $r.serviceAccountName }}
    namespace: {{ $ns }}
  {{- with $r.extraSubjects }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/*
The member webhooks of one kind, as lbcf/admission.Configurations registers them:
(dict "root" $ "kind" "mutating"|"validating" "base" "https://host:port" or "").
An empty base reaches the member Service.
*/}}
{{- define "lbfed.member.webhooks" -}}
{{- $m := .root.Values.member }}
{{- include "lbfed.tls" .root }}
{{- $caBundle := .root.Values._tls.member.ca | b64enc }}
{{- $hooks := dict
  "mutating" (list
    (list "mutate-driver" "/mutate-load-balancer-driver" "loadbalancerdrivers" (list "CREATE"))
    (list "mutate-lb" "/mutate-load-balancer" "loadbalancers" (list "CREATE"))
    (list "mutate-bg" "/mutate-backend-group" "backendgroups" (list "CREATE" "UPDATE")))
  "validating" (list
    (list "validate-driver" "/validate-load-balancer-driver" "loadbalancerdrivers" (list "CREATE" "UPDATE" "DELETE"))
    (list "validate-lb" "/validate-load-balancer" "loadbalancers" (list "CREATE" "UPDATE" "DELETE"))
    (list "validate-bg" "/validate-backend-group" "backendgroups" (list "CREATE" "UPDATE" "DELETE"))) }}
{{- range $h := index $hooks .kind }}
- name: {{ index $h 0 }}.lbcf.tkestack.io
  clientConfig:
    {{- if $.base }}
    url: {{ printf "%s%s" (trimSuffix "/" $.base) (index $h 1) }}
    {{- else }}
    service:
      namespace: {{ $m.namespace }}
      name: {{ $m.name }}
      path: {{ index $h 1 }}
      port: 443
    {{- end }}
    caBundle: {{ $caBundle }}
  rules:
    - operations: {{ index $h 3 | toJson }}
      apiGroups: [lbcf.tkestack.io]
      apiVersions: [v1beta1]
      resources: [{{ index $h 2 }}]
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 15
{{- end }}
{{- if and (eq .kind "mutating") $m.webhook.readinessGate.enabled }}
{{- /* The readiness-gate injection, as lbcf/admission.ReadinessGateConfiguration writes it. */}}
{{- $gates := list (list "inject-readiness-gate" "/mutate-pod-readiness-gate" "In" (list "enabled")) }}
{{- if $m.webhook.readinessGate.groupOptIn }}
{{- $gates = append $gates (list "inject-readiness-gate-groups" "/mutate-pod-readiness-gate-groups" "NotIn" (list "enabled" "disabled")) }}
{{- end }}
{{- range $h := $gates }}
- name: {{ index $h 0 }}.lbfed.io
  clientConfig:
    {{- if $.base }}
    url: {{ printf "%s%s" (trimSuffix "/" $.base) (index $h 1) }}
    {{- else }}
    service:
      namespace: {{ $m.namespace }}
      name: {{ $m.name }}
      path: {{ index $h 1 }}
      port: 443
    {{- end }}
    caBundle: {{ $caBundle }}
  rules:
    - operations: [CREATE]
      apiGroups: [""]
      apiVersions: [v1]
      resources: [pods]
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 5
  namespaceSelector:
    matchExpressions:
      - key: lbfed.io/readiness-gate-inject
        operator: {{ index $h 2 }}
        values: {{ index $h 3 | toJson }}
{{- end }}
{{- end }}
{{- end }}

{{/* lbcf-controller --mode=member and everything it needs, as templates in karmada-apiserver. */}}
{{- define "lbfed.karmada.member" -}}
{{- $m := .Values.member }}
{{- $ns := $m.namespace }}
{{- $sel := dict "root" . "component" "member" }}
{{- $labels := include "lbfed.labels" (dict "root" . "component" "member" "target" "karmada-apiserver") }}
{{- $cluster := include "lbfed.member.clusterName" . }}
{{- include "lbfed.tls" . }}
{{- $tls := .Values._tls.member }}
{{- if $m.createNamespace }}
---
apiVersion: v1
kind: Namespace
metadata:
  name: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
{{- end }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $m.name }}
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
---
# A member reads the backends and the LBCF kinds and writes BackendGroup status only; drivers are
# called from the control plane.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $cluster }}
  labels:
    {{- $labels | nindent 4 }}
rules:
  - apiGroups: [""]
    resources: [pods, services, nodes]
    verbs: [get, list, watch]
  # The readiness gate's condition (lbfed.io/backend-registered).
  - apiGroups: [""]
    resources: [pods/status]
    verbs: [patch]
  # status.loadBalancer.ingress of lbfed-class Services, from their template's annotation.
  - apiGroups: [""]
    resources: [services/status]
    verbs: [patch]
  - apiGroups: [lbcf.tkestack.io]
    resources: [loadbalancerdrivers, loadbalancers, backendgroups, backendrecords]
    verbs: [get, list, watch]
  - apiGroups: [lbcf.tkestack.io]
    resources: [backendgroups/status]
    verbs: [patch]
  - apiGroups: [""]
    resources: [events]
    verbs: [create, patch]
  - apiGroups: [events.k8s.io]
    resources: [events]
    verbs: [create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $cluster }}
  labels:
    {{- $labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $cluster }}
subjects:
  - kind: ServiceAccount
    name: {{ $m.name }}
    namespace: {{ $ns }}
---
# The federation reads a member's pods through Karmada's cluster proxy, which impersonates its
# identity in the member: it may read pods, nothing else.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $cluster }}-federation-pods
  labels:
    {{- $labels | nindent 4 }}
rules:
  - apiGroups: [""]
    resources: [pods]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $cluster }}-federation-pods
  labels:
    {{- $labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $cluster }}-federation-pods
subjects:
  - kind: ServiceAccount
    name: {{ .Values.karmada.rbac.serviceAccountName }}
    namespace: {{ .Values.karmada.namespace }}
  {{- with .Values.karmada.rbac.extraSubjects }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with $m.clusterProxyImpersonator }}{{ if .name }}
---
# Karmada's proxy impersonates the caller and its groups in the member; Karmada's own sync of
# impersonation rules leaves the ServiceAccount groups out (karmada-io/karmada#2075).
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $cluster }}-federation-impersonation
  labels:
    {{- $labels | nindent 4 }}
rules:
  - apiGroups: [""]
    resources: [serviceaccounts]
    verbs: [impersonate]
    resourceNames: [{{ $.Values.karmada.rbac.serviceAccountName }}]
  - apiGroups: [""]
    resources: [users]
    verbs: [impersonate]
    resourceNames: ["system:serviceaccount:{{ $.Values.karmada.namespace }}:{{ $.Values.karmada.rbac.serviceAccountName }}"]
  - apiGroups: [""]
    resources: [groups]
    verbs: [impersonate]
    resourceNames: ["system:serviceaccounts", "system:serviceaccounts:{{ $.Values.karmada.namespace }}", "system:authenticated"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $cluster }}-federation-impersonation
  labels:
    {{- $labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $cluster }}-federation-impersonation
subjects:
  - kind: ServiceAccount
    name: {{ .name }}
    namespace: {{ .namespace }}
{{- end }}{{ end }}
{{- if $m.leaderElection.enabled }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $m.name }}-leader-election
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $m.name }}-leader-election
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $m.name }}-leader-election
subjects:
  - kind: ServiceAccount
    name: {{ $m.name }}
    namespace: {{ $ns }}
{{- end }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ include "lbfed.member.secretName" . }}
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
type: kubernetes.io/tls
data:
  ca.crt: {{ $tls.ca | b64enc }}
  tls.crt: {{ $tls.crt | b64enc }}
  tls.key: {{ $tls.key | b64enc }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $m.name }}
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
spec:
  replicas: {{ $m.replicas }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "lbfed.selectorLabels" $sel | nindent 6 }}
  template:
    metadata:
      labels:
        {{- $labels | nindent 8 }}
        {{- with $m.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        checksum/webhook-tls: {{ $tls.crt | sha256sum }}
        {{- with $m.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ $m.name }}
      {{- with (include "lbfed.imagePullSecrets" . | trim) }}{{ . | nindent 6 }}{{ end }}
      securityContext:
        {{- toYaml $m.podSecurityContext | nindent 8 }}
      {{- with (include "lbfed.scheduling" (dict "root" . "component" "member" "values" $m) | trim) }}{{ . | nindent 6 }}{{ end }}
      containers:
        - name: lbcf-controller
          image: {{ include "lbfed.image" (dict "root" . "image" $m.image) }}
          imagePullPolicy: {{ $m.image.pullPolicy }}
          args:
            - --mode=member
            - --leader-elect={{ $m.leaderElection.enabled }}
            - --leader-elect-namespace={{ $ns }}
            - --webhook-port={{ $m.ports.webhook }}
            - --cert-dir=/etc/lbcf/tls
            - --metrics-bind-address=:{{ $m.ports.metrics }}
            - --health-probe-bind-address=:{{ $m.ports.probes }}
            - --client-qps={{ $m.clientQPS }}
            - --client-burst={{ $m.clientBurst }}
            {{- with .Values.controller.federation.frontDoors }}
            - --service-load-balancer-status={{ .service }}
            - --service-load-balancer-class={{ .serviceLoadBalancerClass }}
            - --service-claim-unclassed={{ .serviceClaimUnclassed }}
            {{- end }}
            {{- if $m.candidatesBudgetBytes }}
            - --candidates-budget-bytes={{ int $m.candidatesBudgetBytes }}
            {{- end }}
            - --v={{ $m.logVerbosity }}
            {{- with $m.extraArgs }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- if or $m.goMemLimit $m.extraEnv }}
          env:
            {{- with $m.goMemLimit }}
            # A soft heap limit under the container's memory limit: the GC works harder before
            # the kernel would kill the process.
            - name: GOMEMLIMIT
              value: {{ . | quote }}
            {{- end }}
            {{- with $m.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- end }}
          ports:
            - name: webhook
              containerPort: {{ $m.ports.webhook }}
              protocol: TCP
            - name: metrics
              containerPort: {{ $m.ports.metrics }}
              protocol: TCP
            - name: probes
              containerPort: {{ $m.ports.probes }}
              protocol: TCP
          livenessProbe:
            {{- toYaml $m.livenessProbe | nindent 12 }}
          readinessProbe:
            {{- toYaml $m.readinessProbe | nindent 12 }}
          resources:
            {{- toYaml $m.resources | nindent 12 }}
          securityContext:
            {{- toYaml $m.securityContext | nindent 12 }}
          volumeMounts:
            - name: webhook-tls
              mountPath: /etc/lbcf/tls
              readOnly: true
      volumes:
        - name: webhook-tls
          secret:
            secretName: {{ include "lbfed.member.secretName" . }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $m.name }}
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "lbfed.selectorLabels" $sel | nindent 4 }}
  ports:
    - name: webhook
      port: 443
      targetPort: webhook
      protocol: TCP
{{- if $m.metricsService.enabled }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $m.name }}-metrics
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
  {{- with $m.metricsService.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: ClusterIP
  selector:
    {{- include "lbfed.selectorLabels" $sel | nindent 4 }}
  ports:
    - name: metrics
      port: {{ $m.ports.metrics }}
      targetPort: metrics
      protocol: TCP
{{- end }}
{{- include "lbfed.karmada.memberNetworkPolicy" . }}
{{- if $m.podDisruptionBudget.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $m.name }}
  namespace: {{ $ns }}
  labels:
    {{- $labels | nindent 4 }}
spec:
  maxUnavailable: {{ $m.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "lbfed.selectorLabels" $sel | nindent 6 }}
{{- end }}
{{- range $kind := list "Mutating" "Validating" }}
---
# No webhooks here: karmada-apiserver would enforce them on its own LBCF objects and call a
# Service that has no endpoints there. ClusterOverridePolicy {{ $cluster }}-{{ lower $kind }} adds
# them to the copy each member receives.
apiVersion: admissionregistration.k8s.io/v1
kind: {{ $kind }}WebhookConfiguration
metadata:
  name: {{ $cluster }}
  labels:
    {{- $labels | nindent 4 }}
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterOverridePolicy
metadata:
  name: {{ $cluster }}-{{ lower $kind }}
  labels:
    {{- $labels | nindent 4 }}
spec:
  resourceSelectors:
    - apiVersion: admissionregistration.k8s.io/v1
      kind: {{ $kind }}WebhookConfiguration
      name: {{ $cluster }}
  overrideRules:
    {{- range $name, $url := $m.webhook.clusterURLs }}
    - targetCluster:
        clusterNames: [{{ $name }}]
      overriders:
        plaintext:
          - path: /webhooks
            operator: add
            value:
              {{- include "lbfed.member.webhooks" (dict "root" $ "kind" (lower $kind) "base" $url) | trim | nindent 14 }}
    {{- end }}
    - overriders:
        plaintext:
          - path: /webhooks
            operator: add
            value:
              {{- include "lbfed.member.webhooks" (dict "root" $ "kind" (lower $kind) "base" "") | trim | nindent 14 }}
      {{- with keys $m.webhook.clusterURLs | sortAlpha }}
      targetCluster:
        exclude: {{ toJson . }}
      {{- end }}
{{- end }}
---
# The CRDs and the member components go to every selected member cluster (the namespace follows
# through Karmada's namespace sync).
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: {{ $cluster }}
  labels:
    {{- $labels | nindent 4 }}
spec:
  conflictResolution: {{ $m.conflictResolution }}
  resourceSelectors:
    {{- range $path, $_ := .Files.Glob "files/crds/*.yaml" }}
    - apiVersion: apiextensions.k8s.io/v1
      kind: CustomResourceDefinition
      name: {{ ($.Files.Get $path | fromYaml).metadata.name }}
    {{- end }}
    - apiVersion: v1
      kind: ServiceAccount
      namespace: {{ $ns }}
      name: {{ $m.name }}
    - apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRole
      name: {{ $cluster }}
    - apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRoleBinding
      name: {{ $cluster }}
    - apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRole
      name: {{ $cluster }}-federation-pods
    - apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRoleBinding
      name: {{ $cluster }}-federation-pods
    {{- if $m.clusterProxyImpersonator.name }}
    - apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRole
      name: {{ $cluster }}-federation-impersonation
    - apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRoleBinding
      name: {{ $cluster }}-federation-impersonation
    {{- end }}
    {{- if $m.leaderElection.enabled }}
    - apiVersion: rbac.authorization.k8s.io/v1
      kind: Role
      namespace: {{ $ns }}
      name: {{ $m.name }}-leader-election
    - apiVersion: rbac.authorization.k8s.io/v1
      kind: RoleBinding
      namespace: {{ $ns }}
      name: {{ $m.name }}-leader-election
    {{- end }}
    - apiVersion: v1
      kind: Secret
      namespace: {{ $ns }}
      name: {{ include "lbfed.member.secretName" . }}
    {{- range include "lbfed.member.propagatedPullSecrets" . | fromJsonArray }}
    # A pull Secret the member pods name, created in karmada-apiserver by the user.
    - apiVersion: v1
      kind: Secret
      namespace: {{ $ns }}
      name: {{ . }}
    {{- end }}
    - apiVersion: apps/v1
      kind: Deployment
      namespace: {{ $ns }}
      name: {{ $m.name }}
    - apiVersion: v1
      kind: Service
      namespace: {{ $ns }}
      name: {{ $m.name }}
    {{- if $m.metricsService.enabled }}
    - apiVersion: v1
      kind: Service
      namespace: {{ $ns }}
      name: {{ $m.name }}-metrics
    {{- end }}
    {{- include "lbfed.karmada.memberNetworkPolicySelector" . | nindent 4 }}
    {{- if $m.podDisruptionBudget.enabled }}
    - apiVersion: policy/v1
      kind: PodDisruptionBudget
      namespace: {{ $ns }}
      name: {{ $m.name }}
    {{- end }}
    - apiVersion: admissionregistration.k8s.io/v1
      kind: MutatingWebhookConfiguration
      name: {{ $cluster }}
    - apiVersion: admissionregistration.k8s.io/v1
      kind: ValidatingWebhookConfiguration
      name: {{ $cluster }}
  placement:
    {{- with $m.clusterAffinity }}
    clusterAffinity:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with $m.clusterTolerations }}
    clusterTolerations:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    replicaScheduling:
      replicaSchedulingType: Duplicated
{{- end }}
