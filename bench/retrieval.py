#!/usr/bin/env python3
"""Retrieval quality of the knowledge-base search on SciFact (BEIR layout), over the REST API.

Run by bench/retrieval.sh against a running `switchboard dev`; Python 3 standard library only.
Puts every corpus document in a new knowledge base as a Q&A reference (question = title,
answer = abstract), `CONCURRENCY` requests in flight, then runs every train query that has
judgements through `GET /v1/knowledgebase/{id}/search?limit=10&threshold=0`, one at a time (so
that the client-side latency is that of one search), and scores the answers against the qrels:
nDCG@10 (binary relevance, gain 1 / log2(rank + 1), ideal DCG from min(relevant, 10)) and
recall@10. Writes the figures as JSON and the "retrieval" section of BENCHMARKS.md as Markdown.
"""

import argparse
import http.client
import json
import math
import os
import statistics
import sys
import threading
import time
import unicodedata
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

QUESTION_MAX = 5000  # characters, docs/openapi.json CreateReference.question
ANSWER_MAX = 50_000  # characters, CreateReference.answer
MODEL_WINDOW = 256  # tokens the embedder reads (services/knowledgebase/src/embed/bert.rs)
WINDOW_WORDS = 128  # services/knowledgebase/src/passages.rs
K = 10


# ---------------------------------------------------------------- HTTP

class Api:
    """Keep-alive JSON client, one connection per thread (http.client: stdlib, unlike requests)."""

    def __init__(self, base_url, key):
        url = urllib.parse.urlsplit(base_url)
        self.host, self.port = url.hostname, url.port or 80
        self.prefix = url.path.rstrip("/")
        self.key = key
        self.local = threading.local()

    def _connection(self):
        if getattr(self.local, "conn", None) is None:
            self.local.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        return self.local.conn

    def call(self, method, path, body=None, retries=5):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"X-API-Key": self.key}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(retries + 1):
            conn = self._connection()
            try:
                conn.request(method, self.prefix + path, body=data, headers=headers)
                response = conn.getresponse()
                raw = response.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                self.local.conn = None
                if attempt == retries:
                    raise
                time.sleep(0.2 * (attempt + 1))
                continue
            if response.status in (429, 503) and attempt < retries:
                time.sleep(0.5 * (attempt + 1))
                continue
            try:
                payload = json.loads(raw) if raw else None
            except ValueError:
                payload = {"raw": raw[:200].decode(errors="replace")}
            return response.status, payload
        raise RuntimeError("unreachable")


# ---------------------------------------------------------------- data

def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_qrels(path):
    qrels = {}
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            parts = line.rstrip("\n").split("\t")
            if i == 0 and parts[0] == "query-id":
                continue
            if len(parts) < 3 or int(parts[2]) <= 0:
                continue
            qrels.setdefault(parts[0], set()).add(parts[1])
    return qrels


# ------------------------------------------- BERT WordPiece token count (for the model window)

class WordPiece:
    """The uncased BERT tokenizer of tokenizer.json (BertNormalizer lowercase + accents stripped,
    BertPreTokenizer, WordPiece), enough to count tokens."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            model = json.load(f)["model"]
        self.vocab = model["vocab"]
        self.max_chars = model.get("max_input_chars_per_word", 100)

    @staticmethod
    def _is_punct(ch):
        cp = ord(ch)
        if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
            return True
        return unicodedata.category(ch).startswith("P")

    @staticmethod
    def _is_cjk(cp):
        return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
                or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
                or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)

    def _words(self, text):
        out = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r"):
                continue
            if self._is_cjk(cp):
                out.append(f" {ch} ")
            elif ch.isspace():
                out.append(" ")
            else:
                out.append(ch)
        text = unicodedata.normalize("NFD", "".join(out).lower())
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
        words = []
        for chunk in text.split():
            current = []
            for ch in chunk:
                if self._is_punct(ch):
                    if current:
                        words.append("".join(current))
                        current = []
                    words.append(ch)
                else:
                    current.append(ch)
            if current:
                words.append("".join(current))
        return words

    def count(self, text):
        tokens = 2  # [CLS] and [SEP]
        for word in self._words(text):
            if len(word) > self.max_chars:
                tokens += 1
                continue
            start, pieces = 0, 0
            while start < len(word):
                end = len(word)
                while end > start:
                    piece = word[start:end] if start == 0 else "##" + word[start:end]
                    if piece in self.vocab:
                        break
                    end -= 1
                if end == start:  # no piece fits: the whole word is [UNK]
                    pieces = 1
                    break
                pieces += 1
                start = end
            tokens += pieces
        return tokens


# ---------------------------------------------------------------- metrics

def passage_count(answer):
    """Passages the service embeds for an answer (services/knowledgebase/src/passages.rs)."""
    words = len(answer.split())
    return 1 if words <= WINDOW_WORDS else -(-words // WINDOW_WORDS)


def passage_texts(reference):
    """The texts the service embeds for a reference (services/knowledgebase/src/passages.rs)."""
    words = reference["answer"].split()
    if len(words) <= WINDOW_WORDS:
        return [reference["question"] + "\n" + reference["answer"]]
    question = " ".join(reference["question"].split()[:32])
    size = -(-len(words) // passage_count(reference["answer"]))
    return [question + "\n" + " ".join(words[start:start + size]) for start in range(0, len(words), size)]


def ndcg_at_k(ranked, relevant, k=K):
    dcg = sum(1.0 / math.log2(rank + 1) for rank, doc in enumerate(ranked[:k], start=1) if doc in relevant)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(relevant), k) + 1))
    return dcg / ideal if ideal else 0.0


def recall_at_k(ranked, relevant, k=K):
    return len(set(ranked[:k]) & relevant) / len(relevant) if relevant else 0.0


def percentile(values, p):
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


# ---------------------------------------------------------------- run

def bulk_add(api, kb, batch, ref_to_doc, refused):
    """One `POST .../references/bulk` of (doc id, body) pairs; created ids come back in request
    order, failed items by index."""
    status, answer = api.call("POST", f"/knowledgebase/{kb}/references/bulk", {"references": [b for _, b in batch]})
    if status != 200:
        refused.extend((doc_id, status, answer) for doc_id, _ in batch)
        return
    failed = {f["index"]: f for f in answer["data"]["failed"]}
    written = [doc_id for i, (doc_id, _) in enumerate(batch) if i not in failed]
    for doc_id, reference in zip(written, answer["data"]["created"]):
        ref_to_doc[reference["id"]] = doc_id
    refused.extend((batch[i][0], 200, f["code"]) for i, f in failed.items())


def new_knowledgebase(api, name):
    status, answer = api.call("POST", "/knowledgebase", {"name": name})
    assert status == 201, (status, answer)
    return answer["data"]["id"]


def ingest(api, references, concurrency, log, bulk=0):
    """Creates the knowledge base and one reference per document (with `bulk`, through
    `references/bulk` in requests of that many, one at a time); returns what the run needs."""
    kb = new_knowledgebase(api, "SciFact retrieval benchmark")

    ref_to_doc, refused, lock = {}, [], threading.Lock()
    if bulk:
        log(f"ingesting {len(references)} references through references/bulk, {bulk} a request")
        started = time.perf_counter()
        for at in range(0, len(references), bulk):
            bulk_add(api, kb, references[at:at + bulk], ref_to_doc, refused)
            log(f"  {len(ref_to_doc)} in {time.perf_counter() - started:.0f} s")
        ingest_seconds = time.perf_counter() - started
        ingest_rate = len(ref_to_doc) / ingest_seconds if ingest_seconds else 0.0
        log(f"ingested {len(ref_to_doc)} in {ingest_seconds:.1f} s: {ingest_rate:.1f}/s; refused {len(refused)}")
        return kb, ref_to_doc, refused, ingest_seconds, ingest_rate

    def add(item):
        doc_id, body = item
        status, answer = api.call("POST", f"/knowledgebase/{kb}/references", body)
        with lock:
            if status == 201:
                ref_to_doc[answer["data"]["id"]] = doc_id
            else:
                refused.append((doc_id, status, (answer or {}).get("message") or answer))

    log(f"ingesting {len(references)} references, {concurrency} in flight")
    started = time.perf_counter()
    done = 0
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for _ in pool.map(add, references):
            done += 1
            if done % 500 == 0:
                log(f"  {done} in {time.perf_counter() - started:.0f} s")
    ingest_seconds = time.perf_counter() - started
    ingest_rate = len(ref_to_doc) / ingest_seconds if ingest_seconds else 0.0
    log(f"ingested {len(ref_to_doc)} in {ingest_seconds:.1f} s: {ingest_rate:.1f}/s; refused {len(refused)}")
    for doc_id, status, message in refused[:5]:
        log(f"  refused {doc_id}: {status} {message}")

    return kb, ref_to_doc, refused, ingest_seconds, ingest_rate


def loaded_searches(api, kb, judged, references, clients, log):
    """`clients` search at once, each one query after another, for as long as a bulk import of
    `references` into another knowledge base runs (100 a request, one at a time): search latency
    while the model is busy with ingestion."""
    other = new_knowledgebase(api, "SciFact bulk import under search load")
    done = threading.Event()
    latencies, lock, errors = [], threading.Lock(), []

    def searcher(n):
        i = n
        while not done.is_set():
            text = judged[i % len(judged)][1]
            path = f"/knowledgebase/{kb}/search?" + urllib.parse.urlencode({"query": text[:2000], "limit": K,
                                                                             "threshold": 0})
            t0 = time.perf_counter()
            status, answer = api.call("GET", path, retries=0)
            elapsed = time.perf_counter() - t0
            with lock:
                if status == 200:
                    latencies.append(elapsed)
                else:
                    errors.append(status)
            i += clients

    threads = [threading.Thread(target=searcher, args=(n,), daemon=True) for n in range(clients)]
    log(f"{clients} search clients while {len(references)} references go in through references/bulk")
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    made, refused = {}, []
    try:
        for at in range(0, len(references), 100):
            bulk_add(api, other, references[at:at + 100], made, refused)
    finally:
        done.set()
    seconds = time.perf_counter() - started
    for thread in threads:
        thread.join(130)
    log(f"  {len(latencies)} searches ({len(errors)} failed) during {seconds:.1f} s of import "
        f"({len(made) / seconds:.1f} references/s)")
    return {
        "loaded_clients": clients,
        "loaded_searches": len(latencies),
        "loaded_failed": len(errors),
        "loaded_p50_ms": round(1000 * percentile(latencies, 50), 2) if latencies else None,
        "loaded_p99_ms": round(1000 * percentile(latencies, 99), 2) if latencies else None,
        "loaded_import_rate": round(len(made) / seconds, 2) if seconds else None,
        "loaded_import_references": len(made),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--key", required=True)
    parser.add_argument("--data", required=True, help="the scifact folder")
    parser.add_argument("--limit-docs", type=int, default=0, help="first N corpus documents only (0: all)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--tokenizer", default="", help="tokenizer.json, to count entries over the model window")
    parser.add_argument("--json", default="", help="write the figures here")
    parser.add_argument("--section", default="", help="write the BENCHMARKS.md section here")
    parser.add_argument("--machine", default="")
    parser.add_argument("--ranking", default="dense only (cosine similarity of the query's and the entry's embeddings)",
                        help="how the build under test ranks, for the section")
    parser.add_argument("--state", default="", help="after ingesting, write the knowledge base id and the "
                        "reference-to-document map here")
    parser.add_argument("--reuse", default="", help="a --state file of an earlier run on the same data: "
                        "skip ingesting, only search (for tuning runs)")
    parser.add_argument("--bulk", type=int, default=0, help="ingest through references/bulk, this many a request")
    parser.add_argument("--loaded-clients", type=int, default=0, help="after the searches, search again with this "
                        "many clients at once while a bulk import of --loaded-docs documents into another knowledge "
                        "base runs")
    parser.add_argument("--loaded-docs", type=int, default=1000)
    parser.add_argument("--passages-out", default="", help="write the first --passages-sample passages the service "
                        "embeds (JSON lines), for the encoder's own rate")
    parser.add_argument("--passages-sample", type=int, default=400)
    parser.add_argument("--encoder-rate", type=float, default=0.0, help="the encoder's own passages a second on "
                        "those passages, measured in this run (embed_bench), for the section")
    args = parser.parse_args()
    api = Api(args.base_url, args.key)
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731

    corpus = read_jsonl(os.path.join(args.data, "corpus.jsonl"))
    corpus_total = len(corpus)
    if args.limit_docs:
        corpus = corpus[: args.limit_docs]
    corpus_ids = {doc["_id"] for doc in corpus}
    queries = {q["_id"]: q["text"] for q in read_jsonl(os.path.join(args.data, "queries-train.jsonl"))}
    qrels = read_qrels(os.path.join(args.data, "qrels-train.tsv"))
    # Every judged query; with LIMIT_DOCS only those whose relevant documents are all inside.
    judged = [(qid, queries[qid], rel) for qid, rel in qrels.items() if qid in queries and rel <= corpus_ids]
    judged.sort(key=lambda t: int(t[0]) if t[0].isdigit() else t[0])
    log(f"{len(corpus)} of {corpus_total} documents, {len(judged)} of {len(queries)} train queries judged in it")

    # References within the API's limits (characters, as the service counts them).
    references, cut_question, cut_answer, skipped = [], 0, 0, []
    for doc in corpus:
        question, answer = doc.get("title") or "", doc.get("text") or ""
        if len(question) > QUESTION_MAX:
            question, cut_question = question[:QUESTION_MAX], cut_question + 1
        if len(answer) > ANSWER_MAX:
            answer, cut_answer = answer[:ANSWER_MAX], cut_answer + 1
        if not question.strip() or not answer.strip() or "\0" in question + answer:
            skipped.append(doc["_id"])
            continue
        references.append((doc["_id"], {"question": question, "answer": answer}))

    over_window, tokens = None, []
    if args.tokenizer and os.path.isfile(args.tokenizer):
        wordpiece = WordPiece(args.tokenizer)
        # The service embeds "question\nanswer" (EntryText::embedding_input), truncated to 256 tokens.
        tokens = [wordpiece.count(r["question"] + "\n" + r["answer"]) for _, r in references]
        over_window = sum(1 for t in tokens if t > MODEL_WINDOW)
        log(f"{over_window} of {len(tokens)} entries exceed the model's {MODEL_WINDOW}-token window "
            f"(median {statistics.median(tokens):.0f} tokens)")

    if args.passages_out:
        with open(args.passages_out, "w") as out:
            for text in [p for _, r in references for p in passage_texts(r)][: args.passages_sample]:
                out.write(json.dumps(text) + "\n")
        log(f"wrote {args.passages_sample} passages to {args.passages_out}")
        return
    passages = [passage_count(r["answer"]) for _, r in references]
    log(f"{sum(passages)} passages for {len(references)} references "
        f"({sum(1 for p in passages if p > 1)} of them longer than one)")

    if args.reuse:
        with open(args.reuse) as f:
            state = json.load(f)
        kb, ref_to_doc, refused = state["kb"], state["ref_to_doc"], state["refused"]
        ingest_seconds, ingest_rate = state["ingest_seconds"], state["ingest_rate"]
        log(f"reusing knowledge base {kb} ({len(ref_to_doc)} references) from {args.reuse}")
    else:
        kb, ref_to_doc, refused, ingest_seconds, ingest_rate = ingest(api, references, args.concurrency, log,
                                                                      args.bulk)
        if args.state:
            with open(args.state, "w") as f:
                json.dump({"kb": kb, "ref_to_doc": ref_to_doc, "refused": refused,
                           "ingest_seconds": ingest_seconds, "ingest_rate": ingest_rate}, f)

    credits = 0

    def search(text):
        nonlocal credits
        path = f"/knowledgebase/{kb}/search?" + urllib.parse.urlencode(
            {"query": text[:2000], "limit": K, "threshold": 0})
        t0 = time.perf_counter()
        status, answer = api.call("GET", path, retries=0)
        elapsed = time.perf_counter() - t0
        if status != 200:
            raise RuntimeError(f"search answered {status}: {answer}")
        credits += answer["meta"]["creditsUsed"]
        return answer["data"], elapsed

    # Creating a reference embeds and indexes it before answering (docs/openapi.json: "searchable
    # at once"); check it on a sample of titles, each of which should find its own entry, and wait
    # (up to 120 s) if the index lagged.
    doc_to_ref = {d: r for r, d in ref_to_doc.items()}
    ingested = [(d, b) for d, b in references if d in doc_to_ref]
    sample = ingested[:: max(1, len(ingested) // 20)][:20]
    deadline, waited = time.perf_counter() + 120, 0.0
    while True:
        found = sum(1 for d, b in sample if any(h["reference"]["id"] == doc_to_ref[d] for h in search(b["question"])[0]))
        if found == len(sample) or time.perf_counter() > deadline:
            break
        time.sleep(1)
        waited += 1
    log(f"searchable: {found} of {len(sample)} sampled titles find their own entry (waited {waited:.0f} s)")

    # Warm-up, not measured.
    for _, text, _ in judged[:3]:
        search(text)

    ndcgs, recalls, latencies, unknown_ids, short = [], [], [], 0, 0
    started = time.perf_counter()
    for i, (qid, text, relevant) in enumerate(judged, start=1):
        hits, elapsed = search(text)
        latencies.append(elapsed)
        ranked = []
        for hit in hits:
            doc = ref_to_doc.get(hit["reference"]["id"])
            if doc is None:
                unknown_ids += 1
            ranked.append(doc)
        if len(hits) < K:
            short += 1
        ndcgs.append(ndcg_at_k(ranked, relevant))
        recalls.append(recall_at_k(ranked, relevant))
        if i % 200 == 0:
            log(f"  {i} queries, nDCG@10 so far {statistics.mean(ndcgs):.4f}")
    search_seconds = time.perf_counter() - started

    loaded = {}
    if args.loaded_clients:
        loaded = loaded_searches(api, kb, judged, references[: args.loaded_docs], args.loaded_clients, log)

    figures = {
        **loaded,
        "bulk": args.bulk,
        "encoder_rate": args.encoder_rate or None,
        "documents": len(corpus),
        "corpus_documents": corpus_total,
        "references_created": len(ref_to_doc),
        "refused": len(refused),
        "skipped_blank": len(skipped),
        "cut_question": cut_question,
        "cut_answer": cut_answer,
        "over_model_window": over_window,
        "median_tokens": statistics.median(tokens) if tokens else None,
        "passages": sum(passages),
        "multi_passage_entries": sum(1 for p in passages if p > 1),
        "concurrency": args.concurrency,
        "ingest_seconds": round(ingest_seconds, 2),
        "ingest_rate": round(ingest_rate, 2),
        "searchable_sample": [found, len(sample)],
        "queries": len(judged),
        "judgements": sum(len(r) for _, _, r in judged),
        "ndcg_at_10": round(statistics.mean(ndcgs), 4) if ndcgs else None,
        "recall_at_10": round(statistics.mean(recalls), 4) if recalls else None,
        "latency_p50_ms": round(1000 * percentile(latencies, 50), 2) if latencies else None,
        "latency_p99_ms": round(1000 * percentile(latencies, 99), 2) if latencies else None,
        "latency_mean_ms": round(1000 * statistics.mean(latencies), 2) if latencies else None,
        "searches_per_second": round(len(judged) / search_seconds, 1) if search_seconds else None,
        "answers_short_of_10": short,
        "unknown_ids": unknown_ids,
        "credits_used": credits,
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    if args.section:
        with open(args.section, "w") as f:
            f.write(section(figures, args.machine, args.ranking))


def section(f, machine, ranking):
    subset = "" if f["documents"] == f["corpus_documents"] else f" (first {f['documents']} documents only)"
    window = ""
    if f["over_model_window"] is not None:
        window = (f" {f['over_model_window']:,} of the {f['references_created']:,} entries (title + abstract, median "
                  f"{f['median_tokens']:.0f} WordPiece tokens) are longer than the model's {MODEL_WINDOW}-token "
                  f"window; {f['multi_passage_entries']:,} have answers over {WINDOW_WORDS} words and are embedded as "
                  f"even passages of at most {WINDOW_WORDS} words, {f['passages']:,} passages in all (a longer abstract costs more passages, "
                  "and ingestion pays for each).")
    lines = [
        "## Knowledge base: retrieval quality on SciFact",
        "",
        f"{machine} `bench/retrieval.sh`: release `switchboard dev` (SQLite, embedded qdrant-edge shard, "
        "all-MiniLM-L6-v2 on the CPU, rate limits lifted), one run.",
        "",
        f"BEIR SciFact{subset}: {f['references_created']:,} abstracts put in one knowledge base over the REST API as "
        "Q&A references (question = title, answer = abstract); every judged train query "
        f"({f['queries']} queries, {f['judgements']} judgements) through "
        "`GET /v1/knowledgebase/{id}/search?limit=10&threshold=0`, one at a time. "
        f"Within the API's limits: {f['cut_question']} titles and {f['cut_answer']} abstracts cut, "
        f"{f['skipped_blank']} documents skipped as blank, {f['refused']} refused.{window}",
        "",
        "| measurement | value |",
        "|---|---|",
        f"| nDCG@10 (train split, binary relevance) | {f['ndcg_at_10']:.4f} |",
        f"| recall@10 | {f['recall_at_10']:.4f} |",
        f"| search latency p50 (client side, sequential) | {f['latency_p50_ms']:.1f} ms |",
        f"| search latency p99 | {f['latency_p99_ms']:.1f} ms |",
        (f"| ingestion (`POST .../references/bulk`, {f['bulk']} a request, one at a time) | "
         if f["bulk"] else f"| ingestion (`POST .../references`, {f['concurrency']} in flight) | ")
        + f"{f['ingest_rate']:.1f} references/s ({f['references_created']:,} in {f['ingest_seconds']:.1f} s, "
        f"{f['passages'] / f['ingest_seconds']:.1f} passages/s) |",
    ]
    if f.get("encoder_rate"):
        lines.append(f"| the encoder alone on the first SciFact passages, one call (`embed_bench`, same run) | "
                     f"{f['encoder_rate']:.1f} passages/s |")
    if f.get("loaded_clients"):
        lines += [
            f"| search p50 / p99, {f['loaded_clients']} clients at once during a bulk import | "
            f"{f['loaded_p50_ms']:.1f} / {f['loaded_p99_ms']:.1f} ms ({f['loaded_searches']:,} searches, "
            f"{f['loaded_failed']} failed) |",
            f"| that bulk import's rate meanwhile | {f['loaded_import_rate']:.1f} references/s |",
        ]
    lines += [
        "",
        f"Ranking: {ranking}. For orientation, "
        "published nDCG@10 on the test split (300 queries, not used here): BM25 0.665 (BEIR paper), "
        "all-MiniLM-L6-v2 0.645 (MTEB).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
