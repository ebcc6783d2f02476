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
