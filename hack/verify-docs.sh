#!/usr/bin/env bash
# Fails if README.md or a page of docs/ names, in backticks, a path of this repository that does not exist: the
# docs say where the code is (docs/architecture.md draws every package), and a file moved without its docs breaks
# that promise. A Go identifier after a package path (`pkg/gce/client.Classify`) counts as its package; a path in
# another repository is written as `owner/repo: path` and skipped, as are patterns (`{a,b}`, `<tenant>`, `...`, `*`).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ROOT}"
missing=()
for doc in README.md docs/*.md; do
  while IFS= read -r quoted; do
    [[ "${quoted}" == *': '* ]] && continue
    for word in ${quoted}; do
      [[ "${word}" =~ ^(\./)?(cmd|pkg|test|hack|manifests|charts|overlays|staging|docs)/ ]] || continue
      path=${word%%[,:;\)\(]*}
      path=${path%%#*}
      path=${path%.}
      [[ "${path}" == *[\{\<\*]* || "${path}" == *...* ]] && continue
      [[ -e "${path}" ]] && continue
      # pkg/gce/client.Classify: an identifier of the package pkg/gce/client.
      if [[ "${path##*/}" =~ ^[^.]+\.[A-Za-z_][A-Za-z0-9_]*$ && -d "${path%.*}" ]]; then
        continue
      fi
      missing+=("${doc}: ${path}")
    done
  done < <(grep -o '`[^`]*`' "${doc}" | tr -d '`')
done
if ((${#missing[@]})); then
  printf 'names a path that does not exist: %s\n' "${missing[@]}" >&2
  exit 1
fi
