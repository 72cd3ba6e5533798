# berth: `make run` runs berth with the example pods; `make test` runs every test.
GO        ?= go
BIN       ?= bin
ROOT_DIR  ?= /var/lib/berth
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
BUSYBOX   ?= /bin/busybox
# Per test package: the conformance smoke test builds the upstream suite the first
# time (about 20 minutes on 2 cores); everything together stays well inside 90 min.
TEST_TIMEOUT ?= 45m

.PHONY: all build images deps run test unit e2e e2e-containerd2 containerd2 vet bench conformance chaos clean install uninstall

all: build images

# Runtime packages berth drives: containerd, runc, the CNI plugins, iptables for
# port mappings, and busybox-static for the example and test images.
deps:
	@if ! command -v containerd >/dev/null || ! command -v runc >/dev/null || \
	    [ ! -x /usr/lib/cni/bridge ] || [ ! -x $(BUSYBOX) ] || ! command -v iptables >/dev/null || ! command -v ip >/dev/null; then \
		echo "installing containerd, runc, CNI plugins, iptables and busybox-static"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			containerd runc containernetworking-plugins iptables iproute2 busybox-static; \
	fi
	@# runc built by `make containerd2` links libseccomp (cgo).
	@if [ ! -e /usr/include/seccomp.h ]; then \
		echo "installing libseccomp-dev"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libseccomp-dev; \
	fi

# containerd 2, its runc shim and runc, built from the Go module of
# runtime/containerd2 into $(BIN)/runtime/containerd2-<hash of its go.mod and
# go.sum>/ (cached: a few minutes the first time, nothing after); prints that
# directory. Run berth on it with --containerd-binary <dir>/containerd.
CONTAINERD2 = $(GO) run ./hack/buildruntime -module runtime/containerd2 -out $(BIN)/runtime
containerd2: deps
	@$(CONTAINERD2)

build:
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/berth ./cmd/berth
	CGO_ENABLED=0 $(GO) build -ldflags "-s -w" -o $(BIN)/berth-pause ./cmd/berth-pause
	CGO_ENABLED=0 $(GO) build -o $(BIN)/berth-bench ./cmd/berth-bench

# OCI tarballs built locally from berth-pause and Debian's busybox-static:
# nothing is fetched from a registry.
images: build deps
	$(GO) run ./hack/mkimage -pause-binary $(BIN)/berth-pause -busybox $(BUSYBOX) -out $(BIN)/images

run: deps build images
	mkdir -p $(ROOT_DIR)/images
	cp $(BIN)/images/busybox.tar $(ROOT_DIR)/images/
	$(BIN)/berth run --root-dir $(ROOT_DIR) --pod-manifest-path $(CURDIR)/examples

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

unit:
	$(GO) test ./internal/... ./cmd/...

# The end-to-end tests run berth's own binaries against a real, managed containerd.
e2e: deps build
	BERTH_BIN=$(abspath $(BIN)) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -v ./test/e2e/...

# The same end-to-end suite with every node managing the containerd 2 of
# `make containerd2` instead of the host's containerd (about 25 minutes on
# 2 cores).
e2e-containerd2: deps build
	dir=$$($(CONTAINERD2)) && BERTH_E2E_CONTAINERD=$$dir BERTH_CONTAINERD2_BIN=$$dir BERTH_BIN=$(abspath $(BIN)) \
		$(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) -v ./test/e2e/

# The unit tests run under the race detector (it needs cgo: a C compiler).
# The end-to-end packages run one at a time: each runs real runtimes (and a
# control plane), and on 2 cores two at once make each other's timing fail.
test: deps build vet
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./internal/... ./cmd/... ./hack/...
	dir=$$($(CONTAINERD2)) && BERTH_CONTAINERD2_BIN=$$dir BERTH_BIN=$(abspath $(BIN)) \
		$(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) ./test/...

# The performance harness (BENCHMARKS.md): about 15 minutes on 2 cores.
# BENCH_FLAGS passes options, e.g. BENCH_FLAGS="--pods 10 --steady-pods 20".
# BENCH_COMPARE=kubelet also runs every scenario on the upstream kubelet and
# on berth with an external containerd (--compare-runs times each, 2 by
# default: about six times as long), with the kubelet of test/cluster's
# addons (cached in bin/cluster or $BERTH_ADDONS_BIN; a first build takes
# about 15 minutes).
BENCH_COMPARE ?=
bench: deps build
	@if [ -n "$(BENCH_COMPARE)" ]; then \
		kubelet=$$($(GO) run ./hack/addonbin kubelet) || exit 1; \
		set -x; $(BIN)/berth-bench --bin $(abspath $(BIN)) --out $(BIN)/bench.json \
			--compare $(BENCH_COMPARE) --kubelet-bin $$kubelet $(BENCH_FLAGS); \
	else \
		set -x; $(BIN)/berth-bench --bin $(abspath $(BIN)) --out $(BIN)/bench.json $(BENCH_FLAGS); \
	fi

# The upstream Kubernetes e2e suite's node conformance specs against two berth
# nodes joined to the control plane of test/cluster (CONFORMANCE.md). The first
# run builds e2e.test (about 15 minutes on 2 cores, cached in bin/conformance).
# FOCUS and SKIP are regexps over the specs' names, LABEL_FILTER replaces the
# default exclusions, CONFORMANCE_PROCS specs run at once (Serial ones alone);
# the JUnit reports and summary go to bin/conformance/latest.
FOCUS        ?=
SKIP         ?=
LABEL_FILTER ?=
CONFORMANCE_TIMEOUT ?= 3h
CONFORMANCE_PROCS   ?= 4
# The nodes manage containerd 2 (make containerd2): image volumes and user
# namespaces need it. CONFORMANCE_RUNTIME=host runs the host's containerd.
CONFORMANCE_RUNTIME ?= containerd2
conformance: deps build
	CGO_ENABLED=0 $(GO) build -o $(BIN)/berth-conformance ./test/conformance/cmd/conformance
	dir=; if [ "$(CONFORMANCE_RUNTIME)" = containerd2 ]; then dir=$$($(CONTAINERD2)) || exit 1; fi; \
	$(BIN)/berth-conformance -berth-bin $(abspath $(BIN)) -busybox $(BUSYBOX) -timeout $(CONFORMANCE_TIMEOUT) -procs $(CONFORMANCE_PROCS) \
		-containerd "$$dir" -focus '$(FOCUS)' -skip '$(SKIP)' -label-filter '$(LABEL_FILTER)'

# The long fault-injection run (test/chaos; make test runs a short smoke of
# it): CHAOS_FAULTS random faults of CHAOS_PROFILE on a node of CHAOS_PODS
# pods, the invariants checked after each. The seed is printed; CHAOS_SEED
# replays a run. CHAOS_DURATION (e.g. 30m) stops the faults early, still
# tearing down and checking for leaks.
CHAOS_FAULTS  ?= 200
CHAOS_PODS    ?= 40
CHAOS_PROFILE ?= full
CHAOS_SEED    ?=
CHAOS_DURATION ?=
CHAOS_TIMEOUT ?= 8h
chaos: deps build
	BERTH_BIN=$(abspath $(BIN)) CHAOS_FAULTS=$(CHAOS_FAULTS) CHAOS_PODS=$(CHAOS_PODS) CHAOS_PROFILE=$(CHAOS_PROFILE) CHAOS_SEED=$(CHAOS_SEED) CHAOS_DURATION=$(CHAOS_DURATION) \
		$(GO) test -count=1 -timeout $(CHAOS_TIMEOUT) -v -run TestChaos ./test/chaos/

# berth as a systemd service: the binaries in $(PREFIX)/bin, the unit in
# $(UNITDIR) (its ExecStart pointing at them), the config in
# $(SYSCONFDIR)/berth/config.yaml unless one is there, and an empty
# manifests dir beside it. DESTDIR stages it all elsewhere (packaging).
# Then: systemctl daemon-reload && systemctl enable --now berth. Upgrading in
# place is `make install` of the new version and `systemctl restart berth`.
PREFIX     ?= /usr/local
SYSCONFDIR ?= /etc
UNITDIR    ?= /etc/systemd/system
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/berth/manifests
	install -m 0755 $(BIN)/berth $(DESTDIR)$(PREFIX)/bin/berth.new
	install -m 0755 $(BIN)/berth-pause $(DESTDIR)$(PREFIX)/bin/berth-pause.new
	# A rename replaces a running binary without "text file busy".
	mv -f $(DESTDIR)$(PREFIX)/bin/berth.new $(DESTDIR)$(PREFIX)/bin/berth
	mv -f $(DESTDIR)$(PREFIX)/bin/berth-pause.new $(DESTDIR)$(PREFIX)/bin/berth-pause
	sed -e 's|/usr/local/bin/berth|$(PREFIX)/bin/berth|' -e 's|/etc/berth/|$(SYSCONFDIR)/berth/|g' dist/berth.service > $(DESTDIR)$(UNITDIR)/berth.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/berth.service
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/berth/config.yaml ]; then \
		echo "keeping $(DESTDIR)$(SYSCONFDIR)/berth/config.yaml (the new default is dist/config.yaml)"; \
	else \
		sed -e 's|/etc/berth/|$(SYSCONFDIR)/berth/|g' dist/config.yaml > $(DESTDIR)$(SYSCONFDIR)/berth/config.yaml && \
		chmod 0644 $(DESTDIR)$(SYSCONFDIR)/berth/config.yaml; \
	fi

# Removes what install put there but the config and the manifests, which
# are the operator's; `berth reset` removes what berth made when it ran.
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/berth $(DESTDIR)$(PREFIX)/bin/berth-pause $(DESTDIR)$(UNITDIR)/berth.service
	@echo "kept $(DESTDIR)$(SYSCONFDIR)/berth (config and manifests); run 'berth reset' before uninstalling to remove berth's pods and state"

clean:
	rm -rf $(BIN)
