# marshal — build, test and run.

GO      ?= go
BIN     ?= bin
PKGS    ?= ./...
BENCH   ?= .
COUNT   ?= 1
FUZZTIME ?= 30s

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build marshald and marshalctl into bin/
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: fmt-check
fmt-check: ## fail when a Go file is not gofmt-formatted
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet: ## go vet
	$(GO) vet $(PKGS)

.PHONY: test
test: fmt-check vet ## gofmt check, go vet, and every test with -race
	$(GO) test -race -count=$(COUNT) $(PKGS)

.PHONY: bench
bench: ## run the benchmarks (BENCH=regexp PKGS=./path/...)
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count=$(COUNT) $(PKGS)

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME
	$(GO) test -run '^$$' -fuzz FuzzLoadBytes -fuzztime $(FUZZTIME) ./api/loader
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./internal/scope

.PHONY: generate
generate: ## regenerate the manifest reference (api/v1alpha1/reference.md, README)
	$(GO) test ./api/v1alpha1 -run TestReference -update

.PHONY: run
run: build ## validate the example manifests in manifests/
	$(BIN)/marshalctl validate manifests/

.PHONY: clean
clean: ## remove build output
	rm -rf $(BIN)
