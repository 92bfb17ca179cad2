#!/usr/bin/env bash
# Fails if a hand-written Go file under pkg/ or cmd/ is over 500 lines, or a function over 80 (unless its doc comment
# says why it reads better whole): the bar that keeps each file one room and each function one step.
#   hack/verify-sizes.sh -top 10     also lists the largest files and the longest functions
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ROOT}"
go run ./hack/tools/sizes "$@" pkg cmd
