#!/usr/bin/env bash
# hack/timed.sh NAME COMMAND [ARG...] runs COMMAND and prints, when it ends (passed or failed), how long it took, so
# that a CI log shows each phase's time at its end (make verify, and each of make test's parts). Exits as COMMAND.
# Beside the wall time it prints the CPU time COMMAND and everything it waited for used (user + system): on a
# shared or a bigger machine the wall time moves, the CPU time says what a phase costs.
set -o nounset -o pipefail
name=$1
shift
start=${SECONDS}
status=0
"$@" || status=$?
elapsed=$((SECONDS - start))
# `times` prints the shell's own times, then its children's ("XmY.YYYs XmY.YYYs": user, system). It runs in this
# shell, into a file: in a pipe or $(...) it would run in a subshell, which has no children.
times_file=$(mktemp)
times >"${times_file}"
cpu=$(tail -n 1 "${times_file}" | awk '{
  n = split($0, f, " "); total = 0
  for (i = 1; i <= n; i++) { split(f[i], p, "m"); sub("s", "", p[2]); total += p[1] * 60 + p[2] }
  printf "%dm%02ds", total / 60, total % 60 }')
rm -f "${times_file}"
printf '[time] %s: %dm%02ds (cpu %s, exit %d)\n' "${name}" $((elapsed / 60)) $((elapsed % 60)) "${cpu}" "${status}" >&2
exit "${status}"
