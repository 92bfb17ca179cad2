#!/usr/bin/env bash
# Rewrites docs/security.md's table of the manager's RBAC from manifests/rbac (hack/verify-rbac-docs.sh checks it).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ROOT}"
go run ./hack/tools/rbacaudit -doc docs/security.md manifests/rbac
