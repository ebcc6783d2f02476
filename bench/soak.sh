#!/usr/bin/env bash
# Soak: every component its own release `serve` process, each service on a PostgreSQL database
# of its own, the gateway on a Redis of its own. bench/soak.py sends a mix of reads, writes and
# searches (GET /me, contact search, contact create, call list, knowledge search, reference
# update: the knowledge index keeps its size) with THREADS threads:
#  1. as fast as they can for MAX_SECONDS: the maximum throughput of the mix;
#  2. at half that rate for SOAK_SECONDS (10 minutes by default), while the resident memory of
#     every process is sampled every 5 s.
# Pass: no answer but 2xx, and each process's mean RSS of the last minute within 10 % of the
# first minute's. Writes the "soak" section of BENCHMARKS.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_packages redis-server
ensure_postgres
ensure_model
THREADS="${THREADS:-8}"
MAX_SECONDS="${MAX_SECONDS:-30}"
SOAK_SECONDS="${SOAK_SECONDS:-600}"
SWITCHBOARD_BIN="$(release_binary)"
bench_begin soak
declare -A served_pid
redis_port="$(free_port)"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >/dev/null &
pids+=("$!")
served_pid[redis]=$!
for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
# As deployed: the identity service announces team changes in the gateway's Redis.
bench_serve identity "$bench_db" REDIS_URL="redis://127.0.0.1:$redis_port/"
served_pid[identity]="$SERVED_PID"
for component in agents knowledgebase conversations crm webhooks; do
  # The teams' embedding budget (2,000 passages a minute) would refuse the soak's updates.
  bench_serve "$component" "$(bench_extra_database "$component")" SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE=1000000000
  served_pid[$component]="$SERVED_PID"
done
bench_gateway REDIS_URL="redis://127.0.0.1:$redis_port/" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000 \
  SWITCHBOARD_RATE_LIMIT_WRITE=1000000000 SWITCHBOARD_RATE_LIMIT_SEARCH=1000000000
served_pid[gateway]="${pids[-1]}"

admin() { "$SWITCHBOARD_BIN" admin --database-url "$bench_db" "$@"; }
team="$(admin create-team --name Soaked --credits 100000000 | json_field '["id"]')"
key="$(admin create-key --team "$team" --name soak | json_field '["key"]')"
admin seed-demo --team "$team" --calls 200 --chats 0 --contacts 500 --recordings 0 >/dev/null
kb="$(curl -sf -H "X-API-Key: $key" -H 'Content-Type: application/json' -d '{"name":"Soak"}' "$base/knowledgebase" \
  | json_field '["data"]["id"]')"
for n in $(seq 1 50); do
  curl -sf -H "X-API-Key: $key" -H 'Content-Type: application/json' \
    -d "{\"question\":\"How do refunds work at branch $n?\",\"answer\":\"Branch $n refunds within 14 days.\"}" \
    "$base/knowledgebase/$kb/references" | json_field '["data"]["id"]'
done | paste -sd, >"$work/references.txt"
references="$(cat "$work/references.txt")"

echo "maximum throughput of the mix: $THREADS threads for $MAX_SECONDS s" >&2
python3 "$BENCH_DIR/soak.py" "$base" "$key" "$kb" "$references" "$MAX_SECONDS" "$THREADS" 0 "$work/max.log" 0
max_rate="$(awk -v s="$MAX_SECONDS" '$3 >= 200 && $3 < 300 {n++} END {printf "%.0f", n / s}' FS='\t' "$work/max.log")"
rate=$((max_rate / 2))
echo "maximum $max_rate requests/s; soaking at $rate for $SOAK_SECONDS s" >&2

# Memory of every process every 5 s: `seconds component rss-kB anonymous-kB` (RssAnon: the
# process's own memory, without the pages of files it maps, such as qdrant-edge's WAL).
(
  started="$(date +%s)"
  while true; do
    for component in "${!served_pid[@]}"; do
      memory="$(awk '/^VmRSS/ {r = $2} /^RssAnon/ {a = $2} END {print r + 0, a + 0}' \
        "/proc/${served_pid[$component]}/status" 2>/dev/null || echo "0 0")"
      echo "$(($(date +%s) - started)) $component $memory"
    done
    sleep 5
  done
) >"$work/rss.log" &
sampler=$!
pids+=("$sampler")
python3 "$BENCH_DIR/soak.py" "$base" "$key" "$kb" "$references" "$SOAK_SECONDS" "$THREADS" "$rate" "$work/soak.log" 1
kill "$sampler" 2>/dev/null || true
# The samples themselves, for a closer look at a process that grew (`RSS_LOG=path`).
[ -z "${RSS_LOG:-}" ] || cp "$work/rss.log" "$RSS_LOG"

python3 - "$work" "$SOAK_SECONDS" "$THREADS" "$max_rate" "$rate" "$(machine_line)" >"$work/section.md" <<'PY'
import collections, sys
work, soak_seconds, threads, max_rate, rate, machine = sys.argv[1:7]
soak_seconds = int(soak_seconds)
rows = [line.rstrip("\n").split("\t") for line in open(f"{work}/soak.log") if line.strip()]
by_name = collections.defaultdict(list)
for _, name, status, ms in rows:
    by_name[name].append((int(status), float(ms)))
def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))] if values else 0
errors = sum(1 for _, _, status, _ in rows if not 200 <= int(status) < 300)
print(f"## Soak: {soak_seconds // 60} minutes at half the maximum throughput\n")
print("Command: `bench/soak.sh` (release build; identity, agents, knowledgebase, conversations, CRM and")
print("webhooks each a `serve` process on a PostgreSQL database of its own, the gateway on a Redis of its")
print(f"own; bench/soak.py, {threads} threads, cycles through the mix below with one key; one run).\n")
print(machine + "\n")
print(f"Maximum throughput of the mix: {int(max_rate):,} requests/s. Soak: {int(rate):,} requests/s asked for "
      f"{soak_seconds} s; {len(rows):,} requests sent ({len(rows) / soak_seconds:.0f}/s), {errors} answered other than 2xx.\n")
print("| request | count | non-2xx | p50 | p99 |")
print("|---|---|---|---|---|")
for name, answers in by_name.items():
    bad = sum(1 for status, _ in answers if not 200 <= status < 300)
    ms = [m for _, m in answers]
    print(f"| {name} | {len(answers):,} | {bad} | {pct(ms, 50):.1f} ms | {pct(ms, 99):.1f} ms |")
samples = collections.defaultdict(list)
for line in open(f"{work}/rss.log"):
    t, component, rss, anonymous = line.split()
    samples[component].append((int(t), int(rss), int(anonymous)))
print("\nResident memory (RSS) and its anonymous part (the process's own, without mapped files), mean")
print("of the samples (every 5 s) in the first and in the last minute:\n")
print("| process | RSS first minute | RSS last minute | change | anonymous first | anonymous last | change |")
print("|---|---|---|---|---|---|---|")
flat = True
def means(points, column):
    end = max(p[0] for p in points)
    first = [p[column] for p in points if p[0] < 60]
    last = [p[column] for p in points if p[0] > end - 60]
    a, b = sum(first) / len(first), sum(last) / len(last)
    return a, b, (b - a) / a * 100 if a else 0
for component in sorted(samples):
    a, b, change = means(samples[component], 1)
    anon_a, anon_b, anon_change = means(samples[component], 2)
    flat &= abs(change) <= 10
    print(f"| {component} | {a / 1024:.1f} MiB | {b / 1024:.1f} MiB | {change:+.1f}% "
          f"| {anon_a / 1024:.1f} MiB | {anon_b / 1024:.1f} MiB | {anon_change:+.1f}% |")
print(f"\nResult: {errors} errors; memory {'flat' if flat else 'NOT flat'} (target: 0 errors, within 10 %).")
PY
replace_section soak "$work/section.md"
cat "$work/section.md"
