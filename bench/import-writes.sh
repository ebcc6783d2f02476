#!/usr/bin/env bash
# One team's single writes while another team bulk-imports, no searches (issue 53):
# bench/import_writes.py against a release `switchboard dev` with the write rate limits lifted.
# Prints the machine, its SIMD flags and the steal time over the run. SWITCHBOARD_BIN=<a built
# binary> skips the release build; SCIFACT_DIR names the corpus.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_model
scifact_and_binary
work="$(mktemp -d)"
DEV_PID=""
trap '[ -n "$DEV_PID" ] && kill "$DEV_PID" 2>/dev/null; sleep 1; rm -rf "$work"' EXIT
read -r steal0 total0 < <(steal_ticks)
start_dev "$work/data" SWITCHBOARD_RATE_LIMIT_WRITE=1000000000 SWITCHBOARD_RATE_LIMIT_BULK=1000000000
importer="$(team_key "$work/data" Importer)"
writer="$(team_key "$work/data" Writer)"
timeout 600 python3 "$BENCH_DIR/import_writes.py" "$BASE_URL" "$importer" "$writer" "$SCIFACT_DIR"
read -r steal1 total1 < <(steal_ticks)
machine_line
simd_line
echo "steal time over the run: $(steal_percent "$steal0" "$total0" "$steal1" "$total1") %"
