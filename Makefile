# flecht's build and test entry points. `make test` needs Go and nothing
# else (it builds the pinned promtool the alert rules' tests run on);
# `make e2e` starts a real Kafka broker (Java + Maven), Mosquitto and
# Prometheus.
SHELL     := /bin/bash
# pipefail: the test targets pipe go test through failreport.
.SHELLFLAGS := -o pipefail -c
GO        ?= go
BIN       ?= bin/flecht
FUZZTIME  ?= 100000x
BENCHTIME ?= 2s
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: build test rules modules image e2e e2e-cluster upstream bench bench-e2e lint fuzz demo docs clean

# The repository's Go modules: flecht itself, the SDK that transform
# modules are built with (a module of its own, so that a transform module
# does not pull in flecht's dependencies), the example modules, and the
# image builder (its own module, for go-containerregistry).
GO_MODULES := . sdk examples/modules tools/image

build:
	$(GO) build -buildvcs=true -o $(BIN) ./cmd/flecht

# Unit and in-process tests (kfake, mochi-mqtt), with the race detector,
# and the alert rules' unit tests.
#
# Every test target pipes `go test -json` through e2e/failreport: the
# output is what go test prints, and it ends with only the error lines of
# each failed test, so the tail of a long log says why it failed.
FAILREPORT = $(GO) run ./e2e/failreport
FAILREPORT_BIN = bin/failreport

# PKG=./internal/transformer RUN=TestName runs the tests of one package of
# flecht's module (RUN optional), without the rules' tests.
PKG ?=
RUN ?=
ifeq ($(PKG),)
test: rules
	$(GO) build -o $(FAILREPORT_BIN) ./e2e/failreport
	@set -e; for m in $(GO_MODULES); do \
	  echo "go test $$m"; \
	  (cd $$m && $(GO) test -race -count=1 -timeout 30m -json ./...) | $(FAILREPORT_BIN) -quiet; \
	done
else
test:
	$(GO) build -o $(FAILREPORT_BIN) ./e2e/failreport
	$(GO) test -race -count=1 -timeout 30m -json $(if $(RUN),-run '$(RUN)') $(PKG) | $(FAILREPORT_BIN) -quiet
endif

# The example transform modules, built to WebAssembly in bin/modules: the
# Go ones with the Go toolchain, tally-as with AssemblyScript (Node.js and
# npm; its build script installs the pinned compiler).
GO_EXAMPLE_MODULES := count enrich alarm
modules:
	@mkdir -p bin/modules
	@set -e; for m in $(GO_EXAMPLE_MODULES); do \
	  echo "module $$m"; \
	  (cd examples/modules && GOOS=wasip1 GOARCH=wasm $(GO) build -trimpath -buildmode=c-shared -o ../../bin/modules/$$m.wasm ./$$m); \
	done
	@echo "module tally-as"; examples/modules/tally-as/build.sh bin/modules/tally-as.wasm

# The Prometheus rules in deploy/prometheus, checked and unit-tested with
# promtool at the version tools/promtool pins, built with Go into
# bin/promtool (the first build takes a few minutes; Go's build cache
# makes the next ones quick). PROMTOOL=/path/to/promtool uses another.
PROMTOOL ?= bin/promtool
PROMTOOL_RUN = $(if $(filter bin/promtool,$(PROMTOOL)),$(CURDIR)/bin/promtool,$(PROMTOOL))
bin/promtool: tools/promtool/go.mod tools/promtool/go.sum
	cd tools/promtool && $(GO) build -o ../../bin/promtool github.com/prometheus/prometheus/cmd/promtool
rules: $(if $(filter bin/promtool,$(PROMTOOL)),bin/promtool)
	$(PROMTOOL_RUN) check rules deploy/prometheus/flecht-rules.yaml
	cd deploy/prometheus && $(PROMTOOL_RUN) test rules flecht-rules.test.yaml

# A minimal OCI image of the static binary, without a container daemon:
# tools/image (a module of its own, on go-containerregistry) writes it as
# an OCI archive, $(IMAGE_TAR), named $(IMAGE) (docs/image.md): docker
# load -i, podman load -i, skopeo and crane push read it. linux/amd64 unless
# GOARCH=arm64 (or another); the binary's own build info sets the image's
# platform. Reproducible: every date in it is SOURCE_DATE_EPOCH, by default
# the commit's time, so two builds of a commit give the same digest.
IMAGE_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# localhost/ (podman's prefix for local images): a full reference, which
# containerd-based loaders (Docker's containerd image store, ctr, kind)
# need to name the image at all.
IMAGE         ?= localhost/flecht:$(IMAGE_VERSION)
IMAGE_TAR     ?= bin/flecht-image.tar
IMAGE_GOARCH  := $(or $(GOARCH),amd64)
IMAGE_BIN      = bin/flecht-linux-$(IMAGE_GOARCH)
# GOOS and GOARCH emptied: the builder runs here, whatever the image's are.
bin/imagetool: tools/image/go.mod tools/image/go.sum $(wildcard tools/image/*.go)
	cd tools/image && GOOS= GOARCH= $(GO) build -o ../../bin/imagetool .
image: bin/imagetool
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_GOARCH) $(GO) build -trimpath -buildvcs=true -o $(IMAGE_BIN) ./cmd/flecht
	SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null)} \
	  bin/imagetool -binary $(IMAGE_BIN) -out $(IMAGE_TAR) -name '$(IMAGE)' \
	    -version '$(IMAGE_VERSION)' -revision "$$(git rev-parse HEAD 2>/dev/null)"

# Tests against a real Apache Kafka 4.x broker and a real Mosquitto, and
# (the TestUpstream* tests) beside the real Python library: flechtwerk and
# flechtctl 0.17.0 in the root `make upstream` builds. One of them,
# TestUpstreamSecretPackage, runs internal/secret's
# TestUpstreamOpensFlechtValues with FLECHT_UPSTREAM_PYTHON=e2e/upstream/python
# (the root's Python). A missing root fails those tests;
# FLECHT_E2E_SKIP_UPSTREAM=1 opts out of them explicitly.
# FLECHT_E2E_BROKERS=host:port uses an existing cluster instead.
E2EFLAGS ?= -timeout 60m
e2e:
	$(call with_broker,FLECHT_UPSTREAM_ROOT=$(UPSTREAM_ROOT) $(GO) test -json -tags e2e -count=1 $(E2EFLAGS) ./e2e/ | $(FAILREPORT) -quiet)

# The cluster tier: the TestCluster* tests (build tag e2ecluster) against
# three Kafka nodes e2e/kafka/cluster.sh starts on FLECHT_E2E_KAFKA_PORT
# (default 29192, below Linux's ephemeral ports) and the five ports after it, injecting node kills,
# pauses and restarts while the stages run. FLECHT_E2E_SEED replays a run's
# faults. As with `make e2e`, the EXIT trap is set only once this run's
# start succeeded, so it never stops a cluster someone else started.
E2E_CLUSTER_FLAGS ?= -timeout 40m
e2e-cluster:
	@e2e/kafka/cluster.sh start || exit 1; \
	trap 'e2e/kafka/cluster.sh stop' EXIT; \
	FLECHT_E2E_BROKERS=$$(e2e/kafka/cluster.sh brokers) FLECHT_E2E_CLUSTER=1 \
	  $(GO) test -json -tags 'e2e e2ecluster' -count=1 -run '^TestCluster' $(E2E_CLUSTER_FLAGS) ./e2e/ | $(FAILREPORT)

# The root of the upstream interop tier: Debian 13 by debootstrap with a
# venv of the pinned upstream packages (e2e/upstream/requirements.txt).
# Needs root; idempotent (it rebuilds only what the pinned set changed).
UPSTREAM_ROOT ?= $(CURDIR)/e2e/.run/upstream/root
upstream:
	e2e/upstream/build.sh $(UPSTREAM_ROOT)

# with_broker runs $(1) against a broker it starts on FLECHT_E2E_KAFKA_PORT
# (default 29092), unless FLECHT_E2E_BROKERS names a cluster, which it never
# touches. The EXIT trap stops the broker even when the test binary panics
# or hits -timeout, where TestMain's own stop never runs; it is set only
# after start succeeded, so a broker someone else started is never stopped.
define with_broker
	@if [ -n "$$FLECHT_E2E_BROKERS" ]; then $(1); else \
	  e2e/kafka/broker.sh start || exit 1; \
	  trap 'e2e/kafka/broker.sh stop' EXIT; \
	  FLECHT_E2E_BROKERS=127.0.0.1:$${FLECHT_E2E_KAFKA_PORT:-29092} $(1); \
	fi
endef

# Benchmarks beside their limits on the same machine, as ratios. The e2e
# tier's benchmarks (the runner against the broker's own transactional
# produce limit) run when a broker can be had: FLECHT_E2E_BROKERS, or Java
# for the harness to start one.
bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) ./...
	@if [ -n "$$FLECHT_E2E_BROKERS" ] || command -v java >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory bench-e2e; \
	else \
	  echo "bench-e2e skipped: no FLECHT_E2E_BROKERS and no java to start a broker"; \
	fi

# One run each (they time whole pipelines, not loops). The runner
# benchmarks run Kafka Streams beside flecht (e2e/streams, built here with
# Maven; it needs a JDK); BENCH=Runner runs only those, and each prints one
# SUMMARY line.
BENCH ?= .
bench-e2e:
	cd e2e/streams && mvn -q -B -Dstyle.color=never package
	$(call with_broker,$(GO) test -tags e2e -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 60m ./e2e/)

# Each fuzz target for a short budget; found inputs land in testdata/fuzz.
# The budget is a count of executions, not a duration: Go 1.26's fuzz
# coordinator can report a bare "context deadline exceeded" failure when a
# -fuzztime duration ends on a loaded machine (golang/go#75804, fixed in
# Go 1.27); a count has no deadline to race.
fuzz:
	@set -e; for m in $(GO_MODULES); do (cd $$m && \
	  for pkg in $$($(GO) list ./...); do \
	    for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	      echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
	      $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg; \
	    done; \
	  done); \
	done

# go mod tidy -diff keeps go.mod honest: direct dependencies not marked
# indirect, nothing unused.
lint:
	@set -e; for m in $(GO_MODULES); do (cd $$m && $(GO) mod tidy -diff); done
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd sdk && $(GO) vet ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...
	cd examples/modules && $(GO) vet ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...
	cd tools/image && $(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/
	$(GO) vet -tags 'e2e e2ecluster' ./e2e/
	$(GO) run $(STATICCHECK) ./...
	cd sdk && $(GO) run $(STATICCHECK) ./...
	cd examples/modules && $(GO) run $(STATICCHECK) ./...
	cd tools/image && $(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags e2e ./e2e/
	$(GO) run $(STATICCHECK) -tags 'e2e e2ecluster' ./e2e/

# The whole pipeline on the embedded Kafka + MQTT broker, with a live view:
# the zero-install way to try flecht.
demo:
	$(GO) run ./cmd/flecht dev --demo

# The command reference (docs/reference, one Markdown page per command),
# the man pages (docs/man) and the README's command table, generated from
# the commands' help text (internal/docgen). The docgen test fails when
# they differ from the command tree; this target brings them back in step.
docs:
	$(GO) run ./internal/docgen/cmd/flecht-docs

clean:
	rm -rf bin e2e/.run e2e/kafka/target e2e/streams/target
