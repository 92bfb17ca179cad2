//go:build tools

// Package etcd pins the etcd release that the integration tests and hack/local-up.sh run. It is never imported;
// hack/build-controlplane.sh builds from it.
package etcd

import _ "go.etcd.io/etcd/server/v3/etcdmain"
