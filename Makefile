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

# A release (docs/release.md): binaries for linux/amd64 and linux/arm64, the multi-architecture OCI image built without
# a container engine, the packaged chart, the rendered manifests, the release notes and SHA256SUMS, into
# $(OUT_DIR)/release/$(VERSION). hack/release.sh refuses a missing or malformed VERSION.
.PHONY: release
release: ## Build a release into _output/release/VERSION (VERSION=vX.Y.Z required; docs/release.md).
	RELEASE_OUT_DIR="$${RELEASE_OUT_DIR:-$(OUT_DIR)/release/$(VERSION)}" hack/release.sh

# The integration and packaging tests run side by side: the integration tests wait on API servers and leases for much
# of their time, which the packaging module's compile (Helm, kustomize, Prometheus) fills. Each one's output is
# printed in one piece when it ends.
.PHONY: test
test: test-unit ## Run unit, integration and packaging tests (what CI runs).
	$(MAKE) --no-print-directory --jobs=2 --output-sync=target test-integration test-packaging

.PHONY: test-unit
test-unit: ## Unit tests with -race, in the root module and every staging module.
	hack/timed.sh test-unit hack/test-unit.sh $(TESTFLAGS)

.PHONY: test-integration
test-integration: ## Integration tests against a real etcd and kube-apiserver (built and cached on first use).
	hack/timed.sh test-integration hack/test-integration.sh $(TESTFLAGS)

# Packaging: the kustomize base, the Helm chart and the monitoring rules, in test/packaging (a module of its own, so
# that Helm, kustomize and Prometheus stay out of go.mod).
.PHONY: test-packaging
test-packaging: ## Kustomize base, Helm chart, Prometheus rules and dashboard; dry run on a real kube-apiserver.
	hack/timed.sh test-packaging hack/test-packaging.sh $(TESTFLAGS)

.PHONY: verify
verify: ## gofmt, go vet, license headers, import layering, generated code and the benchmark table up to date.
	hack/timed.sh verify hack/verify-all.sh

.PHONY: update
update: ## Regenerate generated code and the benchmark table, add missing license headers and reformat.
	hack/update-boilerplate.sh
	hack/update-gofmt.sh
	hack/update-codegen.sh
	hack/update-benchtable.sh

# Benchmarks write their rows into bench/results (BENCH_RESULTS_DIR); make update then renders the README's table
# and docs/benchmarks.md from them. BENCH=regexp runs only the matching ones of a set.
.PHONY: bench
bench: ## The quick benchmarks (about 20 minutes); each records its row, ratio against a baseline in the same run.
	hack/bench.sh quick

.PHONY: bench-churn
bench-churn: ## Endpoint churn at scale, in process and end to end (up to 90 minutes).
	hack/bench.sh churn

.PHONY: bench-scale
bench-scale: ## 1,000 tenants: idle cost, restart at scale, cold start (IDLE_TENANTS overrides the count).
	hack/bench.sh scale

.PHONY: bench-sharded
bench-sharded: ## Sharded replicas against one, the built binary (SHARD_BENCH_ROUNDS, default 10).
	hack/bench.sh sharded

.PHONY: local-up
local-up: ## Run a local control plane with the manager and demo objects; Ctrl-C stops everything.
	hack/local-up.sh

.PHONY: clean
clean: ## Remove build output (the control-plane cache outside the clone is kept).
	rm -rf $(OUT_DIR)
