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
# RANKING (how the build under test ranks, for the section's text).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_model
SCIFACT_DIR="${SCIFACT_DIR:-$SWITCHBOARD_ROOT/../shared/data/scifact}"
LIMIT_DOCS="${LIMIT_DOCS:-0}"
CONCURRENCY="${CONCURRENCY:-4}"
RANKING="${RANKING:-dense only (cosine similarity of the query's and the entry's embeddings)}"
[ -f "$SCIFACT_DIR/corpus.jsonl" ] || { echo "no SciFact corpus in $SCIFACT_DIR" >&2; exit 1; }
if [ -z "${SWITCHBOARD_BIN:-}" ]; then
  ensure_build_tools
  SWITCHBOARD_BIN="$(release_binary)"
fi
work="$(mktemp -d)"
DEV_PID=""
trap '[ -n "$DEV_PID" ] && kill "$DEV_PID" 2>/dev/null; sleep 1; rm -rf "$work"' EXIT

start_dev "$work/data" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000 SWITCHBOARD_RATE_LIMIT_WRITE=1000000000 \
  SWITCHBOARD_RATE_LIMIT_SEARCH=1000000000
# A team of its own with credits for every search (one each), and a full-access key.
team="$("$SWITCHBOARD_BIN" admin --data-dir "$work/data" create-team --name "Retrieval bench" --credits 100000 \
  | json_field '["id"]')"
key="$("$SWITCHBOARD_BIN" admin --data-dir "$work/data" create-key --team "$team" --name "retrieval bench" \
  | json_field '["key"]')"

python3 "$BENCH_DIR/retrieval.py" --base-url "$BASE_URL" --key "$key" --data "$SCIFACT_DIR" \
  --limit-docs "$LIMIT_DOCS" --concurrency "$CONCURRENCY" \
  --tokenizer "$SWITCHBOARD_EMBEDDING_MODEL_DIR/tokenizer.json" \
  --json "$work/figures.json" --section "$work/section.md" --machine "$(machine_line)" --ranking "$RANKING"

echo >&2
cat "$work/section.md"
if [ "$LIMIT_DOCS" -eq 0 ]; then
  replace_section retrieval "$work/section.md"
else
  echo "(LIMIT_DOCS=$LIMIT_DOCS: a partial run, BENCHMARKS.md left alone)" >&2
fi
