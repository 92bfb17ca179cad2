#!/usr/bin/env bash
# Runs the integration tests (build tag `integration`) against a real etcd, kube-apiserver and
# kube-controller-manager, which test/integration/framework starts once per test package.
#
#   hack/test-integration.sh                     all of ./test/integration/... and ./test/e2e/...
#   hack/test-integration.sh -run TestX -v       extra arguments go to `go test`
#   WHAT=./test/integration/controlplane hack/test-integration.sh
#   CONTROLPLANE_BIN_DIR=DIR hack/...            use binaries from DIR instead of hack/build-controlplane.sh
#
# The first run builds the control plane from the Go module proxy (10+ minutes on 2 cores) and caches it outside
# the clone; later runs reuse the cache. After the tests it checks that no process of the run is left behind.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib.sh
source "${ROOT}/hack/lib.sh"
cd "${ROOT}"

log() { printf '[test-integration] %s\n' "$*" >&2; }

if [[ -z "${CONTROLPLANE_BIN_DIR:-}" ]]; then
  log "building the control plane if it is not cached yet"
  build_start=${SECONDS}
  CONTROLPLANE_BIN_DIR=$(CONTROLPLANE_COMPONENTS="etcd kube-apiserver kube-controller-manager" \
    hack/build-controlplane.sh | tail -n 1)
  log "control plane ready after $((SECONDS - build_start)) s"
fi
export CONTROLPLANE_BIN_DIR
log "control-plane binaries: ${CONTROLPLANE_BIN_DIR}"

# Every control plane of this run puts its directory under run_dir (the framework uses os.MkdirTemp), and each
# component's command line names that directory, so the leak check below finds exactly this run's processes and
# never another run's or hack/local-up.sh's.
run_dir=$(mktemp -d "${TMPDIR:-/tmp}/multiproject-test-integration.XXXXXX")

status=0
# -count=1: a run against a real control plane is never answered from Go's test cache.
# shellcheck disable=SC2086 # WHAT may list several packages
TMPDIR="${run_dir}" go_test test-integration -race -count=1 -tags integration -timeout 30m ${WHAT:-./test/integration/... ./test/e2e/...} "$@" || status=$?

exit "$(finish_controlplane_run "${run_dir}" "${status}" test-integration)"
