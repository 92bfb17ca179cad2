#!/usr/bin/env bash
# Fails if any Go file is not gofmt -s clean.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ROOT}"
bad=$(go_files | xargs -r gofmt -s -l)
if [[ -n "${bad}" ]]; then
  echo "These files are not gofmt -s clean; run hack/update-gofmt.sh:" >&2
  echo "${bad}" >&2
  exit 1
fi
