# flecht's build and test entry points. `make test` needs nothing but Go;
# `make e2e` starts a real Kafka broker (Java + Maven) and Mosquitto.
SHELL     := /bin/bash
GO        ?= go
BIN       ?= bin/flecht
FUZZTIME  ?= 10s
BENCHTIME ?= 2s
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: build test e2e bench lint fuzz demo clean

build:
	$(GO) build -buildvcs=true -o $(BIN) ./cmd/flecht

# Unit and in-process tests (kfake, mochi-mqtt), with the race detector.
test:
	$(GO) test -race -count=1 ./...

# Tests against a real Apache Kafka 4.x broker and a real Mosquitto.
# FLECHT_E2E_BROKERS=host:port uses an existing cluster instead.
e2e:
	$(GO) test -tags e2e -count=1 -timeout 60m ./e2e/

# Benchmarks beside their limits on the same machine, as ratios.
bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) ./...

# Each fuzz target for a short budget; found inputs land in testdata/fuzz.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags e2e ./e2e/

# The embedded Kafka + MQTT broker: the zero-install way to try flecht.
demo:
	$(GO) run ./cmd/flecht dev

clean:
	rm -rf bin e2e/.run e2e/kafka/target
