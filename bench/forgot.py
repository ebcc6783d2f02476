"""The time of POST /v1/auth/forgot for addresses that have an account and for ones that do not
(issue 53, finding 7: the answer must not tell them apart, in content or in time).

forgot.py BASE_URL N: signs up N people (the platform runs with SWITCHBOARD_SIGNUP=open), then
asks for a reset link N times for one of them and N times for an unknown address, interleaved,
each request from a client address of its own (X-Forwarded-For; the platform trusts
127.0.0.0/8) and for an address of its own, so that no cap answers 429. Prints JSON: the
median, p90 and p99 in ms of each kind, and whether every answer was the same 202 body.
"""

import json
import statistics
import sys
import time
import urllib.request


def post(base, path, body, client):
    request = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "X-Forwarded-For": client},
        method="POST",
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as answer:
        text = answer.read()
        status = answer.status
    return status, text, (time.perf_counter() - started) * 1000


def quantile(values, share):
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 2)


def main():
    base, n = sys.argv[1], int(sys.argv[2])
    for i in range(n):
        body = {"email": f"known{i}@forgot.example", "password": "correct horse battery staple",
                "firstName": "K", "lastName": str(i), "teamName": f"Forgot {i}"}
        status, _, _ = post(base, "/auth/sign-up", body, f"10.9.{i // 250}.{i % 250 + 1}")
        assert status == 201, status
    times = {"known": [], "unknown": []}
    bodies = set()
    for i in range(n):
        for kind in ("known", "unknown"):
            octet = 1 if kind == "known" else 2
            client = f"10.{octet}.{i // 250}.{i % 250 + 1}"
            status, text, ms = post(base, "/auth/forgot", {"email": f"{kind}{i}@forgot.example"}, client)
            assert status == 202, (status, text)
            times[kind].append(ms)
            # The body names the address asked for; the rest must be the same.
            bodies.add(text.decode().replace(f"{kind}{i}@forgot.example", "ADDRESS"))
    summary = {kind: {"median": round(statistics.median(values), 2), "p90": quantile(values, 0.9),
                      "p99": quantile(values, 0.99)} for kind, values in times.items()}
    summary["n"] = n
    summary["same_body"] = len(bodies) == 1
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
