#!/usr/bin/env bash
# go vet over the root module and every staging module, including the integration-tagged files.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
for dir in $(go_modules); do
  echo "go vet: ${dir#"${ROOT}"/}" >&2
  (cd "${dir}" && go vet -tags integration ./...)
done
