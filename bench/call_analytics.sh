#!/usr/bin/env bash
# Call analytics and export (issue 41), on SQLite and on PostgreSQL in turn: identity and agents
# as `serve` processes on SQLite, conversations on the engine measured, and the gateway.
#  1. CALLS calls (default 100,000) of one team over the last 30 days, each with an outcome
#     (sentiment, success, disconnection reason, cost, two custom fields), written straight
#     into the conversations database (the figures are of the reads, not of ingestion; the
#     ingestion path has its own bench, bench/conversations.sh), then as many of another team;
#  2. GET /v1/analytics/calls over the 30 days, REQUESTS times one after another (every 4th of
#     one agent): p50 and p95;
#  3. GET /v1/calls/export of the team's calls: seconds, rows, and the peak resident memory of
#     the conversations service and of the gateway over their idle size (VmHWM after the export,
#     reset with clear_refs before it, minus VmRSS before it).
# Prints the table; with --write, also puts it in BENCHMARKS.md ("call-analytics" section).
# SWITCHBOARD_BIN may name the binary to measure; by default the BENCH_PROFILE build.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_postgres
CALLS="${CALLS:-100000}"
REQUESTS="${REQUESTS:-200}"
WRITE="${1:-}"
SWITCHBOARD_BIN="${SWITCHBOARD_BIN:-$(release_binary)}"

steal0="$(steal_ticks)"
report="$(mktemp)"
{
  echo "## Calls: analytics and CSV export (issue 41)"
  echo
  echo "Command: \`bench/call_analytics.sh --write\` (conversations, identity and the gateway each a \`serve\` process;"
  echo "targets: \`GET /v1/analytics/calls\` p95 <= 200 ms over 30 days; an export of 100,000 calls within +50 MB RSS)."
  echo
  machine_line
  echo "$CALLS calls of the measured team over 30 days (and as many of another team), each with an analysis;"
  echo "binary: \`$SWITCHBOARD_BIN\`."
  echo
  echo "| engine | analytics, 30 days: p50 / p95 | export: seconds, rows | export: conversations +RSS / gateway +RSS |"
  echo "|---|---|---|---|"
} >"$report"

# fill ENGINE URL TEAM AGENT: CALLS calls of TEAM (a quarter of AGENT) and CALLS of another team.
fill() {
  python3 - "$@" "$CALLS" <<'PY'
import csv, json, random, subprocess, sys, time, uuid, io
engine, url, team, agent, calls = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
rng = random.Random(41)
now = int(time.time() * 1000)
sentiments = ["positive", "neutral", "negative", "unknown"]
reasons = ["customer_hangup", "agent_hangup", "transfer", "voicemail", "no_answer", "busy", "error", "other"]
columns = ["id", "team_id", "external_id", "agent_id", "from_number", "to_number", "direction", "status",
           "started_at", "ended_at", "duration_seconds", "summary", "flagged", "favorite", "spam", "created_at",
           "updated_at", "sentiment", "successful", "analysis_custom", "disconnection_reason", "cost_credits",
           "cost_unpaid_credits"]
def rows(team_id):
    for n in range(calls):
        started = now - rng.randrange(30 * 86_400_000)
        seconds = rng.randrange(5, 900)
        successful = rng.choice([0, 1, None])
        custom = json.dumps({"tier": rng.choice(["gold", "silver"]), "score": rng.randrange(10)}, separators=(",", ":"))
        yield [str(uuid.uuid4()), team_id, f"bench-{n}", agent if n % 4 == 0 else None, "+14155550100",
               f"+1415555{n % 10000:04d}", rng.choice(["INCOMING", "OUTGOING"]), "completed", started,
               started + seconds * 1000, seconds, f"Summary, \"quoted\", of call {n}", 0, 0, 0, started,
               started, rng.choice(sentiments), successful, custom, rng.choice(reasons), rng.randrange(20), 0]
teams = [team, str(uuid.uuid4())]
if engine == "sqlite":
    import sqlite3
    db = sqlite3.connect(url)
    marks = ", ".join("?" for _ in columns)
    for team_id in teams:
        db.executemany(f"INSERT INTO calls ({', '.join(columns)}) VALUES ({marks})", rows(team_id))
    db.commit()
else:
    for team_id in teams:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        for row in rows(team_id):
            writer.writerow(["" if value is None else value for value in row])
        copy = f"\\copy calls ({', '.join(columns)}) from stdin with (format csv)"
        subprocess.run(["psql", url, "-qc", copy], input=buffer.getvalue(), text=True, check=True)
    subprocess.run(["psql", url, "-qc", "vacuum analyze calls"], check=True)
PY
}

# latency KEY AGENT: REQUESTS analytics requests, one after another; prints "p50 ms / p95 ms".
latency() {
  python3 - "$base" "$1" "$2" "$REQUESTS" <<'PY'
import datetime, sys, time, urllib.error, urllib.request
base, key, agent, requests = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
today = datetime.date.today()
first = (today - datetime.timedelta(days=29)).isoformat()
took = []
for n in range(requests + 10):
    path = f"/analytics/calls?from={first}&to={today.isoformat()}" + (f"&agentId={agent}" if n % 4 == 0 else "")
    request = urllib.request.Request(base + path, headers={"X-API-Key": key})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request) as answer:
            answer.read()
    except urllib.error.HTTPError as error:
        sys.exit(f"{path}: {error.code} {error.read().decode()}")
    if n >= 10:  # the first ten warm the caches
        took.append((time.perf_counter() - start) * 1000)
took.sort()
pick = lambda q: took[min(len(took) - 1, int(q * len(took)))]
print(f"{pick(0.5):.1f} ms / {pick(0.95):.1f} ms")
PY
}

rss_kib() { awk -v field="$2:" '$1 == field {print $2}' "/proc/$1/status"; }

measure() {
  local engine="$1"
  bench_begin "calls_$engine"
  local conversations_url="$bench_db"
  if [ "$engine" = sqlite ]; then conversations_url="sqlite://$work/data/conversations.db?mode=rwc"; fi
  bench_serve identity "sqlite://$work/data/identity.db?mode=rwc"
  bench_serve agents "sqlite://$work/data/agents.db?mode=rwc"
  bench_serve conversations "$conversations_url"
  local conversations_pid="$SERVED_PID"
  bench_gateway SWITCHBOARD_RATE_LIMIT_BULK=1000000
  local gateway_pid="${pids[-1]}"
  admin() { "$SWITCHBOARD_BIN" admin --database-url "sqlite://$work/data/identity.db?mode=rwc" "$@"; }
  local team key agent
  team="$(admin create-team --name Measured | json_field '["id"]')"
  key="$(admin create-key --team "$team" --name bench | json_field '["key"]')"
  # An agent id of the calls: the analytics filter by it without asking the agents service.
  agent="$(python3 -c 'import uuid; print(uuid.uuid4())')"
  echo "$engine: writing $CALLS calls of the team and $CALLS of another" >&2
  if [ "$engine" = sqlite ]; then fill sqlite "$work/data/conversations.db" "$team" "$agent"
  else fill postgres "$bench_db" "$team" "$agent"; fi

  local analytics
  analytics="$(latency "$key" "$agent")"
  echo "$engine analytics: $analytics" >&2

  local idle_conv idle_gw start end rows
  idle_conv="$(rss_kib "$conversations_pid" VmRSS)"
  idle_gw="$(rss_kib "$gateway_pid" VmRSS)"
  echo 5 >"/proc/$conversations_pid/clear_refs"
  echo 5 >"/proc/$gateway_pid/clear_refs"
  start="$(date +%s.%N)"
  curl -sf -H "X-API-Key: $key" "$base/calls/export" -o "$work/export.csv"
  end="$(date +%s.%N)"
  rows="$(python3 -c "import csv,sys; print(sum(1 for _ in csv.reader(open(sys.argv[1], newline=''))) - 1)" "$work/export.csv")"
  local peak_conv peak_gw
  peak_conv="$(rss_kib "$conversations_pid" VmHWM)"
  peak_gw="$(rss_kib "$gateway_pid" VmHWM)"
  local seconds
  seconds="$(python3 -c "print(round($end - $start, 1))")"
  echo "$engine export: $seconds s, $rows rows, conversations $idle_conv → $peak_conv KiB, gateway $idle_gw → $peak_gw KiB" >&2
  echo "| $engine | $analytics | $seconds s, $rows rows | +$(((peak_conv - idle_conv) / 1024)) MB / +$(((peak_gw - idle_gw) / 1024)) MB |" >>"$report"
  bench_end
  trap - EXIT
}

measure sqlite
measure postgres
steal1="$(steal_ticks)"
# shellcheck disable=SC2086
echo >>"$report"
echo "Steal time during the run: $(steal_percent $steal0 $steal1) %." >>"$report"
cat "$report"
if [ "$WRITE" = "--write" ]; then replace_section call-analytics "$report"; fi
rm -f "$report"
