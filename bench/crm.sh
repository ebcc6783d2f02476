#!/usr/bin/env bash
# CRM figures on PostgreSQL, each component its own release `serve` process as in a deployment
# (identity on SQLite, the CRM on PostgreSQL, the gateway):
#  1. CONTACTS contacts into the measured team and as many into another, by `admin seed-demo`
#     through the CRM service's bulk gRPC API (1,000 per request);
#  2. through the gateway with wrk: GET /contacts with `search`, and with `tagIds` and a sort;
#  3. POST /contacts/bulk with 1,000 new contacts through the gateway, timed by curl.
# Writes the "crm" section of BENCHMARKS.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_packages wrk
ensure_postgres
CONTACTS="${CONTACTS:-100000}"
DURATION="${DURATION:-20s}"
CONNECTIONS="${CONNECTIONS:-2}"
SWITCHBOARD_BIN="$(release_binary)"
bench_begin crm
crm_db="$bench_db"
bench_serve identity "sqlite://$work/data/identity.db?mode=rwc"
bench_serve crm "$crm_db"
bench_gateway SWITCHBOARD_RATE_LIMIT_BULK=1000000

admin() { "$SWITCHBOARD_BIN" admin --database-url "sqlite://$work/data/identity.db?mode=rwc" "$@"; }
team="$(admin create-team --name Measured | json_field '["id"]')"
other="$(admin create-team --name Other | json_field '["id"]')"
bulk_team="$(admin create-team --name Bulk | json_field '["id"]')"
key="$(admin create-key --team "$team" --name bench | json_field '["key"]')"
bulk_key="$(admin create-key --team "$bulk_team" --name bench | json_field '["key"]')"
echo "crm database: $crm_db" >&2

seed() { admin seed-demo --calls 0 --chats 0 "$@"; }
echo "writing $CONTACTS contacts into the measured team and $CONTACTS into another" >&2
seed --team "$team" --contacts "$CONTACTS" | tee "$work/seed-team.json" >&2
seed --team "$other" --contacts "$CONTACTS" --seed 2 | tee "$work/seed-other.json" >&2
# As autovacuum leaves the tables in steady state: statistics and a visibility map.
psql "$crm_db" -qc "vacuum analyze" >/dev/null

curl -sf -H "X-API-Key: $key" "$base/tags" >"$work/tags.json"
python3 - "$work" <<'PY'
import json, random, sys
work = sys.argv[1]
rng = random.Random(1)
tags = [t["id"] for t in json.load(open(f"{work}/tags.json"))["data"]]
names = ["gra", "hopper", "Lovelace", "kenji", "nakam", "patel", "schmi", "ingrid", "dubois", "kowal",
         "amara", "okafor", "lucía", "reyes", "tanaka", "freya", "walsh", "nguyen", "ada", "ravi"]
searches = []
for _ in range(400):
    searches.append(rng.choice([
        f"/contacts?search={rng.choice(names)}",
        f"/contacts?search={rng.choice(names)}&sortBy=lastName&sortOrder=asc",
        f"/contacts?search=5550{rng.randrange(100, 200)}",
        f"/contacts?search={rng.choice(['415', '628', '212', '312'])}{rng.randrange(200, 220)}{rng.randrange(0, 10)}",
        f"/contacts?search={rng.choice(['grace.hop', 'ada.love', 'kenji.tan', 'priya.pa'])}",
    ]))
tagged = []
for _ in range(400):
    chosen = rng.sample(tags, rng.choice([1, 1, 2]))
    sort = rng.choice(["createdAt", "firstName", "lastName", "email", "number"])
    tagged.append(f"/contacts?tagIds={','.join(chosen)}&sortBy={sort}&sortOrder={rng.choice(['asc', 'desc'])}"
                  f"&page={rng.choice([1, 1, 1, 2, 3, 10])}")
open(f"{work}/searches.txt", "w").write("\n".join(searches) + "\n")
open(f"{work}/tagged.txt", "w").write("\n".join(tagged) + "\n")
PY

bench_wrk "$work/searches.txt" "$work/searches.wrk" "$key"
bench_wrk "$work/tagged.txt" "$work/tagged.wrk" "$key"

echo "POST /contacts/bulk: 5 requests of 1,000 new contacts each" >&2
for round in 1 2 3 4 5; do
  python3 - "$round" >"$work/bulk-$round.json" <<'PY'
import json, sys
r = int(sys.argv[1])
contacts = [{"number": f"+1312{200 + r}{n:04d}", "firstName": f"Bulk{n}", "lastName": "Import",
             "email": f"bulk{r}.{n}@example.com", "tagNames": ["Imported"], "note": "From the spreadsheet"}
            for n in range(1000)]
print(json.dumps({"contacts": contacts}))
PY
  curl -s -o "$work/bulk-$round.out" -w "%{time_total}\n" -H "X-API-Key: $bulk_key" -H "Content-Type: application/json" \
    --data-binary "@$work/bulk-$round.json" "$base/contacts/bulk" >>"$work/bulk-times.txt"
  created="$(json_field '["data"]["created"].__len__()' <"$work/bulk-$round.out")"
  [ "$created" = 1000 ] || { head -c 600 "$work/bulk-$round.out" >&2; echo "bulk round $round created $created" >&2; exit 1; }
done

python3 - "$work" "$CONTACTS" "$CONNECTIONS" "$DURATION" "$(machine_line)" >"$work/section.md" <<'PY'
import json, re, sys
work, contacts, connections, duration, machine = sys.argv[1:]
def wrk(name):
    text = open(f"{work}/{name}.wrk").read()
    rate = re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)
    pct = dict(re.findall(r"^\s+(\d+)%\s+([\d.]+\w+)", text, re.M))
    return float(rate), pct["50"], pct["99"]
team = json.load(open(f"{work}/seed-team.json"))["crm"]
other = json.load(open(f"{work}/seed-other.json"))["crm"]
bulk = sorted(float(t) * 1000 for t in open(f"{work}/bulk-times.txt").read().split())
print("## CRM: contact lists, search, bulk create")
print()
print("Command: `bench/crm.sh` (release build; identity, the CRM service and the gateway each its own")
print("`serve` process; the CRM on PostgreSQL; contacts written by `admin seed-demo` through the CRM")
print(f"bulk gRPC API, 1,000 per request, then `VACUUM ANALYZE`; reads through the gateway by wrk, 1 thread,")
print(f"{connections} connections, {duration} per row, cycling through 400 generated paths; one run).")
print()
print(machine)
print()
print(f"Contacts written: {team['contacts']:,} into the measured team in {team['seconds']} s"
      f" ({team['contactsPerSecond']:,.0f}/s), {other['contacts']:,} into another in {other['seconds']} s.")
print()
print("| request | requests/s | p50 | p99 | target p99 |")
print("|---|---|---|---|---|")
for label, name, target in [("`GET /contacts?search=...` (name parts, e-mail parts, number digits)", "searches", "30 ms"),
                            ("`GET /contacts?tagIds=...&sortBy=...` (1 or 2 tags, every sort, pages)", "tagged", "20 ms")]:
    rate, p50, p99 = wrk(name)
    print(f"| {label} | {rate:,.0f} | {p50} | {p99} | {target} |")
print()
print(f"`POST /contacts/bulk` with 1,000 new contacts (names, e-mail, a tag by name, a note), 5 requests:"
      f" median {bulk[2]:.0f} ms, slowest {bulk[-1]:.0f} ms (target 1 s).")
PY
cat "$work/section.md"
replace_section crm "$work/section.md"
