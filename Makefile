# multiproject-controller-manager. `make help` lists the targets.
SHELL := /usr/bin/env bash -o errexit -o pipefail -o nounset
.SHELLFLAGS := -c
MAKEFLAGS += --no-builtin-rules
.DEFAULT_GOAL := build

OUT_DIR ?= _output
BIN_DIR := $(OUT_DIR)/bin
GOFLAGS ?=
# The version stamped into the binary (hack/version.sh computes it from git and the chart's appVersion when these
# are empty; a release sets them, e.g. make build VERSION=v0.1.0).
VERSION ?=
GIT_COMMIT ?=
export VERSION GIT_COMMIT
# Extra flags for go test, e.g. make test-unit TESTFLAGS='-run TestFoo -v'.
TESTFLAGS ?=

.PHONY: help
help: ## Print this help.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  %-18s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build the binary into _output/bin.
	go build $(GOFLAGS) -trimpath -ldflags "$$(hack/version.sh)" -o $(BIN_DIR)/multiproject-controller-manager ./cmd/multiproject-controller-manager

.PHONY: test
test: test-unit test-integration test-packaging ## Run unit, integration and packaging tests (what CI runs).

.PHONY: test-unit
test-unit: ## Unit tests with -race, in the root module and every staging module.
	hack/test-unit.sh $(TESTFLAGS)

.PHONY: test-integration
test-integration: ## Integration tests against a real etcd and kube-apiserver (built and cached on first use).
	hack/test-integration.sh $(TESTFLAGS)

# Packaging: the kustomize base, the Helm chart and the monitoring rules, in test/packaging (a module of its own, so
# that Helm, kustomize and Prometheus stay out of go.mod).
.PHONY: test-packaging
test-packaging: ## Kustomize base, Helm chart, Prometheus rules and dashboard; dry run on a real kube-apiserver.
	hack/test-packaging.sh $(TESTFLAGS)

.PHONY: verify
verify: ## gofmt, go vet, license headers, import layering, generated code up to date.
	hack/verify-all.sh

.PHONY: update
update: ## Regenerate generated code, add missing license headers and reformat.
	hack/update-boilerplate.sh
	hack/update-gofmt.sh
	hack/update-codegen.sh

.PHONY: bench
bench: ## Benchmarks; each prints its ratio against a baseline run in the same process.
	hack/bench.sh

.PHONY: local-up
local-up: ## Run a local control plane with the manager and demo objects; Ctrl-C stops everything.
	hack/local-up.sh

.PHONY: clean
clean: ## Remove build output (the control-plane cache outside the clone is kept).
	rm -rf $(OUT_DIR)
