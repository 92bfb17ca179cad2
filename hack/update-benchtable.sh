#!/usr/bin/env bash
# Renders the README's benchmark table and docs/benchmarks.md from bench/results/*.json (after make bench*).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ROOT}"
go run ./hack/tools/benchtable
