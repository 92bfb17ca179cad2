//go:build tools

// Package codegen pins the code generators that hack/update-codegen.sh runs: k8s.io/code-generator (its
// kube_codegen.sh and the deepcopy, client, lister, informer and apply-configuration generators) and
// sigs.k8s.io/controller-tools' controller-gen for the CRD schemas. It is never imported; the script builds the
// generators from this module so that every clone generates with exactly these versions.
package codegen

import (
	_ "k8s.io/code-generator"
	_ "k8s.io/code-generator/cmd/applyconfiguration-gen"
	_ "k8s.io/code-generator/cmd/client-gen"
	_ "k8s.io/code-generator/cmd/deepcopy-gen"
	_ "k8s.io/code-generator/cmd/informer-gen"
	_ "k8s.io/code-generator/cmd/lister-gen"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
