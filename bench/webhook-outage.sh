#!/usr/bin/env bash
# A webhook receiver down for DOWN_SECONDS (600) while contacts are created and updated, then
# back: every event must reach it, none twice after a 2xx, and each contact's events in order.
# Each component its own release `serve` process (identity on SQLite; the CRM and webhooks on
# PostgreSQL), default retry settings (5 s doubling). The receiver (bench/webhook_receiver.py)
# answers 503 while down. Writes the "webhook-outage" section of BENCHMARKS.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_postgres
DOWN_SECONDS="${DOWN_SECONDS:-600}"
PER_SECOND="${PER_SECOND:-2}"
SWITCHBOARD_BIN="$(release_binary)"
bench_begin outage
hooks_db="$(bench_extra_database hooks)"
export SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE=true
bench_serve identity "sqlite://$work/data/identity.db?mode=rwc"
bench_serve webhooks "$hooks_db"
bench_serve crm "$bench_db"
bench_gateway SWITCHBOARD_RATE_LIMIT_WRITE=1000000

receiver_port="$(free_port)"
touch "$work/down"
python3 "$BENCH_DIR/webhook_receiver.py" "$receiver_port" "$work/received.log" "$work/down" 2>"$work/receiver.err" &
pids+=("$!")

admin() { "$SWITCHBOARD_BIN" admin --database-url "sqlite://$work/data/identity.db?mode=rwc" "$@"; }
team="$(admin create-team --name Measured | json_field '["id"]')"
key="$(admin create-key --team "$team" --name bench | json_field '["key"]')"
curl -sf -H "X-API-Key: $key" -H "Content-Type: application/json" \
  -d "{\"url\": \"http://127.0.0.1:$receiver_port/hook\", \"events\": [\"contact.created\", \"contact.updated\"]}" \
  "$base/webhooks" >/dev/null

echo "receiver down for $DOWN_SECONDS s while $PER_SECOND contacts a second are created and updated" >&2
python3 - "$base" "$key" "$PER_SECOND" "$DOWN_SECONDS" "$work/load.json" <<'PY'
import json, sys, time, urllib.request
base, key, per_second, seconds, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def send(method, path, body):
    request = urllib.request.Request(f"{base}{path}", data=json.dumps(body).encode(), method=method,
                                     headers={"X-API-Key": key, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)["data"]
start, events = time.time(), 0
for second in range(seconds):
    for n in range(per_second):
        contact = send("POST", "/contacts", {"number": f"+1312{200 + second // 100:03d}{(second % 100) * 100 + n:04d}"})
        send("PUT", f"/contacts/{contact['id']}", {"firstName": f"Updated{n}"})
        events += 2
    time.sleep(max(0.0, start + second + 1 - time.time()))
json.dump({"events": events, "seconds": time.time() - start}, open(out, "w"))
PY
rm "$work/down"
recovered="$(python3 -c 'import time; print(time.time() * 1000)')"
expected="$(json_field '["events"]' <"$work/load.json")"
echo "receiver back; waiting for $expected events (at most 20 minutes)" >&2
for _ in $(seq 1 1200); do
  [ "$(grep -c ' 204 ' "$work/received.log" || true)" -ge "$expected" ] && break
  sleep 1
done

python3 - "$work" "$DOWN_SECONDS" "$PER_SECOND" "$recovered" "$(machine_line)" >"$work/section.md" <<'PY'
import collections, json, sys
work, down, per_second, recovered, machine = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
load = json.load(open(f"{work}/load.json"))
lines = [line.split() for line in open(f"{work}/received.log") if line.strip()]
accepted = [line for line in lines if line[3] == "204"]
refused = sum(1 for line in lines if line[3] == "503")
ids = collections.Counter(line[2] for line in accepted)
twice = sum(count - 1 for count in ids.values() if count > 1)
kinds = collections.defaultdict(list)
for line in accepted:
    kinds[line[5]].append(line[4])
out_of_order = sum(1 for events in kinds.values() if events != ["contact.created", "contact.updated"][:len(events)])
last = max(float(line[0]) for line in accepted) if accepted else recovered
print("## Webhooks: a receiver down, then back")
print()
print("Command: `bench/webhook-outage.sh` (release build; identity, the CRM, the webhooks service and")
print("the gateway each its own `serve` process; the CRM and webhooks on PostgreSQL; default retries:")
print(f"5 s doubling; {per_second} contacts a second created and then updated through the gateway while the")
print(f"receiver answered 503 for {down} s; one run).")
print()
print(machine)
print()
print("| events | delivered (2xx) | delivered twice | contacts out of order | 503 answers while down | last delivery after recovery |")
print("|---|---|---|---|---|---|")
print(f"| {load['events']:,} | {len(ids):,} | {twice} | {out_of_order} | {refused:,} | {(last - recovered) / 1000:.0f} s |")
PY
cat "$work/section.md"
replace_section webhook-outage "$work/section.md"
