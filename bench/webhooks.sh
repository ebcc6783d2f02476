#!/usr/bin/env bash
# Webhook delivery figures on PostgreSQL, each component its own release `serve` process
# (identity on SQLite; the CRM and the webhooks service each on a PostgreSQL database):
# RATE contacts per second are created through `POST /contacts/bulk` for RUN_SECONDS seconds,
# each telling `contact.created` to one webhook whose receiver (bench/webhook_receiver.py)
# logs when each event arrives. Reports the time from the event (its `timestamp`, written in
# the creating transaction) to its arrival, deliveries per second, and duplicates.
# Writes the "webhooks" section of BENCHMARKS.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_postgres
RATE="${RATE:-1000}"
RUN_SECONDS="${RUN_SECONDS:-30}"
SWITCHBOARD_BIN="$(release_binary)"
bench_begin webhooks
crm_db="$bench_db"
hooks_db="$(bench_extra_database hooks)"
export SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE=true
bench_serve identity "sqlite://$work/data/identity.db?mode=rwc"
bench_serve webhooks "$hooks_db"
bench_serve crm "$crm_db"
bench_gateway SWITCHBOARD_RATE_LIMIT_BULK=1000000 SWITCHBOARD_RATE_LIMIT_WRITE=1000000

receiver_port="$(free_port)"
python3 "$BENCH_DIR/webhook_receiver.py" "$receiver_port" "$work/received.log" 2>"$work/receiver.err" &
pids+=("$!")

admin() { "$SWITCHBOARD_BIN" admin --database-url "sqlite://$work/data/identity.db?mode=rwc" "$@"; }
team="$(admin create-team --name Measured | json_field '["id"]')"
key="$(admin create-key --team "$team" --name bench | json_field '["key"]')"
curl -sf -H "X-API-Key: $key" -H "Content-Type: application/json" \
  -d "{\"url\": \"http://127.0.0.1:$receiver_port/hook\", \"events\": [\"contact.created\"]}" "$base/webhooks" >/dev/null

echo "creating $RATE contacts a second for $RUN_SECONDS s" >&2
python3 - "$base" "$key" "$RATE" "$RUN_SECONDS" "$work/load.json" <<'PY'
import json, sys, time, urllib.request
base, key, rate, seconds, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
start, created, slowest = time.time(), 0, 0.0
for second in range(seconds):
    contacts = [{"number": f"+1312{200 + second:03d}{n:04d}", "firstName": f"Load{n}"} for n in range(rate)]
    request = urllib.request.Request(f"{base}/contacts/bulk", data=json.dumps({"contacts": contacts}).encode(),
                                     headers={"X-API-Key": key, "Content-Type": "application/json"})
    began = time.time()
    with urllib.request.urlopen(request, timeout=60) as answer:
        created += len(json.load(answer)["data"]["created"])
    slowest = max(slowest, time.time() - began)
    time.sleep(max(0.0, start + second + 1 - time.time()))
json.dump({"created": created, "seconds": time.time() - start, "slowestBulk": slowest}, open(out, "w"))
PY
expected="$(json_field '["created"]' <"$work/load.json")"
[ "$expected" -gt 0 ] || { echo "no contact was created" >&2; exit 1; }
for _ in $(seq 1 1200); do
  [ "$(wc -l <"$work/received.log")" -ge "$expected" ] && break
  sleep 0.1
done

python3 - "$work" "$RATE" "$RUN_SECONDS" "$(machine_line)" >"$work/section.md" <<'PY'
import json, sys
work, rate, seconds, machine = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
load = json.load(open(f"{work}/load.json"))
lines = [line.split() for line in open(f"{work}/received.log") if line.strip()]
ids = [line[2] for line in lines]
latencies = sorted(float(line[0]) - float(line[1]) for line in lines)
def pct(p):
    return latencies[min(len(latencies) - 1, int(len(latencies) * p / 100))]
arrivals = sorted(float(line[0]) for line in lines)
span = (arrivals[-1] - arrivals[0]) / 1000 if len(arrivals) > 1 else 0
print("## Webhooks: event to delivery")
print()
print("Command: `bench/webhooks.sh` (release build; identity, the CRM, the webhooks service and the")
print("gateway each its own `serve` process; the CRM and webhooks on PostgreSQL; contacts created")
print(f"by `POST /contacts/bulk`, {rate:,} a second for {seconds} s, each telling `contact.created` to one")
print("webhook; the receiver (bench/webhook_receiver.py, Python asyncio, on the same 2 cores) answers")
print("204 at once; latency = arrival minus the event's `timestamp`; one run).")
print()
print(machine)
print()
print("| events | delivered | duplicates | deliveries/s | p50 | p99 | max | target p99 |")
print("|---|---|---|---|---|---|---|---|")
print(f"| {load['created']:,} | {len(lines):,} | {len(ids) - len(set(ids))} | {len(lines) / span if span else 0:,.0f} |"
      f" {pct(50):.0f} ms | {pct(99):.0f} ms | {latencies[-1]:.0f} ms | 1,000 ms |")
print()
print(f"Slowest `POST /contacts/bulk` of {rate:,} while deliveries ran: {load['slowestBulk'] * 1000:.0f} ms.")
PY
cat "$work/section.md"
replace_section webhooks "$work/section.md"
