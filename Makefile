# Entry points for developers and CI. `make test` is what CI runs.

GO ?= go
BIN ?= bin/wasmkeep

.PHONY: test vet versitygw chromium wasm-c build examples check sim-long soak run dev fuzz

# Every package but the simulation runs under the race detector. The
# simulation is single-threaded per run (it spreads seeds over the cores
# itself); under -race its 2,000 seeds and seven broken variants would take
# many times longer for nothing.
RACE_PKGS = $(shell $(GO) list ./... | grep -v /tests/sim)

# test: vet, then every package with the race detector, then the
# simulation. -p 1 runs one test binary at a time: several of them start
# their own S3 server, and the machines this runs on have two cores.
test: versitygw chromium wasm-c vet
	$(GO) test -race -p 1 $(RACE_PKGS)
	$(GO) test -count=1 ./tests/sim
	@GO=$(GO) FUZZTIME=3s ./scripts/fuzz.sh

# fuzz runs every fuzz target at length (FUZZTIME each, default 5m).
FUZZTIME ?= 5m
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

# sim-long runs 20,000 seeds of the simulation and prints their counts.
sim-long:
	$(GO) test -count=1 -run 'TestSeeds$$' -v ./tests/sim -seeds=20000 -timeout 30m

# soak runs the cluster's fault tests under load, each SOAK times in a
# row (default 20), outside make test: rolling restarts, a node killed, a
# node hung, over three and four nodes, with a checker that holds every
# counter to what its answers said, and Idempotency-Keys through all three
# faults. bench/RESULTS.md records a run.
SOAK ?= 20
SOAK_TESTS = TestRollingRestart|TestKilledNodeUnderLoad|TestHungNodeUnderLoad|TestHungNodeFailsOver|TestIdempotencyKeysThroughFaults
soak: versitygw
	$(GO) test -count=$(SOAK) -v -timeout 6h -run '^($(SOAK_TESTS))$$' ./tests/cluster

vet:
	$(GO) vet ./...

# versitygw builds the S3-compatible test server into the user's cache if it
# is not there yet (minutes the first time, nothing after).
versitygw:
	@./scripts/versitygw.sh >/dev/null

# chromium installs Debian's chromium if it is missing: tests/e2e drives
# the chat page in it (set WASMKEEP_NO_BROWSER=1 to skip that test where no
# browser can be installed).
chromium:
	@if [ "$${WASMKEEP_NO_BROWSER:-}" != 1 ]; then ./scripts/chromium.sh >/dev/null; fi

# wasm-c installs Debian's clang-16, lld-16 and wasi-libc if they are
# missing: wasmhost/cguest_test.go builds the C guests with them (set
# WASMKEEP_NO_WASM_C=1 to skip installing them; the test then skips, or
# fails where CI is set).
wasm-c:
	@if [ "$${WASMKEEP_NO_WASM_C:-}" != 1 ]; then ./scripts/wasm-c.sh >/dev/null; fi

build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/wasmkeep

# examples builds every wasm example class examples/NAME into
# classes/NAME.wasm, where `wasmkeep serve` finds it as class NAME
# (examples/counter-wasm is class counter-wasm): those ending in -wasm with
# Go, those ending in -c with clang on the C SDK (wasmhost/sdk/c), when
# clang can build for wasm32-wasi (make wasm-c installs it). A C class may
# include chat_page.inc, the chat page's bytes as a C initialiser list.
WASM_CFLAGS = --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor -O2 -Wall -Wextra -Wl,--strip-debug
examples:
	@mkdir -p classes
	@for dir in examples/*-wasm; do \
		name="$$(basename "$$dir")"; \
		echo "GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o classes/$$name.wasm ./$$dir"; \
		GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o "classes/$$name.wasm" "./$$dir" || exit 1; \
	done
	@if ! clang="$$(./scripts/wasm-c.sh --check 2>/dev/null)"; then \
		echo "examples: skipped the C classes (examples/*-c): no clang for wasm32-wasi (make wasm-c installs it)"; \
		exit 0; \
	fi; \
	inc="$$(mktemp -d)" && trap 'rm -rf "$$inc"' EXIT && \
	od -An -v -tx1 examples/chat/page/page.html | sed 's/[0-9a-f][0-9a-f]/0x&,/g' >"$$inc/chat_page.inc" && \
	for dir in examples/*-c; do \
		name="$$(basename "$$dir")"; \
		echo "$$clang $(WASM_CFLAGS) -I wasmhost/sdk/c -I $$inc -o classes/$$name.wasm wasmhost/sdk/c/wasmkeep.c $$dir/*.c"; \
		"$$clang" $(WASM_CFLAGS) -I wasmhost/sdk/c -I "$$inc" -o "classes/$$name.wasm" wasmhost/sdk/c/wasmkeep.c "$$dir"/*.c || exit 1; \
	done

# run builds the binary and the wasm examples and starts a node on
# 127.0.0.1:8080 with its bucket in ./wasmkeep-data and its wasm classes
# from ./classes; ARGS adds flags (make run ARGS='--listen 127.0.0.1:8081').
run: build examples
	./$(BIN) serve $(ARGS)

# dev runs a node that rebuilds and deploys each examples/*-wasm class as
# its files change (wasmkeep dev); ARGS adds flags.
dev: build
	./$(BIN) dev $(ARGS)

# check runs the conditional-write check against a fresh directory store.
check: build
	@dir="$$(mktemp -d)" && trap 'rm -rf "$$dir"' EXIT && ./$(BIN) bucket check --bucket "$$dir"
