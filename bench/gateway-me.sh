#!/usr/bin/env bash
# GET /v1/me through the gateway (Redis rate limiter on, limits raised so that nothing is
# refused) against a static JSON file served by nginx, the ceiling of this machine; wrk
# with 64 connections for 20 s each, in the same run. Writes BENCHMARKS.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_packages wrk nginx-light redis-server
DURATION="${DURATION:-20s}"
CONNECTIONS="${CONNECTIONS:-64}"
SWITCHBOARD_BIN="$(release_binary)"
work="$(mktemp -d)"
trap 'kill $DEV_PID $REDIS_PID 2>/dev/null; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; sleep 1; rm -rf "$work"' EXIT

redis_port="$(free_port)"
redis-server --port "$redis_port" --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
REDIS_PID=$!
sleep 0.5
start_dev "$work/data" REDIS_URL="redis://127.0.0.1:$redis_port/" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000
me="$(curl -s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me")"
echo "$me" | grep -q '"credits"' || { echo "GET /me failed: $me" >&2; exit 1; }

# 64 teams with a key each, for the run where requests are spread over teams (so that
# concurrent reads of one team's identity rarely share a call).
TEAMS="${TEAMS:-64}"
keys_lua="$work/keys.lua"
{
  echo "local keys = {"
  for i in $(seq "$TEAMS"); do
    team="$("$SWITCHBOARD_BIN" admin --data-dir "$work/data" create-team --name "Bench $i" --credits 10 | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
    key="$("$SWITCHBOARD_BIN" admin --data-dir "$work/data" create-key --team "$team" --name bench | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')"
    echo "  \"$key\","
  done
  echo "}"
  cat <<'LUA'
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", nil, { ["X-API-Key"] = keys[(i % #keys) + 1] })
end
LUA
} > "$keys_lua"

# The same bytes as the gateway's answer, served by nginx.
nginx_port="$(free_port)"
mkdir -p "$work/www"
printf '%s' "$me" > "$work/www/me.json"
# nginx's workers run as another user: let them read the file.
chmod a+rx "$work" "$work/www"; chmod a+r "$work/www/me.json"
cat > "$work/nginx.conf" <<CONF
worker_processes auto;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  default_type application/json;
  server { listen 127.0.0.1:$nginx_port; root $work/www; keepalive_requests 1000000; }
}
CONF
nginx -c "$work/nginx.conf"
sleep 0.3

run_wrk() { wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency "$@"; }
echo "warming up" >&2
wrk -t2 -c"$CONNECTIONS" -d3s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me" >/dev/null
echo "gateway: GET /v1/me for $DURATION" >&2
run_wrk -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me" | tee "$work/gateway.txt" >&2
echo "gateway: GET /v1/me with $TEAMS teams' keys for $DURATION" >&2
run_wrk -s "$keys_lua" "$BASE_URL/me" | tee "$work/teams.txt" >&2
echo "nginx: static file for $DURATION" >&2
run_wrk "http://127.0.0.1:$nginx_port/me.json" | tee "$work/nginx.txt" >&2
redis_keys="$(redis-cli -p "$redis_port" --scan --pattern 'switchboard:ratelimit:*' | wc -l)"

python3 - "$work" "$DURATION" "$CONNECTIONS" "$redis_keys" "$(machine_line)" "$TEAMS" > "$work/section.md" <<'PY'
import re, sys
work, duration, connections, redis_keys, machine, teams = sys.argv[1:7]
def parse(name):
    text = open(f"{work}/{name}.txt").read()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    def pct(p):
        m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        value, unit = float(m.group(1)), m.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return rps, pct(50), pct(99), int(non2xx.group(1)) if non2xx else 0
g, t, n = parse("gateway"), parse("teams"), parse("nginx")
print("## Gateway: GET /v1/me against a static file\n")
print(f"Command: `bench/gateway-me.sh` (wrk, {connections} connections, 2 threads, {duration} each, one run).")
print("The gateway authenticates the key (cached), takes a token from the Redis bucket (Lua script),")
print("calls the identity service over loopback gRPC (SQLite) and renders JSON; nginx serves the same")
print("bytes from a file. Both share the 2 cores with wrk. Concurrent requests of one team share one")
print("Redis script call and one identity read (each started after the requests it serves arrived,")
print("see docs/api-decisions.md); the second row spreads the same load over the keys of many teams,")
print("where that sharing rarely applies.\n")
print(f"{machine}\n")
print("| target | requests/s | p50 | p99 | non-2xx |")
print("|---|---|---|---|---|")
print(f"| gateway `GET /v1/me`, one key | {g[0]:,.0f} | {g[1]:.2f} ms | {g[2]:.2f} ms | {g[3]} |")
print(f"| gateway `GET /v1/me`, keys of {teams} teams | {t[0]:,.0f} | {t[1]:.2f} ms | {t[2]:.2f} ms | {t[3]} |")
print(f"| nginx static JSON | {n[0]:,.0f} | {n[1]:.2f} ms | {n[2]:.2f} ms | {n[3]} |")
print(f"\nRatio: {g[0] / n[0] * 100:.1f}% of nginx with one key (target: at least 25%), {t[0] / n[0] * 100:.1f}% with the keys of {teams} teams;")
print(f"gateway p99 {g[2]:.2f} ms and {t[2]:.2f} ms (target: under 10 ms).")
print(f"Redis held {redis_keys} rate-limit bucket(s) afterwards, so the Redis path was the one measured.")
PY
replace_section gateway-me "$work/section.md"
cat "$work/section.md"
