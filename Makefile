# lbfed — see README.md. Every target works on a fresh machine with only Go, gcc, git and apt.
SHELL := /bin/bash
GO ?= go
BIN ?= $(CURDIR)/bin
# Tools are built from the Go module proxy into a cache outside the repo.
LBFED_CACHE ?= $(HOME)/.cache/lbfed
TOOLBIN ?= $(LBFED_CACHE)/tools
CONTROLLER_GEN_VERSION ?= v0.20.1
STATICCHECK_VERSION ?= v0.8.2
CONTROLLER_GEN := $(TOOLBIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
STATICCHECK := $(TOOLBIN)/staticcheck-$(STATICCHECK_VERSION)
# helm is pinned in the scratch module hack/helm (not the root go.mod) and built from the Go module
# proxy (≈ 1-2 min on 2 cores: it shares the root module's build cache). Exported for the chart tests.
HELM_VERSION := $(shell sed -n 's|^[[:space:]]*helm.sh/helm/v[0-9]* \(v[^ ]*\).*|\1|p' hack/helm/go.mod)
HELM := $(TOOLBIN)/helm-$(HELM_VERSION)
export HELM

# Kubernetes, Karmada, etcd and kwok for `make up` and the integration tests: pinned in
# e2e/upstream/*/go.mod and built from the Go module proxy into $(LBFED_BIN_DIR), skipping what
# is already built for the pinned versions (cold ≈ 8-13 min on 2 cores, then ≈ 1 s).
LBFED_BIN_DIR ?= $(LBFED_CACHE)/bin
export LBFED_BIN_DIR
LOCALUP := $(BIN)/localup
LOCALUP_DIR ?= $(CURDIR)/.localup/run
KIND_VERSION ?= v0.31.0
KIND := $(TOOLBIN)/kind-$(KIND_VERSION)

.PHONY: all build test test-unit generate verify-generate lint fmt
.PHONY: localup tools up down up-kind down-kind test-e2e
.PHONY: docs helm-lint chart-crds chart-interpreter bench

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

## test: everything CI runs: unit + integration (real etcd/kube-apiserver) + e2e (Karmada and
## two members). Integration tests fail instead of skipping when binaries are missing.
test: verify-generate tools helm-lint
	LBFED_REQUIRE_INTEGRATION=1 $(MAKE) --no-print-directory test-unit test-e2e

test-unit:
	$(GO) test ./...

## test-e2e: the full-topology tests (build tag e2e): propagation proof, `up`/`down`, interpreter,
## the lbfed chart on Karmada.
test-e2e: tools $(HELM)
	$(GO) test -tags e2e -count=1 -timeout 60m ./e2e/ ./e2e/localup/cmd/localup/ ./e2e/interpreter/ ./e2e/federation/ ./e2e/standalone/ ./charts/propagation/

localup:
	$(GO) build -o $(LOCALUP) ./e2e/localup/cmd/localup

## tools: build the pinned upstream binaries that are missing.
tools: localup
	$(LOCALUP) build

## up: Karmada + members m1, m2 as local processes, lbfed CRDs installed; prints kubectl usage.
## PULL_MEMBERS=1 adds m3, joined in Pull mode by a karmada-agent.
PULL_MEMBERS ?= 0
up: tools $(HELM)
	$(LOCALUP) up --dir=$(LOCALUP_DIR) --pull-members=$(PULL_MEMBERS)

## down: stop everything `make up` started.
down: localup
	$(LOCALUP) down --dir=$(LOCALUP_DIR)

$(KIND):
	@mkdir -p $(TOOLBIN)
	GOBIN=$(TOOLBIN) $(GO) install sigs.k8s.io/kind@$(KIND_VERSION)
	mv $(TOOLBIN)/kind $@

## up-kind: the same topology on kind clusters, for users with Docker (not run in CI).
up-kind: tools $(KIND)
	KIND=$(KIND) KUBECTL=$$($(LOCALUP) bin kubectl) KARMADACTL=$$($(LOCALUP) bin karmadactl) kind-config/up-kind.sh

down-kind: $(KIND)
	for c in karmada-host m1 m2; do $(KIND) delete cluster --name lbfed-$$c; done
	rm -rf $(CURDIR)/.localup/kind

$(CONTROLLER_GEN):
	@mkdir -p $(TOOLBIN)
	GOBIN=$(TOOLBIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLBIN)/controller-gen $@

$(STATICCHECK):
	@mkdir -p $(TOOLBIN)
	GOBIN=$(TOOLBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLBIN)/staticcheck $@

## generate: deepcopy and CRDs from lbcf/api with controller-gen.
generate: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./lbcf/api/...
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./lbcf/api/... output:crd:artifacts:config=lbcf/api/crd
	$(MAKE) --no-print-directory chart-crds chart-interpreter

## verify-generate: fails when generated files are stale.
verify-generate: $(CONTROLLER_GEN)
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/verify-generate.sh

# Every benchmark once (BENCH narrows them, e.g. BENCH=Register5000Pods), then one table: each
# figure, its target (hack/benchtable/targets.go) and its ratio to the baseline of the same run.
# The full set takes about an hour on two cores (the 30,000- and 100,000-record runs dominate).
BENCH ?= .
bench:
	@mkdir -p bin
	set -o pipefail; $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 180m ./... 2>&1 | tee bin/bench.txt
	$(GO) run ./hack/benchtable < bin/bench.txt | tee bin/bench-table.txt

lint: $(STATICCHECK)
	$(GO) vet ./...
	$(STATICCHECK) ./...

fmt:
	gofmt -s -w $$(git ls-files '*.go')

## docs: docs/flags.md from every binary's -help (hack/flagsdoc; its test fails when stale).
docs:
	$(GO) run ./hack/flagsdoc -out docs/flags.md

$(HELM):
	@mkdir -p $(TOOLBIN)
	cd hack/helm && $(GO) build -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)" -o $@.tmp.$$PPID helm.sh/helm/v4/cmd/helm
	mv $@.tmp.$$PPID $@

## chart-crds: copy the generated CRDs into both charts (the chart tests fail when they differ).
chart-crds:
	cp lbcf/api/crd/lbcf.tkestack.io_*.yaml charts/lbcf/crds/
	cp lbcf/api/crd/lbcf.tkestack.io_*.yaml charts/lbfed/files/crds/

## chart-interpreter: copy the Lua ResourceInterpreterCustomizations into the lbfed chart (the
## chart tests fail when they differ).
chart-interpreter:
	cp interpreter/customizations.yaml charts/lbfed/files/interpreter/

## helm-lint: helm lint and helm template of both charts with every values file in <chart>/ci;
## the checks of what they render are the Go tests in charts/ (part of test-unit).
helm-lint: $(HELM)
	@set -e; for chart in charts/lbcf charts/lbfed; do \
	  for values in $$chart/ci/*.yaml; do \
	    echo "helm lint + template $$chart -f $$values"; \
	    $(HELM) lint --strict --quiet $$chart --namespace lbfed-test --values $$values; \
	    $(HELM) template lbfed-test $$chart --namespace lbfed-test --values $$values > /dev/null; \
	  done; \
	done
