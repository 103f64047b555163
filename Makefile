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

.PHONY: all build test test-unit generate verify-generate lint fmt

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

## test: everything CI runs (unit + integration against real kube-apiserver/etcd + e2e once available).
test: verify-generate test-unit

test-unit:
	$(GO) test ./...

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

## verify-generate: fails when generated files are stale.
verify-generate: $(CONTROLLER_GEN)
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/verify-generate.sh

lint: $(STATICCHECK)
	$(GO) vet ./...
	$(STATICCHECK) ./...

fmt:
	gofmt -s -w $$(git ls-files '*.go')
