# Shared helpers for hack/ scripts; source it.
# shellcheck shell=bash
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export ROOT

# go_modules prints the directories of the root module and of every staging module.
go_modules() {
  echo "${ROOT}"
  find "${ROOT}/staging" -name go.mod -not -path '*/vendor/*' -printf '%h\n' 2>/dev/null | sort
}

# go_files prints tracked and untracked (not ignored) Go files, except generated tool modules' caches.
go_files() {
  (cd "${ROOT}" && git ls-files --cached --others --exclude-standard -- '*.go' | grep -v -e '^vendor/' -e '/testdata/')
}
