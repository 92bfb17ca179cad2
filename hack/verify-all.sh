#!/usr/bin/env bash
# Runs every hack/verify-*.sh and reports which failed.
set -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
failed=()
for script in "${ROOT}"/hack/verify-*.sh; do
  name=$(basename "${script}")
  [[ "${name}" == verify-all.sh ]] && continue
  echo "== ${name}"
  if ! "${ROOT}/hack/timed.sh" "${name}" "${script}"; then
    failed+=("${name}")
  fi
done
if ((${#failed[@]})); then
  echo "FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "all verify checks passed"
