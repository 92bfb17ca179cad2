#!/usr/bin/env bash
# go vet over the root module and every staging module, including the integration-tagged files, and over the release
# tool's module (hack/tools/release, which hack/release.sh runs; test/packaging is vetted by hack/test-packaging.sh).
#
# The root and staging modules are vetted with -race: vet compiles every package it checks, and with the flags of
# hack/test-unit.sh and hack/test-integration.sh that compile is the one the tests reuse from Go's build cache, where
# a plain vet would compile all of it (client-go, compute/v1) a second time on a cold machine. The checks are the
# same. The release tool is vetted as hack/release.sh builds it, without -race.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
for dir in $(go_modules); do
  echo "go vet -race: ${dir#"${ROOT}"/}" >&2
  (cd "${dir}" && go vet -race -tags integration ./...)
done
echo "go vet: hack/tools/release" >&2
(cd "${ROOT}/hack/tools/release" && go vet ./...)
