#!/usr/bin/env bash
# Prints the -ldflags that stamp the version into a build of multiproject-controller-manager: component-base's
# version package (what --version, the "Starting" log line, the GCE User-Agent and the metric
# kubernetes_build_info report) and verflag's program name. The one place the version is computed: the Makefile and
# the Dockerfile both call it, so a binary reports the same whichever built it.
#
#   hack/version.sh                        the version from git: the tag at HEAD (v*), else v<chart appVersion>-dev
#                                          with the commit as build metadata; -dirty when the tree has changes
#   VERSION=v0.1.0 GIT_COMMIT=abc hack/version.sh
#                                          what a release pipeline or `docker build --build-arg` gives, for a
#                                          source tree without .git (the Dockerfile's build context may lack it)
#   hack/version.sh --version              prints only the version
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHART="${ROOT}/charts/multiproject-controller-manager/Chart.yaml"

in_git() { git -C "${ROOT}" rev-parse --is-inside-work-tree >/dev/null 2>&1; }

commit="${GIT_COMMIT:-}"
if [[ -z "${commit}" ]]; then
  commit=$(in_git && git -C "${ROOT}" rev-parse HEAD 2>/dev/null || echo unknown)
fi

tree_state=""
if in_git; then
  if git -C "${ROOT}" diff --quiet HEAD -- 2>/dev/null; then tree_state=clean; else tree_state=dirty; fi
fi

version="${VERSION:-}"
if [[ -z "${version}" ]]; then
  # The chart's appVersion is the release being prepared; its image tag defaults to it.
  app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "${CHART}")
  meta=""
  if in_git && tag=$(git -C "${ROOT}" describe --tags --exact-match --match 'v*' HEAD 2>/dev/null); then
    version="${tag}"
  else
    version="${app_version}-dev"
    meta="${commit:0:12}"
  fi
  [[ "${tree_state}" != dirty ]] || meta="${meta:+${meta}.}dirty"
  version="${version}${meta:++${meta}}"
fi
if [[ ! "${version}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]]; then
  echo "hack/version.sh: version ${version@Q} is not v<major>.<minor>.<patch>[...]" >&2
  exit 1
fi

if [[ "${1:-}" == --version ]]; then
  echo "${version}"
  exit 0
fi

build_date=$(date -u ${SOURCE_DATE_EPOCH:+-d "@${SOURCE_DATE_EPOCH}"} +%Y-%m-%dT%H:%M:%SZ)
pkg=k8s.io/component-base/version
# Not gitMajor and gitMinor: component-base reads them as the Kubernetes version the binary emulates, and the
# feature gates (--feature-gates) are versioned against Kubernetes' releases, not ours; with 0 and 1 every gate
# would be "PreAlpha at emulated version 0.1" and refused.
flags=(
  "-X ${pkg}.gitVersion=${version}"
  "-X ${pkg}.gitCommit=${commit}"
  "-X ${pkg}.buildDate=${build_date}"
  "-X ${pkg}/verflag.programName=multiproject-controller-manager"
)
[[ -z "${tree_state}" ]] || flags+=("-X ${pkg}.gitTreeState=${tree_state}")
echo "${flags[*]}"
