"""Steady load for the fault drills: THREADS threads cycle through PATHS (below the base URL)
for DURATION seconds with one API key, and every answer is written down as
`seconds-since-start path status milliseconds json` (json: 1 when the body parsed as JSON).
A path `POST/contacts` creates a contact with a number no other request uses.

usage: faults.py BASE KEY DURATION THREADS OUT PATH...
"""

import json
import sys
import threading
import time
import urllib.parse

from loadgen import run_workers, send


def main():
    base, key, duration, threads, out = sys.argv[1:6]
    paths = sys.argv[6:]
    url = urllib.parse.urlsplit(base)
    prefix = url.path.rstrip("/")
    duration, threads = float(duration), int(threads)
    started = time.monotonic()
    # The drill script stamps its actions with the wall clock; this is where "0 s" is.
    epoch = time.time()
    lines, lock = [], threading.Lock()

    def worker(offset):
        connection = None
        i = offset
        while time.monotonic() - started < duration:
            path = paths[i % len(paths)]
            i += 1
            sent = time.monotonic()
            status, parsed = 0, 0
            method, target, body, headers = "GET", path, None, {"X-API-Key": key}
            if path.startswith("POST/"):
                method, target = "POST", path[len("POST"):]
                # Unique per thread and request: +1 415 2xx xxxx.
                number = f"+1415{2000000 + offset * 100000 + i}"
                body = json.dumps({"number": number, "firstName": "Drill"})
                headers["Content-Type"] = "application/json"
            connection, status, answer = send(url, connection, method, prefix + target, body, headers)
            if answer is not None:
                try:
                    json.loads(answer)
                    parsed = 1
                except ValueError:
                    parsed = 0
            done = time.monotonic()
            with lock:
                lines.append(f"{sent - started:.3f} {path} {status} {(done - sent) * 1000:.1f} {parsed}")

    run_workers(threads, worker)
    with open(out, "w") as f:
        f.write(f"# start {epoch:.3f}\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
