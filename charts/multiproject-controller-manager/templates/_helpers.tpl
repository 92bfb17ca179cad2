{{/*
Object names are fixed rather than derived from the release name: the ClusterRoles, the admission policy and the
leader-election Lease are cluster-wide singletons that the docs and the manager's defaults name, and one manager
runs per cluster.
*/}}
{{- define "mpcm.name" -}}
multiproject-controller-manager
{{- end -}}

{{/* Labels of every object: the manifests' one, plus commonLabels (which cannot replace it). */}}
{{- define "mpcm.labels" -}}
{{- toYaml (merge (dict "app.kubernetes.io/name" (include "mpcm.name" .)) .Values.commonLabels) -}}
{{- end -}}

{{- define "mpcm.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}
