#!/usr/bin/env bash
# Lighthouse (npm `lighthouse`, Debian's Chromium, desktop preset) on every page of the portal,
# signed in as an owner of a team filled by `admin seed-demo` (issue 40's figures):
# accessibility, best practices, cumulative layout shift, total blocking time, and the longest
# chain of requests (modulepreload puts every module in one round after index.html).
# The signed-out sign-in page is the reference, measured in the same run.
# SWITCHBOARD_BIN reuses a built binary (default: a release build; BENCH_BUILD names what it is). Prints the CPU model and the
# host's steal time over the run; writes the "portal lighthouse" section of BENCHMARKS.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_packages chromium
lh_dir="$HOME/.cache/switchboard-lighthouse"
if [ ! -x "$lh_dir/node_modules/.bin/lighthouse" ]; then
  mkdir -p "$lh_dir"
  timeout 600 npm i --prefix "$lh_dir" --no-audit --no-fund lighthouse@12 >&2
fi
SWITCHBOARD_BIN="${SWITCHBOARD_BIN:-$(release_binary)}"
# What the binary is, for the figures' note: "release" unless SWITCHBOARD_BIN says otherwise.
build="${BENCH_BUILD:-release}"
work="$(mktemp -d)"
trap 'kill $DEV_PID 2>/dev/null; sleep 1; rm -rf "$work"' EXIT
read -r steal0 total0 < <(steal_ticks)
# The portal's files from this tree: the same bytes a release build embeds, and the files measured when
# SWITCHBOARD_BIN is an older binary.
start_dev "$work/data" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000 SWITCHBOARD_RATE_LIMIT_AUTH=100000 \
  SWITCHBOARD_PORTAL_DIR="$SWITCHBOARD_ROOT/portal/assets"
root="${BASE_URL%/v1}"
team="$(curl -s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me" | json_field '["data"]["team"]["id"]')"
"$SWITCHBOARD_BIN" admin --data-dir "$work/data" seed-demo --team "$team" --calls 60 --chats 12 --recordings 2 \
  --contacts 40 >/dev/null
api() { curl -s --max-time 10 -H "X-API-Key: $DEMO_KEY" -H 'Content-Type: application/json' "$@"; }
agent="$(api -d '{"name": "Front desk", "type": "phone"}' "$BASE_URL/agents" | json_field '["data"]["id"]')"
for n in 1 2 3; do
  api -X PUT -d "{\"instructions\": \"You are the front desk of a dental clinic, version $n: greet callers and book them in.\"}" \
    "$BASE_URL/agents/$agent/instructions" >/dev/null
done
kb="$(api -d '{"name": "Clinic answers"}' "$BASE_URL/knowledgebase" | json_field '["data"]["id"]')"
first() { api "$BASE_URL/$1?limit=1" | json_field '["data"][0]["id"]'; }
token="$(owner_session "$team" "$root" "$work")"

pages=(
  "reference /sign-in" "overview /" "agents /agents" "agent /agents/$agent" "knowledge /knowledge"
  "knowledge-base /knowledge/$kb" "calls /calls" "call /calls/$(first calls)" "chats /chats"
  "chat /chats/$(first chats)" "contacts /contacts" "contact /contacts/$(first contacts)" "boards /boards"
  "board /boards/$(first boards)" "tags /settings/tags" "custom-fields /settings/custom-fields"
  "webhooks /webhooks" "keys /keys" "members /members" "subteams /subteams" "audit-log /audit-log"
  "security /settings/security" "profile /settings/profile"
)
for entry in "${pages[@]}"; do
  read -r name path <<<"$entry"
  headers='{}'
  [ "$name" = reference ] || headers="{\"Cookie\": \"switchboard_session=$token\"}"
  CHROME_PATH=/usr/bin/chromium timeout 180 "$lh_dir/node_modules/.bin/lighthouse" "$root$path" --quiet \
    --preset=desktop --only-categories=performance,accessibility,best-practices --output=json \
    --output-path="$work/$name.json" --extra-headers="$headers" \
    --chrome-flags="--headless=new --no-sandbox" >&2 || { echo "lighthouse failed on $path" >&2; exit 1; }
  echo "$name $path" >>"$work/pages.txt"
done
read -r steal1 total1 < <(steal_ticks)
steal="$(steal_percent "$steal0" "$total0" "$steal1" "$total1")"

out="$work/section.md"
{
  echo "## The portal in Lighthouse: every page, desktop preset (issue 40)"
  echo
  echo "$(machine_line) Steal time over the run: $steal %. \`bench/lighthouse.sh\`: Lighthouse 12"
  echo "(\`--preset=desktop\`) in Debian's Chromium against \`switchboard dev\` ($build build, SQLite) on loopback,"
  echo "signed in as an owner of a team with 60 seeded calls, 12 chats and 40 contacts. The first row, the"
  echo "signed-out sign-in page, is the reference. Goals: accessibility 100, best practices ≥ 95, CLS < 0.1,"
  echo "TBT ≤ 200 ms; \"chain\" is the longest chain of requests Lighthouse finds (index.html → the modules"
  echo "it preloads is 2: one round after the page)."
  echo
  python3 "$BENCH_DIR/lighthouse_table.py" "$work"
  echo
  echo "The console errors Lighthouse counts are answers the pages expect: 401 from \`GET /v1/auth/session\` when"
  echo "nobody is signed in (the sign-in page asks), and 404 from \`GET /v1/members/sso\` when the team has no single"
  echo "sign-on. A page's content shows once its first answers are in (at most 1.2 s), so nothing moves as they"
  echo "arrive: CLS went from 0.455 (/settings/security), 0.184 (a board) and 0.137 (/agents) to 0.000, and LCP is the"
  echo "time of the last of those answers."
} >"$out"
cat "$out"
replace_section "portal lighthouse" "$out"
