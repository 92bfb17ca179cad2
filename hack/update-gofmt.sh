#!/usr/bin/env bash
# Rewrites every Go file with gofmt -s.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ROOT}"
go_files | xargs -r gofmt -s -w
