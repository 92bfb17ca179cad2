{{/*
The chart renders the RBAC and the admission policy from the very files of manifests/ (files/rbac and
files/admission are links to manifests/rbac and manifests/admission), so that a rule or an object added there is in
the chart at once, and changes only what the values decide.

mpcm.objects takes (dict "root" $ "path" "files/rbac/*.yaml") and returns the YAML documents of those files, each
parsed, as a list in file order; comment-only documents and kustomizations are left out.
*/}}
{{- define "mpcm.objects" -}}
{{- $root := .root -}}
{{- $objects := list -}}
{{- range $path, $_ := $root.Files.Glob .path -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" ($root.Files.Get $path) -1 -}}
{{- $obj := fromYaml $doc -}}
{{- if hasKey $obj "Error" -}}
{{- fail (printf "%s: %s" $path $obj.Error) -}}
{{- end -}}
{{- if and $obj (not (hasPrefix "kustomize.config.k8s.io/" (toString $obj.apiVersion))) -}}
{{- $objects = append $objects $obj -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $objects -}}
{{- end -}}

{{/*
mpcm.place moves a manifest object where the values put it: from kube-system to the release namespace (except the
binding to extension-apiserver-authentication-reader, a Role that exists only in kube-system), from
multiproject-gcp-credentials to credentialsNamespace.name, its ServiceAccount subjects with it, adds commonLabels,
and gives the manager's ServiceAccount serviceAccount.annotations (its GCP identity: docs/gcp-identity.md). It takes
(dict "root" $ "obj" OBJ) and changes OBJ in place.
*/}}
{{- define "mpcm.place" -}}
{{- $root := .root -}}
{{- $obj := .obj -}}
{{- $meta := $obj.metadata -}}
{{- $ns := toString $meta.namespace -}}
{{- $authReader := and (eq $obj.kind "RoleBinding") (eq (toString $obj.roleRef.name) "extension-apiserver-authentication-reader") -}}
{{- if and (eq $ns "kube-system") (not $authReader) -}}
{{- $_ := set $meta "namespace" $root.Release.Namespace -}}
{{- else if eq $ns "multiproject-gcp-credentials" -}}
{{- $_ := set $meta "namespace" $root.Values.credentialsNamespace.name -}}
{{- end -}}
{{- if and (eq $obj.kind "Namespace") (eq $meta.name "multiproject-gcp-credentials") -}}
{{- $_ := set $meta "name" $root.Values.credentialsNamespace.name -}}
{{- end -}}
{{- range $subject := $obj.subjects | default list -}}
{{- if eq (toString $subject.namespace) "kube-system" -}}
{{- $_ := set $subject "namespace" $root.Release.Namespace -}}
{{- end -}}
{{- end -}}
{{- if and (eq $obj.kind "ServiceAccount") (eq (toString $meta.name) (include "mpcm.name" $root)) $root.Values.serviceAccount.annotations -}}
{{- $_ := set $meta "annotations" (merge (dict) ($meta.annotations | default dict) $root.Values.serviceAccount.annotations) -}}
{{- end -}}
{{- if $root.Values.commonLabels -}}
{{- $_ := set $meta "labels" (merge (dict) ($meta.labels | default dict) $root.Values.commonLabels) -}}
{{- end -}}
{{- end -}}
