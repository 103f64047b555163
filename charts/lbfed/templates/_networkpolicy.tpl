{{/* The member lbcf-controller's NetworkPolicy (a template in karmada-apiserver, propagated with
the member components): admission webhooks from the member's API server, metrics from the
monitoring peers, probes from the kubelet. */}}
{{- define "lbfed.karmada.memberNetworkPolicy" -}}
{{- $np := .Values.networkPolicy }}
{{- if $np.enabled }}
{{- $m := .Values.member }}
{{- $sel := dict "root" . "component" "member" }}
{{- $metricsFrom := list (dict "namespaceSelector" $np.metrics.namespaceSelector "podSelector" $np.metrics.podSelector) }}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ $m.name }}
  namespace: {{ $m.namespace }}
  labels:
    {{- include "lbfed.labels" (dict "root" . "component" "member" "target" "karmada-apiserver") | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "lbfed.selectorLabels" $sel | nindent 6 }}
  policyTypes: [Ingress]
  ingress:
    - ports:
        - port: webhook
          protocol: TCP
      {{- with $np.memberAPIServer }}
      from:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    - ports:
        - port: metrics
          protocol: TCP
      from:
        {{- toYaml $metricsFrom | nindent 8 }}
    - ports:
        - port: probes
          protocol: TCP
{{- end }}
{{- end }}

{{/* The member NetworkPolicy's entry in the member ClusterPropagationPolicy. */}}
{{- define "lbfed.karmada.memberNetworkPolicySelector" -}}
{{- if .Values.networkPolicy.enabled }}
- apiVersion: networking.k8s.io/v1
  kind: NetworkPolicy
  namespace: {{ .Values.member.namespace }}
  name: {{ .Values.member.name }}
{{- end }}
{{- end }}
