#!/usr/bin/env bash
# Runs the packaging tests of test/packaging, a Go module of its own so that Helm, kustomize and Prometheus stay
# out of the product's go.mod: the kustomize base (manifests/kustomization.yaml) installs what README.md applies,
# the Helm chart (charts/multiproject-controller-manager) renders the same objects and its values render as
# documented, both pass a server-side dry run on a real kube-apiserver, and the monitoring rules and dashboard
# (manifests/monitoring) parse and use only metrics the manager exports.
#
#   hack/test-packaging.sh                  vet, then every test, with a control plane
#   hack/test-packaging.sh -run TestChart -v   extra arguments go to `go test`
#   CONTROLPLANE_BIN_DIR=DIR hack/...       use binaries from DIR instead of hack/build-controlplane.sh
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib.sh
source "${ROOT}/hack/lib.sh"
cd "${ROOT}/test/packaging"

log() { printf '[test-packaging] %s\n' "$*" >&2; }

# Everything here is built as hack/release.sh builds the product (static, -trimpath), which the release test runs
# and test/e2e's manager build shares: on a cold machine the dependencies this module shares with the product
# (client-go, apimachinery) compile once for all of them.
export CGO_ENABLED=0
# hack/verify-govet.sh covers the root and staging modules only; this module is vetted here. Vet comes first: it
# compiles Helm, kustomize and Prometheus (most of this script's CPU on a cold machine) and needs no control plane,
# so under make test it runs while test-integration builds that control plane, whose build this script then waits for.
log "go vet"
go vet -trimpath -tags integration ./...

if [[ -z "${CONTROLPLANE_BIN_DIR:-}" ]]; then
  log "building the control plane if it is not cached yet"
  CONTROLPLANE_BIN_DIR=$(CONTROLPLANE_COMPONENTS="etcd kube-apiserver" "${ROOT}/hack/build-controlplane.sh" | tail -n 1)
fi
export CONTROLPLANE_BIN_DIR

# As in hack/test-integration.sh: the control plane puts its directory under run_dir, whose path is on every
# component's command line, so the check below finds exactly this run's processes.
run_dir=$(mktemp -d "${TMPDIR:-/tmp}/multiproject-test-packaging.XXXXXX")
status=0
# No -race: these tests render and parse on one goroutine, and without it the test build reuses what go vet just
# compiled instead of compiling Helm, kustomize and Prometheus a second time.
TMPDIR="${run_dir}" go_test test-packaging -trimpath -count=1 -tags integration -timeout 15m ./... "$@" || status=$?

exit "$(finish_controlplane_run "${run_dir}" "${status}" test-packaging)"
