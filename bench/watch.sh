#!/usr/bin/env bash
# WatchAgents: how long a change to an agent takes to reach the runtimes watching it (issue 41).
# The agents service alone, a release `serve agents` process, on SQLite and then on PostgreSQL;
# services/agents/examples/watch_bench.rs opens the streams and makes the changes over gRPC on
# loopback. The reference in the same run is one watcher; the target is 1,000 watchers with
# p99 <= 1 s. Writes the "watch" section of BENCHMARKS.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_postgres
CHANGES="${CHANGES:-100}"
RATE="${RATE:-10}"
SWITCHBOARD_BIN="$(release_binary)"
(cd "$SWITCHBOARD_ROOT" && cargo build --release -p switchboard-agents --example watch_bench >&2)
client="$CARGO_TARGET_DIR/release/examples/watch_bench"
bench_begin watch
read -r steal0 ticks0 < <(steal_ticks)

measure() { # ENGINE URL
  local engine="$1" url="$2" watchers
  bench_serve agents "$url"
  local pid="$SERVED_PID"
  for watchers in 1 1000; do
    echo "$engine: $watchers watchers, $CHANGES changes at $RATE/s" >&2
    AGENTS_URL="http://127.0.0.1:${port[agents]}" WATCHERS="$watchers" CHANGES="$CHANGES" RATE="$RATE" \
      timeout 300 "$client" | sed "s/^{/{\"engine\":\"$engine\",/" | tee -a "$work/results.jsonl" >&2
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
}
measure SQLite "sqlite://$work/data/agents.db?mode=rwc"
measure PostgreSQL "$bench_db"

read -r steal1 ticks1 < <(steal_ticks)
steal="$(steal_percent "$steal0" "$ticks0" "$steal1" "$ticks1")"
python3 - "$work/results.jsonl" "$(machine_line)" "$steal" "$CHANGES" "$RATE" >"$work/section.md" <<'PY'
import json, sys
path, machine, steal, changes, rate = sys.argv[1:]
rows = [json.loads(line) for line in open(path)]
print("## WatchAgents: change to runtime (issue 41)")
print()
print(f"Command: `bench/watch.sh` (release build; `serve agents` alone; `services/agents/examples/watch_bench.rs`")
print(f"opens the streams on one team over 8 HTTP/2 connections, then changes the agent's first message {changes}")
print(f"times at {rate}/s with `UpdateAgent`, and times each change from just before it is sent until each stream")
print("has it, over every (change, stream) pair; one run). The reference is one watcher, in the same run.")
print()
print(f"{machine} Steal during the run: {steal} %.")
print()
print("| engine | watchers | changes seen / expected | p50 | p99 | slowest | target p99 |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    target = "1 s" if r["watchers"] >= 1000 else "(reference)"
    print(f"| {r['engine']} | {r['watchers']:,} | {r['received']:,} / {r['expected']:,} | {r['p50_ms']:.1f} ms"
          f" | {r['p99_ms']:.1f} ms | {r['max_ms']:.1f} ms | {target} |")
print()
print("A change is written with its row in the `agent_changes` log; the service's feed task is woken by")
print("the commit, reads the row, loads the agent's config once and broadcasts it to every stream")
print("(docs/runtime.md). Fewer changes seen than expected would mean a stream got a later config in")
print("place of an earlier one (each carries the config as it is when sent), not a lost change.")
PY
cat "$work/section.md"
replace_section watch "$work/section.md"
