#!/usr/bin/env python3
"""The platform as a cluster on one machine, and faults injected into it (issue 42).

`up` builds the topology: a bridge (sbc0, 10.88.0.1/24) and one network namespace per replica
with its own address on it; PostgreSQL (a database per service), Redis and a Qdrant server on
the bridge's host address; two replicas of every service and two gateways, each in its own
namespace; HAProxy on 127.0.0.1 in front of the gateways, checking their /readyz. Components
reach each other's replicas through a URL naming both (the balanced, health-checked channels
of services/kit/src/grpc/discovery.rs). The gateways reach the CRM's replicas through a
delaying proxy in each one's namespace, which adds nothing until the latency scenario turns
its delay on (this kernel has no sch_netem). `test` runs the scenarios, each with a workload
that records a history of every request and answer, and checkers that read it afterwards: REST
clients through HAProxy, a runtime ingesting calls and chats over gRPC straight to the
conversations replicas, probes of the rate limits and of signed-out sessions through each
gateway, and a webhook receiver on the bridge's host address. `down` removes everything. State
lives in CLUSTER_DIR (default /tmp/switchboard-cluster).

Every address is on the bridge or the loopback: no traffic leaves the machine. Every wait has
a bound and says what it waited for.
"""

import base64
import collections
import concurrent.futures
import datetime
import glob
import hashlib
import hmac
import importlib
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIR = os.environ.get("CLUSTER_DIR", "/tmp/switchboard-cluster")
STATE = os.path.join(DIR, "state.json")
BIN = os.environ.get("SWITCHBOARD_BIN", "")
BRIDGE, HOST = "sbc0", "10.88.0.1"
PG_PORT, REDIS_PORT, QDRANT_HTTP, QDRANT_GRPC = 55432, 56379, 56333, 56334
HAPROXY_PORT = int(os.environ.get("CLUSTER_PORT", "58080"))
TOKEN = "cluster-service-token-" + "0" * 16
# What serve identity seals TOTP secrets with: one key shared by every replica.
ENCRYPTION_KEYS = "cluster:" + base64.b64encode(b"cluster-only-key-of-32-bytes-!!!").decode()
DRAIN_SECONDS = 5
SERVICES = [("identity", 50051), ("agents", 50052), ("knowledgebase", 50053),
            ("conversations", 50054), ("crm", 50055), ("webhooks", 50056)]
REPLICAS = 2
# The limits checker's own team sends bulk requests (GET /calls/export, which no other traffic
# of a run sends) through both gateways, limited to BULK_LIMIT per window. The window is every
# class's (SWITCHBOARD_RATE_LIMIT_WINDOW_MS, for tests), shortened from a minute so that each
# scenario holds many windows; the other classes' limits stay far above the workload's rate.
BULK_LIMIT, RATE_WINDOW_MS = 10, 2000
# The webhook receiver, on the bridge's host address: every replica's namespace reaches it.
# Below Linux's ephemeral range (32768-60999): a port in it can be held by an outgoing
# connection from the bridge's address (HAProxy's checks), and the receiver then could not
# listen (a CI run failed so, with EADDRINUSE).
WEBHOOK_PORT = 28090
# A delivery claimed by a webhooks replica that dies is taken by the other once its lease ends:
# the receiver's timeout (2 s here) + 30 s. A failed attempt is retried from 0.5 s on.
WEBHOOK_TIMEOUT_MS, WEBHOOK_RETRY_BASE_MS = 2000, 500


def log(message):
    print(f"[cluster {time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(*args, check=True, quiet=False, **kwargs):
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=120, **kwargs)
    if check and result.returncode != 0:
        raise SystemExit(f"failed ({result.returncode}): {' '.join(args)}\n{result.stdout}{result.stderr}")
    if not quiet and result.returncode != 0:
        log(f"(ignored) {' '.join(args)}: {result.stderr.strip()}")
    return result


def wait_for(what, test, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if test():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"timed out after {timeout} s waiting for {what}")


def port_open(address, port):
    with socket.create_connection((address, port), timeout=0.5):
        return True


def exchange(method, url, body=None, headers=None, timeout=15):
    """One request; (status, parsed JSON body or text, the answer's headers with lower-case
    names). A transport failure is status 0, with the error as its body and no headers."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            status, raw, fields = answer.status, answer.read(), answer.headers
    except urllib.error.HTTPError as error:
        status, raw, fields = error.code, error.read(), error.headers
    except (OSError, urllib.error.URLError) as error:
        return 0, str(error), {}
    fields = {name.lower(): value for name, value in fields.items()}
    try:
        return status, json.loads(raw), fields
    except ValueError:
        return status, raw.decode(errors="replace"), fields


def http(method, url, body=None, key=None, idempotency=None, timeout=15):
    """One request; (status, parsed JSON body or text). A transport failure is status 0."""
    headers = {}
    if key:
        headers["X-API-Key"] = key
    if idempotency:
        headers["Idempotency-Key"] = idempotency
    status, answer, _ = exchange(method, url, body, headers, timeout)
    return status, answer


# --- the topology -------------------------------------------------------------------------

def replicas():
    """Every replica: (name, component, address, port). Gateways first in address order."""
    out, n = [], 10
    for component, port in SERVICES + [("gateway", 8080)]:
        for index in range(1, REPLICAS + 1):
            n += 1
            out.append((f"{component}-{index}", component, f"10.88.0.{n}", port))
    return out


def addresses(component):
    return [(address, port) for _, c, address, port in replicas() if c == component]


def namespace(name):
    return f"sbc-{name}"


def network_up():
    if run("ip", "link", "show", BRIDGE, check=False, quiet=True).returncode != 0:
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        run("ip", "addr", "add", f"{HOST}/24", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")
    for n, (name, _, address, _) in enumerate(replicas()):
        ns, veth = namespace(name), f"sbcv{n}"
        if run("ip", "netns", "exec", ns, "true", check=False, quiet=True).returncode == 0:
            continue
        run("ip", "netns", "add", ns)
        run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        run("ip", "link", "set", veth, "master", BRIDGE, "up")
        run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{address}/24", "dev", "eth0")
        run("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
        run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")


def network_down():
    for n, (name, *_rest) in enumerate(replicas()):
        run("ip", "netns", "del", namespace(name), check=False, quiet=True)
        run("ip", "link", "del", f"sbcv{n}", check=False, quiet=True)
    run("ip", "link", "del", BRIDGE, check=False, quiet=True)


def pg_bin():
    versions = sorted(os.listdir("/usr/lib/postgresql"), key=lambda v: int(v.split(".")[0]))
    return f"/usr/lib/postgresql/{versions[-1]}/bin"


ETCD_CLIENT, ETCD_PEER = 52379, 52380
# Each PostgreSQL node: its name, its port and its Patroni REST port. HAProxy's PG_PORT sends
# connections to whichever answers Patroni's /primary.
PG_NODES = [("pg-1", 55433, 58008), ("pg-2", 55434, 58009)]


def as_postgres(*args):
    """A command run as the postgres user in place (no shell in between), so that its pid is
    the command's."""
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", *args]


def patroni_config(name, port, rest):
    data = os.path.join(DIR, name)
    return f"""scope: switchboard
name: {name}
restapi:
  listen: {HOST}:{rest}
  connect_address: {HOST}:{rest}
etcd3:
  hosts: {HOST}:{ETCD_CLIENT}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 2
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    # A commit is acknowledged once the standby has it: a failover loses no acknowledged write.
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      parameters:
        max_connections: 400
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
  initdb:
    - encoding: UTF8
  pg_hba:
    - local all all trust
    - host all all 10.88.0.0/24 trust
    - host replication all 10.88.0.0/24 trust
postgresql:
  listen: {HOST}:{port}
  connect_address: {HOST}:{port}
  data_dir: {data}
  bin_dir: {pg_bin()}
  authentication:
    superuser: {{username: postgres, password: postgres}}
    replication: {{username: replicator, password: replicator}}
    rewind: {{username: rewinder, password: rewinder}}
  parameters:
    unix_socket_directories: {DIR}
"""


def start_pg_node(state, name):
    port, rest = next((p, r) for n, p, r in PG_NODES if n == name)
    config = os.path.join(DIR, f"{name}.yml")
    with open(config, "w") as out:
        out.write(patroni_config(name, port, rest))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": DIR, "LANG": "C.UTF-8"}
    state["pg"][name] = spawn(name, as_postgres("patroni", config), env)
    save(state)


def leader():
    """The node whose Patroni says it is the primary, or None."""
    for name, _, rest in PG_NODES:
        if http("GET", f"http://{HOST}:{rest}/primary", timeout=1)[0] == 200:
            return name
    return None


def sync_standby_streaming():
    status, cluster = http("GET", f"http://{HOST}:{PG_NODES[0][2]}/cluster", timeout=1)
    if status != 200:
        status, cluster = http("GET", f"http://{HOST}:{PG_NODES[1][2]}/cluster", timeout=1)
    members = cluster.get("members", []) if isinstance(cluster, dict) else []
    return any(m.get("role") == "sync_standby" and m.get("state") in ("streaming", "running") for m in members)


def postgres_up(state):
    os.makedirs(DIR, exist_ok=True)
    run("chown", "postgres:postgres", DIR)
    etcd_dir = os.path.join(DIR, "etcd")
    state["etcd"] = spawn("etcd", ["etcd", "--name", "sb", "--data-dir", etcd_dir,
                                   "--listen-client-urls", f"http://{HOST}:{ETCD_CLIENT}",
                                   "--advertise-client-urls", f"http://{HOST}:{ETCD_CLIENT}",
                                   "--listen-peer-urls", f"http://{HOST}:{ETCD_PEER}",
                                   "--initial-advertise-peer-urls", f"http://{HOST}:{ETCD_PEER}",
                                   "--initial-cluster", f"sb=http://{HOST}:{ETCD_PEER}"], dict(os.environ))
    save(state)
    wait_for("etcd", lambda: port_open(HOST, ETCD_CLIENT), 30)
    for name, *_rest in PG_NODES:
        start_pg_node(state, name)
    wait_for("a PostgreSQL primary elected by Patroni", lambda: leader() is not None, 120)
    wait_for("PostgreSQL through HAProxy", lambda: port_open(HOST, PG_PORT), 30)
    wait_for("a synchronous standby streaming", sync_standby_streaming, 120)
    for component, _ in SERVICES:
        exists = run("psql", "-h", HOST, "-p", str(PG_PORT), "-U", "postgres", "-qAtc",
                     f"select 1 from pg_database where datname = '{component}'").stdout.strip()
        if exists != "1":
            run("psql", "-h", HOST, "-p", str(PG_PORT), "-U", "postgres", "-qc", f"create database {component}")


def kill_pg_node(state, name):
    """The node dies: its Patroni and its postmaster, SIGKILLed."""
    postmaster = os.path.join(DIR, name, "postmaster.pid")
    pid = state.setdefault("pg", {}).get(name)
    if pid:
        stop_pid(pid, signal.SIGKILL, timeout=10)
    try:
        with open(postmaster) as source:
            stop_pid(int(source.readline().strip()), signal.SIGKILL, timeout=10)
    except (OSError, ValueError):
        pass


def postgres_down(state):
    for name, *_rest in PG_NODES:
        try:
            kill_pg_node(state, name)
        except SystemExit as error:
            log(str(error))
    if state.get("etcd"):
        stop_pid(state["etcd"], signal.SIGKILL, timeout=10)


def database_url(component):
    return f"postgres://postgres@{HOST}:{PG_PORT}/{component}"


def spawn(name, args, env, ns=None):
    """A process that outlives this script (its own session), its output in DIR/logs."""
    os.makedirs(os.path.join(DIR, "logs"), exist_ok=True)
    out = open(os.path.join(DIR, "logs", f"{name}.log"), "ab")
    command = (["ip", "netns", "exec", ns] if ns else []) + args
    process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=DIR)
    return process.pid


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def stop_pid(pid, sig=signal.SIGTERM, timeout=60):
    try:
        os.kill(pid, sig)
    except OSError:
        return
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    if alive(pid):
        raise SystemExit(f"pid {pid} did not stop within {timeout} s of signal {sig}")


def component_env(component, address, port):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "RUST_LOG": os.environ.get("CLUSTER_RUST_LOG", "warn"),
        "SWITCHBOARD_SERVICE_TOKEN": TOKEN,
        "SWITCHBOARD_ENCRYPTION_KEYS": ENCRYPTION_KEYS,
        "SWITCHBOARD_DRAIN_SECONDS": str(DRAIN_SECONDS),
        "REDIS_URL": f"redis://{HOST}:{REDIS_PORT}/",
        "SWITCHBOARD_DATA_DIR": os.path.join(DIR, "data", f"{component}-{address}"),
    }
    if component in ("gateway", "identity"):
        # "Redis answers again" (info) ends each "Redis unavailable" (warn): the limits and
        # sessions checkers read from both when a replica used its fallback (fallbacks()).
        env["RUST_LOG"] += ",switchboard_kit::redis_client=info"
    if "SWITCHBOARD_EMBEDDING_MODEL_DIR" in os.environ:
        env["SWITCHBOARD_EMBEDDING_MODEL_DIR"] = os.environ["SWITCHBOARD_EMBEDDING_MODEL_DIR"]
    for other, _ in SERVICES:
        env[f"SWITCHBOARD_{other.upper()}_URL"] = ",".join(f"http://{a}:{p}" for a, p in addresses(other))
    if component == "gateway":
        env.update({
            "SWITCHBOARD_LISTEN": f"{address}:{port}",
            "SWITCHBOARD_PUBLIC_URL": f"http://127.0.0.1:{HAPROXY_PORT}",
            "SWITCHBOARD_TRUSTED_PROXIES": HOST,
            "SWITCHBOARD_DRAIN_TIMEOUT_MS": "20000",
            # The workload sends far more than the spec's per-minute limits. The bulk class
            # (which only the limits checker's team uses) keeps a low limit, and every window
            # is RATE_WINDOW_MS long.
            "SWITCHBOARD_RATE_LIMIT_STANDARD": "1000000",
            "SWITCHBOARD_RATE_LIMIT_WRITE": "1000000",
            "SWITCHBOARD_RATE_LIMIT_SEARCH": "1000000",
            "SWITCHBOARD_RATE_LIMIT_BULK": str(BULK_LIMIT),
            "SWITCHBOARD_RATE_LIMIT_WINDOW_MS": str(RATE_WINDOW_MS),
        })
    else:
        env.update({"SWITCHBOARD_GRPC_LISTEN": f"{address}:{port}", "DATABASE_URL": database_url(component)})
        if component == "knowledgebase":
            env.update({"QDRANT_URL": f"http://{HOST}:{QDRANT_GRPC}", "QDRANT_COLLECTION": "cluster"})
        if component == "webhooks":
            # The receiver is on the bridge, a private address.
            env.update({"SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE": "true",
                        "SWITCHBOARD_WEBHOOK_TIMEOUT_MS": str(WEBHOOK_TIMEOUT_MS),
                        "SWITCHBOARD_WEBHOOK_RETRY_BASE_MS": str(WEBHOOK_RETRY_BASE_MS)})
    return env


def start_replica(state, name):
    _, component, address, port = next(r for r in replicas() if r[0] == name)
    pid = spawn(name, [BIN, "serve", component], component_env(component, address, port), namespace(name))
    state["pids"][name] = pid
    save(state)
    return pid


def ready(name, timeout=90):
    _, component, address, port = next(r for r in replicas() if r[0] == name)
    try:
        if component == "gateway":
            wait_for(f"{name}'s /readyz",
                     lambda: http("GET", f"http://{address}:{port}/readyz", timeout=1)[0] == 200, timeout)
        else:
            wait_for(f"{name} listening on {address}:{port}", lambda: port_open(address, port), timeout)
    except SystemExit as failure:
        # `down` removes DIR with the logs: the replica's last lines go with the failure.
        raise SystemExit(f"{failure}\n--- the last lines of {name}'s log:\n{log_tail(name)}") from None


def log_tail(name, lines=40):
    try:
        with open(os.path.join(DIR, "logs", f"{name}.log"), errors="replace") as source:
            return "".join(source.readlines()[-lines:])
    except OSError as error:
        return f"(no log: {error})"


def haproxy_config():
    servers = "\n".join(f"    server {name} {address}:{port} check inter 500ms fall 1 rise 2"
                        for name, c, address, port in replicas() if c == "gateway")
    pg_servers = "\n".join(f"    server {name} {HOST}:{port} check port {rest}" for name, port, rest in PG_NODES)
    return f"""global
    maxconn 2000
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    retries 3
    option redispatch
    retry-on conn-failure empty-response
frontend switchboard
    bind 127.0.0.1:{HAPROXY_PORT}
    default_backend gateways
backend gateways
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
{servers}
# PostgreSQL: only the node whose Patroni answers /primary; connections to a node that stops
# being it are closed, so that clients reconnect to the new one.
listen postgres
    mode tcp
    bind {HOST}:{PG_PORT}
    timeout client 30m
    timeout server 30m
    option httpchk OPTIONS /primary
    http-check expect status 200
    default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions
{pg_servers}
"""


# --- the delaying proxy (the latency scenario) -----------------------------------------------

# This kernel has no sch_netem (`tc qdisc ... netem`: "Specified qdisc kind is unknown"), so the
# latency scenario delays the gateways' traffic to the CRM in userspace: in each crm replica's
# namespace an nft rule redirects TCP to the gRPC port coming from the gateways to a delaying
# proxy in that namespace, which forwards to the replica's own address (so its own connections
# are not redirected again). Everything else reaches the CRM directly.
DELAY_COMPONENT, DELAY_PORT = "crm", 60055
# Each chunk is held for a delay drawn uniformly from 30..70 ms while the delay is on.
DELAY_MS, JITTER_MS = 50, 20
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class Streams:
    """Counts the HTTP/2 streams a client opens, from the bytes it sends: each gRPC call is one
    HEADERS frame on a stream id above the last. A connection that does not start with the
    HTTP/2 preface is not counted."""

    def __init__(self):
        self.preface, self.header, self.skip = b"", b"", 0
        self.last = self.opened = 0
        self.broken = False

    def feed(self, data):
        i = 0
        while i < len(data) and not self.broken:
            if len(self.preface) < len(HTTP2_PREFACE):
                part = data[i:i + len(HTTP2_PREFACE) - len(self.preface)]
                self.preface += part
                i += len(part)
                self.broken = not HTTP2_PREFACE.startswith(self.preface)
            elif self.skip:
                step = min(self.skip, len(data) - i)
                self.skip -= step
                i += step
            else:
                part = data[i:i + 9 - len(self.header)]
                self.header += part
                i += len(part)
                if len(self.header) == 9:
                    kind, stream = self.header[3], int.from_bytes(self.header[5:9], "big") & 0x7FFFFFFF
                    if kind == 1 and stream > self.last:
                        self.last, self.opened = stream, self.opened + 1
                    self.skip, self.header = int.from_bytes(self.header[:3], "big"), b""


def delay_proxy(listen, upstream, stats):
    """The delaying proxy (`cluster.py delay-proxy LISTEN UPSTREAM STATS`): forwards each
    connection to UPSTREAM, a new upstream connection per connection, closing the client's when
    UPSTREAM refuses (the replica restarting) and when UPSTREAM closes. SIGUSR1 turns the delay
    on (each chunk DELAY_MS ± JITTER_MS), SIGUSR2 off. A chunk is never sent before the one
    read before it in its direction (send time = max(now + delay, previous send time)), so byte
    order is kept and no chunk waits more than the largest delay after it arrived. STATS gets
    its counters (JSON) at every switch, as they were at that instant, and every second."""
    import asyncio

    host, port = listen.rsplit(":", 1)
    upstream_host, upstream_port = upstream.rsplit(":", 1)
    counters = {"delayed": 0, "switches": 0, "connections": 0, "refused": 0, "streams": 0, "chunks": 0}
    rng = random.Random()

    def write_stats():
        with open(stats + ".tmp", "w") as out:
            json.dump(counters, out)
        os.replace(stats + ".tmp", stats)

    def switch(delayed):
        counters["delayed"], counters["switches"] = int(delayed), counters["switches"] + 1
        write_stats()

    def nodelay(writer):
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def pipe(reader, writer, streams, close_all):
        loop, queue, last = asyncio.get_running_loop(), asyncio.Queue(), 0.0

        async def send():
            try:
                while (item := await queue.get()) is not None:
                    at, data = item
                    if at > loop.time():
                        await asyncio.sleep(at - loop.time())
                    writer.write(data)
                    await writer.drain()
                if writer.can_write_eof():
                    writer.write_eof()
            except (OSError, RuntimeError):
                close_all()

        sender = asyncio.ensure_future(send())
        try:
            while data := await reader.read(65536):
                counters["chunks"] += 1
                if streams is not None:
                    before = streams.opened
                    streams.feed(data)
                    counters["streams"] += streams.opened - before
                delay = rng.uniform(DELAY_MS - JITTER_MS, DELAY_MS + JITTER_MS) / 1000 if counters["delayed"] else 0.0
                last = max(loop.time() + delay, last)
                queue.put_nowait((last, data))
        except OSError:
            pass
        queue.put_nowait(None)
        await sender

    async def handle(client_reader, client_writer):
        counters["connections"] += 1
        try:
            upstream_reader, upstream_writer = await asyncio.wait_for(
                asyncio.open_connection(upstream_host, int(upstream_port)), 5)
        except (OSError, asyncio.TimeoutError):
            counters["refused"] += 1
            client_writer.close()
            return
        nodelay(client_writer)
        nodelay(upstream_writer)

        def close_all():
            client_writer.close()
            upstream_writer.close()

        tasks = [asyncio.ensure_future(pipe(client_reader, upstream_writer, Streams(), close_all)),
                 asyncio.ensure_future(pipe(upstream_reader, client_writer, None, close_all))]
        # When one side has finished (and its last chunks were sent), the other gets 10 s to.
        _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if pending:
            await asyncio.wait(pending, timeout=10)
        close_all()
        for task in tasks:
            task.cancel()

    async def main():
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, switch, True)
        loop.add_signal_handler(signal.SIGUSR2, switch, False)
        await asyncio.start_server(handle, host, int(port), reuse_address=True)
        while True:
            write_stats()
            await asyncio.sleep(1)

    asyncio.run(main())


def delay_stats(name):
    return os.path.join(DIR, f"delay-{name}.json")


def delay_up(state):
    """A delaying proxy (delay off) in each crm replica's namespace, and the nft rule that sends
    the gateways' connections to the replica's gRPC port through it."""
    gateways = ", ".join(address for address, _ in addresses("gateway"))
    for name, component, address, port in replicas():
        if component != DELAY_COMPONENT:
            continue
        nft(name, "add", "table", "ip", "sbdelay")
        nft(name, "add", "chain", "ip", "sbdelay", "pre", "{ type nat hook prerouting priority dstnat ; }")
        nft(name, "add", "rule", "ip", "sbdelay", "pre", "ip", "saddr", f"{{ {gateways} }}", "tcp", "dport",
            str(port), "redirect", "to", f":{DELAY_PORT}")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CLUSTER_DIR": DIR}
        state["delay"][name] = spawn(f"delay-{name}", [sys.executable, os.path.abspath(__file__), "delay-proxy",
                                                       f"{address}:{DELAY_PORT}", f"{address}:{port}",
                                                       delay_stats(name)], env, namespace(name))
        save(state)
    for name, component, address, _ in replicas():
        if component == DELAY_COMPONENT:
            wait_for(f"the delaying proxy of {name} on {address}:{DELAY_PORT}",
                     lambda: port_open(address, DELAY_PORT) and os.path.exists(delay_stats(name)), 30)


def delay_down(state):
    for name, pid in state.get("delay", {}).items():
        try:
            stop_pid(pid, signal.SIGKILL, timeout=10)
        except SystemExit as error:
            log(str(error))
        run("ip", "netns", "exec", namespace(name), "nft", "delete", "table", "ip", "sbdelay",
            check=False, quiet=True)


def read_json(path):
    try:
        with open(path) as source:
            return json.load(source)
    except (OSError, ValueError):
        return {}


def delay_switch(state, delayed):
    """Every delaying proxy switched on (50 ± 20 ms) or off; answers their counters summed, each
    as it was at its switch, and the time of the first signal."""
    sent, totals = time.time(), collections.Counter()
    for name, pid in state["delay"].items():
        seen = read_json(delay_stats(name)).get("switches", 0)
        os.kill(pid, signal.SIGUSR1 if delayed else signal.SIGUSR2)
        wait_for(f"the delaying proxy of {name} to switch its delay {'on' if delayed else 'off'}",
                 lambda: read_json(delay_stats(name)).get("switches", 0) > seen, 10)
        totals.update(read_json(delay_stats(name)))
    return sent, totals


def save(state):
    with open(STATE + ".tmp", "w") as out:
        json.dump(state, out, indent=1)
    os.replace(STATE + ".tmp", STATE)


def load():
    with open(STATE) as source:
        return json.load(source)


def admin(*args):
    result = run(BIN, "admin", "--database-url", database_url("identity"), *args,
                 env={**os.environ, "REDIS_URL": f"redis://{HOST}:{REDIS_PORT}/"})
    return json.loads(result.stdout)


def redis_command():
    """Redis on the bridge's host address. Protected mode is off: with it on (the default) and no
    password, Redis 7 refuses every client that does not come from the loopback ("DENIED Redis
    is running in protected mode"), so every replica would run on its fallbacks. Only the
    cluster's namespaces reach the bridge."""
    return ["redis-server", "--bind", HOST, "--port", str(REDIS_PORT), "--protected-mode", "no", "--save", "",
            "--appendonly", "no"]


def up():
    os.makedirs(DIR, exist_ok=True)
    state = {"pids": {}, "pg": {}, "delay": {}}
    network_up()
    # Before any gateway connects: the redirect applies to new connections only.
    delay_up(state)
    with open(os.path.join(DIR, "haproxy.cfg"), "w") as out:
        out.write(haproxy_config())
    state["haproxy"] = spawn("haproxy", ["haproxy", "-f", os.path.join(DIR, "haproxy.cfg"), "-db"], dict(os.environ))
    postgres_up(state)
    state["redis"] = spawn("redis", redis_command(), dict(os.environ))
    qdrant = os.environ.get("QDRANT_BIN", os.path.join(ROOT, "..", "shared", "bin", "qdrant"))
    qdrant_env = {**os.environ, "QDRANT__SERVICE__HOST": HOST, "QDRANT__SERVICE__HTTP_PORT": str(QDRANT_HTTP),
                  "QDRANT__SERVICE__GRPC_PORT": str(QDRANT_GRPC), "QDRANT__TELEMETRY_DISABLED": "true",
                  "QDRANT__STORAGE__STORAGE_PATH": os.path.join(DIR, "qdrant")}
    state["qdrant"] = spawn("qdrant", [qdrant], qdrant_env)
    save(state)
    wait_for("Redis", lambda: port_open(HOST, REDIS_PORT), 30)
    wait_for("Qdrant", lambda: port_open(HOST, QDRANT_GRPC), 60)
    for component, _ in SERVICES:
        run(BIN, "migrate", component, env={**os.environ, "DATABASE_URL": database_url(component)})
    for name, *_rest in replicas():
        start_replica(state, name)
    for name, *_rest in replicas():
        ready(name)
    base = f"http://127.0.0.1:{HAPROXY_PORT}"
    wait_for("HAProxy in front of a ready gateway", lambda: http("GET", f"{base}/readyz", timeout=1)[0] == 200, 30)
    state["base"] = f"{base}/v1"
    save(state)
    log(f"up: {len(replicas())} replicas in namespaces on {BRIDGE}, PostgreSQL primary {leader()} (Patroni), "
        f"HAProxy on {base}")


def down():
    state = load() if os.path.exists(STATE) else {"pids": {}, "pg": {}}
    for pid in list(state["pids"].values()) + [state.get("haproxy"), state.get("redis"), state.get("qdrant")]:
        if pid:
            try:
                stop_pid(pid, signal.SIGKILL, timeout=10)
            except SystemExit as error:
                log(str(error))
    postgres_down(state)
    delay_down(state)
    network_down()
    run("rm", "-rf", DIR, check=False)
    log("down")


# --- the workload and its history -------------------------------------------------------------

class History:
    """Every operation: what was sent, when, and what came back (JSON lines in DIR)."""

    def __init__(self, scenario):
        self.scenario = scenario
        self.path = os.path.join(DIR, f"history-{scenario}.jsonl")
        self.lock = threading.Lock()
        self.entries = []
        open(self.path, "w").close()

    def record(self, entry):
        with self.lock:
            self.entries.append(entry)
            with open(self.path, "a") as out:
                out.write(json.dumps(entry) + "\n")


class UniqueNumbers:
    """Phone numbers for the run's team (a contact's number is unique in its team): US numbers
    of random exchanges, each given once; safe across threads."""

    def __init__(self):
        self.lock, self.given, self.rng = threading.Lock(), set(), random.Random(os.urandom(16))

    def next(self):
        with self.lock:
            while True:
                number = (f"+1{self.rng.choice((212, 312, 415, 617, 718, 929))}"
                          f"{self.rng.randint(200, 999)}{self.rng.randint(0, 9999):04d}")
                if number not in self.given:
                    self.given.add(number)
                    return number


# How long a retrying client keeps sending a write: longer than a failover takes.
RETRY_SECONDS = 30

# One for the whole run: numbers are unique across its scenarios.
NUMBERS = UniqueNumbers()


# --- what the workload sends besides its REST clients -----------------------------------------

class Gateways:
    """The gateways' own addresses, for the probes that must choose which gateway answers (the
    limits and sessions checkers), and which of them a scenario is stopping: a probe sends to a
    gateway only while it is not marked away, as HAProxy would not either."""

    def __init__(self):
        self.lock, self.away = threading.Lock(), set()

    def all(self):
        return [(name, f"http://{address}:{port}/v1") for name, c, address, port in replicas() if c == "gateway"]

    def up(self):
        with self.lock:
            return [(name, base) for name, base in self.all() if name not in self.away]

    def leave(self, name):
        """Marked before the scenario stops the gateway: a request sent before that finishes
        during the gateway's drain."""
        if name.startswith("gateway-"):
            with self.lock:
                self.away.add(name)

    def back(self, name):
        with self.lock:
            self.away.discard(name)


GATEWAYS = Gateways()


def rfc3339(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def iso_to_ms(text):
    """Milliseconds since the epoch of an RFC 3339 time as the API writes it (`...T05:22:59.000Z`)."""
    parsed = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    return round(parsed.timestamp() * 1000)


# The gRPC codes as the history records them: the HTTP status the gateway gives the same error
# (services/kit/src/error.rs), so that every checker reads one kind of status.
GRPC_STATUS = {"INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "OUT_OF_RANGE": 400, "UNAUTHENTICATED": 401,
               "PERMISSION_DENIED": 403, "NOT_FOUND": 404, "ALREADY_EXISTS": 409, "ABORTED": 409,
               "RESOURCE_EXHAUSTED": 429, "CANCELLED": 499, "UNIMPLEMENTED": 501, "UNAVAILABLE": 503,
               "DEADLINE_EXCEEDED": 504}
# What an ingestion call may take: an internal consumer bounds its calls as the gateway bounds
# a request (SWITCHBOARD_REQUEST_TIMEOUT_MS, 10 s).
INGEST_DEADLINE = 10
# The pause between two conversations of the ingesting runtime.
INGEST_PAUSE = 0.3


class Ingest:
    """The conversations service's ingestion API (`ConversationIngest`), called straight at both
    conversations replicas, as a voice or chat runtime does (docs/runtime.md): one channel over
    both addresses that sends round robin to the replicas whose gRPC health says SERVING (gRPC's
    own health checking), and the service token as `authorization` metadata. Stubs are generated
    from proto/ with grpcio-tools, as tests/grpc_clients/runtime.py does; grpcio comes from the
    venv of scripts/lib.sh's ensure_grpc_clients, whose Python runs `cluster.py test`."""

    def __init__(self):
        try:
            import grpc
            from google.protobuf import json_format
            from grpc_tools import protoc
        except ImportError as error:
            raise SystemExit(f"the workload's gRPC ingestion needs grpcio and grpcio-tools ({error}): "
                             "run `scripts/cluster test`, which runs this with the Python of ensure_grpc_clients")
        self.grpc, self.json_format = grpc, json_format
        out, proto = os.path.join(DIR, "grpc-stubs"), os.path.join(ROOT, "proto")
        os.makedirs(out, exist_ok=True)
        files = sorted(os.path.relpath(path, proto) for path in glob.glob(os.path.join(proto, "**", "*.proto"),
                                                                            recursive=True))
        args = ["protoc", f"-I{proto}", f"-I{os.path.join(os.path.dirname(protoc.__file__), '_proto')}",
                f"--python_out={out}", f"--grpc_python_out={out}", *files]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed on {files}")
        sys.path.insert(0, out)
        self.messages = importlib.import_module("switchboard.v1.conversations_pb2")
        stubs = importlib.import_module("switchboard.v1.conversations_pb2_grpc")
        target = "ipv4:" + ",".join(f"{address}:{port}" for address, port in addresses("conversations"))
        config = {"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": ""}}
        # The authority names the service: by default it is the whole target (both addresses,
        # comma-separated), which the replicas' HTTP/2 server refuses (RST_STREAM
        # PROTOCOL_ERROR), health checks included.
        self.channel = grpc.insecure_channel(target, options=[("grpc.service_config", json.dumps(config)),
                                                              ("grpc.default_authority", "conversations")])
        self.stub = stubs.ConversationIngestStub(self.channel)
        self.metadata = [("authorization", f"Bearer {TOKEN}")]

    def call(self, method, request):
        """One call; (status, gRPC code, answer): the answer's id (calls and chats) or counts
        (appends), or the error's details."""
        message = self.json_format.ParseDict(request, getattr(self.messages, f"{method}Request")())
        try:
            answer = getattr(self.stub, method)(message, metadata=self.metadata, timeout=INGEST_DEADLINE)
        except self.grpc.RpcError as error:
            code = error.code().name
            return GRPC_STATUS.get(code, 500), code, {"error": error.details()}
        if method.startswith("Append"):
            return 200, "OK", {"appended": answer.appended, "total": answer.total}
        return 200, "OK", {"id": answer.id, "status": answer.status}

    def send(self, history, resource, step, method, request, retries):
        """One step of a conversation, recorded; with `retries`, sent again as it was (the
        conversation's external id and the items' own ids make it idempotent) until answered or
        RETRY_SECONDS have passed. Its answer, or None."""
        first, attempt = time.monotonic(), 0
        while True:
            attempt += 1
            started = time.time()
            status, code, answer = self.call(method, request)
            history.record({"kind": "ingest", "method": "gRPC", "path": f"ConversationIngest/{method}",
                            "request": request, "key": request["external_id"], "resource": resource, "step": step,
                            "attempt": attempt, "start": started, "end": time.time(), "status": status,
                            "grpc": code, "answer": answer})
            if status == 200:
                return answer
            if not retries or time.monotonic() - first > RETRY_SECONDS:
                return None
            time.sleep(0.25)


INGEST = None


def conversation(team, scenario, serial):
    """The three steps of a call (two in three conversations) or of a chat: begun, its transcript
    or messages, ended with a summary. Every text carries the conversation's tag. A call's caller
    number is unique in the run, a chat's contact address too: the checker finds each by it."""
    tag, now = uuid.uuid4().hex[:12], time.time()
    external = f"cluster-{scenario}-{tag}"
    ids = {"team_id": team, "external_id": external}
    if serial % 3:
        return "call", [
            ("begin", "UpsertCall", {**ids, "from": NUMBERS.next(), "to": "+14155550100", "direction": "INCOMING",
                                     "status": "in-progress", "started_at": rfc3339(now - 90)}),
            ("append", "AppendTranscript", {**ids, "segments": [
                {"seq": 1, "speaker": "caller", "text": f"Caller {tag}: a table for two at eight.", "offset_ms": 2000},
                {"seq": 2, "speaker": "agent", "text": f"Agent {tag}: booked for eight.", "offset_ms": 6000}]}),
            ("end", "EndCall", {**ids, "ended_at": rfc3339(now), "status": "completed", "summary": f"Booked {tag}."}),
        ]
    return "chat", [
        ("begin", "UpsertChat", {**ids, "channel": "web", "contact_email": f"{tag}@cluster.example",
                                 "started_at": rfc3339(now - 90)}),
        ("append", "AppendChatMessages", {**ids, "messages": [
            {"external_id": f"{tag}-1", "role": "user", "text": f"User {tag}: when are you open?",
             "created_at": rfc3339(now - 80)},
            {"external_id": f"{tag}-2", "role": "agent", "text": f"Agent {tag}: from 9 to 17.",
             "created_at": rfc3339(now - 79)}]}),
        ("end", "EndChat", {**ids, "ended_at": rfc3339(now), "summary": f"Opening hours {tag}."}),
    ]


def ingest_client(state, history, retries, stop, deadline):
    """The voice and chat runtime: one conversation after another, each step over gRPC. A step
    that stays unanswered ends its conversation (the runtime gives up on it)."""
    serial = 0
    while time.monotonic() < deadline and not stop.is_set():
        serial += 1
        resource, steps = conversation(state["team"], history.scenario, serial)
        for step, method, request in steps:
            if INGEST.send(history, resource, step, method, request, retries) is None:
                break
        time.sleep(INGEST_PAUSE)


# The pause of each gateway's limits probe between two requests: about 5 requests a second to
# each gateway, 20 per window of 2 s against a limit of 10, so that every window is spent.
LIMIT_PAUSE = 0.2


def limits_client(state, history, gateway, stop, deadline):
    """The limits checker's traffic through one gateway's own address (not HAProxy): bulk
    requests of the limited team, each recorded with the gateway, the answer's status and its
    rate-limit fields (the window's reset; a 429's body says it to the millisecond)."""
    key = state["limited"]["key"]
    while time.monotonic() < deadline and not stop.is_set():
        base = dict(GATEWAYS.up()).get(gateway)
        if base is None:
            time.sleep(LIMIT_PAUSE)
            continue
        started = time.time()
        status, answer, fields = exchange("GET", f"{base}/calls/export", headers={"X-API-Key": key})
        entry = {"kind": "limited", "method": "GET", "path": "/calls/export", "gateway": gateway, "start": started,
                 "end": time.time(), "status": status, "expected": [429],
                 "reset": int(fields["x-ratelimit-reset"]) if "x-ratelimit-reset" in fields else None,
                 "answer": answer if isinstance(answer, dict) else {"text": answer[:200]}}
        history.record(entry)
        time.sleep(LIMIT_PAUSE)


# The pause between two sign-in and sign-out rounds of the sessions checker: each sign-in costs
# the identity service an Argon2id hash (up to a second of a core here).
SESSION_PAUSE = 2.0


def session_round(state, history, number, first, second):
    """One round of the sessions checker: a portal user signs in through the gateway `first`,
    reads their session through `second` (which then holds it in its cache), signs out through
    `first`, and reads it through `second` again at once: that must be 401. A round stops at a
    step that fails; the checker counts only rounds that got to the last step."""
    sessions = state["sessions"]
    round_id = f"{history.scenario}-{number}"

    def step(name, gateway, method, path, body=None, headers=None):
        started = time.time()
        status, answer, fields = exchange(method, gateway[1] + path, body, headers)
        entry = {"kind": "session", "round": round_id, "step": name, "gateway": gateway[0], "method": method,
                 "path": path, "start": started, "end": time.time(), "status": status,
                 "answer": answer if isinstance(answer, dict) else {"text": str(answer)[:200]}}
        if name == "after sign-out":
            entry["expected"] = [401]
        history.record(entry)
        return status, answer, fields

    status, answer, fields = step("sign-in", first, "POST", "/auth/sign-in",
                                  {"email": sessions["email"], "password": sessions["password"]})
    cookie = fields.get("set-cookie", "").split(";")[0]
    if status != 200 or not cookie.startswith("switchboard_session="):
        return
    headers = {"Cookie": cookie}
    if step("before sign-out", second, "GET", "/auth/session", headers=headers)[0] != 200:
        return
    signed_out = step("sign-out", first, "POST", "/auth/sign-out", {},
                      {**headers, "X-CSRF-Token": answer["data"]["csrfToken"]})
    if signed_out[0] != 200:
        return
    step("after sign-out", second, "GET", "/auth/session", headers=headers)


def sessions_client(state, history, stop, deadline):
    """Rounds of the sessions checker, the two gateways swapping roles each round; none while a
    gateway is away."""
    number = 0
    while time.monotonic() < deadline and not stop.is_set():
        available = GATEWAYS.up()
        if len(available) < 2:
            time.sleep(0.2)
            continue
        number += 1
        first, second = available if number % 2 else available[::-1]
        session_round(state, history, number, first, second)
        time.sleep(SESSION_PAUSE)


class Receiver:
    """The webhook receiver: an HTTP server on the bridge's host address (WEBHOOK_PORT) that the
    run's team subscribed at /hooks/<team id>. It keeps every delivery with its `webhook-id`, its
    body, its event's type and subject (`data.id`), and whether its Standard Webhooks signature
    is right (HMAC-SHA256 of `id.timestamp.body` under the secret's key, checked here with the
    standard library), and writes them to DIR/webhooks.jsonl. It answers 200 to everything, so
    that deliveries still due to the teams of earlier runs end too."""

    def __init__(self):
        self.lock, self.deliveries, self.secrets = threading.Lock(), [], {}
        self.path = os.path.join(DIR, "webhooks.jsonl")
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.received(self.path, self.headers, body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        try:
            self.server = ThreadingHTTPServer((HOST, WEBHOOK_PORT), Handler)
        except OSError as error:
            raise SystemExit(f"the webhook receiver cannot listen on {HOST}:{WEBHOOK_PORT} ({error}): "
                             "is the cluster up, and no other `cluster.py test` running?")
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, team):
        return f"http://{HOST}:{WEBHOOK_PORT}/hooks/{team}"

    def received(self, path, headers, body):
        team = path.rsplit("/", 1)[-1]
        with self.lock:
            secret = self.secrets.get(team)
        if secret is None:
            return
        delivery = {"at": time.time(), "team": team, "id": headers.get("webhook-id"),
                    "timestamp": headers.get("webhook-timestamp"), "body": body.decode(errors="replace"),
                    "signed": signed(secret, headers, body)}
        try:
            event = json.loads(body)
            delivery["type"], delivery["subject"] = event.get("type"), (event.get("data") or {}).get("id")
        except (ValueError, AttributeError):
            delivery["type"] = delivery["subject"] = None
        with self.lock:
            self.deliveries.append(delivery)
            with open(self.path, "a") as out:
                out.write(json.dumps(delivery) + "\n")

    def of(self, team):
        with self.lock:
            return [d for d in self.deliveries if d["team"] == team]


RECEIVER = None
# The events the run's team subscribes to: those the workload's writes cause.
WEBHOOK_EVENTS = ["contact.created", "call.ended", "chat.ended"]


def signed(secret, headers, body):
    """Whether `webhook-signature` holds the Standard Webhooks signature of this message."""
    try:
        key = base64.b64decode(secret.removeprefix("whsec_"))
    except ValueError:
        return False
    message = f"{headers.get('webhook-id')}.{headers.get('webhook-timestamp')}.".encode() + body
    expected = "v1," + base64.b64encode(hmac.new(key, message, hashlib.sha256).digest()).decode()
    return any(hmac.compare_digest(expected, given) for given in (headers.get("webhook-signature") or "").split())


def workload(state, history, seconds, clients, retries, stop):
    """`clients` threads for `seconds`: writes with an Idempotency-Key each (contacts, notes on
    a contact the client made, references in a knowledge base of this history's own), reads of
    the contacts written and of the calls list (the conversations service), and metered
    knowledge searches. With `retries`, a failed write is sent again with the same key until it
    is answered or RETRY_SECONDS have passed. Beside them, for as long: a runtime ingesting
    calls and chats over gRPC (ingest_client), the limits probes through each gateway
    (limits_client) and the sign-in and sign-out rounds of the sessions checker
    (sessions_client)."""
    base, key = state["base"], state["key"]
    kb = state["knowledgebase"]
    # The references go to a knowledge base of their own: reading it back lists only this
    # history's, and the one searched keeps its single reference.
    status, made = http("POST", f"{base}/knowledgebase", {"name": f"Cluster writes {history.scenario}"}, key)
    if status != 201:
        raise SystemExit(f"creating the knowledge base for the reference writes answered {status}: {made}")
    references = made["data"]["id"]

    def operation(kind, method, path, body, idempotency, attempt, resource=None):
        started = time.time()
        status, answer = http(method, base + path, body, key, idempotency)
        entry = {"kind": kind, "method": method, "path": path, "request": body, "key": idempotency,
                 "attempt": attempt, "start": started, "end": time.time(), "status": status,
                 "answer": answer if status else {"transport": answer}}
        if resource:
            entry["resource"] = resource
        history.record(entry)
        return status, answer

    def write(resource, path, body):
        """One write under a key of its own; the id made, or None when it stayed unanswered."""
        idempotency = str(uuid.uuid4())
        first, attempt = time.monotonic(), 0
        while True:
            attempt += 1
            status, answer = operation("write", "POST", path, body, idempotency, attempt, resource)
            if status == 201:
                return answer["data"]["id"]
            if not retries or time.monotonic() - first > RETRY_SECONDS:
                return None
            time.sleep(0.25)

    def client(n):
        rng = random.Random(n)
        deadline = time.monotonic() + seconds
        written = []
        serial = 0
        while time.monotonic() < deadline and not stop.is_set():
            choice = rng.random()
            serial += 1
            # 45 % writes: 25 % contacts (all of them until there is one to write a note on),
            # 10 % notes, 10 % references.
            if choice < 0.35 and (choice < 0.25 or not written):
                body = {"number": NUMBERS.next(), "firstName": f"C{n}", "lastName": f"N{serial}"}
                made = write("contact", "/contacts", body)
                if made:
                    written.append(made)
            elif choice < 0.35:
                write("note", f"/contacts/{rng.choice(written)}/notes", {"note": f"Note {uuid.uuid4()}"})
            elif choice < 0.45:
                write("reference", f"/knowledgebase/{references}/references",
                      {"question": f"Question {uuid.uuid4()}?", "answer": f"Answer {n}-{serial}."})
            elif choice < 0.75 and written:
                operation("read", "GET", f"/contacts/{rng.choice(written)}", None, None, 1)
            elif choice < 0.85:
                operation("read", "GET", "/calls?limit=5", None, None, 1)
            else:
                operation("search", "GET", f"/knowledgebase/{kb}/search?query=opening+hours&limit=3", None, None, 1)

    deadline = time.monotonic() + seconds
    jobs = [(client, (n,)) for n in range(clients)]
    jobs += [(ingest_client, (state, history, retries, stop, deadline)),
             (sessions_client, (state, history, stop, deadline))]
    jobs += [(limits_client, (state, history, name, stop, deadline)) for name, _ in GATEWAYS.all()]
    threads = [threading.Thread(target=target, args=args, daemon=True) for target, args in jobs]
    for thread in threads:
        thread.start()
    return threads


def settle_threads(threads, seconds):
    deadline = time.monotonic() + seconds + 60
    for thread in threads:
        thread.join(max(0.1, deadline - time.monotonic()))
        if thread.is_alive():
            raise SystemExit("a workload client did not finish within 60 s of its end")


# --- the checkers ---------------------------------------------------------------------------

def failed_request(e):
    """Whether the platform failed a request: any answer but a 2xx, except the refusal a probe
    is sent to see (a 429 of the limited team, a 401 of a session after its sign-out)."""
    return not (200 <= e["status"] < 300) and e["status"] not in e.get("expected", ())


def ingested(entries):
    """The conversations ingested over gRPC with at least one step acknowledged, by external
    id: the resource (call or chat), the request of each acknowledged step, and the ids their
    answers named."""
    out = {}
    for e in entries:
        if e["kind"] != "ingest" or e["status"] != 200:
            continue
        made = out.setdefault(e["key"], {"resource": e["resource"], "steps": {}, "ids": set()})
        made["steps"][e["step"]] = e["request"]
        if "id" in e["answer"]:
            made["ids"].add(e["answer"]["id"])
    return out


def missing_from(made, status, found):
    """What of an acknowledged conversation its read-back (GET /calls/{id} or /chats/{id})
    lacks, or None: a begun call's numbers, a begun chat's channel and contact; every
    transcript segment or message appended; an ended call's status and summary, an ended
    chat's status and summary."""
    if status != 200:
        return f"answered {status}"
    data, steps = found["data"], made["steps"]
    begin, append, end = steps.get("begin"), steps.get("append"), steps.get("end")
    if made["resource"] == "call":
        if begin and (data.get("from"), data.get("to")) != (begin["from"], begin["to"]):
            return "its numbers"
        texts = {line.get("text") for line in data.get("transcript", [])}
        if append and any(segment["text"] not in texts for segment in append["segments"]):
            return "a transcript segment"
        if end and (data.get("status"), data.get("summary")) != ("completed", end["summary"]):
            return "its end"
    else:
        if begin and ((data.get("contact") or {}).get("email"), data.get("channel")) != (
                begin["contact_email"], begin["channel"]):
            return "its contact"
        texts = {message.get("text") for message in data.get("messages", [])}
        if append and any(message["text"] not in texts for message in append["messages"]):
            return "a message"
        if end and (data.get("status"), data.get("summary")) != ("ended", end["summary"]):
            return "its end"
    return None


def check(state, history, credits_before, failures, unexact=None):
    """The checkers every scenario shares. `failures`: "none" (every request must succeed),
    "retried" (every write must succeed after its retries) or "judged" (the scenario's own
    checkers judge them). `unexact`: the (start, end) of the time in which Redis was away and
    coming back, when the scenario took it away: the limits and sessions checkers judge what
    lies outside it and report what lies inside."""
    base, key = state["base"], state["key"]
    results = []
    entries = history.entries
    bad = [e for e in entries if failed_request(e)]
    if failures == "judged":
        pass
    elif failures == "retried":
        # Only the answered outcome of each operation counts: a retried write is one write, a
        # retried ingestion step one step.
        finals = {}
        for e in entries:
            if e["kind"] in ("write", "ingest"):
                finals[(e["key"], e.get("step"))] = e
        unanswered = [e for e in finals.values() if not (200 <= e["status"] < 300)]
        results.append(("every write answered after its retries", not unanswered,
                        f"{len(unanswered)} unanswered of {len(finals)} (REST writes and gRPC ingestion steps)"
                        + (f", last attempt of the first: {unanswered[0]}" if unanswered else "")))
    else:
        results.append(("0 failed requests", not bad,
                        f"{len(bad)} of {len(entries)} failed" + (f", first: {bad[0]}" if bad else "")))

    # No acknowledged write lost: every 201 is readable with its content at the end. Exactly
    # once: every answer to one Idempotency-Key names the same resource, and no content exists
    # twice (a contact's number, a note's text on its contact, a reference's question in its
    # knowledge base).
    acknowledged = {}
    for e in entries:
        if e["kind"] == "write" and e["status"] == 201:
            acknowledged.setdefault(e["key"], []).append(e)
    kinds = collections.defaultdict(list)
    for answers in acknowledged.values():
        kinds[answers[0].get("resource", "contact")].append(answers[0])
    lost, duplicates = [], []

    def read(path):
        return http("GET", base + path, key=key)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        # Contacts: each read back; the first 200 numbers searched for twins.
        contacts = kinds["contact"]
        for e, (status, found) in zip(contacts, pool.map(lambda e: read(f"/contacts/{e['answer']['data']['id']}"),
                                                          contacts)):
            if status != 200 or found["data"].get("number") != e["request"]["number"]:
                lost.append(("contact", e["answer"]["data"]["id"], status))
        numbers = sorted({e["request"]["number"] for e in contacts})[:200]
        for number, (status, found) in zip(numbers, pool.map(
                lambda number: read(f"/contacts?search={urllib.request.quote(number)}&limit=5"), numbers)):
            if status == 200 and len([c for c in found["data"] if c.get("number") == number]) > 1:
                duplicates.append(("contact", number))
        # Notes: each contact's list read once; every note in it with its text, and once.
        notes = collections.defaultdict(list)
        for e in kinds["note"]:
            notes[e["path"]].append(e)
        for path, (status, found) in zip(list(notes), pool.map(read, list(notes))):
            listed = found["data"] if status == 200 else []
            texts = collections.Counter(n.get("note") for n in listed)
            ids = {n.get("id"): n.get("note") for n in listed}
            for e in notes[path]:
                if ids.get(e["answer"]["data"]["id"]) != e["request"]["note"]:
                    lost.append(("note", e["answer"]["data"]["id"], status))
                if texts[e["request"]["note"]] > 1:
                    duplicates.append(("note", e["request"]["note"]))
        # References: each read back with its question and answer; each knowledge base's list
        # read once for questions made twice.
        references = kinds["reference"]
        for e, (status, found) in zip(references, pool.map(
                lambda e: read(f"{e['path']}/{e['answer']['data']['id']}"), references)):
            if status != 200 or (found["data"].get("question"), found["data"].get("answer")) != (
                    e["request"]["question"], e["request"]["answer"]):
                lost.append(("reference", e["answer"]["data"]["id"], status))
        for path in {e["path"].rsplit("/", 1)[0] for e in references}:
            status, found = read(path)
            if status != 200:
                raise SystemExit(f"GET {path} answered {status}: {found}")
            questions = collections.Counter(r.get("question") for r in found["data"]["references"])
            duplicates += [("reference", e["request"]["question"]) for e in references
                           if e["path"].startswith(path + "/") and questions[e["request"]["question"]] > 1]
        # Calls and chats ingested over gRPC: each read back through the gateway with what
        # its acknowledged steps wrote; the first 200 of each searched for twins (by the
        # caller's number, by the chat contact's address).
        made = ingested(entries)
        conversations = [(external, c) for external, c in made.items() if c["ids"]]
        for (external, c), (status, found) in zip(conversations, pool.map(
                lambda item: read(f"/{item[1]['resource']}s/{min(item[1]['ids'])}"), conversations)):
            missing = missing_from(c, status, found)
            if missing:
                lost.append((c["resource"], external, missing))
        calls = [c for _, c in conversations if c["resource"] == "call" and "begin" in c["steps"]][:200]
        for c, (status, found) in zip(calls, pool.map(
                lambda c: read(f"/calls?number={urllib.parse.quote(c['steps']['begin']['from'])}&limit=5"), calls)):
            number = c["steps"]["begin"]["from"]
            if status == 200 and len([f for f in found["data"] if f.get("from") == number]) > 1:
                duplicates.append(("call", number))
        chats = [c for _, c in conversations if c["resource"] == "chat" and "begin" in c["steps"]][:200]
        for c, (status, found) in zip(chats, pool.map(
                lambda c: read(f"/chats?search={urllib.parse.quote(c['steps']['begin']['contact_email'])}&limit=5"),
                chats)):
            email = c["steps"]["begin"]["contact_email"]
            if status == 200 and len([f for f in found["data"] if (f.get("contact") or {}).get("email") == email]) > 1:
                duplicates.append(("chat", email))
    counts = ", ".join(f"{len(kinds[k])} {k}s" for k in ("contact", "note", "reference"))
    by_resource = collections.Counter(c["resource"] for _, c in conversations)
    steps = sum(len(c["steps"]) for _, c in conversations)
    results.append(("no acknowledged write lost", not lost,
                    f"{len(acknowledged)} acknowledged ({counts}); over gRPC {by_resource['call']} calls and "
                    f"{by_resource['chat']} chats ({steps} steps acknowledged); {len(lost)} lost"
                    + (f", first: {lost[0]}" if lost else "")))
    split = [k for k, answers in acknowledged.items() if len({a["answer"]["data"]["id"] for a in answers}) > 1]
    split += [external for external, c in conversations if len(c["ids"]) > 1]
    results.append(("exactly once per Idempotency-Key", not split and not duplicates,
                    f"{len(split)} keys with two resources, {len(duplicates)} created twice"
                    + (f", first: {duplicates[0]}" if duplicates else "")
                    + f" (of {len(numbers)} numbers searched, {len(kinds['note'])} notes and "
                    f"{len(references)} references listed, {len(calls)} calls and {len(chats)} chats searched)"))

    # Credits: the balance fell by exactly the searches answered 200 (one credit each), give
    # or take those whose answer never reached the client (each may or may not have been paid).
    searches = [e for e in entries if e["kind"] == "search"]
    paid = len([e for e in searches if e["status"] == 200])
    # A search that timed out (no answer, or the gateway's 503 after its timeout) may or may
    # not have been paid for.
    unknown = len([e for e in searches if e["status"] == 0 or e["status"] >= 500])
    credits_after = balance(state)
    spent = credits_before - credits_after
    results.append(("credits conserved", paid <= spent <= paid + unknown and credits_after >= 0,
                    f"{spent} spent for {paid} searches answered 200 ({unknown} without an answer)"))
    results += check_limits(entries, unexact)
    results += check_sessions(entries, unexact)
    # Last: the deliveries had the other checkers' time to arrive.
    results += check_webhooks(state, entries)
    return results


# How long the webhooks checker waits after a scenario for the deliveries of its events: a
# delivery claimed by a webhooks replica that was killed is taken by the other when its lease
# ends (WEBHOOK_TIMEOUT_MS + 30 s after the claim), and an outbox relay that failed to publish
# waits up to 10 s before it tries again.
WEBHOOK_SETTLE_SECONDS = 60


def check_webhooks(state, entries):
    """Every committed event delivered at least once: each acknowledged write that emits an
    event (a contact created; a call or a chat ended, over gRPC) has a delivery of that event
    type naming its resource (`data.id`) by the end, waiting up to WEBHOOK_SETTLE_SECONDS. And
    a repeated delivery is the same message: every delivery of one event carries the same
    `webhook-id` and the same body, and every signature is right. The repetition check covers
    the run's deliveries so far."""
    expected = set()
    for e in entries:
        if e["kind"] == "write" and e["status"] == 201 and e.get("resource") == "contact":
            expected.add(("contact.created", e["answer"]["data"]["id"]))
        elif e["kind"] == "ingest" and e["status"] == 200 and e["step"] == "end":
            expected.add((f"{e['resource']}.ended", e["answer"]["id"]))
    started = time.monotonic()
    while True:
        deliveries = RECEIVER.of(state["team"])
        missing = expected - {(d["type"], d["subject"]) for d in deliveries}
        if not missing or time.monotonic() - started > WEBHOOK_SETTLE_SECONDS:
            break
        time.sleep(0.2)
    waited = time.monotonic() - started
    if missing:
        log(f"timed out after {WEBHOOK_SETTLE_SECONDS} s waiting for the webhook deliveries of "
            f"{len(missing)} of {len(expected)} events")
    messages, bodies = collections.defaultdict(set), collections.defaultdict(set)
    for d in deliveries:
        messages[(d["type"], d["subject"])].add((d["id"], d["body"]))
        bodies[d["id"]].add(d["body"])
    differing = [event for event, sent in messages.items() if len(sent) > 1]
    differing += [webhook_id for webhook_id, sent in bodies.items() if len(sent) > 1]
    repeated = len(deliveries) - len(bodies)
    unsigned = [d for d in deliveries if not d["signed"]]
    types = collections.Counter(kind for kind, _ in expected)
    return [
        ("webhooks: every committed event delivered", not missing,
         f"{len(expected)} events of acknowledged writes ({', '.join(f'{n} {t}' for t, n in sorted(types.items()))}), "
         f"{len(missing)} not delivered; waited {waited:.1f} s (at most {WEBHOOK_SETTLE_SECONDS})"
         + (f", first missing: {sorted(missing)[0]}" if missing else "")),
        ("webhooks: a repeated delivery is the same message", not differing and not unsigned,
         f"{len(deliveries)} deliveries to the run's team so far, {repeated} of them repeated; "
         f"{len(differing)} events delivered under two webhook-ids or bodies, {len(unsigned)} deliveries "
         f"without a valid signature" + (f", first: {differing[0]}" if differing else "")
         + (f", first unsigned: {unsigned[0]}" if unsigned else "")),
    ]


# The fewest windows and sign-out rounds each checker must judge (outside Redis's absence):
# fewer would let it pass on too little.
MIN_WINDOWS, MIN_ROUNDS = 3, 2
LOG_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def inside(e, start, end):
    return start <= e["start"] and e["end"] <= end


def overlaps(e, intervals):
    return any(e["start"] <= end and start <= e["end"] for start, end in intervals)


def fallbacks(component):
    """When a replica of `component` (gateway or identity) did without Redis, from its logs: from
    each "Redis unavailable" (a Redis call failed or took over 50 ms; Redis is then skipped for
    1 s at a time) to the next "Redis answers again". Meanwhile a gateway limits from its own
    buckets and cannot see a team's new version, and the identity service publishes no version,
    as docs/api-decisions.md says. A process that stopped before Redis answered it again ends
    its interval at the first timed line after the next process's start line ("... listening
    on ..."), the latest it can have ended. Intervals are (start, end) in epoch seconds."""
    intervals = []
    for name, c, *_rest in replicas():
        if c != component:
            continue
        start, restarted = None, False
        try:
            with open(os.path.join(DIR, "logs", f"{name}.log"), errors="replace") as source:
                lines = source.readlines()
        except OSError:
            continue
        for line in lines:
            line = ANSI.sub("", line)
            if " listening on " in line and not LOG_TIME.match(line):
                restarted = start is not None
                continue
            timed = LOG_TIME.match(line)
            if not timed:
                continue
            at = datetime.datetime.strptime(timed.group(1)[:26], "%Y-%m-%dT%H:%M:%S.%f").replace(
                tzinfo=datetime.timezone.utc).timestamp()
            if restarted:
                intervals.append((start, at))
                start, restarted = None, False
            if "Redis unavailable" in line and start is None:
                start = at
            elif "Redis answers again" in line and start is not None:
                intervals.append((start, at))
                start = None
        if start is not None:
            intervals.append((start, time.time()))
    return intervals


def check_limits(entries, unexact=None):
    """Admitted requests per team and window never exceed the limit, across both gateways.

    The gateway's bucket (gateway/src/limits/) is not a bucket that refills at a rate: it holds
    BULK_LIMIT tokens and is refilled in full when its window ends, RATE_WINDOW_MS after the
    first request that found it refilled. So the bound is the limit itself: no window admits
    more than BULK_LIMIT (a burst of BULK_LIMIT, and no rate within the window). Redis keeps
    the bucket for both gateways, on its clock, which is this machine's. Each window is known
    by its end, which a 429 says to the millisecond (`resetAt`); a window counts when both
    gateways refused in it (so Redis decided, not a gateway alone). In each, the requests
    admitted (200) wholly inside it (from start to answer) are counted, whichever gateway
    admitted them. The 200s are also counted by the window their `X-RateLimit-Reset` names (its
    end, in whole seconds). When a Redis call fails or takes over 50 ms, a gateway limits from a
    bucket of its own for a while, as documented (docs/api-decisions.md): windows that overlap
    such a time (fallbacks()), or Redis's absence in the Redis scenario (`unexact`), are not
    judged, and the 200s of those times are not counted by their reset."""
    probes = [e for e in entries if e["kind"] == "limited"]
    admitted = [e for e in probes if e["status"] == 200]
    refused = [e for e in probes if e["status"] == 429]
    # Not judged: windows in which a gateway decided without Redis (documented), and Redis's
    # absence in the Redis scenario.
    away = fallbacks("gateway") + ([unexact] if unexact else [])

    def judged(start_ms, end_ms):
        return not any(start_ms <= 1000 * end and 1000 * start <= end_ms for start, end in away)

    refusing = collections.defaultdict(set)
    for e in refused:
        if isinstance(e["answer"], dict) and e["answer"].get("resetAt"):
            refusing[iso_to_ms(e["answer"]["resetAt"])].add(e["gateway"])
    shared = [end for end, gateways in refusing.items() if len(gateways) > 1]
    windows = sorted(end for end in shared if judged(end - RATE_WINDOW_MS, end))
    by_time = {end: len([e for e in admitted if inside(e, (end - RATE_WINDOW_MS) / 1000, end / 1000)])
               for end in windows}
    # A reset in whole seconds (rounded up) is the end of a window that began up to a second
    # more before it. Only the answers Redis decided count: those of a gateway's own bucket
    # carry its own reset, which may round to the same second.
    by_reset = collections.Counter(e["reset"] for e in admitted
                                   if e["reset"] and not overlaps(e, away)
                                   and judged(1000 * e["reset"] - 1000 - RATE_WINDOW_MS, 1000 * e["reset"]))
    worst_time, worst_reset = max(by_time.values(), default=0), max(by_reset.values(), default=0)
    worst = max(by_time, key=by_time.get) if by_time else None
    gateways = collections.Counter(e["gateway"] for e in admitted)
    spans = [(min(e["start"] for e in probes), max(e["end"] for e in probes))] if probes else []
    results = [("limits: admitted per team and window at most the limit, across gateways",
                len(windows) >= MIN_WINDOWS and worst_time <= BULK_LIMIT and worst_reset <= BULK_LIMIT,
                f"limit {BULK_LIMIT} per {RATE_WINDOW_MS} ms window; {len(windows)} windows judged (at least "
                f"{MIN_WINDOWS}), {len(shared) - len(windows)} not (a gateway was without Redis "
                f"{len([i for i in away if overlaps({'start': i[0], 'end': i[1]}, spans)])} times meanwhile); "
                f"the most admitted in one: {worst_time} wholly inside it"
                + (f" (the window ending {worst / 1000:.3f})" if worst else "")
                + f", {worst_reset} under one X-RateLimit-Reset; {len(admitted)} admitted "
                f"({', '.join(f'{n} by {g}' for g, n in sorted(gateways.items()))}), {len(refused)} refused")]
    if unexact:
        during = [e for e in admitted if inside(e, *unexact)]
        seconds = unexact[1] - unexact[0]
        results.append(("limits while Redis was away and coming back (reported, not judged)", True,
                        f"{len(during)} admitted in {seconds:.1f} s, "
                        f"{len(during) * RATE_WINDOW_MS / 1000 / seconds:.1f} per window of {RATE_WINDOW_MS} ms "
                        f"(each gateway's own bucket admits {BULK_LIMIT} a window)"))
    return results


def check_sessions(entries, unexact=None):
    """A signed-out session is refused by every gateway on the next request: in each round of
    session_round that got to its last step, the gateway that did not sign the session out, and
    had just answered it 200 (so held it in its cache), answers it 401 right after the sign-out.
    Without Redis a gateway cannot see that the session's team has a new version, and may accept
    the session until its cached lookup is 2 s old (SWITCHBOARD_AUTH_CACHE_TTL_MS;
    docs/api-decisions.md): rounds during Redis's absence (`unexact`), or while a gateway or an
    identity replica did without Redis (fallbacks()), are reported, not judged."""
    rounds = collections.defaultdict(dict)
    for e in entries:
        if e["kind"] == "session":
            rounds[e["round"]][e["step"]] = e
    without = fallbacks("gateway") + fallbacks("identity") + ([unexact] if unexact else [])
    judged, away = [], []
    for steps in rounds.values():
        probe = steps.get("after sign-out")
        if probe is None or probe["status"] not in (200, 401):
            continue
        span = {"start": steps["sign-in"]["start"], "end": probe["end"]}
        if overlaps(span, without):
            away.append(steps)
        else:
            judged.append(steps)
    accepted = [steps for steps in judged if steps["after sign-out"]["status"] == 200]
    results = [("sessions: a signed-out session is refused by the other gateway",
                not accepted and len(judged) >= MIN_ROUNDS,
                f"{len(judged)} sessions signed out through one gateway and read at once through the other "
                f"(at least {MIN_ROUNDS}): {len(judged) - len(accepted)} refused (401), {len(accepted)} accepted; "
                f"{len(rounds) - len(judged) - len(away)} rounds stopped at a failed step"
                + (f"; first accepted: {accepted[0]['after sign-out']}" if accepted else ""))]
    if away:
        taken = len([steps for steps in away if steps["after sign-out"]["status"] == 200])
        results.append(("sessions while a gateway or identity replica did without Redis (reported, not judged)",
                        True, f"{len(away)} rounds: {len(away) - taken} refused, {taken} accepted"))
    return results


def balance(state):
    status, me = http("GET", f"{state['base']}/me", key=state["key"])
    if status != 200:
        raise SystemExit(f"GET /me answered {status}: {me}")
    return me["data"]["credits"]["balance"]


# --- the scenarios ----------------------------------------------------------------------------

def prepare(state):
    """A team of its own for every run, so that what an earlier run on this cluster wrote
    (a contact's number is unique in its team) never meets this one's checks; its webhook,
    subscribed to the events the workload causes, to the receiver. Two more teams: the limits
    checker's, and the sessions checker's with its owner (let in by `admin invite`), so that
    the workload's own requests neither spend the limited bucket nor change the team version
    that tells gateways a session ended."""
    run_id = uuid.uuid4().hex[:6]
    team = admin("create-team", "--name", f"Cluster {run_id}", "--credits", "100000")
    state["team"], state["key"] = team["id"], admin("create-key", "--team", team["id"])["key"]
    base, key = state["base"], state["key"]
    status, webhook = http("POST", f"{base}/webhooks", {"url": RECEIVER.url(team["id"]), "events": WEBHOOK_EVENTS,
                                                        "description": "cluster.py's receiver"}, key)
    if status != 201:
        raise SystemExit(f"creating the webhook answered {status}: {webhook} (a cluster brought up before "
                         "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE was set needs `down` and `up`)")
    RECEIVER.secrets[team["id"]] = webhook["data"]["secret"]
    limited = admin("create-team", "--name", f"Cluster limits {run_id}")
    state["limited"] = {"team": limited["id"], "key": admin("create-key", "--team", limited["id"])["key"]}
    people = admin("create-team", "--name", f"Cluster sessions {run_id}")
    email, password = f"owner-{run_id}@cluster.example", f"Cluster run {uuid.uuid4().hex}"
    invitation = admin("invite", "--team", people["id"], "--email", email, "--base-url", base.removesuffix("/v1"))
    status, accepted = http("POST", f"{base}/auth/accept-invite",
                            {"token": invitation["url"].rsplit("/", 1)[-1], "password": password,
                             "firstName": "Cluster", "lastName": "Owner"})
    if status != 201:
        raise SystemExit(f"accepting the invitation of the sessions checker's user answered {status}: {accepted}")
    state["sessions"] = {"team": people["id"], "email": email, "password": password}
    status, kb = http("POST", f"{base}/knowledgebase", {"name": "Cluster"}, key)
    assert status == 201, (status, kb)
    state["knowledgebase"] = kb["data"]["id"]
    status, ref = http("POST", f"{base}/knowledgebase/{kb['data']['id']}/references",
                       {"question": "When are you open?", "answer": "Every day from 9 to 17."}, key)
    assert status == 201, (status, ref)
    save(state)
    log(f"team {team['id']} (webhook {webhook['data']['id']}), limits team {limited['id']}, "
        f"sessions team {people['id']}")


def rolling_restart(state, short):
    """Every replica of every component, one at a time, SIGTERM then started again, as a
    Deployment's rollout does; the workload sends throughout, without retries."""
    history = History("rolling-restart")
    before = balance(state)
    stop = threading.Event()
    order = [name for name, *_rest in replicas()]
    if short:
        order = [n for n in order if n.split("-")[0] in ("identity", "crm", "gateway")]
    seconds = 3600
    threads = workload(state, history, seconds, clients=4, retries=False, stop=stop)
    time.sleep(2)
    for name in order:
        GATEWAYS.leave(name)
        stop_pid(state["pids"][name], signal.SIGTERM, timeout=60)
        start_replica(state, name)
        ready(name)
        GATEWAYS.back(name)
        # The new replica is healthy; the callers' next health round (2 s) sends to it again.
        time.sleep(3)
        log(f"rolled {name}")
    time.sleep(2)
    stop.set()
    settle_threads(threads, 0)
    return history, check(state, history, before, "none")


def kill_random(state, short):
    """SIGKILL of a random replica every 10 s (a pod's process dying), started again 2 s later;
    the workload retries a failed write with the same Idempotency-Key."""
    history = History("kill")
    before = balance(state)
    stop = threading.Event()
    rounds = 3 if short else 12
    threads = workload(state, history, 3600, clients=4, retries=True, stop=stop)
    rng = random.Random(42)
    for _ in range(rounds):
        time.sleep(8)
        name = rng.choice([n for n, *_rest in replicas()])
        GATEWAYS.leave(name)
        stop_pid(state["pids"][name], signal.SIGKILL, timeout=10)
        log(f"killed {name}")
        time.sleep(2)
        start_replica(state, name)
        ready(name)
        GATEWAYS.back(name)
    time.sleep(4)
    stop.set()
    settle_threads(threads, 0)
    return history, check(state, history, before, "retried")


def nft(name, *rule):
    run("ip", "netns", "exec", namespace(name), "nft", *rule)


def partition(state, short):
    """conversations-1 and identity-1 cut off from PostgreSQL (an nft rule in their namespaces
    drops what they send to it) for 30 s (20 s with --short). They must turn NOT_SERVING
    within the probe period, the other components must leave them, and no request may hang
    past the gateway's timeout (SWITCHBOARD_REQUEST_TIMEOUT_MS, 10 s)."""
    history = History("partition")
    before = balance(state)
    stop = threading.Event()
    threads = workload(state, history, 3600, clients=4, retries=False, stop=stop)
    cut_off = ("conversations-1", "identity-1")
    time.sleep(3)
    cut = time.time()
    for name in cut_off:
        nft(name, "add", "table", "inet", "sbfault")
        nft(name, "add", "chain", "inet", "sbfault", "out", "{ type filter hook output priority 0 ; }")
        nft(name, "add", "rule", "inet", "sbfault", "out", "ip", "daddr", HOST, "tcp", "dport", str(PG_PORT), "drop")
    log(f"cut {', '.join(cut_off)} off from PostgreSQL")
    # Requests in flight on the cut-off replicas wait for the gateway's timeout (10 s); the
    # partition lasts well beyond it, so that what follows the probe period is measured.
    time.sleep(20 if short else 30)
    for name in cut_off:
        nft(name, "delete", "table", "inet", "sbfault")
    healed = time.time()
    log("partition healed")
    time.sleep(5)
    stop.set()
    settle_threads(threads, 0)
    results = check(state, history, before, "judged")
    # The probe period: the database check (1 s, every 1 s) and the callers' round (2 s) and
    # its health check (1 s), with a margin.
    settled = cut + 6
    after = [e for e in history.entries if settled < e["start"] <= healed]
    late = [e for e in after if failed_request(e)]
    results.append(("every request after the probe period answered", not late and len(after) >= 100,
                    f"{len(after) - len(late)} of {len(after)} requests started between 6 s after the cut and "
                    f"the heal answered" + (f", first failure: {late[0]}" if late else "")))
    slowest = max((e["end"] - e["start"] for e in history.entries), default=0)
    results.append(("no request hangs past the gateway's timeout", slowest <= 11,
                    f"slowest request {slowest:.1f} s (timeout 10 s)"))
    return history, results


# After Redis is back, the time its clients take to use it again: a gateway whose Redis call
# failed skips Redis for 1 s and reconnects within 0.5 s (services/kit/src/redis_client.rs).
REDIS_GRACE = 3
# How long the workload runs once Redis is back: the grace, then enough windows of the limits
# checker and rounds of the sessions checker to judge.
REDIS_AFTER = 12


def redis_outage(state, short):
    """Redis killed (SIGKILL) for 30 s (10 s with --short) under load, then started again: the
    gateways' rate limits fall back to their in-process buckets and identities are read from
    the identity service, so no request fails (docs/configuration.md, REDIS_URL). Once Redis
    is back (after REDIS_GRACE), limits and sessions are exact again: the limits and sessions
    checkers judge that time, and the time before the kill."""
    history = History("redis")
    before = balance(state)
    stop = threading.Event()
    threads = workload(state, history, 3600, clients=4, retries=False, stop=stop)
    time.sleep(3)
    killed = time.time()
    stop_pid(state["redis"], signal.SIGKILL, timeout=10)
    log("killed Redis")
    time.sleep(10 if short else 30)
    state["redis"] = spawn("redis", redis_command(), dict(os.environ))
    save(state)
    wait_for("Redis again", lambda: port_open(HOST, REDIS_PORT), 30)
    back = time.time()
    log("Redis is back")
    time.sleep(REDIS_AFTER)
    stop.set()
    settle_threads(threads, 0)
    return history, check(state, history, before, "none", unexact=(killed, back + REDIS_GRACE))


def outage(entries, since, until):
    """Seconds from the first failed write attempt after `since` to the last one before `until`."""
    failed = [e for e in entries
              if e["kind"] == "write" and (e["status"] == 0 or e["status"] >= 500) and since <= e["start"] <= until]
    if not failed:
        return 0.0, 0
    return max(e["end"] for e in failed) - min(e["start"] for e in failed), len(failed)


def failover(state, short):
    """PostgreSQL changes primary twice under load: a Patroni switchover to the synchronous
    standby, then the new primary's node dies (its Patroni and postmaster SIGKILLed) and
    Patroni promotes the other once the leader key expires (ttl 10 s). Writes are retried
    with their key. Goal: no acknowledged write lost (synchronous replication); the seconds
    of unavailability are measured."""
    history = History("failover")
    before = balance(state)
    stop = threading.Event()
    threads = workload(state, history, 3600, clients=4, retries=True, stop=stop)
    time.sleep(4)
    first = leader()
    if first is None:
        raise SystemExit("no PostgreSQL primary before the failover scenario")
    second = next(name for name, *_rest in PG_NODES if name != first)
    switched = time.time()
    run("patronictl", "-c", os.path.join(DIR, f"{first}.yml"), "switchover", "--leader", first,
        "--candidate", second, "--force")
    wait_for(f"{second} to be the primary after the switchover", lambda: leader() == second, 60)
    log(f"switchover {first} -> {second} in {time.time() - switched:.1f} s")
    wait_for("the synchronous standby streaming again", sync_standby_streaming, 120)
    time.sleep(3)
    killed = time.time()
    kill_pg_node(state, second)
    log(f"killed {second} (Patroni and postmaster)")
    wait_for(f"{first} to be promoted", lambda: leader() == first, 90)
    log(f"failover to {first} in {time.time() - killed:.1f} s")
    time.sleep(2)
    start_pg_node(state, second)
    wait_for(f"{second} back as the synchronous standby", sync_standby_streaming, 180)
    time.sleep(3)
    stop.set()
    settle_threads(threads, 0)
    results = check(state, history, before, "retried")
    seconds, failed = outage(history.entries, switched, killed)
    results.append(("switchover measured", True, f"writes failed for {seconds:.1f} s ({failed} attempts)"))
    seconds, failed = outage(history.entries, killed, time.time())
    results.append(("failover measured", True, f"writes failed for {seconds:.1f} s ({failed} attempts)"))
    return history, results


def percentile(values, q):
    values = sorted(values)
    return values[max(0, math.ceil(q * len(values)) - 1)] if values else float("nan")


# The entries of the REST clients of the workload, which the latency scenario measures.
REST_KINDS = ("write", "read", "search")


def endpoint(e):
    """The endpoint group of a REST client's history entry, as the latency scenario reports
    them."""
    path = e["path"]
    if path.startswith("/contacts"):
        if path.endswith("/notes"):
            return "note writes"
        return "contact writes" if e["method"] == "POST" else "contact reads"
    if path.startswith("/calls"):
        return "calls list"
    return "reference writes" if path.endswith("/references") else "knowledge search"


AFFECTED = ("contact writes", "contact reads", "note writes")
UNAFFECTED = ("calls list", "knowledge search")
# The most the proxy adds to one call: a unary gRPC call crosses it once each way, and no chunk
# waits more than the largest delay (70 ms) after it arrived.
DELAY_BOUND_MS = 2 * (DELAY_MS + JITTER_MS)
# What a p99 may move by besides the delay. The p99 is taken over each group's requests
# together (several hundred a window, the CRM's over a thousand), not per endpoint: a stall of
# the machine (these 2 cores are shared with builds) holds the 3 or 4 requests then in flight
# for about 200 ms, which is an endpoint's p99 of a few hundred requests by itself. The margin
# covers the proxy's timers waking late by a few ms on busy cores and the p99 of one window
# moving against another's under the same load (by 10 to 20 ms between runs).
LATENCY_MARGIN_MS = 30


def latency(state, short):
    """The gateways' connections to the CRM delayed by 50 ± 20 ms each way (the delaying proxy in
    each crm replica's namespace, see delay_up) for 40 s (20 s with --short), after a baseline
    as long through the same proxy without delay; no client retry. Goal: the p99 of the CRM's
    endpoints rises by the delay and no more, the others' do not rise, nothing fails, and the
    gateways send the CRM no more calls per client request than without the delay (no retry
    storm)."""
    history = History("latency")
    before = balance(state)
    seconds = 20 if short else 40
    # The calls the gateways make without any client request (their channels' health checks).
    idle_start, idle = delay_switch(state, False)
    time.sleep(5)
    baseline_start, counted = delay_switch(state, False)
    idle_rate = (counted["streams"] - idle["streams"]) / (baseline_start - idle_start)
    stop = threading.Event()
    threads = workload(state, history, 3600, clients=4, retries=False, stop=stop)
    try:
        time.sleep(2)
        baseline_start, baseline = delay_switch(state, False)
        time.sleep(seconds)
        delayed_start, delayed = delay_switch(state, True)
        log(f"delay on: {DELAY_MS} ± {JITTER_MS} ms each way between the gateways and {DELAY_COMPONENT}")
        time.sleep(seconds)
        delayed_end, after = delay_switch(state, False)
        log("delay off")
    finally:
        stop.set()
        delay_switch(state, False)
    settle_threads(threads, 0)
    results = check(state, history, before, "none")

    def window(start, end):
        """The milliseconds of each endpoint group's requests made wholly inside the window."""
        out = collections.defaultdict(list)
        for e in history.entries:
            if e["kind"] in REST_KINDS and start <= e["start"] and e["end"] <= end:
                out[endpoint(e)].append(1000 * (e["end"] - e["start"]))
        out["affected"] = [ms for group in AFFECTED for ms in out[group]]
        out["unaffected"] = [ms for group in UNAFFECTED for ms in out[group]]
        return out

    # The delayed window starts once every proxy has switched: delayed_start is the first signal.
    quiet, loud = window(baseline_start, delayed_start), window(delayed_start + 0.5, delayed_end)
    for group in ("affected",) + AFFECTED + ("unaffected",) + UNAFFECTED + ("reference writes",):
        quiet_ms, loud_ms = quiet[group], loud[group]
        print(f"  latency {group}: baseline p50 {percentile(quiet_ms, 0.5):.1f} ms, "
              f"p99 {percentile(quiet_ms, 0.99):.1f} ms ({len(quiet_ms)}); delayed p50 "
              f"{percentile(loud_ms, 0.5):.1f} ms, p99 {percentile(loud_ms, 0.99):.1f} ms ({len(loud_ms)})")

    def rise(group, q):
        return percentile(loud[group], q) - percentile(quiet[group], q)

    # Each crossing holds a chunk at least 30 ms: a median rising by less means the calls do not
    # go through the proxy.
    results.append(("the delay is in the path", rise("affected", 0.5) >= 2 * (DELAY_MS - JITTER_MS) - 10,
                    f"p50 of the CRM's endpoints rose by {rise('affected', 0.5):.1f} ms "
                    f"(at least {2 * (DELAY_MS - JITTER_MS)} ms expected, 10 ms spared)"))
    results.append(("affected p99 rises by the delay and no more",
                    rise("affected", 0.99) <= DELAY_BOUND_MS + LATENCY_MARGIN_MS,
                    f"p99 of the CRM's endpoints rose by {rise('affected', 0.99):.1f} ms "
                    f"(bound {DELAY_BOUND_MS} + {LATENCY_MARGIN_MS} ms)"))
    results.append(("unaffected p99 does not rise", rise("unaffected", 0.99) <= LATENCY_MARGIN_MS,
                    f"p99 of the calls list and knowledge search moved by {rise('unaffected', 0.99):+.1f} ms "
                    f"(margin {LATENCY_MARGIN_MS} ms)"))

    def per_request(start, counters, end, end_counters):
        """Gateway calls to the CRM (HTTP/2 streams the proxies saw, less the health checks'
        rate) per client request to a CRM endpoint, in a window."""
        calls = end_counters["streams"] - counters["streams"] - idle_rate * (end - start)
        requests = len([e for e in history.entries
                        if e["kind"] in REST_KINDS and start <= e["start"] < end and endpoint(e) in AFFECTED])
        return calls / max(1, requests), calls, requests

    quiet_ratio, quiet_calls, quiet_requests = per_request(baseline_start, baseline, delayed_start, delayed)
    loud_ratio, loud_calls, loud_requests = per_request(delayed_start, delayed, delayed_end, after)
    results.append(("no retry storm", loud_ratio <= quiet_ratio + 0.05,
                    f"CRM calls per client request {quiet_ratio:.3f} ({quiet_calls:.0f} for {quiet_requests}) "
                    f"without delay, {loud_ratio:.3f} ({loud_calls:.0f} for {loud_requests}) with it; "
                    f"health checks {idle_rate:.1f}/s; "
                    f"connections refused upstream {after['refused'] - idle['refused']}"))
    return history, results


SCENARIOS = [
    ("rolling restart", rolling_restart),
    ("SIGKILL of a random replica", kill_random),
    ("partition from PostgreSQL", partition),
    ("PostgreSQL failover", failover),
    ("Redis killed", redis_outage),
    ("latency between the gateways and the CRM", latency),
]
# Left out of the short run (CI): the failover, whose lost-answer defect is fixed (write keys,
# docs/deploy.md) but which has passed only once since, and the latency scenario, whose p99
# bound kept a margin of only a few ms on a loaded machine (BENCHMARKS.md, "Cluster faults"):
# either would make CI fail for noise sooner than for a defect. Both run with --only and in the
# full run.
NOT_SHORT = [failover, latency]


def cpu_times():
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    return sum(fields), fields[7] if len(fields) > 7 else 0


def cpu_model():
    with open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def test(short, only):
    global INGEST, RECEIVER
    state = load()
    RECEIVER = Receiver()
    INGEST = Ingest()
    prepare(state)
    total_before, steal_before = cpu_times()
    print(f"machine: {os.cpu_count()} CPUs ({cpu_model()})")
    passed = failed = 0
    for title, scenario in SCENARIOS:
        if only and scenario.__name__ not in only:
            continue
        if short and not only and scenario in NOT_SHORT:
            log(f"scenario: {title}: not in the short run (docs/deploy.md)")
            continue
        log(f"scenario: {title}")
        started = time.monotonic()
        history, results = scenario(state, short)
        requests = len(history.entries)
        failures = len([e for e in history.entries if failed_request(e)])
        print(f"\n## {title}: {requests} requests, {failures} failed, {time.monotonic() - started:.0f} s "
              f"(history: {history.path})")
        for name, ok, detail in results:
            print(f"  {'PASS' if ok else 'FAIL'}  {name}: {detail}")
        if all(ok for _, ok, _ in results):
            passed += 1
        else:
            failed += 1
    total_after, steal_after = cpu_times()
    steal = 100 * (steal_after - steal_before) / max(1, total_after - total_before)
    print(f"\nsteal time during the run: {steal:.1f} %")
    print(f"\n{passed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    global BIN
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if not BIN and command in ("up", "test"):
        raise SystemExit("set SWITCHBOARD_BIN to a built switchboard binary")
    if command == "up":
        up()
    elif command == "down":
        down()
    elif command == "delay-proxy":
        delay_proxy(*sys.argv[2:5])
    elif command == "test":
        args = sys.argv[2:]
        only = args[args.index("--only") + 1].split(",") if "--only" in args[:-1] else []
        unknown = [name for name in only if name not in [scenario.__name__ for _, scenario in SCENARIOS]]
        if unknown:
            raise SystemExit(f"no scenario {unknown}; there are {[s.__name__ for _, s in SCENARIOS]}")
        sys.exit(test("--short" in args, only))
    else:
        raise SystemExit("usage: cluster.py up|test [--short] [--only scenario,...]|down")


if __name__ == "__main__":
    main()
