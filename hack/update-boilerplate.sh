#!/usr/bin/env bash
# Adds the license header of hack/boilerplate.go.txt to every Go file that lacks it, after any build constraint.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "${ROOT}/hack/boilerplate.sh"
while read -r file; do
  path="${ROOT}/${file}"
  tmp=$(mktemp)
  if [[ "$(head -n1 "${path}")" == //go:build* ]]; then
    # The build constraint and its blank line stay first, as Kubernetes lays them out.
    sed -n '1,/^$/p' "${path}" >"${tmp}"
    { cat "${ROOT}/hack/boilerplate.go.txt"; sed '1,/^$/d' "${path}"; } >>"${tmp}"
  else
    { cat "${ROOT}/hack/boilerplate.go.txt"; cat "${path}"; } >"${tmp}"
  fi
  cat "${tmp}" >"${path}"
  rm -f "${tmp}"
done < <(files_missing_boilerplate)
