#!/usr/bin/env bash
# The portal's workspace at scale (issue 25's figures), in one run on this machine:
# - what a first visit downloads: every file index.html names, gzip as a browser asks for it;
# - in Chromium, signed in, from navigation to the data shown, p50/p95 of 20 navigations, on a
#   team holding 100,000 calls and 100,000 contacts: a filtered calls page (direction, duration
#   range, sorted by duration), a contacts search, a call with a 200-segment transcript; and a
#   board of about 2,000 contacts (another team) until its first cards are shown.
# Writes the "portal workspace" section of BENCHMARKS.md, and the README's screenshots of the
# calls page and the board (docs/img).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_portal_tests
CALLS="${CALLS:-100000}"
CONTACTS="${CONTACTS:-100000}"
SWITCHBOARD_BIN="$(release_binary)"
work="$(mktemp -d)"
trap 'kill $DEV_PID 2>/dev/null; sleep 1; rm -rf "$work"' EXIT
start_dev "$work/data" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000 SWITCHBOARD_RATE_LIMIT_AUTH=1000000
root="${BASE_URL%/v1}"
admin() { "$SWITCHBOARD_BIN" admin --data-dir "$work/data" "$@"; }
team="$(curl -s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me" | json_field '["data"]["team"]["id"]')"

seed_started=$(date +%s)
admin seed-demo --team "$team" --calls "$CALLS" --chats 0 --segments 2 --recordings 0 --contacts "$CONTACTS" \
  --concurrency 64 >"$work/seed.json"
admin seed-demo --team "$team" --seed 2 --calls 1 --chats 0 --segments 200 --recordings 1 --recording-kb 2000 \
  --contacts 0 >/dev/null
seed_seconds=$(( $(date +%s) - seed_started ))
# The 200-segment call is by far the longest (2 to 9 s between segments).
long_call="$(curl -s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/calls?limit=1&sortBy=duration&sortOrder=desc" | json_field '["data"][0]["id"]')"
board_team="$(admin create-team --name "Board team" --credits 0 | json_field '["id"]')"
board="$(admin seed-demo --team "$board_team" --calls 0 --chats 0 --contacts 4000 | json_field '["crm"]["board"]')"
board_key="$(admin create-key --team "$board_team" --name bench | json_field '["key"]')"
board_contacts="$(curl -s -H "X-API-Key: $board_key" "$BASE_URL/contacts?boardId=$board&limit=1" \
  | json_field '["pagination"]["totalCount"]')"

session() { owner_session "$1" "$root" "$work"; }

cat >"$work/big.json" <<JSON
[
  {"name": "calls", "path": "/calls?callType=incoming&minDuration=20&maxDuration=60&sortBy=duration&sortOrder=desc", "selector": "main tbody tr", "count": 20, "screenshot": "portal-calls.png"},
  {"name": "contacts", "path": "/contacts?search=Lovelace", "selector": "main tbody tr", "count": 10},
  {"name": "transcript", "path": "/calls/$long_call", "selector": ".cc-bubble", "count": 200}
]
JSON
cat >"$work/board.json" <<JSON
[ {"name": "board", "path": "/boards/$board", "selector": ".kanban-card", "count": 1, "screenshot": "portal-board.png"} ]
JSON
big="$(node "$SWITCHBOARD_ROOT/bench/portal_pages.mjs" "$root" "$(session "$team")" "$work/big.json" "$SWITCHBOARD_ROOT/docs/img")"
small="$(node "$SWITCHBOARD_ROOT/bench/portal_pages.mjs" "$root" "$(session "$board_team")" "$work/board.json" "$SWITCHBOARD_ROOT/docs/img")"

bytes() { curl -s -o /dev/null -H 'Accept-Encoding: gzip' -w '%{size_download}' "$root$1"; }
total=$(bytes /)
files=0
for asset in $(grep -o '/assets/[a-z0-9.-]*' "$SWITCHBOARD_ROOT/portal/assets/index.html" | sort -u); do
  total=$((total + $(bytes "$asset"))); files=$((files + 1))
done

figure() { python3 -c "import json,sys; d=json.loads(sys.argv[1])[sys.argv[2]]; print(f\"{d['p50']} ms / {d['p95']} ms (max {d['max']} ms, {d['runs']} runs)\")" "$1" "$2"; }
out="$work/section.md"
{
  echo "## The portal's workspace: first visit and pages at 100,000 calls and contacts"
  echo
  echo "$(machine_line) \`bench/portal.sh\`: \`switchboard dev\` (release, SQLite), Debian's Chromium on loopback,"
  echo "signed in; each figure is navigation (\`page.goto\`, the portal's files cached) until the data is shown."
  echo
  echo "| what | figure | goal |"
  echo "|---|---|---|"
  echo "| first visit: index.html and the $files files it names, gzip | $total bytes | ≤ 300 KB |"
  echo "| filtered calls page (incoming, 20–60 s, by duration), 20 rows, of $CALLS calls: p50 / p95 | $(figure "$big" calls) | p95 ≤ 500 ms |"
  echo "| contacts search (\`Lovelace\`), rows shown, of $CONTACTS contacts: p50 / p95 | $(figure "$big" contacts) | p95 ≤ 500 ms |"
  echo "| a call with a 200-segment transcript, every segment shown: p50 / p95 | $(figure "$big" transcript) | ≤ 500 ms |"
  echo "| a board of $board_contacts contacts (5 stages, 50 cards a column), first card shown: p50 / p95 | $(figure "$small" board) | ≤ 1 s |"
  echo
  echo "Seeding took ${seed_seconds} s (seed-demo over the ingestion and CRM gRPC APIs). The screenshots"
  echo "docs/img/portal-calls.png and docs/img/portal-board.png come from this run."
} >"$out"
cat "$out"
replace_section "portal workspace" "$out"
