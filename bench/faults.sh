#!/usr/bin/env bash
# Fault drills under steady load, each component its own release `serve` process on PostgreSQL
# (identity and the CRM, each its own database) with the gateway on a Redis of its own:
#  1. Redis killed (-9) and restarted: no request may fail; the limits are shared again after.
#  2. The CRM service killed (-9) and restarted: its routes answer 503 JSON while it is down,
#     the others keep working, and nothing fails once it is back.
#  3. PostgreSQL stopped and started: requests fail fast (503 JSON) while it is down and
#     recover without restarting anything.
# The load: bench/faults.py, THREADS threads cycling through GET /me and GET /contacts (and,
# in the PostgreSQL drill, POST /contacts: acknowledged writes are counted against those made) for
# DRILL seconds; the fault starts at DOWN_AT and ends at UP_AT. Writes the "faults" section of
# BENCHMARKS.md. Stops and starts the machine's PostgreSQL: run it alone.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_packages redis-server
ensure_postgres
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
trap 'bench_end; psql "$TEST_DATABASE_URL" -qc "drop database if exists $crm_database" >/dev/null 2>&1 || true' EXIT

redis_port="$(free_port)"
start_redis() {
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >/dev/null &
  redis_pid=$!
  pids+=("$redis_pid")
  for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "redis did not start" >&2; return 1
}
start_redis
bench_serve identity "$identity_db"
bench_serve crm "$crm_db"
crm_pid="$SERVED_PID"
bench_gateway REDIS_URL="redis://127.0.0.1:$redis_port/" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000 \
  SWITCHBOARD_RATE_LIMIT_WRITE=1000000000

admin() { "$SWITCHBOARD_BIN" admin --database-url "$identity_db" "$@"; }
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
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
PY
cat "$work/section.md"
replace_section faults "$work/section.md"
