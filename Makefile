# toolgate: `make help` lists the targets.
GO       ?= go
BIN      ?= bin/toolgate
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
# The whole suite, race detector on; slow end-to-end tests included. The deploy module
# (its own go.mod) runs verbose: its container tests print what each fault did.
TESTFLAGS ?= -race -count=1 -timeout 15m
# The payloads package's tests move up to 50 MiB through clients and tools in the test's
# own process; under the race detector they skip, and run here, without it.
LARGEFLAGS ?= -count=1 -timeout 15m

# The container engine for the image and the compose stack: podman where it is
# installed, docker otherwise. Podman reads the project's own settings (runtime,
# ulimits) from deploy/containers.conf unless CONTAINERS_CONF names another file.
ENGINE   ?= $(shell command -v podman >/dev/null 2>&1 && echo podman || echo docker)
IMAGE    ?= toolgate:latest
ifeq ($(ENGINE),podman)
COMPOSE  ?= podman-compose
export CONTAINERS_CONF ?= $(CURDIR)/deploy/containers.conf
else
COMPOSE  ?= docker compose
endif
# Where the compose stack's bootstrap writes the admin key and the dev key.
export TOOLGATE_COMPOSE_DIR ?= $(CURDIR)/.toolgate-compose

.PHONY: help build run test test-deps lint bench bench-peers conformance chaos image compose-up compose-down
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/toolgate
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/toolgate

run: build ## start the whole stack on the embedded default (data in ./.toolgate)
	$(BIN) dev

test: test-deps ## run every test (what CI runs)
	$(GO) vet ./...
	$(GO) test $(TESTFLAGS) ./...
	$(GO) test $(LARGEFLAGS) ./payloads/
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 -timeout 20m -v ./...

# The dashboard's browser tests drive Debian's chromium, and the compose stack's tests
# Debian's podman, podman-compose and runc; they skip, saying why, when there are none
# and no apt-get to install them.
test-deps: ## install what the tests need beyond Go (Chromium, Podman, where apt-get can)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  (command -v apt-get >/dev/null 2>&1 && apt-get update -qq && \
	   DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) || \
	  echo "test-deps: no chromium, and it could not be installed; the browser tests will skip"
	@(command -v podman && command -v podman-compose && command -v runc) >/dev/null 2>&1 || \
	  (command -v apt-get >/dev/null 2>&1 && apt-get update -qq && \
	   DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman podman-compose runc) || \
	  echo "test-deps: no podman, and it could not be installed; the compose stack's tests will skip"

chaos: ## kill a NATS node, an edge and a worker under load, and print how calls fared (part of make test)
	$(GO) test -count=1 -v -run TestChaos ./chaos/

lint: ## go vet and staticcheck
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@latest ./...

bench: build ## the gateway's cost: Go benchmarks of the hot paths, the stack under load, and MCP through a link against other MCP gateways (bench/RESULTS.md)
	$(GO) test -run '^$$' -bench . -benchmem ./... > bin/gobench.txt; status=$$?; cat bin/gobench.txt; exit $$status
	$(GO) build -o bin/tgbench ./bench/tgbench
	$(GO) build -o bin/mcpfixture ./internal/mcpfixture/cmd/mcpfixture
	bin/tgbench -bin $(BIN) -gobench bin/gobench.txt -fixture bin/mcpfixture $$(./scripts/bench-peers.sh) -out bench/RESULTS.md

# The peer comparison alone (a few minutes): MCP through a toolgate link, supergateway,
# mcp-proxy and TBXark/mcp-proxy against the same stdio server; prints its table.
bench-peers: build ## only the comparison with other MCP gateways (a few minutes; prints its table)
	$(GO) build -o bin/tgbench ./bench/tgbench
	$(GO) build -o bin/mcpfixture ./internal/mcpfixture/cmd/mcpfixture
	bin/tgbench -bin $(BIN) -only peers -fixture bin/mcpfixture $$(./scripts/bench-peers.sh)

image: ## the container image of the one binary (static, FROM scratch), with podman or docker
	rm -rf bin/image && mkdir -p bin/image/state
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS) -s -w" -o bin/image/toolgate ./cmd/toolgate
	$(ENGINE) build -t $(IMAGE) -f deploy/image/Dockerfile bin/image

compose-up: image ## start the compose stack (3 NATS nodes, 2 edges, demo tools); keys in .toolgate-compose/
	mkdir -p -m 0700 "$(TOOLGATE_COMPOSE_DIR)"
	$(COMPOSE) up -d
	@bin/image/toolgate health --wait 3m http://127.0.0.1:$${TOOLGATE_PORT:-8080}/readyz http://127.0.0.1:$${TOOLGATE_PORT_2:-8081}/readyz
	@echo "edges on http://127.0.0.1:$${TOOLGATE_PORT:-8080} and http://127.0.0.1:$${TOOLGATE_PORT_2:-8081}; the dev key is in $(TOOLGATE_COMPOSE_DIR)/dev-key, the admin key in $(TOOLGATE_COMPOSE_DIR)/admin-key"

compose-down: ## stop the compose stack; its volumes (registry, keys) stay for the next compose-up
	$(COMPOSE) down

conformance: ## the official MCP conformance suites (current and newest): against a stack of its own with the fixture tool and server-everything, or MCP_URL=<link>; then their client auth scenarios with the bridge as the client
	./scripts/conformance.sh
	./scripts/conformance-auth.sh
