#!/usr/bin/env bash
# Webpages and documents: pages scraped and indexed per minute from a local web server,
# and extraction of a 100-page PDF (upload to searchable). Release `switchboard dev`,
# SQLite, the embedded index, the local embedding model. Writes the "sources" section of
# BENCHMARKS.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_model
PAGES="${PAGES:-100}"
SWITCHBOARD_BIN="$(release_binary)"
work="$(mktemp -d)"
trap 'kill $DEV_PID $WEB_PID 2>/dev/null; rm -rf "$work"' EXIT

# A site of $PAGES pages, each with navigation, a script and eight sections of about 80 words.
mkdir -p "$work/site"
python3 - "$work/site" "$PAGES" <<'PY'
import sys, pathlib
site, pages = pathlib.Path(sys.argv[1]), int(sys.argv[2])
words = ("delivery refund warranty branch opening customers invoice account booking parking "
         "repair installation subscription loyalty points gift card returns support team email").split()
for p in range(pages):
    sections = []
    for s in range(8):
        text = " ".join(words[(p * 7 + s * 3 + i) % len(words)] for i in range(80))
        sections.append(f"<h2>Topic {s} of page {p}</h2><p>{text}.</p>")
    html = (f"<html><head><title>Page {p}</title><script>var tracking = 1;</script></head><body>"
            f"<nav><a href='/'>Home</a><a href='/about'>About</a></nav><main><h1>Page {p}</h1>"
            + "".join(sections) + "</main><footer>Footer</footer></body></html>")
    (site / f"page{p}.html").write_text(html)
PY
web_port="$(free_port)"
(cd "$work/site" && exec python3 -m http.server "$web_port" --bind 127.0.0.1 >/dev/null 2>&1) &
WEB_PID=$!

# A 100-page PDF, one paragraph of text per page, written by hand (no PDF library needed).
python3 - "$work/book.pdf" <<'PY'
import sys
objects = []
def add(body):
    objects.append(body)
    return len(objects)
pages = 100
font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
page_ids = []
kids_placeholder = add(b"")  # the Pages object, filled in below
for p in range(pages):
    lines = [f"Chapter {p}: how the service handles case {p}.",
             f"Customers of branch {p % 10} receive answers within {p % 5 + 1} working days.",
             "Refunds, deliveries and warranty repairs follow the same process.",
             f"Reference number {1000 + p} identifies this page in the handbook."]
    stream = "BT /F1 12 Tf 72 720 Td " + " 0 -16 Td ".join(f"({l}) Tj" for l in lines) + " ET"
    content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream.encode() + b"\nendstream")
    page_ids.append(add(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                        b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (kids_placeholder, content, font)))
objects[kids_placeholder - 1] = (b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % i for i in page_ids)
                                 + b"] /Count %d >>" % pages)
catalog = add(b"<< /Type /Catalog /Pages %d 0 R >>" % kids_placeholder)
out = bytearray(b"%PDF-1.4\n")
offsets = []
for i, body in enumerate(objects, start=1):
    offsets.append(len(out))
    out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
xref = len(out)
out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
for offset in offsets:
    out += b"%010d 00000 n \n" % offset
out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, catalog, xref)
open(sys.argv[1], "wb").write(out)
PY

start_dev "$work/data" SWITCHBOARD_RATE_LIMIT_WRITE=1000000000 SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000 \
  SWITCHBOARD_SCRAPE_ALLOW_PRIVATE=true

python3 - "$BASE_URL" "$DEMO_KEY" "$PAGES" "$web_port" "$work" <<'PY'
import json, sys, time, urllib.request, uuid
base, key, pages, port, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
def call(method, path, body=None, raw=None, content_type="application/json"):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"X-API-Key": key, "Content-Type": content_type})
    with urllib.request.urlopen(request) as response:
        return json.load(response)
kb = call("POST", "/knowledgebase", {"name": "Benchmark"})["data"]["id"]
started = time.time()
ids = [call("POST", f"/knowledgebase/{kb}/webpages",
            {"name": f"Page {p}", "url": f"http://127.0.0.1:{port}/page{p}.html"})["data"]["id"] for p in range(pages)]
pending = set(ids)
entries = 0
while pending:
    time.sleep(0.2)
    for page in list(pending):
        data = call("GET", f"/knowledgebase/{kb}/webpages/{page}")["data"]
        if data["status"] in ("ready", "failed"):
            pending.discard(page)
            entries += data["entryCount"]
            if data["status"] == "failed":
                print("failed:", data["failureReason"], file=sys.stderr)
    if time.time() - started > 1800:
        sys.exit("pages did not finish in 30 minutes")
elapsed = time.time() - started

pdf = open(f"{work}/book.pdf", "rb").read()
boundary = uuid.uuid4().hex
body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"handbook.pdf\"\r\n"
        f"Content-Type: application/pdf\r\n\r\n").encode() + pdf + f"\r\n--{boundary}--\r\n".encode()
upload_started = time.time()
document = call("POST", f"/knowledgebase/{kb}/documents", raw=body,
                content_type=f"multipart/form-data; boundary={boundary}")["data"]
upload_answer = time.time() - upload_started
while True:
    data = call("GET", f"/knowledgebase/{kb}/documents/{document['id']}")["data"]
    if data["status"] in ("ready", "failed"):
        break
    time.sleep(0.1)
pdf_elapsed = time.time() - upload_started
with open(f"{work}/results.txt", "w") as out:
    out.write(f"{pages} {elapsed:.2f} {entries} {len(pdf)} {upload_answer:.2f} {pdf_elapsed:.2f} {data['status']} {data['entryCount']}\n")
print(open(f"{work}/results.txt").read(), file=sys.stderr)
PY

python3 - "$work" "$(machine_line)" > "$work/section.md" <<'PY'
import sys
work, machine = sys.argv[1:3]
pages, elapsed, entries, pdf_bytes, upload, pdf_elapsed, status, pdf_entries = open(f"{work}/results.txt").read().split()
pages, elapsed, upload, pdf_elapsed = int(pages), float(elapsed), float(upload), float(pdf_elapsed)
print("## Webpages and documents: scraping and extraction\n")
print("Command: `bench/sources.sh` (release `switchboard dev`, SQLite, embedded index, local model;")
print("pages served by `python3 -m http.server` on loopback; one run).\n")
print(f"{machine}\n")
print("| measurement | value |")
print("|---|---|")
print(f"| webpages added, scraped, split, embedded and indexed | {pages} pages ({entries} entries) in {elapsed:.1f} s: {pages / elapsed * 60:.0f} pages/minute |")
print(f"| 100-page PDF ({int(pdf_bytes):,} bytes): upload answered (type check and parse) | {upload:.2f} s |")
print(f"| 100-page PDF: upload to `{status}` with {pdf_entries} entries searchable | {pdf_elapsed:.2f} s ({100 / pdf_elapsed:.0f} pages/s) |")
PY
replace_section sources "$work/section.md"
cat "$work/section.md"
