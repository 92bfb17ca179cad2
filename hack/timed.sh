#!/usr/bin/env bash
# hack/timed.sh NAME COMMAND [ARG...] runs COMMAND and prints, when it ends (passed or failed), how long it took, so
# that a CI log shows each phase's time at its end (make verify, and each of make test's parts). Exits as COMMAND.
set -o nounset -o pipefail
name=$1
shift
start=${SECONDS}
status=0
"$@" || status=$?
elapsed=$((SECONDS - start))
printf '[time] %s: %dm%02ds (exit %d)\n' "${name}" $((elapsed / 60)) $((elapsed % 60)) "${status}" >&2
exit "${status}"
