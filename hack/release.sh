#!/usr/bin/env bash
# Builds a release of multiproject-controller-manager into _output/release/VERSION (docs/release.md):
#
#   multiproject-controller-manager-linux-amd64, -linux-arm64   static binaries (CGO_ENABLED=0, -trimpath, -s -w),
#                                                               stamped by hack/version.sh
#   image/                                                      the OCI image: an index over both architectures, as
#                                                               an OCI layout (crane push image/ REF pushes the index)
#   multiproject-controller-manager-VERSION-linux-ARCH.tar      each architecture's image as a docker-format tarball
#                                                               (docker load, crane push FILE REF)
#   multiproject-controller-manager-CHARTVERSION.tgz            the Helm chart, version VERSION without the v,
#                                                               appVersion (and so default image tag) VERSION
#   multiproject-controller-manager-VERSION.yaml                the kustomize base rendered with the image tag VERSION
#   CHANGELOG-VERSION.md                                        this release's section of CHANGELOG.md
#   SHA256SUMS                                                  sha256sum of every file above
#
# The image is built without a container engine or registry (hack/tools/release, go-containerregistry) on an empty
# base: the binary, this machine's CA certificate bundle (Debian's ca-certificates package), /etc/passwd and
# /etc/group with the nonroot user 65532 it runs as. Everything is dated with the commit's time, so the same commit
# built with the same Go and the same CA bundle gives the same files and digests.
#
#   make release VERSION=v0.1.0            what a release runs (VERSION is required)
#   VERSION=v0.1.0 hack/release.sh         the same
#   RELEASE_OUT_DIR=DIR                    write there instead of _output/release/VERSION
#   RELEASE_CHANGELOG=FILE                 take the release notes from FILE instead of CHANGELOG.md
#   RELEASE_PREBUILT_DIR=DIR               package the binaries DIR holds (multiproject-controller-manager-linux-ARCH)
#                                          instead of building them; the others are built (test/packaging's
#                                          release test brings a small arm64 stand-in)
#   CA_BUNDLE=FILE                         the CA bundle to put in the image (default: Debian's)
#   GIT_COMMIT, SOURCE_DATE_EPOCH          only for a source tree without .git: the commit and its time (seconds)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PRODUCT=multiproject-controller-manager
CHART_DIR="${ROOT}/charts/${PRODUCT}"
PLATFORMS=(linux/amd64 linux/arm64)

log() { printf '[release] %s\n' "$*" >&2; }
fail() {
  printf 'hack/release.sh: %s\n' "$*" >&2
  exit 1
}

# --- Inputs, all checked before anything is built.

version=${VERSION:-}
# Semantic versioning with a v, without build metadata: the version is also the image tag, which cannot hold a +.
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$'
if [[ -z "${version}" ]]; then
  fail "VERSION is required: make release VERSION=v<major>.<minor>.<patch>, e.g. make release VERSION=v0.1.0"
fi
if [[ ! "${version}" =~ ${semver} ]]; then
  fail "VERSION=${version@Q} is not v<major>.<minor>.<patch>[-<pre-release>] (e.g. v0.1.0, v0.2.0-rc.1)"
fi

if git -C "${ROOT}" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  head=$(git -C "${ROOT}" rev-parse HEAD)
  if [[ -n "${GIT_COMMIT:-}" && "$(git -C "${ROOT}" rev-parse --verify --quiet "${GIT_COMMIT}^{commit}")" != "${head}" ]]; then
    fail "GIT_COMMIT=${GIT_COMMIT} is not HEAD (${head}): the release is built from the work tree; check the commit out"
  fi
  commit=${head}
  epoch=$(git -C "${ROOT}" show -s --format=%ct HEAD)
  if ! git -C "${ROOT}" diff --quiet HEAD --; then
    log "WARNING: the work tree has uncommitted changes: the release is not what ${commit:0:12} holds (the binaries say gitTreeState=dirty)"
  fi
  if ! git -C "${ROOT}" tag --points-at HEAD | grep -qxF "${version}"; then
    log "WARNING: HEAD is not tagged ${version} (docs/release.md tags the commit first)"
  fi
else
  commit=${GIT_COMMIT:-}
  epoch=${SOURCE_DATE_EPOCH:-}
  [[ -n "${commit}" && "${epoch}" =~ ^[0-9]+$ ]] ||
    fail "not in a git work tree: set GIT_COMMIT and SOURCE_DATE_EPOCH (the commit's time in seconds since 1970)"
fi
created=$(date -u -d "@${epoch}" +%Y-%m-%dT%H:%M:%SZ)

app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "${CHART_DIR}/Chart.yaml")
if [[ "${app_version}" != "${version}" ]]; then
  log "WARNING: the chart's appVersion is ${app_version}, not ${version} (docs/release.md updates Chart.yaml first); the packaged chart says ${version}"
fi

# The repository URL for the image's org.opencontainers.image.source: the chart's first `sources` entry, else its
# `home`. Chart.yaml names neither yet, so the placeholder is https:// and the Go module path (docs/release.md).
source_url=$(awk '/^sources:/ { s = 1; next } s && /^ *- / { print $2; exit } /^[^ #]/ { s = 0 }' "${CHART_DIR}/Chart.yaml")
[[ -n "${source_url}" ]] || source_url=$(sed -n 's/^home: *//p' "${CHART_DIR}/Chart.yaml")
[[ -n "${source_url}" ]] || source_url="https://$(awk '$1 == "module" { print $2 }' "${ROOT}/go.mod")"

ca_bundle=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
if [[ ! -s "${ca_bundle}" ]]; then
  fail "no CA certificate bundle at ${ca_bundle}: the image needs one for TLS to Compute Engine. Install Debian's ca-certificates package (apt-get install ca-certificates) or set CA_BUNDLE to a PEM bundle"
fi

# This release's section of the changelog: from its heading (## [VERSION] ... or ## VERSION ...) to the next
# release's heading, without link reference definitions.
changelog=${RELEASE_CHANGELOG:-${ROOT}/CHANGELOG.md}
[[ -f "${changelog}" ]] || fail "no changelog at ${changelog}"
notes=$(awk -v v="${version}" '
  /^## / { if (inside) exit; h = $2; gsub(/[][]/, "", h); if (h == v) inside = 1 }
  inside && !/^\[[^]]*\]: / { print }
' "${changelog}")
if [[ -z "${notes}" ]]; then
  fail "${changelog} has no section for ${version}: add \"## [${version}] - YYYY-MM-DD\" with its notes (docs/release.md)"
fi
if [[ -z "$(tail -n +2 <<<"${notes}" | tr -d '[:space:]')" ]]; then
  fail "the section of ${version} in ${changelog} is empty"
fi

out=${RELEASE_OUT_DIR:-${ROOT}/_output/release/${version}}
mkdir -p "${out}"
out=$(cd "${out}" && pwd)
if [[ -n "$(ls -A "${out}")" ]]; then
  # Only ever empty a directory this script filled.
  [[ -f "${out}/SHA256SUMS" ]] || fail "${out} is not empty and holds no earlier release (no SHA256SUMS): remove it or choose another RELEASE_OUT_DIR"
  find "${out}" -mindepth 1 -delete
fi

log "${version} from ${commit} (${created}) into ${out}"

# --- Binaries.

ldflags="-s -w $(VERSION="${version}" GIT_COMMIT="${commit}" SOURCE_DATE_EPOCH="${epoch}" "${ROOT}/hack/version.sh")"
binary_args=()
for platform in "${PLATFORMS[@]}"; do
  os=${platform%/*} arch=${platform#*/}
  binary="${out}/${PRODUCT}-${os}-${arch}"
  if [[ -n "${RELEASE_PREBUILT_DIR:-}" && -f "${RELEASE_PREBUILT_DIR}/${PRODUCT}-${os}-${arch}" ]]; then
    log "${platform}: the prebuilt binary of ${RELEASE_PREBUILT_DIR}"
    cp "${RELEASE_PREBUILT_DIR}/${PRODUCT}-${os}-${arch}" "${binary}"
  else
    log "${platform}: go build"
    (cd "${ROOT}" && CGO_ENABLED=0 GOOS="${os}" GOARCH="${arch}" \
      go build -trimpath -buildvcs=false -ldflags "${ldflags}" -o "${binary}" "./cmd/${PRODUCT}")
  fi
  chmod 0755 "${binary}"
  binary_args+=(-binary "${platform}=${binary}")
done

# --- The image, the chart and the rendered manifests (hack/tools/release, a module of its own).

release_tool() { (cd "${ROOT}/hack/tools/release" && GOWORK=off go run . "$@"); }

log "image"
release_tool image -out "${out}" -version "${version}" -revision "${commit}" -created "${created}" \
  -source "${source_url}" -ca-bundle "${ca_bundle}" "${binary_args[@]}" >&2
log "chart"
release_tool chart -out "${out}" -chart "${CHART_DIR}" -version "${version}" -created "${created}" >/dev/null
log "manifests"
release_tool manifests -out "${out}/${PRODUCT}-${version}.yaml" -dir "${ROOT}/manifests" -image "${PRODUCT}:${version}"

printf '%s\n' "${notes}" >"${out}/CHANGELOG-${version}.md"
# go-containerregistry writes the layout's files with mixed modes (index.json executable, layers private).
find "${out}/image" -type f -exec chmod 0644 {} +

# --- Checksums of everything, relative to the release directory (sha256sum -c SHA256SUMS there).

(cd "${out}" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum >SHA256SUMS)

log "done: ${out}"
