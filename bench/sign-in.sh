#!/usr/bin/env bash
# Sign-in with a second factor (issue 38's figures), in one run on this machine:
# - the platform (`switchboard dev`, release) pinned to one core (taskset), the clients on the other;
# - a sign-in with a password alone, the reference of this run; with a password and a TOTP code
#   (two requests: sign-in, then verify); with a passkey alone and with a password and a passkey
#   (Chromium's virtual authenticator, bench/passkey_sign_in.mjs): the median and p95 of 20 each;
# - the sign-in throttle's exactness: N concurrent wrong passwords for one e-mail from one client,
#   how many were answered 401 (the limit is 10), in process and with Redis.
# Prints the CPU model and the host's steal time over the run. Writes the "sign-in" section of
# BENCHMARKS.md. SWITCHBOARD_BIN=<a built binary> skips the build.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_packages redis-server util-linux
ensure_portal_tests
SWITCHBOARD_BIN="${SWITCHBOARD_BIN:-$(release_binary)}"
RUNS="${RUNS:-20}"
work="$(mktemp -d)"
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; sleep 1; rm -rf "$work"' EXIT

read -r steal0 total0 < <(steal_ticks)

# start_platform NAME [ENV=VALUE...]: `switchboard dev` on core 0; sets BASE_URL and DEMO_KEY.
start_platform() {
  local name="$1"; shift
  local port out
  port="$(free_port)"
  out="$work/$name.out"
  env RUST_LOG=warn SWITCHBOARD_RATE_LIMIT_AUTH=1000000 SWITCHBOARD_RATE_LIMIT_STANDARD=1000000 \
    SWITCHBOARD_RATE_LIMIT_WRITE=1000000 "$@" taskset -c 0 "$SWITCHBOARD_BIN" dev --data-dir "$work/$name" \
    --listen "127.0.0.1:$port" >"$out" 2>"$work/$name.err" &
  PIDS+=($!)
  for _ in $(seq 1 300); do grep -q "Stop with" "$out" 2>/dev/null && break; sleep 0.1; done
  BASE_URL="$(sed -n 's/^ *API base URL: *//p' "$out")"
  DEMO_KEY="$(sed -n 's/^ *API key (shown once, keep it): *//p' "$out")"
  [ -n "$BASE_URL" ] || { cat "$work/$name.err" >&2; echo "switchboard dev did not start" >&2; exit 1; }
}

start_platform main
team="$(curl -s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me" | json_field '["data"]["team"]["id"]')"
# The measuring clients, on the other core.
taskset -c 1 python3 "$BENCH_DIR/sign_in.py" people "$SWITCHBOARD_BIN" "$work/main" "$team" "$BASE_URL" "$RUNS" \
  >"$work/people.json"
root="${BASE_URL%/v1}"
passkeys="$(taskset -c 1 node "$BENCH_DIR/passkey_sign_in.mjs" "${root/127.0.0.1/localhost}" \
  "$(json_field '["passkey_email"]' <"$work/people.json")" "$RUNS")"
echo "$passkeys" >"$work/passkeys.json"

# The throttle: in process, then with Redis, each on a platform of its own.
start_platform memory
python3 "$BENCH_DIR/sign_in.py" throttle "$SWITCHBOARD_BIN" "$work/memory" "" "$BASE_URL" 30 >"$work/throttle-memory.txt"
redis_port="$(free_port)"
redis-server --port "$redis_port" --save '' --appendonly no --bind 127.0.0.1 >/dev/null &
PIDS+=($!)
sleep 0.5
start_platform redis REDIS_URL="redis://127.0.0.1:$redis_port/"
python3 "$BENCH_DIR/sign_in.py" throttle "$SWITCHBOARD_BIN" "$work/redis" "" "$BASE_URL" 30 >"$work/throttle-redis.txt"
python3 "$BENCH_DIR/sign_in.py" throttle "$SWITCHBOARD_BIN" "$work/redis" "" "$BASE_URL" 100 >"$work/throttle-redis-100.txt"

read -r steal1 total1 < <(steal_ticks)
steal="$(steal_percent "$steal0" "$total0" "$steal1" "$total1")"
figure() { python3 -c "import json,sys; d=json.load(open('$1')); print(d$2)"; }

out="$work/section.md"
{
  echo "## Sign-in with a second factor, and the throttle (issue 38)"
  echo
  echo "$(machine_line) Steal time over the run: $steal %. \`bench/sign-in.sh\`: \`switchboard dev\` (release, SQLite) pinned to one core (\`taskset -c 0\`), the clients on the other; $RUNS sign-ins each, over HTTP on loopback."
  echo
  echo "| what | p50 | p95 | goal |"
  echo "|---|---|---|---|"
  echo "| password alone (Argon2id verify, session written): the reference | $(figure "$work/people.json" '["password"]["p50"]') ms | $(figure "$work/people.json" '["password"]["p95"]') ms | reference |"
  echo "| password, then a TOTP code (two requests) | $(figure "$work/people.json" '["totp"]["p50"]') ms | $(figure "$work/people.json" '["totp"]["p95"]') ms | ≤ 300 ms |"
  echo "| a passkey alone (options, the authenticator, finish; Chromium, virtual authenticator) | $(figure "$work/passkeys.json" '["alone"]["p50"]') ms | $(figure "$work/passkeys.json" '["alone"]["p95"]') ms | ≤ 300 ms |"
  echo "| password, then a passkey (Chromium) | $(figure "$work/passkeys.json" '["second"]["p50"]') ms | $(figure "$work/passkeys.json" '["second"]["p95"]') ms | ≤ 300 ms |"
  echo
  echo "Throttle exactness: N wrong passwords for one e-mail from one client, all at once (the limit is 10 per e-mail and client in 15 minutes):"
  echo
  echo "| limiter | N | answered 401 | answered 429 | goal |"
  echo "|---|---|---|---|---|"
  echo "| in process | 30 | $(cat "$work/throttle-memory.txt") | exactly 10 × 401 |"
  echo "| Redis | 30 | $(cat "$work/throttle-redis.txt") | exactly 10 × 401 |"
  echo "| Redis | 100 | $(cat "$work/throttle-redis-100.txt") | exactly 10 × 401 |"
} >"$out"
cat "$out"
replace_section sign-in "$out"
