#!/usr/bin/env bash
# Fault drills under steady load, each component its own release `serve` process on PostgreSQL
# (identity and the CRM, each its own database) with the gateway on a Redis of its own:
#  1. Redis killed (-9) and restarted: no request may fail; the limits are shared again after.
#  2. The CRM service killed (-9) and restarted: its routes answer 503 JSON while it is down,
#     the others keep working, and nothing fails once it is back.
#  3. PostgreSQL stopped and started: requests fail fast (503 JSON) while it is down and
#     recover without restarting anything.
#  4. The knowledgebase service killed (-9) while 50 webpage scrapes and 50 document uploads
#     are being processed: after the restart every one ends ready, with the same number of
#     entries as its identical siblings (none ingested twice), each page fetched once unless
#     its job was the one cut.
# The load: bench/faults.py, THREADS threads cycling through GET /me and GET /contacts (and,
# in the PostgreSQL drill, POST /contacts: acknowledged writes are counted against those made) for
# DRILL seconds; the fault starts at DOWN_AT and ends at UP_AT. Writes the "faults" section of
# BENCHMARKS.md. Stops and starts the machine's PostgreSQL: run it alone.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_packages redis-server
ensure_postgres
ensure_model
DRILL="${DRILL:-24}"
DOWN_AT="${DOWN_AT:-6}"
UP_AT="${UP_AT:-14}"
THREADS="${THREADS:-4}"
SWITCHBOARD_BIN="$(release_binary)"
bench_begin faults
identity_db="$bench_db"
crm_database="${bench_database}_crm"
psql "$TEST_DATABASE_URL" -qc "create database $crm_database" >/dev/null
crm_db="${TEST_DATABASE_URL%/*}/$crm_database"
kb_database="${bench_database}_kb"
psql "$TEST_DATABASE_URL" -qc "create database $kb_database" >/dev/null
kb_db="${TEST_DATABASE_URL%/*}/$kb_database"
drop_extra() {
  local database
  for database in "$crm_database" "$kb_database"; do
    psql "$TEST_DATABASE_URL" -qc "drop database if exists $database" >/dev/null 2>&1 || true
  done
}
trap 'bench_end; drop_extra' EXIT

redis_port="$(free_port)"
start_redis() {
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >/dev/null &
  redis_pid=$!
  pids+=("$redis_pid")
  for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "redis did not start" >&2; return 1
}
start_redis
# As deployed: the identity service announces team changes in the gateway's Redis.
bench_serve identity "$identity_db" REDIS_URL="redis://127.0.0.1:$redis_port/"
bench_serve crm "$crm_db"
crm_pid="$SERVED_PID"
# Loopback pages may be scraped; a job cut by the kill is taken again 3 s after its last heartbeat.
export SWITCHBOARD_SCRAPE_ALLOW_PRIVATE=true SWITCHBOARD_JOB_LEASE_MS=3000 SWITCHBOARD_JOB_BACKOFF_MS=200
bench_serve knowledgebase "$kb_db"
kb_pid="$SERVED_PID"
bench_gateway REDIS_URL="redis://127.0.0.1:$redis_port/" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000 \
  SWITCHBOARD_RATE_LIMIT_WRITE=1000000000

admin() { "$SWITCHBOARD_BIN" admin --database-url "$identity_db" "$@"; }
team="$(admin create-team --name Drilled | json_field '["id"]')"
key="$(admin create-key --team "$team" --name bench | json_field '["key"]')"
admin seed-demo --team "$team" --calls 0 --chats 0 --contacts 200 >/dev/null

# drill NAME FAULT RECOVER [PATH...]: the load in the background (GET /me and GET /contacts,
# and the given paths), FAULT at DOWN_AT, RECOVER at UP_AT.
drill() {
  local name="$1" fault="$2" recover="$3"
  shift 3
  echo "drill: $name" >&2
  python3 "$(dirname "$0")/faults.py" "$base" "$key" "$DRILL" "$THREADS" "$work/$name.log" /me /contacts "$@" &
  local load=$!
  sleep "$DOWN_AT"; date +%s.%N >"$work/$name.down"; eval "$fault"
  sleep "$((UP_AT - DOWN_AT))"; eval "$recover"; date +%s.%N >"$work/$name.up"
  wait "$load"
}

drill redis 'kill -9 "$redis_pid"' 'start_redis'
redis_keys="$(redis-cli -p "$redis_port" --scan --pattern 'switchboard:ratelimit:*' | wc -l)"
drill service 'kill -9 "$crm_pid"' 'bench_serve crm "$crm_db"'
contacts() { curl -sf -H "X-API-Key: $key" "$base/contacts?limit=1" | json_field '["pagination"]["totalCount"]'; }
contacts_before="$(contacts)"
drill postgres 'pg_ctlcluster 15 main stop -m fast' 'pg_ctlcluster 15 main start' POST/contacts
contacts_after="$(contacts)"
acknowledged="$(awk '$2 == "POST/contacts" && $3 == 201' "$work/postgres.log" | wc -l)"

echo "drill: knowledgebase" >&2
# 50 identical pages (5 paragraphs) on a local server that logs each request, 50 identical files.
mkdir -p "$work/site" "$work/files"
for n in $(seq 1 50); do
  {
    echo "<html><head><title>Page $n</title></head><body><main>"
    for p in 1 2 3 4 5; do
      echo "<h2>Section $p of page $n</h2><p>Harbour Bikes rents electric bicycles by the hour; section $p of page $n"
      echo "explains day passes, helmets, locks, winter storage and puncture repair in some detail.</p>"
    done
    echo "</main></body></html>"
  } >"$work/site/page-$n.html"
  for p in 1 2 3 4 5; do
    printf 'Document %s, part %s: the ferry to the island leaves the harbour at 23:15 on weekdays.\n\n' "$n" "$p"
  done >"$work/files/doc-$n.txt"
done
site_port="$(free_port)"
(cd "$work/site" && python3 -m http.server "$site_port" --bind 127.0.0.1 >/dev/null 2>"$work/site.log") &
pids+=("$!")
sleep 1
kb="$(curl -sf -H "X-API-Key: $key" -H 'Content-Type: application/json' -d '{"name":"Drill"}' "$base/knowledgebase" \
  | json_field '["data"]["id"]')"
for n in $(seq 1 50); do
  curl -sf -o /dev/null -H "X-API-Key: $key" -H 'Content-Type: application/json' \
    -d "{\"name\":\"Page $n\",\"url\":\"http://127.0.0.1:$site_port/page-$n.html\"}" "$base/knowledgebase/$kb/webpages"
  curl -sf -o /dev/null -H "X-API-Key: $key" -F "file=@$work/files/doc-$n.txt" "$base/knowledgebase/$kb/documents"
done
kill -9 "$kb_pid"
sleep 1
bench_serve knowledgebase "$kb_db"
# Every source ready within 5 minutes.
for _ in $(seq 1 300); do
  curl -sf -H "X-API-Key: $key" "$base/knowledgebase/$kb" >"$work/kb.json" || true
  python3 - "$work/kb.json" <<'PY' && break
import json, sys
data = json.load(open(sys.argv[1]))["data"]
sources = data["webpages"] + data["documents"]
sys.exit(0 if len(sources) == 100 and all(s["status"] in ("ready", "failed") for s in sources) else 1)
PY
  sleep 1
done
python3 - "$work/kb.json" "$work/site.log" >"$work/kb-drill.md" <<'PY'
import collections, json, re, sys
data = json.load(open(sys.argv[1]))["data"]
hits = collections.Counter(re.findall(r'"GET /(page-\d+)\.html', open(sys.argv[2]).read()))
for kind in ("webpages", "documents"):
    sources = data[kind]
    statuses = collections.Counter(s["status"] for s in sources)
    entries = collections.Counter(s.get("entryCount") for s in sources)
    print(f"| {kind} | {len(sources)} | {dict(statuses)} | {dict(entries)} |")
fetched = collections.Counter(hits.values())
print(f"Page fetches: {dict(sorted(fetched.items()))} (fetches per page: number of pages).")
PY
cat "$work/kb-drill.md" >&2

python3 - "$work" "$DOWN_AT" "$UP_AT" "$THREADS" "$DRILL" "$redis_keys" "$(machine_line)" \
  "$acknowledged" "$((contacts_after - contacts_before))" >"$work/section.md" <<'PY'
import collections, sys
work, down, up, threads, drill, redis_keys, machine, acknowledged, created = sys.argv[1:]
down, up = float(down), float(up)
def rows(name):
    for line in open(f"{work}/{name}.log"):
        if line.startswith("#"):
            continue
        t, path, status, ms, parsed = line.split()
        yield float(t), path, int(status), float(ms), parsed == "1"
def window(name):
    start = float(open(f"{work}/{name}.log").readline().split()[2])
    stamp = lambda edge: float(open(f"{work}/{name}.{edge}").read()) - start
    return stamp("down"), stamp("up")
ok = lambda status: 200 <= status < 300
print("## Fault drills")
print()
print("Command: `bench/faults.sh` (release build; identity and the CRM as `serve` processes, each on a")
print("PostgreSQL database of its own, the gateway on a Redis of its own; bench/faults.py keeps")
print(f"{threads} threads cycling through `GET /v1/me` and `GET /v1/contacts` for {drill} s per drill; the")
print(f"fault starts about {down:.0f} s in, and ends (the component answers again) about {up:.0f} s in; windows")
print("below are from the script's own timestamps; one run).")
print()
print(machine)
print()
print("| drill | path | requests | failed before | while down: answers | slowest failure | first success after the end | failed after it |")
print("|---|---|---|---|---|---|---|---|")
for name, label in [("redis", "Redis killed (-9), restarted"), ("service", "CRM service killed (-9), restarted"),
                    ("postgres", "PostgreSQL stopped (fast), started")]:
    data = list(rows(name))
    down, up = window(name)
    for path in ["/me", "/contacts"] + (["POST/contacts"] if name == "postgres" else []):
        mine = [r for r in data if r[1] == path]
        before = sum(1 for r in mine if r[0] + r[3] / 1000 < down and not ok(r[2]))
        during = [r for r in mine if down <= r[0] < up]
        answers = collections.Counter(
            f"{r[2]}{'' if ok(r[2]) or r[4] else ' (not JSON)'}" if r[2] else "no answer" for r in during)
        failures = [r[3] for r in mine if not ok(r[2])]
        slowest = f"{max(failures):.0f} ms" if failures else "-"
        recovered = next((r[0] for r in sorted(mine) if r[0] >= up and ok(r[2])), None)
        first = f"{recovered - up:.2f} s" if recovered is not None else "never"
        after = sum(1 for r in mine if recovered is not None and r[0] > recovered and not ok(r[2]))
        shown = ", ".join(f"{status}: {count}" for status, count in sorted(answers.items()))
        shown_path = f"POST /v1{path[4:]}" if path.startswith("POST") else f"GET /v1{path}"
        print(f"| {label} | `{shown_path}` | {len(mine)} | {before} | {shown} | {slowest} | {first} | {after} |")
print()
print(f"After the Redis drill the rate-limit buckets are back in Redis: {redis_keys} `switchboard:ratelimit:*` key(s).")
print(f"PostgreSQL drill writes: {acknowledged} contacts acknowledged with 201, {created} contacts created"
      f" (lost acknowledged writes: {max(0, int(acknowledged) - int(created))}).")
print()
print("Knowledgebase killed (-9) right after 50 webpages and 50 documents (identical within each kind) were")
print("added, restarted 1 s later (job lease 3 s); the sources once every one had settled:")
print()
print("| sources | count | status | entries per source: sources |")
print("|---|---|---|---|")
print(open(f"{work}/kb-drill.md").read().rstrip())
PY
cat "$work/section.md"
replace_section faults "$work/section.md"
