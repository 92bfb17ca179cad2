#!/usr/bin/env bash
# Unit tests with the race detector over the root module and every staging module. Integration tests carry the
# `integration` build tag and are not part of this run. Extra arguments go to go test.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
for dir in $(go_modules); do
  echo "go test -race: ${dir#"${ROOT}"/}" >&2
  (cd "${dir}" && go_test test-unit -race -count=1 "$@" ./...)
done
