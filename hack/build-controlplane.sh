#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager and kubectl from the Go module proxy (no binary can be
# downloaded here) at the versions pinned in hack/tools/controlplane/{etcd,kube}/go.mod, and caches them outside the
# clone, keyed by those versions and by a hash of both modules' go.sum, so a second clone or CI run reuses them and a
# change of any dependency's version (the kube module's are aligned with test/packaging's) builds them anew.
#
# Prints the directory holding the binaries on its last line of stdout. Progress goes to stderr.
#
#   hack/build-controlplane.sh            build what is missing
#   CONTROLPLANE_CACHE=DIR hack/...       cache root (default: ${XDG_CACHE_HOME:-~/.cache}/multiproject-controller-manager)
#   CONTROLPLANE_COMPONENTS="etcd kube-apiserver" hack/...   build only these
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS="${ROOT}/hack/tools/controlplane"

kube_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "${TOOLS}/kube/go.mod")
etcd_version=$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3}' "${TOOLS}/etcd/go.mod")
go_version=$(go env GOVERSION)
deps_hash=$(cat "${TOOLS}/etcd/go.sum" "${TOOLS}/kube/go.sum" | sha256sum | cut -c1-12)
cache_root=${CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/multiproject-controller-manager}
bin_dir="${cache_root}/controlplane/kubernetes-${kube_version}_etcd-${etcd_version}_deps-${deps_hash}_${go_version}_$(go env GOOS)-$(go env GOARCH)"
components=${CONTROLPLANE_COMPONENTS:-etcd kube-apiserver kube-controller-manager kubectl}

log() { printf '[build-controlplane] %s\n' "$*" >&2; }

mkdir -p "${bin_dir}"

# Several callers may start at once (go test runs integration packages in parallel, each may call this script, and
# local-up may run beside them). One builds; the others wait for it and then find the binaries cached.
exec {lock_fd}>"${bin_dir}/.lock"
if ! flock --nonblock "${lock_fd}"; then
  log "another build-controlplane.sh is building into ${bin_dir}; waiting for it"
  flock "${lock_fd}"
fi

build() {
  local name=$1 module_dir=$2 pkg=$3
  if [[ -x "${bin_dir}/${name}" ]]; then
    log "${name}: cached"
    return
  fi
  log "${name}: building ${pkg} (cold builds on 2 cores: etcd ~1 min, kube-apiserver ~7 min, kube-controller-manager ~3 min, kubectl ~2 min)"
  local start=${SECONDS}
  # Build into a temporary name first so an interrupted build never leaves a half-written binary in the cache.
  partial="${bin_dir}/.${name}.partial"
  trap 'rm -f "${partial}"' EXIT
  (cd "${module_dir}" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "${partial}" "${pkg}")
  mv "${partial}" "${bin_dir}/${name}"
  trap - EXIT
  log "${name}: built in $((SECONDS - start))s"
}

for component in ${components}; do
  case "${component}" in
    etcd) build etcd "${TOOLS}/etcd" go.etcd.io/etcd/server/v3 ;;
    kube-apiserver) build kube-apiserver "${TOOLS}/kube" k8s.io/kubernetes/cmd/kube-apiserver ;;
    kube-controller-manager) build kube-controller-manager "${TOOLS}/kube" k8s.io/kubernetes/cmd/kube-controller-manager ;;
    kubectl) build kubectl "${TOOLS}/kube" k8s.io/kubernetes/cmd/kubectl ;;
    *) log "unknown component ${component}"; exit 2 ;;
  esac
done

echo "${bin_dir}"
