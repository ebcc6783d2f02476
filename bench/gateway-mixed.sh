#!/usr/bin/env bash
# What the gateway's own event loops (SWITCHBOARD_GATEWAY_THREADS, one per CPU by default) trade
# against one shared work-stealing runtime (=0): `GET /v1/me` (wrk, 48 connections) while 8 more
# connections ask for something else, for each of OTHERS (default: `agents`, a gRPC call to the
# agents service each; `openapi.json`, a large body each), the two ways alternated ROUNDS times,
# with Redis (so `/me` is answered from what the gateway keeps).
# Prints a Markdown table with the machine line; BENCHMARKS.md ("Issue 27, fifth pass") keeps a
# run. SWITCHBOARD_BIN=<a built binary> skips the build (release profile unless BENCH_PROFILE).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_packages wrk redis-server
DURATION="${DURATION:-8s}"
ROUNDS="${ROUNDS:-2}"
OTHERS="${OTHERS:-agents openapi.json}"
SWITCHBOARD_BIN="${SWITCHBOARD_BIN:-$(release_binary)}"
work="$(mktemp -d)"
DEV_PID=""
# Redis on, as deployed: `/me` is then answered from what the gateway keeps, and the other
# path is what reaches a service.
redis_port="$(free_port)"
redis-server --port "$redis_port" --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
REDIS_PID=$!
trap 'kill $REDIS_PID $DEV_PID 2>/dev/null; sleep 1; rm -rf "$work"; true' EXIT

# One run: `dev` started with THREADS (empty: the default), /me beside OTHER; sets RESULT to
# "me_rps me_p99 other_rps".
mixed_run() {
  local threads="$1" other="$2" data="$work/data-$1"
  redis-cli -p "$redis_port" flushall >/dev/null
  start_dev "$data" SWITCHBOARD_GATEWAY_THREADS="$threads" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000 \
    REDIS_URL="redis://127.0.0.1:$redis_port/"
  curl -sf -o /dev/null -H "X-API-Key: $DEMO_KEY" "$BASE_URL/$other" || { echo "GET /v1/$other failed" >&2; exit 1; }
  # Warm-up of both, then both measured at once; wrk ends each run after its duration.
  wrk -t1 -c8 -d2s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/$other" >/dev/null &
  local warming=$!
  wrk -t1 -c48 -d2s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me" >/dev/null
  # Only wrk: `dev` is a child too, and a bare `wait` would wait for it.
  wait "$warming"
  wrk -t1 -c8 -d"$DURATION" -H "X-API-Key: $DEMO_KEY" "$BASE_URL/$other" >"$work/other.txt" &
  local other_pid=$!
  wrk -t1 -c48 -d"$DURATION" --latency -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me" >"$work/me.txt"
  wait "$other_pid"
  kill "$DEV_PID"
  wait "$DEV_PID" 2>/dev/null || true
  DEV_PID=""
  rm -rf "$data" "$data.out" "$data.err"
  RESULT="$(awk '/Requests\/sec/ {print $2}' "$work/me.txt") $(awk '/ 99%/ {print $2}' "$work/me.txt") $(awk '/Requests\/sec/ {print $2}' "$work/other.txt")"
}

machine_line
echo
echo "| alongside \`/me\` | runtime | \`/me\` requests/s | \`/me\` p99 | the other's requests/s |"
echo "|---|---|---|---|---|"
for other in $OTHERS; do
  for _ in $(seq "$ROUNDS"); do
    for threads in "" 0; do
      mixed_run "$threads" "$other"
      read -r rps p99 other_rps <<<"$RESULT"
      label="$([ -z "$threads" ] && echo "own loops (default)" || echo "shared (=0)")"
      printf '| `GET /v1/%s` | %s | %s | %s | %s |\n' "$other" "$label" "$rps" "$p99" "$other_rps"
    done
  done
done
