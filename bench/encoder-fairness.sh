#!/usr/bin/env bash
# The shared encoder under one team's bulk import at its embedding budget (issue 53): a
# searching team's search latency (one client alone; 8 clients while that same team imports,
# the reference; 8 clients and one single writer while another team imports) on a release
# `switchboard dev` with the default embedding budget (6,000 passages a team a minute) and the
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
scifact_and_binary
work="$(mktemp -d)"
DEV_PID=""
trap '[ -n "$DEV_PID" ] && kill "$DEV_PID" 2>/dev/null; sleep 1; rm -rf "$work"' EXIT

budget=()
[ -n "${EMBED_BUDGET:-}" ] && budget=(SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE="$EMBED_BUDGET")
read -r steal0 total0 < <(steal_ticks)
start_dev "$work/data" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000 SWITCHBOARD_RATE_LIMIT_WRITE=1000000000 \
  SWITCHBOARD_RATE_LIMIT_SEARCH=1000000000 SWITCHBOARD_RATE_LIMIT_BULK=1000000000 "${budget[@]}"
searcher="$(team_key "$work/data" Searcher)"
importer="$(team_key "$work/data" Importer)"
python3 "$BENCH_DIR/encoder_fairness.py" --base-url "$BASE_URL" --searcher-key "$searcher" \
  --importer-key "$importer" --data "$SCIFACT_DIR" --limit-docs "${LIMIT_DOCS:-600}" \
  --loaded-docs "${LOADED_DOCS:-1000}" --clients "${CLIENTS:-8}"
read -r steal1 total1 < <(steal_ticks)
machine_line
simd_line
echo "steal time over the run: $(steal_percent "$steal0" "$total0" "$steal1" "$total1") %"
