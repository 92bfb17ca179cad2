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

# finish_controlplane_run RUN_DIR STATUS LOG_PREFIX kills (and reports) every process a test run left behind under
# RUN_DIR (each control plane names its directory on its components' command lines, so exactly this run's), keeps
# RUN_DIR's control-plane logs when the run failed and removes it otherwise, and prints the run's final status:
# STATUS, or 1 when something outlived the tests.
finish_controlplane_run() {
  local run_dir=$1 status=$2 prefix=$3 leftover pid
  leftover=$(pgrep -f -- "${run_dir}" || true)
  if [[ -n "${leftover}" ]]; then
    printf '[%s] FAIL: control-plane processes outlived the tests:\n' "${prefix}" >&2
    # shellcheck disable=SC2086 # one pid per word
    ps -o pid=,args= -p ${leftover} >&2 || true
    for pid in ${leftover}; do
      # The framework starts each component as the leader of its own process group; kill the group so that whatever
      # it spawned goes too, but never a group that the process merely belongs to.
      if [[ "$(ps -o pgid= -p "${pid}" | tr -d ' ')" == "${pid}" ]]; then
        kill -KILL -- "-${pid}" 2>/dev/null || true
      else
        kill -KILL "${pid}" 2>/dev/null || true
      fi
    done
    status=1
  fi
  if [[ "${status}" -ne 0 ]] && compgen -G "${run_dir}/multiproject-controlplane-*" >/dev/null; then
    printf '[%s] kept the control-plane logs of the failed packages: %s\n' "${prefix}" "$(echo "${run_dir}"/multiproject-controlplane-*)" >&2
  else
    rm -rf "${run_dir}"
  fi
  echo "${status}"
}

# go_test LABEL ARG... runs `go test ARG...` in the current directory. A plain run goes through gotestsum (pinned in
# hack/tools/gotestsum), whose output reads as go test's own, and then prints the run's tests that took
# SLOW_TEST_THRESHOLD (default 20s) or more, so that a CI log says which tests its time went to. A run that asks for
# -v, -json or a benchmark calls go test directly, keeping the output those callers read.
go_test() {
  local label=$1 arg json slowest status=0
  shift
  for arg in "$@"; do
    case "${arg}" in
      -v | -v=* | -test.v* | -json | -bench* | -test.bench*) go test "$@"; return ;;
    esac
  done
  json=$(mktemp)
  go tool -modfile="${ROOT}/hack/tools/gotestsum/go.mod" gotestsum --format standard-quiet --jsonfile "${json}" \
    -- "$@" || status=$?
  slowest=$(go tool -modfile="${ROOT}/hack/tools/gotestsum/go.mod" gotestsum tool slowest --jsonfile "${json}" \
    --threshold "${SLOW_TEST_THRESHOLD:-20s}" || true)
  if [[ -n "${slowest}" ]]; then
    printf '[%s] tests that took %s or more:\n%s\n' "${label}" "${SLOW_TEST_THRESHOLD:-20s}" "${slowest}" >&2
  fi
  rm -f "${json}"
  return "${status}"
}
