#!/usr/bin/env bash
# Fails if a package imports against the layering docs/architecture.md describes: no controller imports a sibling
# controller, the runtime and tenancy packages import no controller, the worker runtime (pkg/worker) imports nothing
# of the product but pkg/metrics, and nothing under pkg/ imports cmd/.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ROOT}"
module=$(go list -m)
controllers=(neg namespaceproject ingresstunnel)
bad=()
while read -r pkg imports; do
  pkg=${pkg#"${module}/"}
  for imp in ${imports}; do
    [[ "${imp}" == "${module}/"* ]] || continue
    imp=${imp#"${module}/"}
    if [[ "${pkg}" == pkg/worker* && "${imp}" != pkg/metrics* && "${imp}" != pkg/worker* ]]; then
      bad+=("${pkg} imports ${imp}: the worker runtime is the lowest layer (pkg/metrics aside)")
    fi
    if [[ "${pkg}" == pkg/* && "${imp}" == cmd/* ]]; then
      bad+=("${pkg} imports ${imp}: pkg/ must not depend on the command")
    fi
    for c in "${controllers[@]}"; do
      [[ "${imp}" == "pkg/controller/${c}" || "${imp}" == "pkg/controller/${c}/"* ]] || continue
      case "${pkg}" in
        pkg/controller/"${c}" | pkg/controller/"${c}"/*) ;;
        pkg/*) bad+=("${pkg} imports ${imp}: only cmd/ may know a controller") ;;
      esac
    done
  done
done < <(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./pkg/... ./cmd/...)
if ((${#bad[@]})); then
  printf '%s\n' "${bad[@]}" >&2
  exit 1
fi
