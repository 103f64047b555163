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
.PHONY: localup tools up down up-kind down-kind test-kind test-e2e
.PHONY: docs helm-lint chart-crds chart-interpreter bench fuzz soak
.PHONY: kind-host-up kind-host-down kind-tools kind-images kind-up kind-down kind-load kind-verify images

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
	$(GO) test -tags e2e -count=1 -timeout 60m ./e2e/ ./testinfra/localup/cmd/localup/ ./e2e/interpreter/ ./e2e/federation/ ./e2e/standalone/ ./charts/propagation/

localup:
	$(GO) build -o $(LOCALUP) ./testinfra/localup/cmd/localup

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

## up-kind: what `make up` shows, on real kubelets: Karmada on kind (kind-up), lbfed's images
## loaded, lbfed installed with Helm as charts/lbfed/README.md tells, the Radware elb-driver
## (charts/lbcf) and the simulated Alteon pair in pods, the demo in m1 and m2 on one VIP.
## Built offline (docs/kind-offline.md); needs root (Docker, routes).
up-kind: kind-up kind-load $(HELM)
	KIND=$(KIND) HELM=$(HELM) hack/kind/lbfed-up.sh

## test-kind: the end-to-end suite on Karmada on kind (build tag kind, e2e/kind): brings up-kind
## up, checks traffic from both members, a helm upgrade under load, helm test, and an uninstall
## that leaves nothing behind (it consumes the installation: make down-kind after it).
test-kind: up-kind
	HELM=$(HELM) $(GO) test -tags kind -count=1 -timeout 30m -v ./e2e/kind/

## down-kind: removes everything up-kind made (clusters, the kind network, the VIP route,
## dockerd and its iptables rules); caches stay.
down-kind:
	hack/kind/lbfed-down.sh
	$(MAKE) --no-print-directory kind-down

## Offline kind topology (docs/kind-offline.md): everything built from the Go module proxy and
## Debian's packages, nothing pulled from a registry. Needs root.
## kind-host-up: Docker engine (with the capability-stripping runtime), inotify limits.
kind-host-up:
	hack/kind/host-up.sh

## kind-host-down: stops what kind-host-up started, restores what it changed.
kind-host-down:
	hack/kind/host-down.sh

## kind-tools: the kind node's binaries (localup build --set=kind) and kind itself. After
## kind-host-up, which installs what runc's cgo build needs (libseccomp-dev, pkg-config).
kind-tools: kind-host-up localup $(KIND)
	$(LOCALUP) build --set=kind

## kind-images: the node image lbfed/kind-node:v1.35.3, its preloaded images, Karmada's images.
kind-images: kind-tools kind-host-up
	KIND=$(KIND) hack/kind/images.sh

## kind-up: clusters lbfed-karmada-host, lbfed-m1, lbfed-m2, Karmada, m1 and m2 joined.
kind-up: kind-images
	KIND=$(KIND) hack/kind/cluster-up.sh

## kind-down: deletes the clusters and the kind network, then kind-host-down.
kind-down:
	KIND=$(KIND) hack/kind/cluster-down.sh
	hack/kind/host-down.sh

## images: lbfed's images (ghcr.io/lbfed/<binary>:<appVersion>), kubectl's, the demo responder.
images: kind-host-up tools
	hack/kind/app-images.sh

## kind-load: images into every cluster of the kind topology.
kind-load: images
	KIND=$(KIND) hack/kind/load-images.sh

## kind-verify: a responder in m1 and m2 answers a pod in lbfed-karmada-host; m1, m2 Ready;
## no pod restarting.
kind-verify: images
	KIND=$(KIND) hack/kind/verify.sh

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

## soak: issue 46's chaos soak (build tag soak, e2e/soak, docs/soak.md): the local topology with
## lbfed as `make up` installs it (two lbfed-controller replicas), load through every VIP, a
## changing workload and DURATION of fault episodes drawn from SEED (printed; empty: the clock's).
## Figures at the end and in bin/soak-report.json; any violation fails it. CI: DURATION=3m SEED=1.
DURATION ?= 30m
SEED ?=
SOAK_TIMEOUT ?= 3h
soak: tools $(HELM)
	@mkdir -p bin
	SOAK_DURATION=$(DURATION) SOAK_SEED=$(SEED) SOAK_REPORT=$(CURDIR)/bin/soak-report.json LBFED_REQUIRE_INTEGRATION=1 \
	  $(GO) test -tags soak -count=1 -timeout $(SOAK_TIMEOUT) -run '^TestSoak$$' -v ./e2e/soak/

## fuzz: every fuzz target for FUZZTIME each (default 10s; crashers become testdata regressions).
FUZZTIME ?= 10s
fuzz:
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

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
