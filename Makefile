# toolgate: `make help` lists the targets.
GO       ?= go
BIN      ?= bin/toolgate
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
# The whole suite, race detector on; slow end-to-end tests included.
TESTFLAGS ?= -race -count=1 -timeout 15m

.PHONY: help build run test lint bench conformance
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/toolgate
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/toolgate

run: build ## start the whole stack on the embedded default (data in ./.toolgate)
	$(BIN) dev

test: ## run every test (what CI runs)
	$(GO) vet ./...
	$(GO) test $(TESTFLAGS) ./...

lint: ## go vet and staticcheck
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@latest ./...

bench: ## Go benchmarks of the hot paths
	$(GO) test -run '^$$' -bench . -benchmem ./...

conformance: ## the official MCP conformance suite against a running server's link (MCP_URL=...)
	./scripts/conformance.sh
