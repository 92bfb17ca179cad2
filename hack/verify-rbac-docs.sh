#!/usr/bin/env bash
# Fails if docs/security.md's table of the manager's RBAC differs from manifests/rbac: the table is generated from
# the manifests (every rule bound to the ServiceAccount, with its comment), so the docs cannot claim a grant the
# manifests do not hold or miss one they do. hack/update-rbac-docs.sh rewrites it.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${ROOT}"
go run ./hack/tools/rbacaudit -doc docs/security.md -verify manifests/rbac
