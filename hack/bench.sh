#!/usr/bin/env bash
# Runs every benchmark. Each one reports its own ratio against a baseline measured in the same process, so the
# numbers are comparable on a noisy machine; none is asserted. The output is kept in _output/bench.txt.
#
#   hack/bench.sh                       unit-level benchmarks (./pkg/...), then those against the real control plane
#                                       (./test/integration/... and ./test/e2e/...)
#   BENCH=RouteEvent hack/bench.sh      only benchmarks matching the regexp
#   BENCH=NoisyNeighbour hack/bench.sh  one tenant flooded with work beside a quiet one, with and without per-tenant
#                                       API shares (test/integration/neg, about 3 minutes)
#   BENCHTIME=3x hack/bench.sh          passed to -benchtime
#
# Integration benchmarks run against the real control plane (built and cached on first use, like the tests).
set -o errexit -o nounset -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"

bench=${BENCH:-.}
benchtime=${BENCHTIME:-1s}
out=_output/bench.txt
mkdir -p _output
: >"${out}"

echo "== unit-level benchmarks" | tee -a "${out}"
go test -run '^$' -bench "${bench}" -benchtime "${benchtime}" -benchmem ./pkg/... 2>&1 | tee -a "${out}"

if [[ -z "${CONTROLPLANE_BIN_DIR:-}" ]]; then
  CONTROLPLANE_BIN_DIR=$(CONTROLPLANE_COMPONENTS="etcd kube-apiserver kube-controller-manager" hack/build-controlplane.sh | tail -n 1)
fi
export CONTROLPLANE_BIN_DIR
echo "== integration benchmarks (real etcd + kube-apiserver)" | tee -a "${out}"
go test -tags integration -run '^$' -bench "${bench}" -benchtime "${benchtime}" -benchmem -timeout 60m ./test/integration/... ./test/e2e/... 2>&1 | tee -a "${out}"
echo "results: ${out}"
