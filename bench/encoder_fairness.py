#!/usr/bin/env python3
"""The shared encoder under one team's import at its embedding budget (issue 53), over the REST
API of a running `switchboard dev` whose budget is the default one.

Run by bench/encoder-fairness.sh; Python 3 standard library, and bench/retrieval.py's client
and SciFact readers. A searching team's knowledge base holds the first LIMIT_DOCS SciFact
abstracts. Then, each phase with budgets full again (a minute apart):
- lone: one client runs the judged train queries of that subset, one at a time;
- one team: CLIENTS of the searching team search while that same team imports LOADED_DOCS
  abstracts through references/bulk (100 a request, one at a time), at its budget: each 429 waits
  its Retry-After and is sent again (the reference);
- two teams: the same searches and, beside them, one writer of the searching team adding single
  references one at a time, while another team imports the same abstracts at its budget.
Prints the figures as JSON on stdout.
"""

import argparse
import collections
import json
import os
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from retrieval import Api, K, percentile, read_jsonl, read_qrels  # noqa: E402

log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731


def call(api, method, path, body=None):
    """One request, 429s waited out by their Retry-After (bounded: 20 in a row)."""
    for _ in range(20):
        status, answer = api.call(method, path, body, retries=0)
        if status != 429:
            return status, answer, 0
        wait = float((answer or {}).get("retryAfter") or 1)
        time.sleep(min(wait, 61))
    raise RuntimeError(f"{method} {path}: still 429 after 20 waits")


def knowledgebase(api, name):
    status, answer, _ = call(api, "POST", "/knowledgebase", {"name": name})
    assert status == 201, (status, answer)
    return answer["data"]["id"]


def import_bulk(api, kb, references):
    """Bulk requests of 100, one at a time, waiting out 429s; returns (created, seconds, 429s)."""
    created, refusals, started = 0, 0, time.perf_counter()
    for at in range(0, len(references), 100):
        body = {"references": [r for _, r in references[at:at + 100]]}
        while True:
            status, answer = api.call("POST", f"/knowledgebase/{kb}/references/bulk", body, retries=0)
            if status != 429:
                break
            refusals += 1
            time.sleep(min(float((answer or {}).get("retryAfter") or 1), 61))
        assert status == 200, (status, answer)
        created += len(answer["data"]["created"])
    return created, time.perf_counter() - started, refusals


def search_path(kb, text):
    return f"/knowledgebase/{kb}/search?" + urllib.parse.urlencode({"query": text[:2000], "limit": K, "threshold": 0})


def searches(api, kb, judged, clients, done):
    """`clients` closed-loop searchers until `done`; returns their latencies and failures."""
    latencies, failures, lock = [], [], threading.Lock()

    def searcher(n):
        i = n
        while not done.is_set():
            t0 = time.perf_counter()
            status, _ = api.call("GET", search_path(kb, judged[i % len(judged)][1]), retries=0)
            elapsed = time.perf_counter() - t0
            with lock:
                (latencies if status == 200 else failures).append(elapsed if status == 200 else status)
            i += clients

    threads = [threading.Thread(target=searcher, args=(n,), daemon=True) for n in range(clients)]
    for thread in threads:
        thread.start()
    return threads, latencies, failures


def writer(api, kb, done):
    """Single references of one short passage, one at a time, 4 a second, until `done`."""
    latencies, failures = [], []

    def run():
        i = 0
        while not done.is_set():
            body = {"question": f"Fairness probe {i}?", "answer": f"A short answer, number {i}."}
            t0 = time.perf_counter()
            status, _ = api.call("POST", f"/knowledgebase/{kb}/references", body, retries=0)
            elapsed = time.perf_counter() - t0
            (latencies if status == 201 else failures).append(elapsed if status == 201 else status)
            i += 1
            # 4 a second: a team's ordinary writes, well within its budget (240 passages a minute).
            done.wait(0.25)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, latencies, failures


def ms(values, p):
    return round(1000 * percentile(values, p), 1) if values else None


def loaded_phase(name, searcher_api, kb, judged, clients, importer_api, import_kb, references, write_kb=None):
    done = threading.Event()
    threads, latencies, failures = searches(searcher_api, kb, judged, clients, done)
    writes = writer(searcher_api, write_kb, done) if write_kb else None
    try:
        created, seconds, refusals = import_bulk(importer_api, import_kb, references)
    finally:
        done.set()
    for thread in threads:
        thread.join(130)
    figures = {
        "phase": name,
        "searches": len(latencies),
        "search_failures": len(failures),
        "search_failure_statuses": dict(collections.Counter(str(status) for status in failures)),
        "search_p50_ms": ms(latencies, 50),
        "search_p99_ms": ms(latencies, 99),
        "imported": created,
        "import_seconds": round(seconds, 1),
        "import_rate": round(created / seconds, 1) if seconds else None,
        "import_429s": refusals,
    }
    if writes:
        writes[0].join(130)
        figures.update({
            "writes": len(writes[1]),
            "write_failures": len(writes[2]),
            "write_failure_statuses": dict(collections.Counter(str(status) for status in writes[2])),
            "write_p50_ms": ms(writes[1], 50),
            "write_p99_ms": ms(writes[1], 99),
        })
    log(json.dumps(figures))
    return figures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--searcher-key", required=True)
    parser.add_argument("--importer-key", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--limit-docs", type=int, default=600)
    parser.add_argument("--loaded-docs", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--pause", type=float, default=61.0, help="seconds between phases: budgets refill")
    args = parser.parse_args()
    searcher = Api(args.base_url, args.searcher_key)
    importer = Api(args.base_url, args.importer_key)

    corpus = [d for d in read_jsonl(os.path.join(args.data, "corpus.jsonl")) if (d.get("title") or "").strip()
              and (d.get("text") or "").strip()]
    references = [(d["_id"], {"question": d["title"][:5000], "answer": d["text"][:50_000]}) for d in corpus]
    subset, loaded = references[: args.limit_docs], references[args.limit_docs: args.limit_docs + args.loaded_docs]
    ids = {doc_id for doc_id, _ in subset}
    queries = {q["_id"]: q["text"] for q in read_jsonl(os.path.join(args.data, "queries-train.jsonl"))}
    judged = [(q, queries[q], rel) for q, rel in read_qrels(os.path.join(args.data, "qrels-train.tsv")).items()
              if q in queries and rel <= ids]
    log(f"{len(subset)} references to search, {len(judged)} judged queries, {len(loaded)} to import")

    kb = knowledgebase(searcher, "Searched")
    created, seconds, refusals = import_bulk(searcher, kb, subset)
    log(f"searched knowledge base: {created} references in {seconds:.1f} s ({refusals} 429s waited out)")
    time.sleep(args.pause)

    lone = []
    for _, text, _ in judged[:3]:
        searcher.call("GET", search_path(kb, text), retries=0)
    for _, text, _ in judged:
        t0 = time.perf_counter()
        status, _ = searcher.call("GET", search_path(kb, text), retries=0)
        assert status == 200, status
        lone.append(time.perf_counter() - t0)
    figures = {"lone_searches": len(lone), "lone_p50_ms": ms(lone, 50), "lone_p99_ms": ms(lone, 99), "phases": []}
    log(json.dumps(figures))

    figures["phases"].append(loaded_phase("one team", searcher, kb, judged, args.clients, searcher,
                                          knowledgebase(searcher, "Own import"), loaded))
    time.sleep(args.pause)
    writes_kb = knowledgebase(searcher, "Single writes")
    figures["phases"].append(loaded_phase("two teams", searcher, kb, judged, args.clients, importer,
                                          knowledgebase(importer, "Other team's import"), loaded, writes_kb))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
