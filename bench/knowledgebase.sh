#!/usr/bin/env bash
# Knowledge-base figures: the embedder alone (query latency, passage throughput), then,
# through the gateway of a release `switchboard dev`: ingestion of about 60-token references
# over the API, and search latency on a knowledge base of 10,000 references.
# Writes the "knowledgebase" section of BENCHMARKS.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_model
ensure_packages wrk
REFERENCES="${REFERENCES:-10000}"
SEARCH_DURATION="${SEARCH_DURATION:-30s}"
SWITCHBOARD_BIN="$(release_binary)"
work="$(mktemp -d)"
trap 'kill $DEV_PID 2>/dev/null; rm -rf "$work"' EXIT

echo "embedder alone" >&2
# The embedder and the searches below use the same queries, so the two latencies compare.
queries="$SWITCHBOARD_ROOT/bench/search-queries.txt"
(cd "$SWITCHBOARD_ROOT" && cargo run -q --release -p switchboard-knowledgebase --example embed_bench -- "$queries") \
  > "$work/embed.md"
cat "$work/embed.md" >&2

start_dev "$work/data" SWITCHBOARD_RATE_LIMIT_WRITE=1000000000 SWITCHBOARD_RATE_LIMIT_SEARCH=1000000000 \
  SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000 SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE=1000000000
team_id="$(curl -s -H "X-API-Key: $DEMO_KEY" "$BASE_URL/me" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["team"]["id"])')"
"$SWITCHBOARD_BIN" admin --data-dir "$work/data" grant-credits --team "$team_id" 1000000 >/dev/null

python3 - "$BASE_URL" "$DEMO_KEY" "$REFERENCES" "$work" <<'PY'
import json, sys, time, urllib.request
from concurrent.futures import ThreadPoolExecutor
base, key, count, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"X-API-Key": key, "Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.load(response)
kb = call("POST", "/knowledgebase", {"name": "Benchmark"})["data"]["id"]
topics = ["refund", "delivery", "password", "invoice", "subscription", "warranty", "account", "booking",
          "parking", "opening hours", "gift card", "loyalty points", "returns", "installation", "repair"]
places = ["Berlin", "Lisbon", "Oslo", "Madrid", "Vienna", "Dublin", "Prague", "Athens", "Helsinki", "Zurich"]
def reference(i):
    topic, place = topics[i % len(topics)], places[(i // len(topics)) % len(places)]
    return {"question": f"How does {topic} work for customers of the {place} branch, case {i}?",
            "answer": f"For {topic} at the {place} branch, customers fill in the form at the desk or online. "
                      f"The team answers within two working days and confirms by email with reference {i}."}
def add(i):
    call("POST", f"/knowledgebase/{kb}/references", reference(i))
started = time.time()
with ThreadPoolExecutor(max_workers=4) as pool:
    list(pool.map(add, range(count)))
elapsed = time.time() - started
with open(f"{work}/ingest.txt", "w") as out:
    out.write(f"{count} {elapsed:.1f} {count / elapsed:.1f}\n")
with open(f"{work}/kb.txt", "w") as out:
    out.write(kb)
print(f"ingested {count} references in {elapsed:.1f} s: {count / elapsed:.1f}/s", file=sys.stderr)
PY
kb="$(cat "$work/kb.txt")"

python3 - "$queries" > "$work/search.lua" <<'PY'
import sys, urllib.parse
queries = [line.strip() for line in open(sys.argv[1]) if line.strip()]
print("local queries = {")
for query in queries:
    print(f'  "{urllib.parse.quote(query)}",')
print("}")
print("""local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", wrk.path .. "&query=" .. queries[(i % #queries) + 1])
end""")
PY
echo "search: one client for $SEARCH_DURATION" >&2
wrk -t1 -c1 -d"$SEARCH_DURATION" --latency -s "$work/search.lua" -H "X-API-Key: $DEMO_KEY" \
  "$BASE_URL/knowledgebase/$kb/search?limit=10" | tee "$work/search.txt" >&2

python3 - "$work" "$REFERENCES" "$SEARCH_DURATION" "$(machine_line)" > "$work/section.md" <<'PY'
import re, sys
work, count, duration, machine = sys.argv[1:5]
embed = open(f"{work}/embed.md").read().strip()
n, elapsed, rate = open(f"{work}/ingest.txt").read().split()
text = open(f"{work}/search.txt").read()
def pct(p):
    m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
    value, unit = float(m.group(1)), m.group(2)
    return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
query_p50 = float(re.search(r"query latency p50[^|]*\|\s*([\d.]+) ms", embed).group(1))
print("## Knowledge base: embeddings, ingestion, search\n")
print("Command: `bench/knowledgebase.sh` (release build, `switchboard dev` with SQLite and the embedded")
print("qdrant-edge shard, rate limits lifted; one run).\n")
print(f"{machine}\n")
print("Embedder alone (`cargo run --release -p switchboard-knowledgebase --example embed_bench -- bench/search-queries.txt`; the searches below use the same queries):\n")
print(embed + "\n")
print("Through the gateway:\n")
print("| measurement | value |")
print("|---|---|")
print(f"| ingestion over the API (`POST .../references`, 4 clients, about 60-token references) | {float(rate):.0f} references/s ({n} in {elapsed} s) |")
print(f"| search p50 on {count} references (`GET /v1/knowledgebase/{{id}}/search`, limit 10, one client, {duration}) | {pct(50):.2f} ms |")
print(f"| search p99 | {pct(99):.2f} ms |")
print(f"| searches per second (one client) | {rps:.0f} |")
print(f"| non-2xx answers | {int(non2xx.group(1)) if non2xx else 0} |")
print(f"\nSearch p50 minus the embedder's query p50: {pct(50) - query_p50:.2f} ms (target: at most 2 ms).")
print("Targets: search p50 under 20 ms and p99 under 50 ms; ingestion at least 50 references/s.")
PY
replace_section knowledgebase "$work/section.md"
cat "$work/section.md"
