#!/usr/bin/env bash
# Fails, naming each module, if a module that provides packages to two builds which are meant to share their compiles
# is at two versions in them. Go's build cache keys a package by its module's version and by its dependencies' keys,
# so one module out of step recompiles it and everything above it on a cold machine (github.com/fxamacker/cbor/v2
# alone, which k8s.io/apimachinery's serializers import, recompiles nearly every Kubernetes package):
#   - the product's binary (the root module: test/e2e builds it, and test/packaging's release test through
#     hack/release.sh) and the packaging tests: client-go, component-base, prometheus/client_golang and their kind;
#     the upgrade suite's previous release (hack/previous-release) shares them too while its go.mod requires what the
#     root module's does, which is the case until a dependency of the product moves (a release then moves the
#     previous release too), so its go.mod is not checked here;
#   - kube-apiserver and kube-controller-manager (hack/tools/controlplane/kube, hack/build-controlplane.sh) and the
#     packaging tests (test/packaging): client-go, apiserver, grpc, otel and their kind, about 1,160 packages;
#   - the release tool (hack/tools/release) and the packaging tests: Helm and kustomize (github.com/klauspost/compress
#     aside, which only go-containerregistry uses; see hack/tools/release/go.mod).
# It compares the modules of the packages each build compiles (go list -deps, with the builds' CGO_ENABLED=0), not
# `go list -m all`: a module that is only in a module graph (no package of it compiled) cannot be pinned by go.mod,
# go mod tidy drops such a requirement, and its version costs no compile. Needs no network once the module cache
# holds these modules (CI fills it).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export CGO_ENABLED=0

# compiled_modules DIR GO_LIST_ARGS...: "path version" of every module whose packages the build compiles, sorted.
compiled_modules() {
  local dir=$1
  shift
  (cd "${ROOT}/${dir}" &&
    go list -deps -f '{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}' "$@") |
    sort -u
}

packaging=$(compiled_modules test/packaging -test -tags integration .)
status=0
# compare NAME MODULES EXCEPTIONS: reports each module NAME's build and the packaging tests hold at two versions.
compare() {
  local name=$1 modules=$2 exceptions=$3 out
  out=$(join <(echo "${modules}") <(echo "${packaging}") |
    awk -v except=" ${exceptions} " '$2 != $3 && index(except, " " $1 " ") == 0 {
      printf "  %s: %s in %s, %s in test/packaging\n", $1, $2, name, $3 }' name="${name}")
  if [[ -n "${out}" ]]; then
    printf '%s and test/packaging compile these modules at different versions; require the same version in both:\n%s\n' \
      "${name}" "${out}" >&2
    status=1
  fi
}

compare "the root module" "$(compiled_modules . ./cmd/multiproject-controller-manager)" ""
compare hack/tools/controlplane/kube \
  "$(compiled_modules hack/tools/controlplane/kube k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)" ""
compare hack/tools/release "$(compiled_modules hack/tools/release .)" "github.com/klauspost/compress"
exit "${status}"
