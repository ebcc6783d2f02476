#!/usr/bin/env python3
"""Single writes of one team while another team bulk-imports (issue 53), without searches.

import_writes.py BASE_URL IMPORTER_KEY WRITER_KEY SCIFACT_DIR: the importer puts 500 SciFact
abstracts in through references/bulk, 100 a request, one at a time; meanwhile the writer adds
single one-passage references, one at a time, 4 a second (at most 400). Prints each bulk
request's start and end, each write over 0.5 s, and the writes' p50 and max in ms.
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from retrieval import Api, read_jsonl  # noqa: E402


def knowledgebase(api, name):
    status, answer = api.call("POST", "/knowledgebase", {"name": name}, retries=0)
    assert status == 201, (status, answer)
    return answer["data"]["id"]


def main():
    base, importer_key, writer_key, data = sys.argv[1:5]
    importer, writer = Api(base, importer_key), Api(base, writer_key)
    corpus = [d for d in read_jsonl(os.path.join(data, "corpus.jsonl")) if d.get("title") and d.get("text")][:500]
    references = [{"question": d["title"][:5000], "answer": d["text"]} for d in corpus]
    imported, written = knowledgebase(importer, "Import"), knowledgebase(writer, "Single writes")
    started, done, events = time.perf_counter(), threading.Event(), []

    def run_import():
        try:
            for at in range(0, len(references), 100):
                t0 = time.perf_counter() - started
                body = {"references": references[at:at + 100]}
                status, _ = importer.call("POST", f"/knowledgebase/{imported}/references/bulk", body, retries=0)
                events.append(("bulk", round(t0, 2), round(time.perf_counter() - started, 2), status))
        finally:
            done.set()

    thread = threading.Thread(target=run_import, daemon=True)
    thread.start()
    latencies = []
    for i in range(400):
        if done.is_set():
            break
        t0 = time.perf_counter()
        body = {"question": f"Probe {i}?", "answer": f"Answer {i}."}
        status, _ = writer.call("POST", f"/knowledgebase/{written}/references", body, retries=0)
        elapsed = time.perf_counter() - t0
        latencies.append(elapsed)
        if elapsed > 0.5 or status != 201:
            events.append(("write", round(t0 - started, 2), round(elapsed, 2), status))
        time.sleep(0.25)
    thread.join(300)
    for event in sorted(events, key=lambda e: e[1]):
        print(event)
    latencies.sort()
    if latencies:
        p50, worst = latencies[len(latencies) // 2], latencies[-1]
        print(f"writes {len(latencies)} p50 {round(p50 * 1000)} ms max {round(worst * 1000)} ms")


if __name__ == "__main__":
    main()
