#!/usr/bin/env bash
# The MCP conformance suite's client, for its authorization scenarios: the gateway
# with the bridge as the MCP OAuth client. The suite runs it with the scenario's
# server URL as the last argument:
#   node .../conformance client --command scripts/conformance-client.sh --scenario auth/<name>
# It starts a `toolgate dev` stack of its own, deploys the URL as the tool "remote"
# with `toolgate worker mcp --url URL --oauth`, completes the dev account's connection
# headlessly (it follows the connect URL as a browser would, with no page to fill in:
# the suite's authorization server approves at once), and calls each of the tool's
# methods; a call the server refuses for a scope the account's token lacks
# (connection_required) has the account connect again, with the larger scope, and is
# made again, at most twice. A scenario's context (MCP_CONFORMANCE_CONTEXT) that names
# a client the deployment registered beforehand gives the bridge its id
# (--oauth-client-id) and the gateway its secret (PUT /admin/tools/remote/oauth-client).
# The bridge's client ID metadata document URL is the suite's example client's: the
# suite's authorization servers fetch no document, and basic-cimd expects that one.
# It needs bin/toolgate (go build -o bin/toolgate ./cmd/toolgate).
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

context() { python3 -c 'import json,os,sys; print(json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}").get(sys.argv[1], ""))' "$1"; }
client_id=$(context client_id)
client_secret=$(context client_secret)
"$bin" worker mcp --nats "nats://127.0.0.1:$nats_port" --tool remote --url "$url" --oauth --base-url "$base" \
	--oauth-client-metadata-url https://conformance-test.local/client-metadata.json ${client_id:+--oauth-client-id "$client_id"} >"$work/bridge.log" 2>&1 &
bridge=$!
pids+=($bridge)
curl -sf -X POST "$base/admin/connections" "${admin[@]}" -d '{"account":"dev","tool":"remote"}' >/dev/null
online=""
for _ in $(seq 300); do
	online=$(curl -sf "$base/tools/remote" "${key[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])' 2>/dev/null || true)
	[[ "$online" == online ]] && break
	kill -0 "$bridge" 2>/dev/null || break # it refused the server: see its log
	sleep 0.1
done
[[ "$online" == online ]] || { echo "conformance-client: the bridge did not come online" >&2; cat "$work/bridge.log" >&2; exit 1; }

if [[ -n "$client_secret" ]]; then
	python3 -c 'import json,sys; print(json.dumps({"client_secret": sys.argv[1]}))' "$client_secret" |
		curl -sf -X PUT "$base/admin/tools/remote/oauth-client" "${admin[@]}" --data-binary @- >/dev/null
fi

# The account's connection, headlessly: the connect URL, followed to the callback.
# Connecting again after a refusal, it waits (2 s at most) until the tool's record
# declares what the server asked for: the connect URL asks for the scope named
# (none named: it differs from the last one but for its state and PKCE challenge,
# as when the server moved to another authorization server).
connect_url() { curl -sf -X POST "$base/admin/connections/dev/remote/authorize" "${admin[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["connect_url"])'; }
asks() { python3 -c 'import sys,urllib.parse as u; p=u.urlsplit(sys.argv[1]); q=sorted((k,v) for k,v in u.parse_qsl(p.query) if k not in ("state","code_challenge")); print(p.netloc+p.path, q)' "$1"; }
scope_of() { python3 -c 'import sys,urllib.parse as u; print(" "+dict(u.parse_qsl(u.urlsplit(sys.argv[1]).query)).get("scope","")+" ")' "$1"; }
last=""
connect() {
	local connect
	connect=$(connect_url)
	for _ in $(seq 10); do
		if [[ -n "${1:-}" ]]; then
			[[ "$(scope_of "$connect")" == *" $1 "* ]] && break
		elif [[ -z "$last" || "$(asks "$connect")" != "$(asks "$last")" ]]; then
			break
		fi
		sleep 0.2
		connect=$(connect_url)
	done
	last=$connect
	curl -sfL -c "$work/jar" -b "$work/jar" -o "$work/connected" "$connect" || { echo "conformance-client: the authorization failed" >&2; cat "$work/bridge.log" "$work/dev.log" >&2; exit 1; }
}
connect

# The tools the server lists to the account's token become the tool's methods. A
# server that refuses the list for a scope the token lacks gets one more connection.
refusals() { grep -c 'did not list its tools.*connection_required' "$work/dev.log" || true; }
asked() { grep -o 'requires the scope [^ ,]*' "$1" | tail -1 | cut -d' ' -f4; } # the scope of the last refusal in a file
methods=""
for attempt in 1 2; do
	for _ in $(seq 100); do
		methods=$(curl -sf "$base/tools/remote" "${key[@]}" | python3 -c 'import json,sys; print(" ".join(m["name"] for m in json.load(sys.stdin).get("methods") or []))' 2>/dev/null || true)
		[[ -n "$methods" ]] && break 2
		(($(refusals) >= attempt)) && break
		sleep 0.1
	done
	(($(refusals) >= attempt)) && [[ $attempt == 1 ]] && connect "$(asked "$work/dev.log")" || break
done
[[ -n "$methods" ]] || { echo "conformance-client: the server listed no tools" >&2; cat "$work/bridge.log" >&2; exit 1; }
status=0
for m in $methods; do
	for attempt in 1 2 3; do
		code=$(curl -s -o "$work/answer" -w '%{http_code}' -X POST "$base/tool-call/remote/$m" "${key[@]}" -H 'Content-Type: application/json' -d '{}')
		echo "conformance-client: $m: $code $(head -c 300 "$work/answer")"
		[[ "$code" == 409 && $attempt -lt 3 ]] && grep -q connection_required "$work/answer" || break
		connect "$(asked "$work/answer")"
	done
	[[ "$code" == 200 ]] || status=1
done
exit $status
