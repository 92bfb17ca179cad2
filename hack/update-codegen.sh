#!/usr/bin/env bash
# Copyright The multiproject-controller-manager Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

# Regenerates everything derived from the API types in staging/src/github.com/multiproject/api:
#
#   - zz_generated.deepcopy.go next to the types (kube_codegen.sh gen_helpers);
#   - the clientset, listers, informers and apply configurations in staging/src/github.com/multiproject/client-go;
#   - the CRDs of our own group in manifests/crds, and the CRDs of the mirrored third-party groups (Rancher,
#     Pangolin) in test/fixtures/crds (controller-gen).
#
# The generators are built from the versions pinned in hack/tools/codegen/go.mod into _output/bin, so this needs
# nothing but Go and the module proxy. hack/verify-codegen.sh runs this script and checks that nothing changed.
#
#   hack/update-codegen.sh
#   KUBE_VERBOSE=2 hack/update-codegen.sh    more generator logging
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS_DIR="${ROOT}/hack/tools/codegen"
BIN_DIR="${ROOT}/_output/bin"
BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"

API_MODULE=github.com/multiproject/api
CLIENT_MODULE=github.com/multiproject/client-go
API_DIR="${ROOT}/staging/src/${API_MODULE}"
CLIENT_DIR="${ROOT}/staging/src/${CLIENT_MODULE}"

# The API packages that get a client, as paths below the api module. Every one must hold a doc.go with
# +groupName. Our own group's CRDs are installed in production; the others are mirrors of APIs owned by Rancher
# and the pangolin-operator, whose CRDs are test fixtures only.
OWN_APIS=(multiproject/v1alpha1)
MIRRORED_APIS=(rancher/management/v3 pangolin/tunnel/v1alpha1)
CRD_DIR="${ROOT}/manifests/crds"
FIXTURE_CRD_DIR="${ROOT}/test/fixtures/crds"

log() { printf '[update-codegen] %s\n' "$*" >&2; }

# Generators run with the repository's own modules as their working directory; a go.work from the user's
# environment would change how they resolve packages.
export GOWORK=off
# kube_codegen.sh installs its generators into GOBIN; keep them in the clone instead of the user's GOPATH.
export GOBIN="${BIN_DIR}"
mkdir -p "${BIN_DIR}"

# kube_codegen.sh builds the generators its functions run (deepcopy-gen, openapi-gen) itself, from the
# code-generator module pinned here; the ones this script runs directly are built here.
log "building generators pinned in hack/tools/codegen"
(
  cd "${TOOLS_DIR}"
  go build -o "${BIN_DIR}/" \
    k8s.io/code-generator/cmd/applyconfiguration-gen \
    k8s.io/code-generator/cmd/client-gen \
    k8s.io/code-generator/cmd/informer-gen \
    k8s.io/code-generator/cmd/lister-gen \
    sigs.k8s.io/controller-tools/cmd/controller-gen
)
CODEGEN_PKG=$(cd "${TOOLS_DIR}" && go list -m -f '{{.Dir}}' k8s.io/code-generator)
# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

# Deepcopy. gen_helpers runs the generator from the current directory, which must be a module that resolves the
# API packages, so run it inside the api module rather than relying on the root module's replace directives.
log "deepcopy"
(
  cd "${API_DIR}"
  kube::codegen::gen_helpers --boilerplate "${BOILERPLATE}" .
)

# OpenAPI definitions of every API type (and of the apimachinery types they use), into client-go/openapi. They are
# not served by anything: they exist so that the apply configurations below know the structure of each type (list
# types, map keys), which the field-managed fake clientset and the Extract* functions need. openapi-gen runs inside
# the client-go module, which resolves the api module and owns the output package. Its API-rule report lists the
# places where our types break Kubernetes API conventions; a new entry fails the run until it is fixed or, for the
# mirrors of third-party APIs whose shape we do not choose, accepted with UPDATE_API_KNOWN_VIOLATIONS=true.
log "openapi"
API_VIOLATIONS="${API_DIR}/api-rules/violation_exceptions.list"
openapi_report_args=(--report-filename "${API_VIOLATIONS}")
if [[ "${UPDATE_API_KNOWN_VIOLATIONS:-}" == "true" ]]; then
  openapi_report_args+=(--update-report)
fi
mkdir -p "$(dirname "${API_VIOLATIONS}")"
(
  cd "${CLIENT_DIR}"
  kube::codegen::gen_openapi \
    --boilerplate "${BOILERPLATE}" \
    --output-dir openapi \
    --output-pkg "${CLIENT_MODULE}/openapi" \
    "${openapi_report_args[@]}" \
    "${API_DIR}"
)
OPENAPI_SCHEMA="${ROOT}/_output/codegen/openapi-schema.json"
mkdir -p "$(dirname "${OPENAPI_SCHEMA}")"
(cd "${CLIENT_DIR}" && go run ./openapi/cmd/models-schema) > "${OPENAPI_SCHEMA}"

# Client, listers, informers, apply configurations.
#
# kube_codegen.sh's gen_client is not used here: it names every API by the last two directories of its path
# ("<group>/<version>") below a single input directory, so it cannot address rancher/management/v3 and
# pangolin/tunnel/v1alpha1 next to multiproject/v1alpha1 in one clientset. The generators themselves accept such
# paths, so this block runs them with the same flags gen_client passes, producing one clientset for all groups.
# Everything runs inside the client-go module, which resolves the api module through its replace directive.
ALL_APIS=("${OWN_APIS[@]}" "${MIRRORED_APIS[@]}")
input_pkgs=()
client_inputs=()
for api in "${ALL_APIS[@]}"; do
  input_pkgs+=("${API_MODULE}/${api}")
  client_inputs+=(--input "${api}")
done
verbosity="${KUBE_VERBOSE:-0}"

# Deletes the files a generator wrote last time (recognised by its "Code generated by" line), so that files of
# removed types do not linger, while hand-written files (tests) in the same directories survive.
remove_generated() {
  local generator=$1 dir=$2
  [[ -d "${dir}" ]] || return 0
  { grep -rlZ --include '*.go' -e "^// Code generated by ${generator}. DO NOT EDIT.$" "${dir}" || true; } | xargs -0 rm -f
}

(
  cd "${CLIENT_DIR}"

  log "apply configurations"
  remove_generated applyconfiguration-gen applyconfiguration
  "${BIN_DIR}/applyconfiguration-gen" \
    -v "${verbosity}" \
    --go-header-file "${BOILERPLATE}" \
    --output-dir applyconfiguration \
    --output-pkg "${CLIENT_MODULE}/applyconfiguration" \
    --openapi-schema "${OPENAPI_SCHEMA}" \
    "${input_pkgs[@]}"

  log "clientset"
  remove_generated client-gen clientset
  "${BIN_DIR}/client-gen" \
    -v "${verbosity}" \
    --go-header-file "${BOILERPLATE}" \
    --output-dir clientset \
    --output-pkg "${CLIENT_MODULE}/clientset" \
    --clientset-name versioned \
    --apply-configuration-package "${CLIENT_MODULE}/applyconfiguration" \
    --input-base "${API_MODULE}" \
    "${client_inputs[@]}"

  log "listers"
  remove_generated lister-gen listers
  "${BIN_DIR}/lister-gen" \
    -v "${verbosity}" \
    --go-header-file "${BOILERPLATE}" \
    --output-dir listers \
    --output-pkg "${CLIENT_MODULE}/listers" \
    "${input_pkgs[@]}"

  log "informers"
  remove_generated informer-gen informers
  "${BIN_DIR}/informer-gen" \
    -v "${verbosity}" \
    --go-header-file "${BOILERPLATE}" \
    --output-dir informers \
    --output-pkg "${CLIENT_MODULE}/informers" \
    --versioned-clientset-package "${CLIENT_MODULE}/clientset/versioned" \
    --listers-package "${CLIENT_MODULE}/listers" \
    "${input_pkgs[@]}"
)

# Package documentation. The generators leave most of their packages without a package comment; every package of
# ours gets one, so write a doc.go for each generated package that lacks one. These doc.go files are generated too
# (recognised by their "Code generated" line) and rewritten on every run.
DOC_MARKER="// Code generated by hack/update-codegen.sh. DO NOT EDIT."

package_summary() {
  local rel=$1 leaf parent
  leaf=$(basename "${rel}")
  parent=$(basename "$(dirname "${rel}")")
  case "${rel}" in
    applyconfiguration) echo "holds the apply configurations (typed builders for server-side apply) of every API group in ${API_MODULE}, and ForKind to find one by kind." ;;
    applyconfiguration/internal) echo "holds the structured-merge-diff schema of the API types, from their OpenAPI definitions, which field management needs to merge and extract applied fields." ;;
    applyconfiguration/*/*) echo "holds the apply configurations of the ${parent} API group, version ${leaf}." ;;
    clientset/versioned) echo "is the clientset for every API group in ${API_MODULE}; fake holds an in-memory one for tests." ;;
    informers/externalversions) echo "holds the shared informer factory for every API group in ${API_MODULE}." ;;
    informers/externalversions/internalinterfaces) echo "holds the interfaces the informer factory and the per-group informers share, kept apart to avoid an import cycle." ;;
    informers/externalversions/*/*) echo "holds the shared informers of the ${parent} API group, version ${leaf}." ;;
    informers/externalversions/*) echo "gives access to the informers of each version of the ${leaf} API group." ;;
    listers/*/*) echo "holds the listers (read access to an informer's cache) of the ${parent} API group, version ${leaf}." ;;
    openapi) echo "holds the OpenAPI definitions of the API types, from which update-codegen.sh derives the apply configurations' schema." ;;
    *) return 1 ;;
  esac
}

write_package_docs() {
  local module_dir=$1 dir rel pkg summary
  { grep -rlZ --include 'doc.go' -F -e "${DOC_MARKER}" "${module_dir}" || true; } | xargs -0 rm -f
  # go list reports the packages (not test-only directories) that have no package comment after the removal.
  while IFS= read -r dir; do
    [[ -n "${dir}" ]] || continue
    rel=${dir#"${module_dir}/"}
    pkg=$(basename "${dir}")
    summary=$(package_summary "${rel}") || { log "no package summary for ${rel}; add one to package_summary"; exit 1; }
    {
      cat "${BOILERPLATE}"
      printf '%s\n\n' "${DOC_MARKER}"
      printf '// Package %s %s\n' "${pkg}" "${summary}" | fold -s -w 116 | sed -e 's/ *$//' -e '2,$s|^|// |'
      printf 'package %s\n' "${pkg}"
    } > "${dir}/doc.go"
  done < <(cd "${module_dir}" && go list -e -f '{{if not .Doc}}{{.Dir}}{{end}}' ./...)
}

log "package docs"
write_package_docs "${CLIENT_DIR}"

# CRDs. controller-gen names each file <group>_<plural>.yaml. Files it wrote before are removed first so that a
# removed kind's CRD does not linger; other files in these directories are left alone.
remove_generated_crds() {
  local dir=$1
  mkdir -p "${dir}"
  { grep -rlZ --include '*.yaml' -e 'controller-gen.kubebuilder.io/version' "${dir}" || true; } | xargs -0 rm -f
}

join_paths() {
  local IFS=';'
  local paths=()
  for api in "$@"; do paths+=("./${api}"); done
  echo "${paths[*]}"
}

log "CRDs"
remove_generated_crds "${CRD_DIR}"
remove_generated_crds "${FIXTURE_CRD_DIR}"
(
  cd "${API_DIR}"
  "${BIN_DIR}/controller-gen" crd:crdVersions=v1 \
    paths="$(join_paths "${OWN_APIS[@]}")" \
    output:crd:dir="${CRD_DIR}"
  "${BIN_DIR}/controller-gen" crd:crdVersions=v1 \
    paths="$(join_paths "${MIRRORED_APIS[@]}")" \
    output:crd:dir="${FIXTURE_CRD_DIR}"
)

log "done"
