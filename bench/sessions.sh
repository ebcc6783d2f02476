#!/usr/bin/env bash
# People and the portal (issue 24's figures), in one run on this machine:
# - GET /v1/me with a session cookie against the same request with X-API-Key (wrk, the same
#   connections and duration, one after the other in this run): sessions are cached like keys;
# - one sign-in (Argon2id verify + a session written), over HTTP, the median of 20;
# - what a first visit to the portal downloads (JavaScript, CSS, HTML, the logo), gzip as a
#   browser asks for it, and the time from navigation to the keys table shown in Chromium.
# Writes the "sessions" section of BENCHMARKS.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_packages wrk
ensure_portal_tests
DURATION="${DURATION:-20s}"
CONNECTIONS="${CONNECTIONS:-64}"
SWITCHBOARD_BIN="$(release_binary)"
work="$(mktemp -d)"
trap 'kill $DEV_PID 2>/dev/null; sleep 1; rm -rf "$work"' EXIT
start_dev "$work/data" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000 SWITCHBOARD_RATE_LIMIT_AUTH=1000000
root="${BASE_URL%/v1}"
team="$(curl -s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me" | json_field '["data"]["team"]["id"]')"
url="$("$SWITCHBOARD_BIN" admin --data-dir "$work/data" invite --team "$team" --email bench@bench.example \
  --base-url "$root" | json_field '["url"]')"
password="correct horse battery"
curl -s -D "$work/accept.headers" -o /dev/null -H 'Content-Type: application/json' \
  -d "{\"token\": \"${url##*/}\", \"password\": \"$password\", \"firstName\": \"Bench\", \"lastName\": \"Mark\"}" \
  "$BASE_URL/auth/accept-invite"
token="$(sed -n 's/^[Ss]et-[Cc]ookie: switchboard_session=\([A-Za-z0-9]*\);.*/\1/p' "$work/accept.headers")"
[ -n "$token" ] || { cat "$work/accept.headers" >&2; echo "no session cookie" >&2; exit 1; }
curl -sf -H "Cookie: switchboard_session=$token" "$BASE_URL/me" >/dev/null

rps() { sed -n 's/^Requests\/sec: *//p' "$1"; }
p99() { awk '/ 99%/ {print $2}' "$1"; }
run_wrk() { wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency -H "$1" "$BASE_URL/me" >"$2"; }
wrk -t2 -c"$CONNECTIONS" -d5s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me" >/dev/null   # warm up
run_wrk "X-API-Key: $DEMO_KEY" "$work/key.txt"
run_wrk "Cookie: switchboard_session=$token" "$work/session.txt"
run_wrk "X-API-Key: $DEMO_KEY" "$work/key2.txt"
key_rps="$(python3 -c "print(round(($(rps "$work/key.txt") + $(rps "$work/key2.txt")) / 2))")"
session_rps="$(python3 -c "print(round($(rps "$work/session.txt")))")"
ratio="$(python3 -c "print(round(100 * $session_rps / $key_rps, 1))")"

for _ in $(seq 20); do
  curl -s -o /dev/null -w '%{time_total}\n' -H 'Content-Type: application/json' \
    -d "{\"email\": \"bench@bench.example\", \"password\": \"$password\"}" "$BASE_URL/auth/sign-in"
done >"$work/sign-in.txt"
sign_in_ms="$(python3 -c "import statistics; print(round(1000 * statistics.median(float(l) for l in open('$work/sign-in.txt')), 1))")"

bytes() { curl -s -o /dev/null -H 'Accept-Encoding: gzip' -w '%{size_download}' "$root$1"; }
assets=(/ /assets/app.css /assets/app.js /assets/api.js /assets/dom.js /assets/pages-auth.js /assets/pages-team.js /assets/logo.svg)
total=0
for asset in "${assets[@]}"; do total=$((total + $(bytes "$asset"))); done
keys_ms="$(node "$SWITCHBOARD_ROOT/bench/portal_keys.mjs" "$root" "$token")"

out="$work/section.md"
{
  echo "## People and the portal: sessions, sign-in, first visit"
  echo
  echo "$(machine_line) \`bench/sessions.sh\`: \`switchboard dev\` (release), wrk -t2 -c$CONNECTIONS -d$DURATION on loopback."
  echo
  echo "| what | figure | goal |"
  echo "|---|---|---|"
  echo "| GET /v1/me with X-API-Key (mean of the runs before and after) | $key_rps req/s | reference |"
  echo "| GET /v1/me with the session cookie | $session_rps req/s ($ratio % of the key's, p99 $(p99 "$work/session.txt") against $(p99 "$work/key.txt")) | within 10 % |"
  echo "| one sign-in over HTTP (Argon2id m=64 MiB t=2 p=1, session written), median of 20 | $sign_in_ms ms | 50-250 ms of one core |"
  echo "| a first visit's download: HTML, JS, CSS and logo, gzip | $total bytes | <= 200 KB |"
  echo "| navigation to the keys table shown (Chromium, loopback, median of 5) | $keys_ms ms | <= 1 s |"
} >"$out"
cat "$out"
replace_section sessions "$out"
