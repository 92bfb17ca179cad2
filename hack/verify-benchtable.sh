#!/usr/bin/env bash
# Fails if the README's benchmark table or docs/benchmarks.md differ from what bench/results/*.json render to: the
# figures are written once, by the benchmark that measured them, and the docs are generated from there
# (hack/update-benchtable.sh, make update, rewrites both).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ROOT}"
go run ./hack/tools/benchtable -verify
