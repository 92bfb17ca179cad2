#!/usr/bin/env bash
# go vet over the root module and every staging module, including the integration-tagged files, and over the release
# tool's module (hack/tools/release, which hack/release.sh runs; test/packaging is vetted by hack/test-packaging.sh).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
for dir in $(go_modules) "${ROOT}/hack/tools/release"; do
  echo "go vet: ${dir#"${ROOT}"/}" >&2
  (cd "${dir}" && go vet -tags integration ./...)
done
