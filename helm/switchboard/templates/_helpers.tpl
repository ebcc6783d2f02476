{{- define "switchboard.name" -}}{{ .Release.Name }}{{- end -}}

{{- define "switchboard.labels" -}}
app.kubernetes.io/part-of: switchboard
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "switchboard.image" -}}{{ .Values.image.repository }}:{{ .Values.image.tag }}{{- end -}}

{{/* Environment shared by every component. */}}
{{- define "switchboard.env" -}}
{{- range $name, $value := .Values.env }}
- { name: {{ $name }}, value: {{ $value | quote }} }
{{- end }}
- { name: SWITCHBOARD_SERVICE_TOKEN, valueFrom: { secretKeyRef: { name: {{ .Values.existingSecret }}, key: SERVICE_TOKEN } } }
- { name: SWITCHBOARD_IDENTITY_URL, value: "http://{{ .Release.Name }}-identity-replicas:{{ .Values.identity.port }}" }
- { name: SWITCHBOARD_AGENTS_URL, value: "http://{{ .Release.Name }}-agents-replicas:{{ .Values.agents.port }}" }
- { name: SWITCHBOARD_KNOWLEDGEBASE_URL, value: "http://{{ .Release.Name }}-knowledgebase-replicas:{{ .Values.knowledgebase.port }}" }
- { name: SWITCHBOARD_CONVERSATIONS_URL, value: "http://{{ .Release.Name }}-conversations-replicas:{{ .Values.conversations.port }}" }
- { name: SWITCHBOARD_CRM_URL, value: "http://{{ .Release.Name }}-crm-replicas:{{ .Values.crm.port }}" }
- { name: SWITCHBOARD_WEBHOOKS_URL, value: "http://{{ .Release.Name }}-webhooks-replicas:{{ .Values.webhooks.port }}" }
- { name: SWITCHBOARD_DRAIN_SECONDS, value: {{ .Values.drainSeconds | quote }} }
- { name: SWITCHBOARD_ADMIN_LISTEN, value: "0.0.0.0:{{ .Values.metrics.port }}" }
- { name: SWITCHBOARD_PUBLIC_URL, value: {{ include "switchboard.publicUrl" . | quote }} }
{{- end -}}

{{/* Where people reach the platform: every link it hands out starts with it. */}}
{{- define "switchboard.publicUrl" -}}
{{- if .Values.publicUrl }}{{ .Values.publicUrl }}{{ else }}{{ ternary "https" "http" (not (empty .Values.ingress.tls)) }}://{{ .Values.ingress.host }}{{ end -}}
{{- end -}}

{{- define "switchboard.scrape" -}}
annotations: { prometheus.io/scrape: "true", prometheus.io/port: {{ .Values.metrics.port | quote }}, prometheus.io/path: /metrics }
{{- end -}}

{{/*
API versions by the cluster's version (issue 56), as widely used charts choose them: Kubernetes
1.20 serves neither policy/v1 PodDisruptionBudgets (from 1.21) nor autoscaling/v2 (from 1.23).
`.Capabilities.APIVersions` is not asked: `helm template` answers it from Helm's own list,
whatever --kube-version says.
*/}}
{{- define "switchboard.pdbApiVersion" -}}
{{- if semverCompare ">=1.21-0" .Capabilities.KubeVersion.Version }}policy/v1{{ else }}policy/v1beta1{{ end }}
{{- end }}

{{- define "switchboard.hpaApiVersion" -}}
{{- if semverCompare ">=1.23-0" .Capabilities.KubeVersion.Version }}autoscaling/v2{{ else }}autoscaling/v2beta2{{ end }}
{{- end }}

{{/*
A probe of a service's gRPC health (dict "root" $ "port" N): the kubelet's own gRPC probe where
the cluster has it (on by default from 1.24), else the binary asking the same health service
(`switchboard health`).
*/}}
{{- define "switchboard.grpcProbe" -}}
{{- if semverCompare ">=1.24-0" .root.Capabilities.KubeVersion.Version -}}
grpc: { port: {{ .port }} }
{{- else -}}
exec: { command: ["switchboard", "health", "127.0.0.1:{{ .port }}"] }
{{- end -}}
{{- end }}
