#!/usr/bin/env bash
# GET /v1/me through the gateway (Redis rate limiter on, limits raised so that nothing is
# refused) against a static JSON file served by nginx, the ceiling of this machine; wrk
# with 64 connections for 20 s each, in the same run, with the Redis commands (INFO commandstats)
# per admitted request and the machine's CPU model. Then over-admission through two more
# gateways (OVER_ADMISSION: "teams:limit" pairs). Also pingora alone (gateway/examples/
# bare_pingora.rs: the same bytes from `request_filter`, nothing of ours on the path), the floor
# under the gateway on this machine, and the CPU each server spent per request. Writes BENCHMARKS.md.
# SWITCHBOARD_BIN=<a built binary> skips the build; BARE_BIN=<built bare_pingora> too (build
# them with BENCH_PROFILE, which the section names); BENCH_PROFILE=release measures the plain
# release profile instead of release-lto.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_packages wrk nginx-light redis-server
DURATION="${DURATION:-20s}"
CONNECTIONS="${CONNECTIONS:-64}"
# The profile the container image ships (fat LTO; a cold build takes ~35 min on two cores),
# for the gateway and for pingora alone alike.
export BENCH_PROFILE="${BENCH_PROFILE:-release-lto}"
SWITCHBOARD_BIN="${SWITCHBOARD_BIN:-$(release_binary)}"
if [ -z "${BARE_BIN:-}" ]; then
  (cd "$SWITCHBOARD_ROOT" && cargo build --profile "$BENCH_PROFILE" -p switchboard-gateway --example bare_pingora >&2)
  BARE_BIN="$CARGO_TARGET_DIR/$BENCH_PROFILE/examples/bare_pingora"
fi
work="$(mktemp -d)"
GATEWAY_PIDS=()
BARE_PID=""
trap 'kill $DEV_PID $REDIS_PID $BARE_PID "${GATEWAY_PIDS[@]}" 2>/dev/null; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; sleep 1; rm -rf "$work"' EXIT

redis_port="$(free_port)"
redis-server --port "$redis_port" --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
REDIS_PID=$!
sleep 0.5
start_dev "$work/data" REDIS_URL="redis://127.0.0.1:$redis_port/" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000
me="$(curl -s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me")"
echo "$me" | grep -q '"credits"' || { echo "GET /me failed: $me" >&2; exit 1; }

# Teams with a key each, for the runs where requests are spread over teams (so that
# concurrent requests of one team rarely share a Redis call or an identity read): a Lua file
# per team count, cycling through that many keys.
TEAM_COUNTS="${TEAM_COUNTS:-64 1000}"
most_teams="$(echo $TEAM_COUNTS | tr ' ' '\n' | sort -n | tail -n1)"
echo "creating $most_teams teams with a key each" >&2
for i in $(seq "$most_teams"); do
  team="$("$SWITCHBOARD_BIN" admin --data-dir "$work/data" create-team --name "Bench $i" --credits 10 | json_field '["id"]')"
  "$SWITCHBOARD_BIN" admin --data-dir "$work/data" create-key --team "$team" --name bench | json_field '["key"]'
done > "$work/keys.txt"
# keys_lua COUNT [COUNTING]: wrk script cycling through the first COUNT keys; with COUNTING,
# it also counts answers by status over all threads and prints them when done.
keys_lua() {
  echo "local keys = {"
  head -n "$1" "$work/keys.txt" | sed 's/.*/  "&",/'
  echo "}"
  cat <<'LUA'
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", nil, { ["X-API-Key"] = keys[(i % #keys) + 1] })
end
LUA
  [ -z "${2:-}" ] || cat <<'LUA'
local threads = {}
function setup(thread) table.insert(threads, thread) end
admitted, limited, other = 0, 0, 0
function response(status)
  if status == 200 then admitted = admitted + 1 elseif status == 429 then limited = limited + 1 else other = other + 1 end
end
function done()
  local a, l, o = 0, 0, 0
  for _, t in ipairs(threads) do a = a + t:get("admitted"); l = l + t:get("limited"); o = o + t:get("other") end
  io.write(string.format("admitted %d limited %d other %d\n", a, l, o))
end
LUA
}
for teams in $TEAM_COUNTS; do keys_lua "$teams" > "$work/keys-$teams.lua"; done

# The same bytes as the gateway's answer, served by nginx.
mkdir -p "$work/www"
printf '%s' "$me" > "$work/www/me.json"
start_nginx "$work/www"
nginx_port="$NGINX_PORT"
bare_port="$(free_port)"
"$BARE_BIN" "127.0.0.1:$bare_port" "$work/www/me.json" > "$work/bare.out" 2>&1 &
BARE_PID=$!
for _ in $(seq 1 100); do grep -q "listening on" "$work/bare.out" 2>/dev/null && break; sleep 0.1; done
grep -q "listening on" "$work/bare.out" || { cat "$work/bare.out" >&2; echo "bare_pingora did not start" >&2; exit 1; }

run_wrk() { wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency "$@"; }
# cpu_ticks PID: the process's user + system CPU so far, in clock ticks (1/100 s).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Redis commands of every kind (those a Lua script runs count too) since the last reset, from
# INFO commandstats; reset before each run, read after it, so a run's figure is its own.
redis_reset() { redis-cli -p "$redis_port" config resetstat >/dev/null; }
redis_commands() {
  redis-cli -p "$redis_port" info commandstats | tr -d '\r' \
    | awk -F'[=,]' '/^cmdstat_/ && !/^cmdstat_(info|config)/ {sum += $2} END {print sum + 0}'
}
echo "warming up" >&2
wrk -t2 -c"$CONNECTIONS" -d3s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me" >/dev/null
echo "gateway: GET /v1/me for $DURATION" >&2
redis_reset
ticks="$(cpu_ticks "$DEV_PID")"
run_wrk -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me" | tee "$work/gateway.txt" >&2
echo $(( $(cpu_ticks "$DEV_PID") - ticks )) > "$work/gateway.cpu"
redis_commands > "$work/gateway.redis"
for teams in $TEAM_COUNTS; do
  # As for the one key: measured warm, each key looked up and each team's identity read once.
  wrk -t2 -c"$CONNECTIONS" -d3s -s "$work/keys-$teams.lua" "$BASE_URL/me" >/dev/null
  echo "gateway: GET /v1/me with $teams teams' keys for $DURATION" >&2
  redis_reset
  # PROFILE_OUT=<file>: a CPU profile (perf, 10 s inside the first many-teams run) of the
  # `switchboard dev` process, its top symbols written to the file.
  if [ -n "${PROFILE_OUT:-}" ] && [ ! -f "$work/perf.data" ]; then
    (sleep 3 && perf record -F 999 -g -p "$DEV_PID" -o "$work/perf.data" -- sleep 10 >/dev/null 2>&1) &
    PERF_PID=$!
  fi
  ticks="$(cpu_ticks "$DEV_PID")"
  run_wrk -s "$work/keys-$teams.lua" "$BASE_URL/me" | tee "$work/teams-$teams.txt" >&2
  echo $(( $(cpu_ticks "$DEV_PID") - ticks )) > "$work/teams-$teams.cpu"
  redis_commands > "$work/teams-$teams.redis"
done
# Read before the buckets' window (a minute) ends.
redis_keys="$(redis-cli -p "$redis_port" --scan --pattern 'switchboard:ratelimit:*' | wc -l)"
if [ -n "${PROFILE_OUT:-}" ]; then
  wait "$PERF_PID" || true
  perf report -i "$work/perf.data" --no-children --sort dso,symbol -g none --percent-limit 0.7 2>/dev/null \
    | grep -v '^#' | grep '%' | sed -E 's/[[:space:]]+-[[:space:]]+-[[:space:]]*$//; s/[[:space:]]+$//' > "$PROFILE_OUT" || true
fi
echo "nginx: static file for $DURATION" >&2
run_wrk "http://127.0.0.1:$nginx_port/me.json" | tee "$work/nginx.txt" >&2
echo "pingora alone: the same bytes for $DURATION" >&2
wrk -t2 -c"$CONNECTIONS" -d3s "http://127.0.0.1:$bare_port/" >/dev/null
ticks="$(cpu_ticks "$BARE_PID")"
run_wrk "http://127.0.0.1:$bare_port/" | tee "$work/bare.txt" >&2
echo $(( $(cpu_ticks "$BARE_PID") - ticks )) > "$work/bare.cpu"

# Over-admission: for each TEAMS:LIMIT, two more gateways on the same Redis and services with
# the standard limit at LIMIT per minute, both hammered with the keys of TEAMS teams for 10 s
# (well inside one window). Every team asks far more than LIMIT times, so at most TEAMS x LIMIT
# answers may be 200; more would be tokens granted twice, fewer are tokens a gateway held in a
# lease when the run ended (limits of 32 and more are leased from, smaller ones never).
OVER_ADMISSION="${OVER_ADMISSION:-1000:20 20:1000}"
token="$(sed -n 's/^ *service token: *//p' "$work/data.out")"
peer_env=(SWITCHBOARD_SERVICE_TOKEN="$token")
for name in identity agents knowledgebase conversations crm webhooks; do
  peer_env+=("SWITCHBOARD_${name^^}_URL=$(sed -n "s/^ *$name gRPC: *//p" "$work/data.out")")
done
: > "$work/over-admission.txt"
for pair in $OVER_ADMISSION; do
  teams="${pair%%:*}"; limit="${pair##*:}"
  redis-cli -p "$redis_port" flushdb >/dev/null
  keys_lua "$teams" counting > "$work/count.lua"
  gateways=()
  for n in 1 2; do
    env RUST_LOG=warn SWITCHBOARD_LISTEN="127.0.0.1:0" REDIS_URL="redis://127.0.0.1:$redis_port/" \
      SWITCHBOARD_RATE_LIMIT_STANDARD="$limit" "${peer_env[@]}" \
      "$SWITCHBOARD_BIN" serve gateway >"$work/gateway-$n.out" 2>"$work/gateway-$n.err" &
    GATEWAY_PIDS+=("$!")
    for _ in $(seq 1 300); do grep -q "gateway listening on" "$work/gateway-$n.out" 2>/dev/null && break; sleep 0.1; done
    url="$(sed -n 's/^gateway listening on *//p' "$work/gateway-$n.out")"
    [ -n "$url" ] || { cat "$work/gateway-$n.err" >&2; echo "gateway $n did not start" >&2; exit 1; }
    gateways+=("$url")
  done
  # Both subscribed to team versions (they take no leases before).
  for _ in $(seq 1 100); do
    [ "$(redis-cli -p "$redis_port" pubsub numsub switchboard:team-versions | tail -n1)" -ge 2 ] && break
    sleep 0.1
  done
  echo "over-admission: $teams teams at $limit per minute through two gateways for 10 s" >&2
  wrk -t1 -c32 -d10s -s "$work/count.lua" "${gateways[0]}/me" > "$work/count-0.txt" &
  first=$!
  wrk -t1 -c32 -d10s -s "$work/count.lua" "${gateways[1]}/me" > "$work/count-1.txt"
  wait "$first"
  admitted="$(cat "$work"/count-*.txt | awk '/^admitted/ {sum += $2} END {print sum}')"
  limited="$(cat "$work"/count-*.txt | awk '/^admitted/ {sum += $4} END {print sum}')"
  others="$(cat "$work"/count-*.txt | awk '/^admitted/ {sum += $6} END {print sum}')"
  echo "admitted $admitted (allowed $((teams * limit))), limited $limited, other $others" >&2
  echo "$teams $limit $admitted $limited $others" >> "$work/over-admission.txt"
  kill "${GATEWAY_PIDS[@]}" 2>/dev/null || true
  wait "${GATEWAY_PIDS[@]}" 2>/dev/null || true
  GATEWAY_PIDS=()
done

python3 - "$work" "$DURATION" "$CONNECTIONS" "$redis_keys" "$(machine_line)" "$TEAM_COUNTS" "$BENCH_PROFILE" \
  > "$work/section.md" <<'PY'
import re, sys
work, duration, connections, redis_keys, machine, team_counts, profile = sys.argv[1:8]
def parse(name):
    text = open(f"{work}/{name}.txt").read()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    def pct(p):
        m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        value, unit = float(m.group(1)), m.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    non2xx = int(non2xx.group(1)) if non2xx else 0
    requests = int(re.search(r"(\d+) requests in", text).group(1))
    try:
        commands = int(open(f"{work}/{name}.redis").read().strip())
        per_request = f"{commands / max(1, requests - non2xx):.2f}"
    except FileNotFoundError:
        per_request = "-"
    try:
        cpu = f"{int(open(f'{work}/{name}.cpu').read().strip()) * 10_000 / requests:.1f}"
    except FileNotFoundError:
        cpu = "-"
    return rps, pct(50), pct(99), non2xx, per_request, cpu
g, n, b = parse("gateway"), parse("nginx"), parse("bare")
spread = [(int(teams), parse(f"teams-{teams}")) for teams in team_counts.split()]
print("## Gateway: GET /v1/me against a static file\n")
print(f"Command: `bench/gateway-me.sh` (wrk, {connections} connections, 2 threads, {duration} each, one run;")
print(f"the gateway and pingora alone built with the `{profile}` profile).")
print("The gateway authenticates the key (cached), admits the request from a token lease it took from")
print("the team's Redis bucket (one Lua script call per lease of up to 256 tokens, which also reads the")
print("team's version), knows the team's current version from its Redis subscription, and renders JSON")
print("from the identity it keeps for that version (read from the identity service over loopback gRPC,")
print("SQLite, when the version is new: every change to a team gives it a new version before it is")
print("acknowledged, see docs/api-decisions.md); nginx serves the same bytes from a file. Both share")
print("the 2 cores with wrk. The gateway and pingora alone serve on one event loop per core, as nginx's")
print("workers do (`SWITCHBOARD_GATEWAY_THREADS`). The rows with many teams cycle through their keys, so")
print("that concurrent requests are mostly of different teams.\n")
print(f"{machine}\n")
print("| target | requests/s | p50 | p99 | non-2xx | Redis commands per admitted request | server CPU per request | % of nginx |")
print("|---|---|---|---|---|---|---|---|")
def row(label, r):
    cpu = f"{r[5]} µs" if r[5] != "-" else "-"
    print(f"| {label} | {r[0]:,.0f} | {r[1]:.2f} ms | {r[2]:.2f} ms | {r[3]} | {r[4]} | {cpu} | {r[0] / n[0] * 100:.1f}% |")
row("gateway `GET /v1/me`, one key", g)
for teams, r in spread:
    row(f"gateway `GET /v1/me`, keys of {teams:,} teams", r)
row("nginx static JSON", n)
row("pingora alone: the same bytes, nothing of ours", b)
print(f"\nTargets (issue 27): at least 60% of nginx with one key and with 64 teams, 45% with 1,000 teams;")
print("p99 at most 5 ms; at most 0.5 Redis commands per admitted request with one key and with 64 teams.")
print(f"Redis held {redis_keys} rate-limit bucket(s) afterwards, so the Redis path was the one measured.")
print("Redis commands: every `cmdstat_*` of `INFO commandstats` (commands run inside the limiter's")
print("Lua script included) over the run, divided by the answers 200. Server CPU: user and system")
print("time of the `switchboard dev` process (all its components) or of `bare_pingora` over the run")
print("(/proc), divided by the requests answered; nginx's workers are not measured.\n")
print("Over-admission: two more gateways on the same Redis, the keys of the teams cycled through both")
print("for 10 s (inside one window), every team asking far more than its limit:\n")
print("| teams x standard limit | allowed | answers 200 | 429 | others | over-admitted | held in leases at the end |")
print("|---|---|---|---|---|---|---|")
for line in open(f"{work}/over-admission.txt"):
    teams, limit, admitted, limited, others = map(int, line.split())
    allowed = teams * limit
    print(f"| {teams:,} x {limit:,} | {allowed:,} | {admitted:,} | {limited:,} | {others} | "
          f"{max(0, admitted - allowed)} | {max(0, allowed - admitted)} |")
PY
replace_section gateway-me "$work/section.md"
cat "$work/section.md"
