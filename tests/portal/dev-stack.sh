#!/usr/bin/env bash
# A stack to develop the portal against: `switchboard dev` serving portal/assets from disk
# (SWITCHBOARD_PORTAL_DIR, so a page change shows on reload without a rebuild), an agency team
# seeded with demo calls, chats, recordings and contacts, and the browser steps run on it.
#
#   tests/portal/dev-stack.sh start <name> <port>   start (once) in /tmp/portal-dev-<name>, seed it
#   tests/portal/dev-stack.sh run <name> [modules]  the browser steps (PORTAL_ONLY=modules) on it
#   tests/portal/dev-stack.sh stop <name>
# The binary is $CARGO_TARGET_DIR/release/switchboard (build it first: cargo build --release -p switchboard).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${SWITCHBOARD_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/switchboard-target}/release/switchboard}
cmd=${1:?start|run|stop}; name=${2:?a name}; dir=/tmp/portal-dev-$name
admin() { timeout 300 "$bin" admin --data-dir "$dir/data" "$@"; }

case $cmd in
start)
  port=${3:?a port}
  mkdir -p "$dir/data"
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then echo "already running"; exit 0; fi
  SWITCHBOARD_RATE_LIMIT_STANDARD=100000 SWITCHBOARD_RATE_LIMIT_WRITE=100000 SWITCHBOARD_RATE_LIMIT_SEARCH=100000 SWITCHBOARD_RATE_LIMIT_AUTH=1000 \
  SWITCHBOARD_PORTAL_DIR="$root/portal/assets" SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE=true SWITCHBOARD_SCRAPE_ALLOW_PRIVATE=true setsid "$bin" dev --data-dir "$dir/data" --listen "127.0.0.1:$port" \
    >"$dir/log" 2>&1 & echo $! >"$dir/pid"
  for _ in $(seq 1 120); do grep -q "Stop with" "$dir/log" 2>/dev/null && break; sleep 1; done
  grep -q "Stop with" "$dir/log" || { echo "the stack did not start in 120 s; see $dir/log"; exit 1; }
  echo "http://127.0.0.1:$port" >"$dir/url"
  if [ ! -f "$dir/team" ]; then
    admin create-team --name "Portal Dev Agency" --agency --credits 5000 | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' >"$dir/team"
    admin seed-demo --team "$(cat "$dir/team")" --calls 60 --chats 12 --recordings 4 --recording-kb 1200 --contacts 40 --hostile >"$dir/seed.json"
  fi
  echo "portal: $(cat "$dir/url")  team: $(cat "$dir/team")  log: $dir/log"
  ;;
run)
  modules=${3:-}
  n=$(date +%s%N)
  invite=$(admin invite --team "$(cat "$dir/team")" --email "owner-$n@portal-dev.example" --role owner \
    --base-url "$(cat "$dir/url")" | python3 -c 'import json,sys; print(json.load(sys.stdin)["url"])')
  cd "$root/tests/portal"
  PORTAL_URL=$(cat "$dir/url") OWNER_INVITE_URL=$invite PORTAL_SEED=$dir/seed.json PORTAL_ONLY=$modules \
    SCREENSHOT_DIR=$dir/shots timeout 900 node run.mjs
  ;;
stop)
  [ -f "$dir/pid" ] && kill -- -"$(cat "$dir/pid")" 2>/dev/null || true
  rm -f "$dir/pid"
  ;;
*) echo "start|run|stop"; exit 2 ;;
esac
