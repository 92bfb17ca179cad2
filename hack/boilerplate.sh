# Shared by verify-boilerplate.sh and update-boilerplate.sh; source it after lib.sh.
# shellcheck shell=bash

# files_missing_boilerplate prints the Go files that do not start with hack/boilerplate.go.txt, after any build
# constraint lines, as Kubernetes lays them out.
files_missing_boilerplate() {
  # One awk over every file: a few processes per file cost minutes on a loaded machine.
  (cd "${ROOT}" && go_files | tr '\n' '\0' | xargs -0 -r awk -v header="${ROOT}/hack/boilerplate.go.txt" '
    function finish() { if (file != "" && (bad || seen < n)) print file }
    BEGIN { while ((getline line < header) > 0) want[++n] = line }
    FNR == 1 { finish(); file = FILENAME; bad = 0; seen = 0; constraint = 0 }
    constraint { if ($0 == "") constraint = 0; next }
    /^\/\/go:build / { constraint = 1; next }
    seen < n { seen++; if ($0 != want[seen]) bad = 1 }
    END { finish() }')
}
