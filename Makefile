# toolgate: `make help` lists the targets.
GO       ?= go
BIN      ?= bin/toolgate
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
# The whole suite, race detector on; slow end-to-end tests included.
TESTFLAGS ?= -race -count=1 -timeout 15m

.PHONY: help build run test test-deps lint bench conformance chaos
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/toolgate
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/toolgate

run: build ## start the whole stack on the embedded default (data in ./.toolgate)
	$(BIN) dev

test: test-deps ## run every test (what CI runs)
	$(GO) vet ./...
	$(GO) test $(TESTFLAGS) ./...

# The dashboard's browser tests drive Debian's chromium; they skip, saying why, when
# there is none and no apt-get to install it.
test-deps: ## install what the tests need beyond Go (Chromium, where apt-get can)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  (command -v apt-get >/dev/null 2>&1 && apt-get update -qq && \
	   DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) || \
	  echo "test-deps: no chromium, and it could not be installed; the browser tests will skip"

chaos: ## kill a NATS node, an edge and a worker under load, and print how calls fared (part of make test)
	$(GO) test -count=1 -v -run TestChaos ./chaos/

lint: ## go vet and staticcheck
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@latest ./...

bench: build ## the gateway's cost: Go benchmarks of the hot paths, then the stack under load (bench/RESULTS.md)
	$(GO) test -run '^$$' -bench . -benchmem ./... > bin/gobench.txt; status=$$?; cat bin/gobench.txt; exit $$status
	$(GO) build -o bin/tgbench ./bench/tgbench
	bin/tgbench -bin $(BIN) -gobench bin/gobench.txt -out bench/RESULTS.md

conformance: ## the official MCP conformance suite: against a stack of its own with the fixture tool, or MCP_URL=<link>
	./scripts/conformance.sh
