#!/usr/bin/env bash
# Runs multiproject-controller-manager against a throwaway local control plane (`make local-up`):
#
#   1. builds etcd, kube-apiserver, kube-controller-manager and kubectl if they are not cached yet;
#   2. starts the integration tests' control plane (test/integration/framework/cmd/controlplane): etcd,
#      kube-apiserver with RBAC, kube-controller-manager with the garbage collector and namespace controllers,
#      and applies manifests/crds, manifests/rbac, manifests/admission (the tenant-label admission policy, so the
#      local cluster refuses what a deployed one refuses) and the third-party CRDs in test/fixtures/crds (when
#      present);
#   3. builds and starts ./cmd/fake-gce (the fake Compute Engine API of pkg/gce/fakegce) on loopback, then
#      ./cmd/multiproject-controller-manager as the manifests' ServiceAccount kube-system/multiproject-controller-manager,
#      with a token from `kubectl create token` and --gce-endpoint pointing at the fake;
#   4. starts a second etcd + kube-apiserver as Rancher's management cluster (the Project CRD and
#      docs/examples/rancher-management/ applied there), makes a kubeconfig for the example's project reader with a
#      token from `kubectl create token`, and stores it in the Secret multiproject-gcp-credentials/rancher-management
#      of the first cluster, which tenant-b of docs/examples/namespace-project-remote-demo.yaml names;
#   5. applies the demo objects in docs/examples/;
#   6. prints what to look at, and runs until Ctrl-C (or SIGTERM), then stops every process it started.
#
# Environment:
#   LOCAL_UP_DIR            working directory (kubeconfigs, logs, binaries); default: a new temporary directory,
#                           removed on a clean stop and kept when something failed
#   LOCAL_UP_MANAGER_PORT   the manager's secure port on 127.0.0.1 (default 10270, as in manifests/deployment.yaml)
#   LOCAL_UP_MANAGER_ARGS   extra flags for the manager, e.g. "--controllers=neg --v=4"
#   LOCAL_UP_GCE_PORT       the fake GCE's port on 127.0.0.1 (default 8086)
#   LOCAL_UP_GCE_ARGS       extra flags for cmd/fake-gce, e.g. "--operation-delay=2s"
#   CONTROLPLANE_BIN_DIR    use control-plane binaries from this directory instead of hack/build-controlplane.sh
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"

# A failed write (the terminal or a pipe went away) must not stop the script before cleanup has stopped everything.
log() { printf '[local-up] %s\n' "$*" >&2 || true; }
fail() { log "FAILED: $*"; exit 1; }

manager_port=${LOCAL_UP_MANAGER_PORT:-10270}
gce_port=${LOCAL_UP_GCE_PORT:-8086}
gce_endpoint="http://127.0.0.1:${gce_port}/compute/v1/"
work_dir=${LOCAL_UP_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/multiproject-local-up.XXXXXX")}
mkdir -p "${work_dir}/bin" "${work_dir}/logs" "${work_dir}/tmp"
admin_kubeconfig="${work_dir}/admin.kubeconfig"
manager_kubeconfig="${work_dir}/manager.kubeconfig"
management_kubeconfig="${work_dir}/rancher-management-admin.kubeconfig"
reader_kubeconfig="${work_dir}/rancher-management.kubeconfig"
# A kubeconfig left by an earlier run in the same LOCAL_UP_DIR would look like "ready" below.
rm -f "${admin_kubeconfig}" "${manager_kubeconfig}" "${management_kubeconfig}" "${reader_kubeconfig}"

controlplane_pid=""
management_pid=""
manager_pid=""
fake_gce_pid=""

# shellcheck disable=SC2317 # stop_group and cleanup run from the EXIT trap
# stop_group PID NAME: SIGTERM to the process group PID leads (each component runs under setsid), then wait for
# it to exit; SIGKILL to the group if it is still there after 30 s (kube-apiserver drains for a few seconds).
stop_group() {
  local pid=$1 name=$2
  [[ -n "${pid}" ]] || return 0
  kill -TERM -- "-${pid}" 2>/dev/null || return 0
  log "stopping ${name} (process group ${pid})"
  local deadline=$((SECONDS + 30))
  while kill -0 "${pid}" 2>/dev/null && ((SECONDS < deadline)); do
    sleep 0.2
  done
  if kill -0 "${pid}" 2>/dev/null; then
    log "${name} did not stop within 30 s; killing its process group"
    kill -KILL -- "-${pid}" 2>/dev/null || true
  fi
  wait "${pid}" 2>/dev/null || true
}

# shellcheck disable=SC2317
cleanup() {
  local status=$?
  # Closing the terminal or the pipe that reads our output must not kill the cleanup half-way.
  trap '' PIPE HUP
  trap - EXIT INT TERM
  # The manager first, so it does not log errors about an API server that went away under it.
  stop_group "${manager_pid}" "multiproject-controller-manager"
  stop_group "${fake_gce_pid}" "fake-gce"
  stop_group "${controlplane_pid}" "the control plane"
  stop_group "${management_pid}" "the Rancher management cluster"
  if [[ "${status}" -eq 0 || "${status}" -eq 129 || "${status}" -eq 130 || "${status}" -eq 143 ]]; then
    if [[ -z "${LOCAL_UP_DIR:-}" ]]; then
      rm -rf "${work_dir}"
    fi
    log "stopped; nothing is left running"
  else
    log "stopped after a failure; logs kept in ${work_dir}/logs"
  fi
  exit "${status}"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# --- 0. tools a fresh machine may lack ----------------------------------------------------------------------------
for tool in curl flock; do
  command -v "${tool}" >/dev/null 2>&1 ||
    fail "${tool} is not installed; on Debian: apt-get install -y $([[ ${tool} == flock ]] && echo util-linux || echo "${tool}")"
done

# --- 1. binaries -----------------------------------------------------------------------------------------------
if [[ -z "${CONTROLPLANE_BIN_DIR:-}" ]]; then
  log "building the control plane if it is not cached yet (a cold build takes 10+ minutes on 2 cores)"
  CONTROLPLANE_BIN_DIR=$(hack/build-controlplane.sh | tail -n 1)
fi
export CONTROLPLANE_BIN_DIR
kubectl="${CONTROLPLANE_BIN_DIR}/kubectl"
[[ -x "${kubectl}" ]] || fail "no kubectl in ${CONTROLPLANE_BIN_DIR}; run hack/build-controlplane.sh"
go build -o "${work_dir}/bin/controlplane" ./test/integration/framework/cmd/controlplane

# --- 2. control plane ------------------------------------------------------------------------------------------
log "starting the control plane (logs: ${work_dir}/logs/controlplane.log)"
# setsid: a process group of its own, so cleanup can signal it as a whole and a Ctrl-C reaches only this script,
# which then stops everything in order. TMPDIR: the control plane's own files live inside work_dir.
controlplane_args=(--kubeconfig="${admin_kubeconfig}")
# Third-party CRDs (Rancher Project, Pangolin) that the demos of docs/examples/ may use.
if [[ -d test/fixtures/crds ]]; then
  controlplane_args+=(--apply=test/fixtures/crds)
fi
TMPDIR="${work_dir}/tmp" setsid "${work_dir}/bin/controlplane" "${controlplane_args[@]}" \
  >"${work_dir}/logs/controlplane.log" 2>&1 &
controlplane_pid=$!

# wait_for_kubeconfig FILE PID LOG WHAT: the runner writes its kubeconfig only once etcd, kube-apiserver (and
# kube-controller-manager) are ready and its manifests are applied.
wait_for_kubeconfig() {
  local file=$1 pid=$2 logfile=$3 what=$4
  while [[ ! -f "${file}" ]]; do
    if ! kill -0 "${pid}" 2>/dev/null; then
      tail -n 40 "${logfile}" >&2
      fail "${what} did not start; see above"
    fi
    sleep 0.2
  done
}
wait_for_kubeconfig "${admin_kubeconfig}" "${controlplane_pid}" "${work_dir}/logs/controlplane.log" "the control plane"
kubectl_admin=("${kubectl}" --kubeconfig="${admin_kubeconfig}")
log "control plane ready"

# --- 3. the fake GCE and the manager ---------------------------------------------------------------------------
log "building and starting ./cmd/fake-gce on ${gce_endpoint} (logs: ${work_dir}/logs/fake-gce.log)"
go build -o "${work_dir}/bin/fake-gce" ./cmd/fake-gce
# shellcheck disable=SC2086 # LOCAL_UP_GCE_ARGS is a list of flags
setsid "${work_dir}/bin/fake-gce" --listen="127.0.0.1:${gce_port}" ${LOCAL_UP_GCE_ARGS:-} \
  >"${work_dir}/logs/fake-gce.log" 2>&1 &
fake_gce_pid=$!
# Any project and zone exist in the fake; an empty list answers once it serves.
until curl -sf "${gce_endpoint}projects/local-up/zones/local-a/networkEndpointGroups" >/dev/null 2>&1; do
  if ! kill -0 "${fake_gce_pid}" 2>/dev/null; then
    tail -n 20 "${work_dir}/logs/fake-gce.log" >&2
    fail "fake-gce exited (is port ${gce_port} taken? set LOCAL_UP_GCE_PORT); see above"
  fi
  sleep 0.2
done

log "building ./cmd/multiproject-controller-manager"
if ! go build -o "${work_dir}/bin/multiproject-controller-manager" ./cmd/multiproject-controller-manager; then
  fail "./cmd/multiproject-controller-manager does not build (see the compiler output above)"
fi

if "${kubectl_admin[@]}" -n kube-system get serviceaccount multiproject-controller-manager >/dev/null 2>&1; then
  # The manager runs with exactly the permissions manifests/rbac gives its ServiceAccount, as in the Deployment.
  token=$("${kubectl_admin[@]}" -n kube-system create token multiproject-controller-manager --duration=24h)
  cp "${admin_kubeconfig}" "${manager_kubeconfig}"
  user=$("${kubectl}" --kubeconfig="${manager_kubeconfig}" config view -o jsonpath='{.contexts[0].context.user}')
  "${kubectl}" --kubeconfig="${manager_kubeconfig}" config set-credentials "${user}" --token="${token}" >/dev/null
  identity="ServiceAccount kube-system/multiproject-controller-manager"
else
  log "WARNING: manifests/rbac did not create ServiceAccount kube-system/multiproject-controller-manager;" \
    "running the manager as the admin, so RBAC is not exercised"
  cp "${admin_kubeconfig}" "${manager_kubeconfig}"
  identity="the admin (no manifests/rbac)"
fi

log "starting multiproject-controller-manager as ${identity} (logs: ${work_dir}/logs/manager.log)"
# shellcheck disable=SC2086 # LOCAL_UP_MANAGER_ARGS is a list of flags
setsid "${work_dir}/bin/multiproject-controller-manager" \
  --kubeconfig="${manager_kubeconfig}" \
  --leader-elect=true \
  --controllers='*' \
  --bind-address=127.0.0.1 \
  --secure-port="${manager_port}" \
  --gce-endpoint="${gce_endpoint}" \
  ${LOCAL_UP_MANAGER_ARGS:-} \
  >"${work_dir}/logs/manager.log" 2>&1 &
manager_pid=$!
# /healthz is served without authentication (like kube-controller-manager's); -k: the serving certificate is
# self-signed.
until curl -ksf "https://127.0.0.1:${manager_port}/healthz" >/dev/null 2>&1; do
  if ! kill -0 "${manager_pid}" 2>/dev/null; then
    tail -n 40 "${work_dir}/logs/manager.log" >&2
    fail "multiproject-controller-manager exited; see above"
  fi
  sleep 0.2
done
log "multiproject-controller-manager is healthy on https://127.0.0.1:${manager_port}/healthz"

# --- 4. Rancher's management cluster --------------------------------------------------------------------------
# A second API server holds the Rancher Projects of the downstream cluster c-abc12, as Rancher's management cluster
# does; the manager reads them with a kubeconfig Secret, as it would in a downstream cluster.
log "starting a second API server as Rancher's management cluster (logs: ${work_dir}/logs/rancher-management.log)"
mkdir -p "${work_dir}/rancher-management-crds"
cp test/fixtures/crds/management.cattle.io_projects.yaml "${work_dir}/rancher-management-crds/"
TMPDIR="${work_dir}/tmp" setsid "${work_dir}/bin/controlplane" --kubeconfig="${management_kubeconfig}" \
  --controller-manager=false --install-project-manifests=false --apply="${work_dir}/rancher-management-crds" \
  >"${work_dir}/logs/rancher-management.log" 2>&1 &
management_pid=$!
wait_for_kubeconfig "${management_kubeconfig}" "${management_pid}" "${work_dir}/logs/rancher-management.log" \
  "the Rancher management cluster"
kubectl_management=("${kubectl}" --kubeconfig="${management_kubeconfig}")
"${kubectl_management[@]}" apply --server-side -f docs/examples/rancher-management/ >/dev/null
# The project reader's kubeconfig, as docs/namespace-project.md makes it: the management cluster's server and CA
# inline, and a token of the example's ServiceAccount that may read the Projects of c-abc12 and nothing else.
reader_token=$("${kubectl_management[@]}" -n multiproject-downstream create token multiproject-c-abc12 --duration=24h)
cp "${management_kubeconfig}" "${reader_kubeconfig}"
reader_user=$("${kubectl}" --kubeconfig="${reader_kubeconfig}" config view -o jsonpath='{.contexts[0].context.user}')
"${kubectl}" --kubeconfig="${reader_kubeconfig}" config set-credentials "${reader_user}" --token="${reader_token}" >/dev/null
"${kubectl_admin[@]}" -n multiproject-gcp-credentials create secret generic rancher-management \
  --from-file=kubeconfig="${reader_kubeconfig}" >/dev/null
log "Rancher management cluster ready; its project reader's kubeconfig is in multiproject-gcp-credentials/rancher-management"

# --- 5. demo objects -------------------------------------------------------------------------------------------
if compgen -G "docs/examples/*.yaml" >/dev/null || compgen -G "docs/examples/*.yml" >/dev/null; then
  log "applying docs/examples/"
  "${kubectl_admin[@]}" apply --server-side -f docs/examples/
else
  log "docs/examples/ has no demo objects yet"
fi

# --- 6. what to look at ----------------------------------------------------------------------------------------
cat <<EOF_HELP

multiproject-controller-manager is running against a local control plane.

  export KUBECONFIG=${admin_kubeconfig}
  alias kubectl=${kubectl}

  kubectl get providerconfigs                       # the tenants; edit docs/examples/ to add one
  kubectl get namespace platform-app -o yaml        # tenant-b: assigned from a Project of the management cluster
  kubectl --kubeconfig=${management_kubeconfig} get projects -A   # Rancher's management cluster
  kubectl get providerconfigs -o yaml               # finalizer, status conditions per controller
  kubectl get translations -A                       # NEGs the neg controller declared
  kubectl get events -A --sort-by=.lastTimestamp    # what the controllers told users
  kubectl -n kube-system get lease multiproject-controller-manager   # the leader
  tail -f ${work_dir}/logs/manager.log              # the manager's log
  curl -k https://127.0.0.1:${manager_port}/healthz
  curl -s ${gce_endpoint}projects/tenant-a-project/aggregated/networkEndpointGroups   # NEGs in the fake GCE
  tail -f ${work_dir}/logs/fake-gce.log             # every GCE call the manager made

Control-plane logs: ${work_dir}/logs/controlplane.log and ${work_dir}/tmp/multiproject-controlplane-*/
Press Ctrl-C to stop everything.
EOF_HELP

# Returns when any of the processes exits on its own (then the EXIT trap stops the others) or when a signal arrives
# (then the INT/TERM trap runs).
wait -n "${controlplane_pid}" "${management_pid}" "${fake_gce_pid}" "${manager_pid}" || true
fail "a process exited on its own; see ${work_dir}/logs/"
