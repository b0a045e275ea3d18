#!/usr/bin/env bash
# The MCP conformance suite's client, for its authorization scenarios: the gateway
# with the bridge as the MCP OAuth client. The suite runs it with the scenario's
# server URL as the last argument:
#   node .../conformance client --command scripts/conformance-client.sh --scenario auth/<name>
# It starts a `toolgate dev` stack of its own, deploys the URL as the tool "remote"
# with `toolgate worker mcp --url URL --oauth`, completes the dev account's connection
# headlessly (it follows the connect URL as a browser would, with no page to fill in:
# the suite's authorization server approves at once), and calls each of the tool's
# methods. It needs bin/toolgate (go build -o bin/toolgate ./cmd/toolgate).
set -euo pipefail

url="${!#}"
bin="${TOOLGATE_BIN:-bin/toolgate}"
work=$(mktemp -d)
pids=()
stop() {
	for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap stop EXIT
trap "exit 1" INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
nats_port=$(free_port)
edge_port=$(free_port)
base="http://127.0.0.1:$edge_port"
"$bin" dev --data "$work/data" --nats-listen "127.0.0.1:$nats_port" --listen "127.0.0.1:$edge_port" >"$work/dev.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do curl -sf "$base/readyz" >/dev/null && break; sleep 0.1; done
curl -sf "$base/readyz" >/dev/null || { echo "conformance-client: the dev stack did not start" >&2; cat "$work/dev.log" >&2; exit 1; }
admin=(-H "Authorization: Bearer $(cat "$work/data/admin-key")" -H 'Content-Type: application/json')
key=(-H "SERVICE_API_KEY: $(cat "$work/data/dev-key")")

"$bin" worker mcp --nats "nats://127.0.0.1:$nats_port" --tool remote --url "$url" --oauth --base-url "$base" >"$work/bridge.log" 2>&1 &
pids+=($!)
curl -sf -X POST "$base/admin/connections" "${admin[@]}" -d '{"account":"dev","tool":"remote"}' >/dev/null
online=""
for _ in $(seq 300); do
	online=$(curl -sf "$base/tools/remote" "${key[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])' 2>/dev/null || true)
	[[ "$online" == online ]] && break
	sleep 0.1
done
[[ "$online" == online ]] || { echo "conformance-client: the bridge did not come online" >&2; cat "$work/bridge.log" >&2; exit 1; }

# The account's connection, headlessly: the connect URL, followed to the callback.
connect=$(curl -sf -X POST "$base/admin/connections/dev/remote/authorize" "${admin[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["connect_url"])')
curl -sfL -c "$work/jar" -b "$work/jar" -o "$work/connected" "$connect" || { echo "conformance-client: the authorization failed" >&2; cat "$work/bridge.log" "$work/dev.log" >&2; exit 1; }

methods=""
for _ in $(seq 100); do
	methods=$(curl -sf "$base/tools/remote" "${key[@]}" | python3 -c 'import json,sys; print(" ".join(m["name"] for m in json.load(sys.stdin).get("methods") or []))' 2>/dev/null || true)
	[[ -n "$methods" ]] && break
	sleep 0.1
done
[[ -n "$methods" ]] || { echo "conformance-client: the server listed no tools" >&2; cat "$work/bridge.log" >&2; exit 1; }
status=0
for m in $methods; do
	code=$(curl -s -o "$work/answer" -w '%{http_code}' -X POST "$base/tool-call/remote/$m" "${key[@]}" -H 'Content-Type: application/json' -d '{}')
	echo "conformance-client: $m: $code $(head -c 300 "$work/answer")"
	[[ "$code" == 200 ]] || status=1
done
exit $status
