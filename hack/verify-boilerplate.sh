#!/usr/bin/env bash
# Fails if a Go file lacks the license header of hack/boilerplate.go.txt.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "${ROOT}/hack/boilerplate.sh"
bad=$(files_missing_boilerplate)
if [[ -n "${bad}" ]]; then
  echo "These files lack the license header; run hack/update-boilerplate.sh:" >&2
  echo "${bad}" >&2
  exit 1
fi
