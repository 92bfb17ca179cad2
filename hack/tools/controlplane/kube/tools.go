//go:build tools

// Package kube pins the Kubernetes release whose kube-apiserver, kube-controller-manager and kubectl the
// integration tests and hack/local-up.sh run. It is never imported; hack/build-controlplane.sh builds from it.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
