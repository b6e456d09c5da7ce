# Entry points for developers and CI. `make test` is what CI runs.

GO ?= go
BIN ?= bin/wasmkeep

.PHONY: test vet versitygw build check

# test: vet, then every package with the race detector. -p 1 runs one test
# binary at a time: several of them start their own S3 server, and the
# machines this runs on have two cores.
test: versitygw vet
	$(GO) test -race -p 1 ./...

vet:
	$(GO) vet ./...

# versitygw builds the S3-compatible test server into the user's cache if it
# is not there yet (minutes the first time, nothing after).
versitygw:
	@./scripts/versitygw.sh >/dev/null

build:
	$(GO) build -o $(BIN) ./cmd/wasmkeep

# check runs the conditional-write check against a fresh directory store.
check: build
	@dir="$$(mktemp -d)" && trap 'rm -rf "$$dir"' EXIT && ./$(BIN) bucket check --bucket "$$dir"
