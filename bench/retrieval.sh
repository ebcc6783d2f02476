#!/usr/bin/env bash
# Retrieval quality of the knowledge-base search on a public benchmark (BEIR SciFact, the train
# split: ../shared/data/scifact, see its README.md), through the REST API of a release
# `switchboard dev`: the corpus goes in as Q&A references (question = title, answer = abstract),
# every judged train query runs through GET /v1/knowledgebase/{id}/search (limit 10,
# threshold 0), and the run prints nDCG@10 and recall@10 beside the search latency (p50, p99,
# client side, one query at a time) and the ingestion rate. bench/retrieval.py does the work.
# Writes the "retrieval" section of BENCHMARKS.md (full corpus only).
#
# Knobs: LIMIT_DOCS=N (the first N documents and the queries whose relevant documents are all
# among them; a quick run, BENCHMARKS.md left alone), CONCURRENCY (references in flight during
# ingestion, default 4), SCIFACT_DIR, SWITCHBOARD_BIN (a built binary: skips the release build),
# RANKING (how the build under test ranks, for the section's text), TUNINGS (space-separated
# SWITCHBOARD_SEARCH_TUNING values, e.g. "k=60,lexical=0 k=20": after the main run, the same
# queries again on the same index under each, restarting the platform; a table of them is added
# to the section. Tune on train only), BULK=N (ingest through POST .../references/bulk, N a
# request, one request at a time), LOADED_CLIENTS=N (default 8; 0 skips it: after the searches,
# N clients search at once while LOADED_DOCS (default 1000) references go into another knowledge
# base through references/bulk). Before the platform starts, the encoder alone embeds the first
# 400 SciFact passages in one call (examples/embed_bench.rs), the reference the ingestion rate is
# compared with in the same run.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_model
SCIFACT_DIR="${SCIFACT_DIR:-$SWITCHBOARD_ROOT/../shared/data/scifact}"
LIMIT_DOCS="${LIMIT_DOCS:-0}"
CONCURRENCY="${CONCURRENCY:-4}"
BULK="${BULK:-0}"
LOADED_CLIENTS="${LOADED_CLIENTS:-8}"
LOADED_DOCS="${LOADED_DOCS:-1000}"
RANKING="${RANKING:-hybrid: dense passages and BM25, reciprocal rank fusion (docs/api-decisions.md, How results are ordered)}"
TUNINGS="${TUNINGS:-}"
[ -f "$SCIFACT_DIR/corpus.jsonl" ] || { echo "no SciFact corpus in $SCIFACT_DIR" >&2; exit 1; }
if [ -z "${SWITCHBOARD_BIN:-}" ]; then
  ensure_build_tools
  SWITCHBOARD_BIN="$(release_binary)"
fi
# WORK_DIR keeps the platform's data (and the knowledge base) after the run; given one that
# already holds a run's, the corpus is not put in again: the searches run on what is there
# (with the ingestion figures of that run), e.g. to measure a new build on the same index.
work="${WORK_DIR:-$(mktemp -d)}"
mkdir -p "$work"
json_row() {
  python3 - "$1" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
print("%.4f | %.4f | %.1f ms | %.1f ms" % (f["ndcg_at_10"], f["recall_at_10"], f["latency_p50_ms"], f["latency_p99_ms"]))
PY
}
read -r steal0 total0 < <(steal_ticks)
# The encoder's own rate on SciFact passages, on a quiet machine, before the platform starts.
python3 "$BENCH_DIR/retrieval.py" --base-url http://127.0.0.1:1/v1 --key none --data "$SCIFACT_DIR" \
  --limit-docs "$LIMIT_DOCS" --passages-out "$work/passages.jsonl"
encoder_rate="$(cd "$SWITCHBOARD_ROOT" && cargo build -q --profile "${BENCH_PROFILE:-release}" \
  -p switchboard-knowledgebase --example embed_bench >&2 &&
  EMBED_BENCH_PASSAGES="$work/passages.jsonl" "$CARGO_TARGET_DIR/${BENCH_PROFILE:-release}/examples/embed_bench" |
  sed -n 's/^passages\/s: //p')"
echo "the encoder alone: $encoder_rate passages/s" >&2
DEV_PID=""
trap '[ -n "$DEV_PID" ] && kill "$DEV_PID" 2>/dev/null; sleep 1; [ -n "${WORK_DIR:-}" ] || rm -rf "$work"' EXIT

# The embedding budget too: the corpus goes in as fast as the encoder takes it (the budget's own
# effect is bench/encoder-fairness.sh's).
UNLIMITED=(SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000 SWITCHBOARD_RATE_LIMIT_WRITE=1000000000
  SWITCHBOARD_RATE_LIMIT_SEARCH=1000000000 SWITCHBOARD_RATE_LIMIT_BULK=1000000000
  SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE=1000000000)
start_dev "$work/data" "${UNLIMITED[@]}"
if [ -f "$work/state.json" ] && [ -f "$work/key" ]; then
  key="$(cat "$work/key")"
  state=(--reuse "$work/state.json")
  echo "reusing the knowledge base in $work" >&2
else
  # A team of its own with credits for every search (one each), and a full-access key.
  team="$("$SWITCHBOARD_BIN" admin --data-dir "$work/data" create-team --name "Retrieval bench" --credits 1000000 \
    | json_field '["id"]')"
  key="$("$SWITCHBOARD_BIN" admin --data-dir "$work/data" create-key --team "$team" --name "retrieval bench" \
    | json_field '["key"]')"
  echo "$key" >"$work/key"
  state=(--state "$work/state.json")
fi

python3 "$BENCH_DIR/retrieval.py" --base-url "$BASE_URL" --key "$key" --data "$SCIFACT_DIR" \
  --limit-docs "$LIMIT_DOCS" --concurrency "$CONCURRENCY" --bulk "$BULK" --loaded-clients "$LOADED_CLIENTS" \
  --loaded-docs "$LOADED_DOCS" --encoder-rate "${encoder_rate:-0}" \
  --tokenizer "$SWITCHBOARD_EMBEDDING_MODEL_DIR/tokenizer.json" \
  --json "$work/figures.json" --section "$work/section.md" --machine "$(machine_line)" --ranking "$RANKING" \
  "${state[@]}"

if [ -n "$TUNINGS" ]; then
  {
    echo
    echo "The same queries on the same index under other fusion settings (\`SWITCHBOARD_SEARCH_TUNING\`;"
    echo "\`dense=0\` or \`lexical=0\` leaves one list out of the order):"
    echo
    echo "| setting | nDCG@10 | recall@10 | p50 | p99 |"
    echo "|---|---|---|---|---|"
    echo "| default | $(json_row "$work/figures.json") |"
  } >"$work/tunings.md"
  for tuning in $TUNINGS; do
    kill "$DEV_PID" 2>/dev/null || true
    wait "$DEV_PID" 2>/dev/null || true
    start_dev "$work/data" "${UNLIMITED[@]}" SWITCHBOARD_SEARCH_TUNING="$tuning"
    echo "== tuning $tuning" >&2
    python3 "$BENCH_DIR/retrieval.py" --base-url "$BASE_URL" --key "$key" --data "$SCIFACT_DIR" \
      --limit-docs "$LIMIT_DOCS" --reuse "$work/state.json" --json "$work/tuning.json" >/dev/null
    echo "| \`$tuning\` | $(json_row "$work/tuning.json") |" | tee -a "$work/tunings.md" >&2
  done
  cat "$work/tunings.md" >>"$work/section.md"
fi

read -r steal1 total1 < <(steal_ticks)
steal="$(steal_percent "$steal0" "$total0" "$steal1" "$total1")"
echo "The host's steal time over the whole run: $steal % of the CPU." >&2
printf '\nThe host took %s %% of the CPU (steal time) over the whole run.\n' "$steal" >>"$work/section.md"

echo >&2
cat "$work/section.md"
if [ "$LIMIT_DOCS" -eq 0 ]; then
  replace_section retrieval "$work/section.md"
else
  echo "(LIMIT_DOCS=$LIMIT_DOCS: a partial run, BENCHMARKS.md left alone)" >&2
fi
