"""Load for the soak: THREADS threads cycle through a mix of reads, writes and searches with
one API key for DURATION seconds, each thread at RATE/THREADS requests a second (RATE 0: as
fast as it can). Every answer is written down as `seconds-since-start name status ms`. The
writes are new contacts (numbers unique per RUN, 0 or 1) and updates of the existing
references REFERENCE_IDS (comma-separated), so that the knowledge index keeps its size and
memory that grows is not data that grows.

usage: soak.py BASE KEY KNOWLEDGEBASE_ID REFERENCE_IDS DURATION THREADS RATE OUT RUN
"""

import json
import sys
import threading
import time
import urllib.parse

from loadgen import run_workers, send

WORDS = ["grace", "kenji", "zanele", "harbour", "lisbon", "refund", "parking", "invoice"]
QUERIES = ["how do refunds work", "parking near the branch", "opening hours on holidays",
           "change my password", "where is my delivery", "gift card balance"]


def requests(offset, i, kb, references, run):
    """The i-th request of a thread: (name, method, path, body)."""
    word, query = WORDS[i % len(WORDS)], QUERIES[i % len(QUERIES)]
    number = f"+1415{3000000 + run * 3000000 + offset * 200000 + i}"
    reference = references[(offset + i) % len(references)]
    mix = [
        ("me", "GET", "/me", None),
        ("contacts search", "GET", f"/contacts?search={word}", None),
        ("contact create", "POST", "/contacts", {"number": number, "firstName": word.title(), "lastName": "Soak"}),
        ("calls", "GET", "/calls?limit=20", None),
        ("knowledge search", "GET", f"/knowledgebase/{kb}/search?query={urllib.parse.quote(query)}&limit=5", None),
        ("reference update", "PUT", f"/knowledgebase/{kb}/references/{reference}",
         {"question": f"What does case {offset}-{i} cover?", "answer": f"Case {offset}-{i} covers {word} and {query}."}),
    ]
    return mix[i % len(mix)]


def main():
    base, key, kb, references, duration, threads, rate, out, run = sys.argv[1:10]
    references, run = references.split(","), int(run)
    url = urllib.parse.urlsplit(base)
    prefix = url.path.rstrip("/")
    duration, threads, rate = float(duration), int(threads), float(rate)
    interval = threads / rate if rate > 0 else 0.0
    started = time.monotonic()
    lines, lock = [], threading.Lock()

    def worker(offset):
        connection = None
        i = 0
        next_at = started + offset * interval / max(threads, 1)
        while True:
            now = time.monotonic()
            if now - started >= duration:
                break
            if interval and now < next_at:
                time.sleep(next_at - now)
            next_at += interval
            name, method, path, body = requests(offset, i, kb, references, run)
            i += 1
            sent = time.monotonic()
            headers = {"X-API-Key": key}
            data = None
            if body is not None:
                data = json.dumps(body)
                headers["Content-Type"] = "application/json"
            connection, status, _ = send(url, connection, method, prefix + path, data, headers, timeout=30)
            done = time.monotonic()
            with lock:
                lines.append(f"{sent - started:.3f}\t{name}\t{status}\t{(done - sent) * 1000:.1f}")

    run_workers(threads, worker)
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
