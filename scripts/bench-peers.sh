#!/usr/bin/env bash
# Installs the MCP gateways that `make bench` compares a toolgate link with, at pinned
# versions, into the repository's ignored .cache/ (nothing system-wide), and prints
# the tgbench flags that name the ones it has:
#   - npm supergateway and npm mcp-proxy (punkpeye), each in .cache/npm/<name>@<version>
#     as the tests' testenv.NPMPackage installs npm packages;
#   - TBXark/mcp-proxy, a Go module, built from its source as the Go module proxy
#     serves that version into .cache/gobin. (`go install ...@version` would also ask
#     for the module's list of versions, which the proxy may refuse.)
# A gateway that cannot be installed (no npm, no registry) is left out with a warning
# on stderr; the bench then says so in its row.
set -uo pipefail

SUPERGATEWAY_VERSION=4.0.0
MCP_PROXY_VERSION=6.7.19
TBXARK_VERSION=v0.43.2

cache="$PWD/.cache"
flags=()

npm_package() { # name version entry-point-below-the-package
	local name=$1 version=$2 entry=$3 dir="$cache/npm/$1@$2"
	local pkg="$dir/node_modules/$name"
	if [[ "$(node -p "require('$pkg/package.json').version" 2>/dev/null)" != "$version" ]]; then
		if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
			echo "bench-peers: no npm or node on PATH: $name is left out" >&2
			return 1
		fi
		mkdir -p "$dir"
		if ! timeout 300 npm install --prefix "$dir" --no-audit --no-fund --silent "$name@$version" >&2; then
			echo "bench-peers: npm could not install $name@$version: it is left out" >&2
			return 1
		fi
	fi
	echo "$pkg/$entry"
}

if p=$(npm_package supergateway "$SUPERGATEWAY_VERSION" dist/index.js); then
	flags+=(-supergateway "$p")
fi
if p=$(npm_package mcp-proxy "$MCP_PROXY_VERSION" dist/bin/mcp-proxy.mjs); then
	flags+=(-mcp-proxy "$p")
fi

tbxark="$cache/gobin/mcp-proxy-tbxark-$TBXARK_VERSION"
if [[ ! -x "$tbxark" ]]; then
	src=$(go mod download -json "github.com/TBXark/mcp-proxy@$TBXARK_VERSION" 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("Dir",""))' 2>/dev/null)
	if [[ -n "$src" ]]; then
		work=$(mktemp -d)
		cp -r "$src/." "$work" && chmod -R u+w "$work" && mkdir -p "$cache/gobin" &&
			(cd "$work" && go build -o "$tbxark" . >&2) ||
			echo "bench-peers: TBXark/mcp-proxy $TBXARK_VERSION did not build: it is left out" >&2
		rm -rf "$work"
	else
		echo "bench-peers: the Go module proxy did not serve TBXark/mcp-proxy $TBXARK_VERSION: it is left out" >&2
	fi
fi
if [[ -x "$tbxark" ]]; then
	flags+=(-tbxark "$tbxark")
fi
echo "${flags[@]//$PWD\//}"
