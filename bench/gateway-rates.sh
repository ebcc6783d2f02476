#!/usr/bin/env bash
# GET /v1/me through the gateway at fixed request rates, against nginx serving the same bytes
# from a file, in the same run: latency timed from when each request was due (open loop, no
# coordinated omission: gateway/examples/open_loop.rs), so a stall is charged to every request
# behind it. The keys of 64 teams are cycled through, Redis rate limiter on with limits raised.
# Rates and servers alternate, ROUNDS times (default 2). Prints a table with the CPU model, its
# SIMD flags and the steal time; BENCHMARKS.md is left alone (the figures go in by hand).
#
# Knobs: RATES (default "10000 20000"), RUN_SECONDS (each row, default 10), CONNECTIONS (default
# 64), ROUNDS, SWITCHBOARD_BIN (a built binary; default: a build with BENCH_PROFILE, release).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_packages nginx-light redis-server
RATES="${RATES:-10000 20000}"
SECONDS_EACH="${RUN_SECONDS:-10}"
CONNECTIONS="${CONNECTIONS:-64}"
ROUNDS="${ROUNDS:-2}"
SWITCHBOARD_BIN="${SWITCHBOARD_BIN:-$(release_binary)}"
(cd "$SWITCHBOARD_ROOT" && cargo build -q --profile "${BENCH_PROFILE:-release}" -p switchboard-gateway --example open_loop >&2)
OPEN_LOOP="$CARGO_TARGET_DIR/${BENCH_PROFILE:-release}/examples/open_loop"
work="$(mktemp -d)"
REDIS_PID=""
DEV_PID=""
trap 'kill $DEV_PID $REDIS_PID 2>/dev/null; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; sleep 1; rm -rf "$work"' EXIT

redis_port="$(free_port)"
redis-server --port "$redis_port" --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
REDIS_PID=$!
sleep 0.5
start_dev "$work/data" REDIS_URL="redis://127.0.0.1:$redis_port/" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000
me="$(curl -s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me")"
echo "$me" | grep -q '"credits"' || { echo "GET /me failed: $me" >&2; exit 1; }
for i in $(seq 64); do team_key "$work/data" "Rates $i"; done > "$work/keys.txt"
gateway_addr="$(echo "$BASE_URL" | sed -E 's#^https?://([^/]+).*#\1#')"

mkdir -p "$work/www/v1"
printf '%s' "$me" > "$work/www/v1/me"
start_nginx "$work/www"
nginx_port="$NGINX_PORT"

# row TARGET ADDR RATE: one open-loop run; prints its JSON.
row() {
  "$OPEN_LOOP" "$2" /v1/me "$3" "$SECONDS_EACH" "$CONNECTIONS" "$work/keys.txt"
}
echo "warming up" >&2
row gateway "$gateway_addr" 5000 >/dev/null
row nginx "127.0.0.1:$nginx_port" 5000 >/dev/null
read -r steal0 total0 < <(steal_ticks)
for round in $(seq "$ROUNDS"); do
  for rate in $RATES; do
    for target in nginx gateway; do
      addr="$gateway_addr"; [ "$target" = nginx ] && addr="127.0.0.1:$nginx_port"
      echo "round $round: $target at $rate/s" >&2
      printf '%s\t%s\t%s\n' "$target" "$rate" "$(row "$target" "$addr" "$rate")" >> "$work/rows.tsv"
    done
  done
done
read -r steal1 total1 < <(steal_ticks)

machine_line
simd_line
echo "Steal time over the runs: $(steal_percent "$steal0" "$total0" "$steal1" "$total1") %."
echo
echo "| target | rate asked | achieved | p50 | p90 | p99 | p99.9 | max | non-2xx | errors |"
echo "|---|---|---|---|---|---|---|---|---|---|"
python3 - "$work/rows.tsv" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    target, rate, figures = line.rstrip("\n").split("\t")
    f = json.loads(figures)
    print("| %s | %s | %s | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %d | %d |" % (
        target, f"{int(rate):,}", f"{int(f['achieved_rate']):,}", f["p50_ms"], f["p90_ms"], f["p99_ms"],
        f["p999_ms"], f["max_ms"], f["non_2xx"], f["errors"]))
PY
