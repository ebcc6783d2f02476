#!/usr/bin/env bash
# The shared encoder under one team's bulk import at its embedding budget (issue 53): a
# searching team's search latency (one client alone; 8 clients while that same team imports,
# the reference; 8 clients and one single writer while another team imports) on a release
# `switchboard dev` with the default embedding budget (2,000 passages a team a minute) and the
# request rate limits lifted. bench/encoder_fairness.py does the work; prints the figures as JSON
# with the machine, its SIMD flags and the steal time over the run.
#
# Knobs: LIMIT_DOCS (SciFact abstracts in the searched knowledge base, default 600), LOADED_DOCS
# (abstracts each import puts in, default 1000), CLIENTS (default 8), SCIFACT_DIR, SWITCHBOARD_BIN
# (a built binary: skips the release build), EMBED_BUDGET (passages a team a minute, default the
# platform's).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_model
SCIFACT_DIR="${SCIFACT_DIR:-$SWITCHBOARD_ROOT/../shared/data/scifact}"
[ -f "$SCIFACT_DIR/corpus.jsonl" ] || { echo "no SciFact corpus in $SCIFACT_DIR" >&2; exit 1; }
if [ -z "${SWITCHBOARD_BIN:-}" ]; then
  ensure_build_tools
  SWITCHBOARD_BIN="$(release_binary)"
fi
work="$(mktemp -d)"
DEV_PID=""
trap '[ -n "$DEV_PID" ] && kill "$DEV_PID" 2>/dev/null; sleep 1; rm -rf "$work"' EXIT

budget=()
[ -n "${EMBED_BUDGET:-}" ] && budget=(SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE="$EMBED_BUDGET")
read -r steal0 total0 < <(steal_ticks)
start_dev "$work/data" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000 SWITCHBOARD_RATE_LIMIT_WRITE=1000000000 \
  SWITCHBOARD_RATE_LIMIT_SEARCH=1000000000 SWITCHBOARD_RATE_LIMIT_BULK=1000000000 "${budget[@]}"
team_key() {
  local team
  team="$("$SWITCHBOARD_BIN" admin --data-dir "$work/data" create-team --name "$1" --credits 1000000 | json_field '["id"]')"
  "$SWITCHBOARD_BIN" admin --data-dir "$work/data" create-key --team "$team" --name bench | json_field '["key"]'
}
searcher="$(team_key Searcher)"
importer="$(team_key Importer)"
python3 "$BENCH_DIR/encoder_fairness.py" --base-url "$BASE_URL" --searcher-key "$searcher" \
  --importer-key "$importer" --data "$SCIFACT_DIR" --limit-docs "${LIMIT_DOCS:-600}" \
  --loaded-docs "${LOADED_DOCS:-1000}" --clients "${CLIENTS:-8}"
read -r steal1 total1 < <(steal_ticks)
machine_line
echo "SIMD: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni|fma)$' | xargs)"
echo "steal time over the run: $(steal_percent "$steal0" "$total0" "$steal1" "$total1") %"
