#!/usr/bin/env bash
# Runs a set of benchmarks, one package at a time (-p 1: packages benchmarked in parallel would share the cores and
# distort each other's figures). Each benchmark records its row of docs/benchmarks.md into bench/results/<id>.json
# (test/benchresult, through BENCH_RESULTS_DIR), then renders the README's table and docs/benchmarks.md from them
# (as make update does); commit the three together. The output is kept in _output/bench-<set>.txt.
#
#   hack/bench.sh [quick]   the quick rows (make bench): ./pkg/..., namespaceproject, ingresstunnel, the neg rows
#                           but churn, tenant isolation and the readiness-gated rollout (TestNEGReadinessGate);
#                           about 20 minutes on a 2-core machine
#   hack/bench.sh churn     endpoint churn (make bench-churn): BenchmarkChurn, BenchmarkEndpointChurn and the
#                           end-to-end churn of test/e2e, which also runs the build of CHURN_TODAY_REF (default
#                           8e7cc33, where the throughput work started) as today's behaviour; up to 90 minutes
#   hack/bench.sh scale     1,000 tenants idle, restarted and cold-started (make bench-scale, test/integration/providerconfig)
#   hack/bench.sh sharded   sharded replicas against one (make bench-sharded, test/e2e BenchmarkShardedReplicas)
#
#   BENCH=RouteEvent hack/bench.sh      only the benchmarks (and tests) of the set matching the regexp
#   BENCHTIME=3x hack/bench.sh          passed to -benchtime (default 1s for ./pkg/..., 1x against the API
#                                       server)
#   BENCH_RUN_NOTE='...' hack/bench.sh  a sentence appended to every recorded row's notes, e.g. that the machine
#                                       was busy
#   BENCH_RESULTS_DIR=DIR               where the rows go (default bench/results of this clone)
#
# Benchmarks against the real control plane use the cached etcd and kube-apiserver (built on first use, like the
# integration tests). None runs with -race.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ROOT}"

set_name=${1:-quick}
export BENCH_RESULTS_DIR=${BENCH_RESULTS_DIR:-${ROOT}/bench/results}
out=_output/bench-${set_name}.txt
mkdir -p _output "${BENCH_RESULTS_DIR}"
: >"${out}"

# step TIMEOUT PACKAGE BENCH_REGEXP [TEST_REGEXP [GO TEST FLAGS...]]: benchmarks (and tests that record a row)
# of one package. With BENCH set, the step runs the benchmarks matching it instead, and its test only if the test's
# name matches too.
step() {
  local timeout=$1 pkg=$2 bench=$3 run=${4:-'^$'}
  shift 4 2>/dev/null || shift $#
  if [[ -n "${BENCH:-}" ]]; then
    bench=${BENCH}
    if [[ "${run}" != '^$' && ! "${run//[\^\$]/}" =~ ${BENCH} ]]; then
      run='^$'
    fi
  fi
  # Against the API server a benchmark is one iteration unless asked otherwise: several of them stop the timer around
  # all but what they time, so -benchtime 1s would make the testing package raise b.N without end.
  local tags=() benchtime=${BENCHTIME:-1s}
  if [[ "${pkg}" == ./test/* ]]; then
    tags=(-tags integration)
    benchtime=${BENCHTIME:-1x}
  fi
  echo "== ${pkg}: -bench '${bench}' -run '${run}' (timeout ${timeout})" | tee -a "${out}"
  go test "${tags[@]}" -p 1 -count=1 -run "${run}" -bench "${bench}" -benchtime "${benchtime}" -benchmem \
    -timeout "${timeout}" "$@" "${pkg}" 2>&1 | tee -a "${out}"
}

controlplane() {
  if [[ -z "${CONTROLPLANE_BIN_DIR:-}" ]]; then
    CONTROLPLANE_BIN_DIR=$(CONTROLPLANE_COMPONENTS="etcd kube-apiserver kube-controller-manager" hack/build-controlplane.sh | tail -n 1)
  fi
  export CONTROLPLANE_BIN_DIR
}

# build_at REF OUT builds the manager binary of commit REF into OUT, from a detached worktree of this clone.
build_at() {
  local ref=$1 out=$2 src
  src=$(mktemp -d "${TMPDIR:-/tmp}/multiproject-build-at.XXXXXX")
  git worktree add --quiet --detach "${src}/tree" "${ref}"
  (cd "${src}/tree" && go build -o "${out}" ./cmd/multiproject-controller-manager)
  local rc=$?
  git worktree remove --force "${src}/tree"
  rm -rf "${src}"
  return "${rc}"
}

# Every control plane a benchmark starts lives under run_dir, so that what a failed run leaves behind is found and
# stopped (as hack/test-integration.sh does).
run_dir=$(mktemp -d "${TMPDIR:-/tmp}/multiproject-bench.XXXXXX")
export TMPDIR="${run_dir}"
start=$(date +%s)
status=0
case "${set_name}" in
  quick)
    for pkg in $(go list ./pkg/...); do
      # Only packages with benchmarks; go test would otherwise build and start every package's test binary.
      grep -qs '^func Benchmark' "$(go list -f '{{.Dir}}' "${pkg}")"/*_test.go || continue
      step 10m "${pkg/#$(go list -m)/.}" . || status=$?
    done
    controlplane
    step 15m ./test/integration/namespaceproject . || status=$?
    step 10m ./test/integration/ingresstunnel . || status=$?
    step 20m ./test/integration/neg '^Benchmark(Convergence|NoisyNeighbour|EndpointChangeCost)$' || status=$?
    # TestNEGReadinessGate is the readiness-gated rollout's benchmark: it records its row when it passes.
    step 15m ./test/e2e '^BenchmarkHealthyTenantConvergence$' '^TestNEGReadinessGate$' || status=$?
    ;;
  churn)
    controlplane
    step 90m ./test/integration/neg '^Benchmark(Churn|EndpointChurn)$' || status=$?
    # The end-to-end churn also runs the build the throughput issue started from, as today's behaviour.
    export E2E_CHURN_TODAY_REF=${CHURN_TODAY_REF:-8e7cc33} E2E_CHURN_TODAY_BINARY="${run_dir}/today-manager"
    build_at "${E2E_CHURN_TODAY_REF}" "${E2E_CHURN_TODAY_BINARY}" || status=$?
    step 90m ./test/e2e 'Churn' || status=$?
    ;;
  scale)
    controlplane
    IDLE_TENANTS=${IDLE_TENANTS:-1000} step 120m ./test/integration/providerconfig . || status=$?
    ;;
  sharded)
    controlplane
    SHARD_BENCH_ROUNDS=${SHARD_BENCH_ROUNDS:-10} step 60m ./test/e2e '^BenchmarkShardedReplicas$' || status=$?
    ;;
  *)
    echo "unknown benchmark set ${set_name}: want quick, churn, scale or sharded" >&2
    exit 2
    ;;
esac
# Render what was recorded, so the README and docs/benchmarks.md never lag the results files they come from.
if [[ "${BENCH_RESULTS_DIR}" -ef "${ROOT}/bench/results" ]]; then
  go run ./hack/tools/benchtable || status=$?
fi
echo "== ${set_name}: $(($(date +%s) - start)) s; results in ${BENCH_RESULTS_DIR}, output in ${out}" | tee -a "${out}"
exit "$(finish_controlplane_run "${run_dir}" "${status}" bench)"
