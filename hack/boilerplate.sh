# Shared by verify-boilerplate.sh and update-boilerplate.sh; source it after lib.sh.
# shellcheck shell=bash

# has_boilerplate FILE succeeds when FILE carries hack/boilerplate.go.txt, after any build constraint lines, as
# Kubernetes lays them out.
has_boilerplate() {
  local file=$1 header_lines body
  header_lines=$(wc -l <"${ROOT}/hack/boilerplate.go.txt")
  body=$(sed '/^\/\/go:build /,/^$/d' "${file}" | head -n "${header_lines}")
  [[ "${body}" == "$(cat "${ROOT}/hack/boilerplate.go.txt")" ]]
}

# files_missing_boilerplate prints every Go file without the license header.
files_missing_boilerplate() {
  local file
  while read -r file; do
    has_boilerplate "${ROOT}/${file}" || echo "${file}"
  done < <(go_files)
}
