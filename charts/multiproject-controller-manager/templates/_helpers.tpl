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

{{/*
mpcm.leaseNamespace is the namespace of the leader-election Lease (--leader-elect-resource-namespace), of the shard
Leases and claim records, and of the cluster-id ConfigMap: leaderElection.resourceNamespace, or the release's.
*/}}
{{- define "mpcm.leaseNamespace" -}}
{{- .Values.leaderElection.resourceNamespace | default .Release.Namespace -}}
{{- end -}}
