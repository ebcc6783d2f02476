"""Clients of bench/sign-in.sh, standard library only.

people BIN DATA TEAM BASE RUNS: makes RUNS people with an authenticator app (TOTP) and one for
passkeys; times RUNS password sign-ins and RUNS password + TOTP sign-ins (each person once, so
that no code is used twice); prints JSON with p50/p95 in ms and the passkey person's e-mail.

throttle BIN DATA - BASE N: N concurrent wrong passwords for one new person; prints
"<401s> | <429s>".
"""

import base64
import concurrent.futures
import hashlib
import hmac
import json
import statistics
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

PASSWORD = "correct horse battery"


def call(method, url, body=None, cookie=None, timeout=30):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if cookie:
        request.add_header("Cookie", cookie[0])
        request.add_header("X-CSRF-Token", cookie[1])
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read() or b"null"), answer.headers
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null"), error.headers


def session_of(headers, body):
    cookie = headers.get("Set-Cookie", "").split(";")[0]
    return cookie, body["data"]["csrfToken"]


def totp(secret, step):
    key = base64.b32decode(secret + "=" * (-len(secret) % 8))
    mac = hmac.new(key, struct.pack(">Q", step), hashlib.sha1).digest()
    offset = mac[-1] & 15
    return "%06d" % ((struct.unpack(">I", mac[offset : offset + 4])[0] & 0x7FFFFFFF) % 1_000_000)


def person(binary, data, team, base, email):
    """A person who accepted an invitation; answers their session."""
    made = subprocess.run(
        [binary, "admin", "--data-dir", data, "invite", "--team", team, "--email", email, "--role", "member"],
        check=True, capture_output=True, text=True, timeout=60,
    )
    token = json.loads(made.stdout)["url"].rsplit("/", 1)[1]
    body = {"token": token, "password": PASSWORD, "firstName": "Bench", "lastName": "Person"}
    status, answer, headers = call("POST", f"{base}/auth/accept-invite", body)
    assert status == 201, (status, answer)
    return session_of(headers, answer)


def figures(samples):
    samples = sorted(samples)
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return {"p50": round(statistics.median(samples), 1), "p95": round(p95, 1)}


def people(binary, data, team, base, runs):
    runs = int(runs)
    with_totp = []
    for n in range(runs):
        email = f"totp{n}@bench.example"
        session = person(binary, data, team, base, email)
        status, enrolment, _ = call("POST", f"{base}/auth/second-factors/totp", {}, session)
        assert status == 201, enrolment
        secret = enrolment["data"]["secret"]
        step = int(time.time()) // 30
        status, answer, _ = call("POST", f"{base}/auth/second-factors/totp/confirm", {"code": totp(secret, step)}, session)
        assert status == 200, answer
        with_totp.append((email, secret, step))
    person(binary, data, team, base, "passkey@bench.example")
    person(binary, data, team, base, "password@bench.example")
    password_ms = []
    for _ in range(runs):
        started = time.perf_counter()
        status, answer, _ = call("POST", f"{base}/auth/sign-in", {"email": "password@bench.example", "password": PASSWORD})
        password_ms.append(1000 * (time.perf_counter() - started))
        assert status == 200, answer
    totp_ms = []
    for email, secret, confirmed_step in with_totp:
        # A step after the one the set-up used, within the one step of skew allowed.
        code = totp(secret, max(confirmed_step, int(time.time()) // 30) + 1)
        started = time.perf_counter()
        status, answer, _ = call("POST", f"{base}/auth/sign-in", {"email": email, "password": PASSWORD})
        assert status == 202, (status, answer)
        status, answer, _ = call(
            "POST", f"{base}/auth/sign-in/verify", {"challenge": answer["data"]["challenge"], "code": code}
        )
        totp_ms.append(1000 * (time.perf_counter() - started))
        assert status == 200, (status, answer)
    print(json.dumps({"password": figures(password_ms), "totp": figures(totp_ms), "passkey_email": "passkey@bench.example"}))


def throttle(binary, data, _team, base, n):
    n = int(n)
    team = json.loads(
        subprocess.run([binary, "admin", "--data-dir", data, "create-team", "--name", "Throttle"], check=True,
                       capture_output=True, text=True, timeout=60).stdout
    )["id"]
    # A person of their own per run: runs may share a platform.
    email = f"guessed-{n}@bench.example"
    person(binary, data, team, base, email)

    def guess(k):
        return call("POST", f"{base}/auth/sign-in", {"email": email, "password": f"wrong guess {k}"})[0]

    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
        statuses = list(pool.map(guess, range(n)))
    print(f"{statuses.count(401)} | {statuses.count(429)}")


if __name__ == "__main__":
    {"people": people, "throttle": throttle}[sys.argv[1]](*sys.argv[2:])
