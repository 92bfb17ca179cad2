#!/usr/bin/env bash
# Copyright The multiproject-controller-manager Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

# Checks that everything hack/update-codegen.sh generates is up to date: it snapshots the generated trees,
# regenerates, compares, and always puts the snapshot back, so the work tree is left exactly as it was whether
# the check passes or fails. Fails with a diff and "run hack/update-codegen.sh" when anything differs.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"

# Everything update-codegen.sh writes (or deletes) lives below these paths.
GENERATED_PATHS=(
  staging/src/github.com/multiproject/api
  staging/src/github.com/multiproject/client-go
  manifests/crds
  test/fixtures/crds
)

SNAPSHOT=$(mktemp -d "${TMPDIR:-/tmp}/verify-codegen.XXXXXX")

restore() {
  local path
  for path in "${GENERATED_PATHS[@]}"; do
    rm -rf "${ROOT:?}/${path}"
    if [[ -e "${SNAPSHOT}/${path}" ]]; then
      mkdir -p "$(dirname "${ROOT}/${path}")"
      cp -a "${SNAPSHOT}/${path}" "${ROOT}/${path}"
    fi
  done
  rm -rf "${SNAPSHOT}"
}

for path in "${GENERATED_PATHS[@]}"; do
  if [[ -e "${path}" ]]; then
    mkdir -p "$(dirname "${SNAPSHOT}/${path}")"
    cp -a "${path}" "${SNAPSHOT}/${path}"
  fi
done
trap restore EXIT

"${ROOT}/hack/update-codegen.sh"

status=0
for path in "${GENERATED_PATHS[@]}"; do
  if ! diff -Naupr "${SNAPSHOT}/${path}" "${path}"; then
    status=1
  fi
done

if [[ ${status} -ne 0 ]]; then
  echo "Generated code is out of date: run hack/update-codegen.sh" >&2
  exit 1
fi
echo "Generated code is up to date."
