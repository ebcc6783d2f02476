#!/usr/bin/env bash
# Conversations figures on PostgreSQL, each component its own release `serve` process as in a
# deployment (identity and agents on SQLite, conversations on PostgreSQL, the gateway):
#  1. ingestion over gRPC by `admin seed-demo` (the way runtimes write): CALLS calls into the
#     measured team and CALLS into another, then transcript-heavy calls of 200 segments;
#  2. through the gateway with wrk: GET /calls with filters, GET /calls with search, and
#     GET /calls/{id} of a 200-segment call;
#  3. the conversations service's resident memory while 1 GB of recordings streams in.
# Writes the "conversations" section of BENCHMARKS.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_packages wrk
ensure_postgres
CALLS="${CALLS:-100000}"
DURATION="${DURATION:-20s}"
CONNECTIONS="${CONNECTIONS:-2}"
SWITCHBOARD_BIN="$(release_binary)"
bench_begin conversations
conversations_db="$bench_db"
bench_serve identity "sqlite://$work/data/identity.db?mode=rwc"
bench_serve agents "sqlite://$work/data/agents.db?mode=rwc"
bench_serve conversations "$conversations_db"
conversations_pid="$SERVED_PID"
bench_gateway

admin() { "$SWITCHBOARD_BIN" admin --database-url "sqlite://$work/data/identity.db?mode=rwc" "$@"; }
team="$(admin create-team --name Measured | json_field '["id"]')"
other="$(admin create-team --name Other | json_field '["id"]')"
key="$(admin create-key --team "$team" --name bench | json_field '["key"]')"
# The 200-segment calls are a team of their own, so that the lists measured are of ordinary calls.
long_team="$(admin create-team --name Long | json_field '["id"]')"
long_key="$(admin create-key --team "$long_team" --name bench | json_field '["key"]')"
echo "conversations database: $conversations_db" >&2

seed() { admin seed-demo --chats 0 --contacts 0 "$@"; }
echo "ingesting $CALLS calls into the measured team" >&2
seed --team "$team" --calls "$CALLS" --recordings 0 --concurrency 32 --append-batch 10 | tee "$work/seed-team.json" >&2
echo "ingesting $CALLS calls into another team" >&2
seed --team "$other" --calls "$CALLS" --recordings 0 --concurrency 32 --append-batch 10 | tee "$work/seed-other.json" >&2
echo "ingesting 2,000 calls of 200 segments, in appends of 100, then 1,000 more in appends of 10" >&2
seed --team "$long_team" --calls 2000 --segments 200 --seed 7 --recordings 0 --concurrency 32 --append-batch 100 \
  | tee "$work/seed-long.json" >&2
seed --team "$long_team" --calls 1000 --segments 200 --seed 8 --recordings 0 --concurrency 32 --append-batch 10 \
  | tee "$work/seed-small-appends.json" >&2
# As autovacuum leaves a table in steady state: statistics, and a visibility map for the
# index-only scans of the counts.
psql "$conversations_db" -qc "vacuum analyze" >/dev/null

# The paths each wrk run cycles through, one per line.
python3 - "$work" "$CALLS" <<'PY'
import random, sys, datetime
work, calls = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
today = datetime.date.today()
def day(back): return (today - datetime.timedelta(days=back)).isoformat()
filters = []
for _ in range(400):
    a, b = sorted(rng.sample(range(0, 90), 2))
    lo = rng.randrange(0, 60)
    area = rng.choice(["415", "628", "212", "312", "617", "303"])
    filters.append(rng.choice([
        "/calls",
        f"/calls?callType={rng.choice(['incoming', 'outgoing'])}",
        f"/calls?minDuration={lo}&maxDuration={lo + rng.randrange(5, 60)}",
        f"/calls?dateFrom={day(b)}&dateTo={day(a)}",
        f"/calls?sortBy={rng.choice(['duration', 'endedAt', 'createdAt'])}&sortOrder={rng.choice(['asc', 'desc'])}",
        f"/calls?number=%2B1%20({area})%20555-0{rng.randrange(100, 200)}",
        f"/calls?page={rng.randrange(2, 200)}&limit=50",
        f"/calls?callType=outgoing&sortBy=endedAt&dateFrom={day(b)}",
        f"/calls?callType=incoming&minDuration=20&sortBy=duration&sortOrder=asc&page={rng.randrange(1, 20)}",
    ]))
words = ["kettle", "vegan", "tiramisu", "double%20charged", "parking", "NW48213", "Leith", "walk-ins",
         "Grace", "Kenji", "Zanele", "accounts%20team", "Saturdays", "appointment", "thank%20you"]
searches = []
for _ in range(400):
    searches.append(rng.choice([
        f"/calls?search={rng.choice(words)}",
        f"/calls?search=5550{rng.randrange(100, 200)}",
        f"/calls?search={rng.choice(['415', '628', '212'])}5550{rng.randrange(100, 200)}",
        f"/calls?search={rng.choice(words)}&callType=incoming&sortBy=duration",
    ]))
open(f"{work}/filters.txt", "w").write("\n".join(filters) + "\n")
open(f"{work}/searches.txt", "w").write("\n".join(searches) + "\n")
PY
# The 200-segment calls are the longest.
curl -sf -H "X-API-Key: $long_key" "$base/calls?limit=100" \
  | python3 -c 'import json,sys; [print("/calls/" + c["id"]) for c in json.load(sys.stdin)["data"]]' >"$work/long.txt"
segments="$(curl -sf -H "X-API-Key: $long_key" "$base$(head -n1 "$work/long.txt")" | json_field '["data"]["transcript"].__len__()')"
[ "$segments" = 200 ] || { echo "expected a 200-segment call, got $segments segments" >&2; exit 1; }

bench_wrk "$work/filters.txt" "$work/filters.wrk" "$key"
bench_wrk "$work/searches.txt" "$work/searches.wrk" "$key"
bench_wrk "$work/long.txt" "$work/get.wrk" "$long_key"

echo "streaming 1 GB of recordings (10 x 100 MiB) while sampling the service's memory" >&2
rss() { awk '/^VmRSS/ {print $2}' "/proc/$conversations_pid/status"; }
rss_before="$(rss)"
seed --team "$long_team" --calls 10 --recordings 10 --recording-kb 102400 --seed 9 --concurrency 2 \
  >"$work/seed-recordings.json" &
seed_pid=$!
peak="$rss_before"
samples=0
while kill -0 "$seed_pid" 2>/dev/null; do
  now="$(rss)"; samples=$((samples + 1))
  [ "$now" -gt "$peak" ] && peak="$now"
  sleep 0.1
done
wait "$seed_pid"
rss_after="$(rss)"
cat "$work/seed-recordings.json" >&2

python3 - "$work" "$CALLS" "$CONNECTIONS" "$DURATION" "$rss_before" "$peak" "$rss_after" "$samples" \
  "$(machine_line)" >"$work/section.md" <<'PY'
import json, re, sys
work, calls, connections, duration, before, peak, after, samples, machine = sys.argv[1:]
def wrk(name):
    text = open(f"{work}/{name}.wrk").read()
    rate = re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)
    pct = dict(re.findall(r"^\s+(\d+)%\s+([\d.]+\w+)", text, re.M))
    return float(rate), pct["50"], pct["99"]
def seed(name): return json.load(open(f"{work}/seed-{name}.json"))
team, other, long, recordings = seed("team"), seed("other"), seed("long"), seed("recordings")
small = seed("small-appends")
mb = lambda kb: f"{int(kb) / 1024:.0f} MiB"
print("## Conversations: ingestion, lists, search, one call, recording memory")
print()
print("Command: `bench/conversations.sh` (release build; identity, agents, conversations and the gateway")
print("each its own `serve` process; conversations on PostgreSQL; ingestion by `admin seed-demo` over")
print(f"gRPC with 32 conversations in flight; reads through the gateway by wrk, 1 thread, {connections}")
print(f"connections, {duration} per row, cycling through 400 generated paths; one run).")
print()
print(machine)
print()
print("| ingestion (gRPC, PostgreSQL) | calls | segments | seconds | segments/s |")
print("|---|---|---|---|---|")
for label, s in [("measured team: per call upsert, appends of 10, ~3 events, end", team),
                 ("another team, the same", other),
                 ("200-segment calls, appends of 100", long),
                 ("200-segment calls, appends of 10", small)]:
    print(f"| {label} | {s['calls']:,} | {s['segments']:,} | {s['callSeconds']} | {s['segmentsPerSecond']:,.0f} |")
print()
print(f"Reads with {int(calls):,} calls in the team and {int(calls):,} in another (and 3,000 calls of 200 segments in a third):")
print()
print("| request | requests/s | p50 | p99 | target p99 |")
print("|---|---|---|---|---|")
for label, name, target in [("`GET /calls` with filters, sorts, pages", "filters", "20 ms"),
                            ("`GET /calls?search=...` (words, names, number fragments)", "searches", "50 ms"),
                            ("`GET /calls/{id}`, 200-segment transcript", "get", "10 ms")]:
    rate, p50, p99 = wrk(name)
    print(f"| {label} | {rate:,.0f} | {p50} | {p99} | {target} |")
print()
print(f"Recordings: {recordings['recordings']} x 100 MiB ({recordings['recordingBytes'] / 2**30:.2f} GiB) streamed by PutRecording,"
      f" 2 at a time, in {recordings['seconds']} s. Resident memory of the conversations service:"
      f" {mb(before)} before, at most {mb(peak)} while they streamed ({samples} samples, every 0.1 s),"
      f" {mb(after)} after.")
PY
cat "$work/section.md"
replace_section conversations "$work/section.md"
