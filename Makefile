# marshal — build, test and run.

GO      ?= go
BIN     ?= bin
STATE   ?= .marshal
PKGS    ?= ./...
BENCH   ?= .
BENCHTIME ?= 1s
COUNT   ?= 1
TESTFLAGS ?=
# A package's whole suite under -race on a busy two-CPU machine (the
# admission journal's crash and recovery tests among them) can pass go
# test's default ten minutes; a hang still ends, with every goroutine's
# stack, well inside CI's time.
TESTTIMEOUT ?= 30m
FUZZTIME ?= 30s

# The user make test-unprivileged runs as.
UNPRIVILEGED_USER ?= nobody

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/marshal-dev/marshal/internal/version.Version=$(VERSION) -X github.com/marshal-dev/marshal/internal/version.Commit=$(COMMIT)

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  %-17s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
# marshal-confine starts in C, before the Go runtime (a user namespace needs
# a single-threaded caller), so it is built with cgo, statically.
CONFINE_FLAGS := -tags netgo,osusergo -ldflags '$(LDFLAGS) -linkmode external -extldflags -static'

build: ## build marshald, marshalctl, marshal-confine and marshal-devguard-launch into bin/ (static: a launch starts faster without the dynamic loader)
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/marshald ./cmd/marshalctl ./cmd/marshal-devguard-launch
	CGO_ENABLED=1 $(GO) build $(CONFINE_FLAGS) -o $(BIN)/ ./cmd/marshal-confine

# The check of a pure cgroup v2 host (test/cgroupv2-check.sh) runs where
# Go may not be: the cgroup-touching test binaries and the real marshald
# and marshalctl, all static and stripped, with the script, in one archive.
CHECK_PKGS := ./internal/cgroup ./internal/cgroup/cgroupfs ./internal/cgroup/systemd ./controllers ./internal/launch ./internal/identity ./internal/peer ./internal/devguardlaunch
CHECK_DIR  := $(BIN)/marshal-cgroupv2-check

.PHONY: cgroupv2-bundle
cgroupv2-bundle: ## build bin/marshal-cgroupv2-check.tar.gz: test/cgroupv2-check.sh with static test binaries of the cgroup packages, marshald and marshalctl, for a host without Go
	rm -rf $(CHECK_DIR) && mkdir -p $(CHECK_DIR)/tests
	CGO_ENABLED=0 $(GO) build -ldflags '-s -w $(LDFLAGS)' -o $(CHECK_DIR)/ ./cmd/marshald ./cmd/marshalctl
	for p in $(CHECK_PKGS); do \
		n=$$(echo "$${p#./}" | tr / -) && mkdir -p $(CHECK_DIR)/tests/$$n && \
		if [ -d $$p/testdata ]; then cp -r $$p/testdata $(CHECK_DIR)/tests/$$n/; fi && \
		CGO_ENABLED=0 $(GO) test -c -ldflags '-s -w' -o $(CHECK_DIR)/tests/$$n.test $$p || exit 1; \
	done
	cp test/cgroupv2-check.sh $(CHECK_DIR)/
	tar -czf $(BIN)/marshal-cgroupv2-check.tar.gz -C $(BIN) marshal-cgroupv2-check
	@du -h $(BIN)/marshal-cgroupv2-check.tar.gz

# The end-to-end tests against a Kubernetes API server run a real
# kube-apiserver, built from the k8s.io/kubernetes module pinned in
# tools/go.mod (a module of its own, so that marshal's never requires it).
# It is a tool of that module: go tool keeps the executable it links in
# Go's build cache, so only the first build takes minutes; the next ones,
# from a fresh clone too, find it there in seconds.
.PHONY: kube-apiserver
kube-apiserver: ## build bin/kube-apiserver (pinned in tools/go.mod) for the tests against a Kubernetes API server
	@mkdir -p $(BIN)
	@exe=$$(cd tools && $(GO) tool -n kube-apiserver) && \
		cp --remove-destination "$$exe" $(BIN)/kube-apiserver && \
		echo "$(BIN)/kube-apiserver: $$exe"

.PHONY: fmt-check
fmt-check: ## fail when a Go file is not gofmt-formatted
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet: ## go vet
	$(GO) vet $(PKGS)

# staticcheck is pinned in tools/lint/go.mod, a module of its own, and run
# as a tool of that module: go tool builds it from the module cache the
# first time (downloading it if need be) and finds it in Go's build cache
# after, so make lint needs nothing installed beforehand.
.PHONY: lint
lint: fmt-check vet ## gofmt check, go vet and staticcheck (pinned in tools/lint/go.mod)
	@exe=$$(cd tools/lint && $(GO) tool -n staticcheck) && \
		echo "staticcheck $(PKGS)" && "$$exe" $(PKGS)

.PHONY: test
test: lint test-go ## make lint, then every test with -race

.PHONY: test-go
test-go: ## every test with -race, without make lint
	$(GO) test -race -count=$(COUNT) -timeout=$(TESTTIMEOUT) $(TESTFLAGS) $(PKGS)

.PHONY: test-unprivileged
test-unprivileged: ## as root: every test with -race as UNPRIVILEGED_USER (default nobody) on a copy of the tree (lint is the same for every user: make test runs it)
	sh test/unprivileged.sh $(UNPRIVILEGED_USER) test-go

# bench keeps each run in $(BENCHDIR)/last.txt, to print the next run's
# figures beside it; BENCH_BASE names another run to compare with.
BENCHDIR   ?= .bench
BENCH_BASE ?= $(wildcard $(BENCHDIR)/last.txt)

.PHONY: bench
bench: ## run the benchmarks, each figure beside the previous run's (BENCH=regexp PKGS=./path/... BENCHTIME=300x BENCH_BASE=file)
	@mkdir -p $(BENCHDIR)
	@{ $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -benchmem -count=$(COUNT) $(PKGS); echo $$? > $(BENCHDIR)/status; } | tee $(BENCHDIR)/new.txt
	@awk -f test/benchcmp.awk $(BENCH_BASE) $(BENCHDIR)/new.txt
	@status=$$(cat $(BENCHDIR)/status); rm -f $(BENCHDIR)/status; \
	if [ "$$status" = 0 ]; then mv $(BENCHDIR)/new.txt $(BENCHDIR)/last.txt; fi; exit $$status

.PHONY: fuzz
# Every Fuzz function in a _test.go file is a target: a new one needs no
# line here. make test runs each target's seed corpus (its f.Add seeds and
# testdata/fuzz/NAME), as go test does; this target fuzzes beyond it.
fuzz: ## run every fuzz target for FUZZTIME each
	@set -e; grep -rl --include='*_test.go' '^func Fuzz[A-Z]' . | sort | while read -r file; do \
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file"); do \
			echo "== $$target in $$(dirname "$$file")"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "./$$(dirname "$$file")"; \
		done; \
	done

.PHONY: generate
generate: ## regenerate the manifest reference, JSON Schemas and CRDs from api/v1alpha1
	$(GO) test ./api/v1alpha1 -run TestReference -update
	$(GO) run ./cmd/schemagen

# make run listens where marshalctl looks by default: as an ordinary
# user $XDG_RUNTIME_DIR/marshal.sock, as root /run/marshal/marshal.sock
# (the socket goes when marshald stops; the directory /run/marshal stays,
# as systemd's runtime directories do until reboot). MARSHALD_FLAGS adds
# flags: MARSHALD_FLAGS='--egress-address 127.0.0.1:4751' beside an
# installed marshald.
MARSHALD_FLAGS ?=

.PHONY: run
run: build ## run marshald on manifests/ with its state in .marshal/ (STATE); MARSHALD_FLAGS='…' adds flags
	$(BIN)/marshald --config-dir manifests --state-dir $(STATE) $(MARSHALD_FLAGS)

.PHONY: clean
clean: ## remove build output and the state of make run (.marshal/); refused while its marshald runs
	@if [ -e "$(STATE)/state.db" ] && ! flock -n "$(STATE)/state.db" true; then \
		echo "a marshald still uses $(STATE)/ (make run): stop it first" >&2; exit 1; \
	fi
	rm -rf "$(BIN)" "$(STATE)"

# Installation follows the GNU conventions: PREFIX (default /usr/local) and
# DESTDIR (a staging root for packaging). The units go to systemd's search
# paths below PREFIX, their ExecStart pointing at the installed marshald.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
SYSTEMD_SYSTEM_UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSTEMD_USER_UNITDIR   ?= $(PREFIX)/lib/systemd/user
# The AppArmor profile that lets marshal-confine make user namespaces
# where AppArmor restricts them (Ubuntu 24.04); APPARMOR_DIR= skips it.
APPARMOR_DIR ?= /etc/apparmor.d
INSTALL ?= install

.PHONY: install
install: ## install bin/, the systemd units and marshal-confine's AppArmor profile (PREFIX, DESTDIR, APPARMOR_DIR); run make build first
	@for b in marshald marshalctl marshal-confine marshal-devguard-launch; do \
		[ -x "$(BIN)/$$b" ] || { echo "$(BIN)/$$b is missing: run 'make build' first" >&2; exit 1; }; \
	done
	$(INSTALL) -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(SYSTEMD_SYSTEM_UNITDIR)" "$(DESTDIR)$(SYSTEMD_USER_UNITDIR)"
	$(INSTALL) -m 0755 "$(BIN)/marshald" "$(BIN)/marshalctl" "$(BIN)/marshal-confine" "$(BIN)/marshal-devguard-launch" "$(DESTDIR)$(BINDIR)/"
	sed 's|@BINDIR@|$(BINDIR)|g' dist/systemd/system/marshald.service >"$(DESTDIR)$(SYSTEMD_SYSTEM_UNITDIR)/marshald.service"
	sed 's|@BINDIR@|$(BINDIR)|g' dist/systemd/user/marshald.service >"$(DESTDIR)$(SYSTEMD_USER_UNITDIR)/marshald.service"
	chmod 0644 "$(DESTDIR)$(SYSTEMD_SYSTEM_UNITDIR)/marshald.service" "$(DESTDIR)$(SYSTEMD_USER_UNITDIR)/marshald.service"
	@if [ -n "$(APPARMOR_DIR)" ]; then \
		$(INSTALL) -d "$(DESTDIR)$(APPARMOR_DIR)" && \
		sed 's|@BINDIR@|$(BINDIR)|g' dist/apparmor/marshal-confine >"$(DESTDIR)$(APPARMOR_DIR)/marshal-confine" && \
		chmod 0644 "$(DESTDIR)$(APPARMOR_DIR)/marshal-confine" && \
		echo "installed $(DESTDIR)$(APPARMOR_DIR)/marshal-confine (load it: apparmor_parser -r $(APPARMOR_DIR)/marshal-confine)"; \
	fi

.PHONY: uninstall
uninstall: ## remove what install put in place (same PREFIX, DESTDIR)
	rm -f "$(DESTDIR)$(BINDIR)/marshald" "$(DESTDIR)$(BINDIR)/marshalctl" "$(DESTDIR)$(BINDIR)/marshal-confine" "$(DESTDIR)$(BINDIR)/marshal-devguard-launch" \
		"$(DESTDIR)$(SYSTEMD_SYSTEM_UNITDIR)/marshald.service" \
		"$(DESTDIR)$(SYSTEMD_USER_UNITDIR)/marshald.service"
	@if [ -n "$(APPARMOR_DIR)" ]; then rm -f "$(DESTDIR)$(APPARMOR_DIR)/marshal-confine"; fi
