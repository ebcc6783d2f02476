"""`scripts/kube test`: the unmodified chart installed on the one-node Kubernetes of cluster.py,
and the proofs of issue 56, each ending in PASS or FAIL and the line `N passed, M failed`.

What runs where:
- PostgreSQL (a database per component), Redis and a Qdrant server run as pods in the namespace
  `switchboard-data`, installed by this test beside the chart (tests/kube/backing.py), the way
  a Helm-installed staging has them next to the release. Their data lives in host folders under
  KUBE_DIR, so that taking the database away (scaling it to 0) keeps it.
- The chart goes into the namespace `switchboard`, release `switchboard`, from helm/switchboard
  as it is: once with its default values and once with values-staging.yaml, each plus
  tests/kube/values-checkers.yaml (what issue 42's checkers need: webhooks to a private
  address, short rate-limit windows). The default install points the knowledge base at the
  Qdrant pod and runs two of it, as a hosted SaaS would: with the embedded index the knowledge
  base is one pod that restarts whole, and no upgrade could be without failed searches.
- The workload and the checkers are issue 42's (tests/cluster/cluster.py), run from the host:
  REST through the gateway Service's ClusterIP, gRPC ingestion to the conversations Service's
  ClusterIP, webhooks delivered to a receiver on the bridge's host address.
"""

import collections
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))

import backing  # noqa: E402
import cluster as checkers  # noqa: E402 - issue 42's history, workload and checkers
import kube  # noqa: E402

RELEASE = NAMESPACE = "switchboard"
CHART = os.path.join(ROOT, "helm", "switchboard")
HELM = os.environ.get("HELM", "helm")
SWITCHBOARD_BIN = os.environ.get("SWITCHBOARD_BIN", "")
FIRST_TAG, SECOND_TAG = "0.1.0", "0.1.1"
COMPONENTS = ["gateway", "identity", "agents", "knowledgebase", "conversations", "crm", "webhooks"]
DATABASES = ["identity", "agents", "knowledgebase", "conversations", "crm", "webhooks"]
RESULTS = []
FIGURES = collections.OrderedDict()


def log(message):
    kube.log(message)


def result(title, ok, detail):
    RESULTS.append((title, ok, detail))
    print(f"  {'PASS' if ok else 'FAIL'}  {title}: {detail}", flush=True)


def helm(*args, timeout=600, check=True):
    return kube.run(HELM, f"--kubeconfig={kube.path('pki', 'admin.kubeconfig')}", *args, timeout=timeout,
                    check=check)


def kubectl_json(*args):
    return json.loads(kube.kubectl(*args, "-o", "json").stdout)


def service_ip(name, namespace=NAMESPACE):
    return kubectl_json("-n", namespace, "get", "service", name)["spec"]["clusterIP"]


# --- the release ------------------------------------------------------------------------------

def install(values, extra=(), timeout=600):
    """helm install --wait; its duration in seconds."""
    started = time.monotonic()
    args = ["install", RELEASE, CHART, "-n", NAMESPACE, "--wait", f"--timeout={timeout}s",
            "-f", os.path.join(HERE, "values-checkers.yaml")]
    for file in values:
        args += ["-f", file]
    args += list(extra)
    helm(*args, timeout=timeout + 60)
    return round(time.monotonic() - started, 1)


def deployments_available():
    """Every Deployment of the release: (all Available, detail)."""
    items = kubectl_json("-n", NAMESPACE, "get", "deployments")["items"]
    missing = []
    for item in items:
        want = item["spec"].get("replicas", 1)
        have = item["status"].get("availableReplicas", 0)
        if have < want:
            missing.append(f"{item['metadata']['name']} {have}/{want}")
    names = sorted(i["metadata"]["name"].removeprefix(f"{RELEASE}-") for i in items)
    return not missing and len(items) == len(COMPONENTS), f"{len(items)} Deployments ({', '.join(names)})" + (
        f"; not available: {missing}" if missing else "")


def migrations_once():
    """Each component's migrations applied once: every pod's `migrate` init container ended 0
    at its first run (two replicas start together and race for the lock), and every database's
    `_sqlx_migrations` holds each version once, all successful."""
    problems, counted = [], []
    for pod in kubectl_json("-n", NAMESPACE, "get", "pods")["items"]:
        for status in pod["status"].get("initContainerStatuses") or []:
            terminated = (status.get("state") or {}).get("terminated") or {}
            if status["restartCount"] or terminated.get("exitCode") != 0:
                problems.append(f"{pod['metadata']['name']}: migrate restarted {status['restartCount']}, "
                                f"exit {terminated.get('exitCode')}")
    for database in DATABASES:
        rows = backing.sql(database, "SELECT count(*), count(DISTINCT version), bool_and(success) FROM _sqlx_migrations")
        total, distinct, success = rows.split("|")
        counted.append(f"{database} {total}")
        if total != distinct or success != "t" or total == "0":
            problems.append(f"{database}: {total} rows, {distinct} versions, all successful: {success}")
    return not problems, "migrations per database: " + ", ".join(counted) + (f"; {problems}" if problems else "")


def make_team():
    """A team with credits and a key, through the identity database (as `switchboard admin`
    does for an operator), and the key put in the Secret as TEST_API_KEY for `helm test`."""
    team = admin("create-team", "--name", f"Kube {uuid.uuid4().hex[:6]}", "--credits", "100000")
    backing.secret(test_api_key=admin("create-key", "--team", team["id"])["key"])


def admin(*args):
    answer = kube.run(SWITCHBOARD_BIN, "admin", "--database-url", backing.database_url("identity"), *args, timeout=60)
    return json.loads(answer.stdout)


def helm_test():
    try:
        output = helm("test", RELEASE, "-n", NAMESPACE, "--timeout=120s", timeout=180).stdout
    except RuntimeError as error:
        return False, str(error)[-600:]
    phases = [line.strip() for line in output.splitlines() if "Phase:" in line or "TEST SUITE" in line]
    return "Failed" not in output, "; ".join(phases)


def prove_installed(label):
    # The gateway's autoscaler (default values) raises it to its minimum of 2 after the
    # install made it with 1.
    try:
        kube.wait_for("every Deployment Available", lambda: deployments_available()[0], 120, interval=2)
    except TimeoutError:
        pass
    ok, detail = deployments_available()
    result(f"{label}: every Deployment Available", ok, detail)
    ok, detail = migrations_once()
    result(f"{label}: migrations ran once, the replicas starting together", ok, detail)
    ok, detail = helm_test()
    result(f"{label}: helm test (/healthz and GET /v1/me through the gateway Service)", ok, detail)


def prove_security(label):
    """What the chart declares, as the kernel sees it in every container of the release: the
    process's uid is not 0, its root mount is read-only, and seccomp filters it (mode 2)."""
    containers = kube.release_containers(NAMESPACE)
    problems = []
    for pod, container, pid in containers:
        status = kube.proc_status(pid)
        uid = status.get("Uid", "").split()[:1]
        if uid == ["0"] or not uid:
            problems.append(f"{pod}/{container} runs as uid {uid}")
        if status.get("Seccomp") != "2":
            problems.append(f"{pod}/{container} seccomp mode {status.get('Seccomp')}")
        if not kube.root_read_only(pid):
            problems.append(f"{pod}/{container} has a writable root filesystem")
    ok = not problems and len(containers) >= len(COMPONENTS)
    result(f"{label}: non-root, read-only root filesystem, RuntimeDefault seccomp", ok,
           f"{len(containers)} containers checked in /proc" + (f"; {problems[:3]}" if problems else ""))


def prove_contained():
    """Nothing a pod sends leaves the machine: IPv4 forwarding is off on the host, and no
    container of the cluster has a route to anywhere but the bridge and the Service range."""
    forwarding = kube.read_sysctl("net.ipv4.ip_forward")
    containers = kube.release_containers(NAMESPACE) + kube.release_containers(backing.NAMESPACE)
    routed = [f"{pod}/{container}" for pod, container, pid in containers if kube.default_routes(pid)]
    result("nothing a pod sends leaves the machine", forwarding == "0" and not routed and containers,
           f"ip_forward {forwarding}; {len(containers)} containers, {len(routed)} with a default route"
           + (f": {routed[:3]}" if routed else ""))


# --- the workload (issue 42's) ----------------------------------------------------------------

def checker_state():
    """What issue 42's workload and checkers read, pointed at this cluster's Services (its
    `prepare` makes the run's own teams)."""
    gateway = service_ip(f"{RELEASE}-gateway")
    conversations = service_ip(f"{RELEASE}-conversations")
    checkers.DIR = kube.path("history")
    checkers.STATE = os.path.join(checkers.DIR, "state.json")
    os.makedirs(checkers.DIR, exist_ok=True)
    checkers.HOST = kube.HOST
    checkers.TOKEN = backing.SERVICE_TOKEN
    # The checkers send "through each gateway" (the limits probes, a session signed out
    # through one and read through the other): here twice through the gateway Service, whose
    # connections kube-proxy spreads over the gateway pods.
    checkers.replicas = lambda: [("gateway-1", "gateway", gateway, 80), ("gateway-2", "gateway", gateway, 80),
                                 ("conversations", "conversations", conversations, 50054)]
    checkers.admin = admin
    state = {"base": f"http://{gateway}/v1"}
    if checkers.RECEIVER is None:
        checkers.RECEIVER = checkers.Receiver()
    checkers.INGEST = ingest_through_dns()
    checkers.prepare(state)
    return state


def ingest_through_dns():
    """Issue 42's runtime, sending as a runtime inside the cluster would (docs/runtime.md): to
    the conversations pods the headless Service names (the cluster DNS stand-in answers one
    record per ready pod), round robin over those whose gRPC health says SERVING. gRPC asks DNS
    again only when a connection fails, not when a pod drains, so a channel that once saw a
    single pod would still know only that one when it drains: like the platform's own channels
    (services/kit/src/grpc/discovery.rs), the runtime resolves again every 2 s, here by opening
    a new channel. A ClusterIP would pin the one HTTP/2 connection to one pod."""
    import importlib

    import grpc

    ingest = checkers.Ingest()
    ingest.channel.close()
    stubs = importlib.import_module("switchboard.v1.conversations_pb2_grpc")
    target = f"dns://{kube.HOST}:53/{RELEASE}-conversations-replicas.{NAMESPACE}.svc.cluster.local:50054"
    config = {"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": ""}}
    options = [("grpc.service_config", json.dumps(config)), ("grpc.default_authority", "conversations")]
    opened = [0.0, None]
    send = ingest.call

    def call(method, request):
        if time.monotonic() - opened[0] > 2:
            if opened[1] is not None:
                opened[1].close()
            opened[0], opened[1] = time.monotonic(), grpc.insecure_channel(target, options=options)
            # A new channel's first call waits for a pod that answers SERVING.
            grpc.channel_ready_future(opened[1]).result(timeout=10)
            ingest.stub = stubs.ConversationIngestStub(opened[1])
        return send(method, request)

    ingest.call = call
    return ingest


class PodLogs:
    """Follows the logs of every gateway and identity pod (`kubectl logs -f`), new pods as they
    come, into DIR/logs/<pod>.log: the limits and sessions checkers read from them when a
    replica did without Redis (issue 42's fallbacks()), and a deleted pod's log is gone from
    the API once it is."""

    def __init__(self):
        # Each scenario its own: a pod of an earlier one is followed again from its start.
        self.folder = os.path.join(checkers.DIR, "logs")
        shutil.rmtree(self.folder, ignore_errors=True)
        os.makedirs(self.folder)
        self.followers, self.stop = {}, threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)
        self.thread.start()

    def watch(self):
        while not self.stop.is_set():
            try:
                pods = kubectl_json("-n", NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/name in (gateway,identity)")
            except (RuntimeError, subprocess.TimeoutExpired, ValueError):
                pods = {"items": []}
            for pod in pods["items"]:
                name = pod["metadata"]["name"]
                running = any("running" in (c.get("state") or {}) for c in pod["status"].get("containerStatuses") or [])
                follower = self.followers.get(name)
                if running and (follower is None or (follower.poll() is not None and
                                                     pod["metadata"].get("deletionTimestamp") is None)):
                    with open(os.path.join(self.folder, f"{name}.log"), "wb") as out:
                        self.followers[name] = subprocess.Popen(
                            [os.path.join(kube.BIN, "kubectl"), f"--kubeconfig={kube.path('pki', 'admin.kubeconfig')}",
                             "-n", NAMESPACE, "logs", "-f", name], stdout=out, stderr=subprocess.DEVNULL)
            self.stop.wait(1)

    def fallbacks(self, component):
        """When a pod of the component did without Redis (issue 42's fallbacks(), read from the
        chart's JSON logs): from each "Redis unavailable" to the next "Redis answers again". A
        pod that ended before Redis answered it again ends its interval at its last line; one
        still running, now."""
        intervals = []
        for name in sorted(os.listdir(self.folder)):
            if not name.startswith(f"{RELEASE}-{component}-"):
                continue
            follower = self.followers.get(name[:-4])
            ended = follower is None or follower.poll() is not None
            start = last = None
            with open(os.path.join(self.folder, name), errors="replace") as source:
                for line in source:
                    try:
                        entry = json.loads(line)
                        at = checkers.iso_to_ms(entry["timestamp"][:23] + "Z") / 1000
                        message = entry["fields"].get("message")
                    except (ValueError, KeyError, TypeError, AttributeError):
                        continue
                    last = at
                    if message == "Redis unavailable" and start is None:
                        start = at
                    elif message == "Redis answers again" and start is not None:
                        intervals.append((start, at))
                        start = None
            if start is not None:
                intervals.append((start, last if ended else time.time()))
        return intervals

    def close(self):
        self.stop.set()
        self.thread.join(10)
        for follower in self.followers.values():
            if follower.poll() is None:
                follower.terminate()
                try:
                    follower.wait(10)
                except subprocess.TimeoutExpired:
                    follower.kill()


def during(state, scenario, action, retries, failures):
    """The workload runs while `action()` does; then issue 42's checkers judge the history."""
    history = checkers.History(scenario)
    before = checkers.balance(state)
    stop = threading.Event()
    logs = PodLogs()
    checkers.fallbacks = logs.fallbacks
    threads = checkers.workload(state, history, 3600, clients=4, retries=retries, stop=stop)
    time.sleep(3)
    started = time.monotonic()
    try:
        action()
    finally:
        seconds = round(time.monotonic() - started, 1)
        time.sleep(3)
        stop.set()
        checkers.settle_threads(threads, 0)
    try:
        results = checkers.check(state, history, before, failures)
    finally:
        logs.close()
    failed = len([e for e in history.entries if checkers.failed_request(e)])
    return seconds, len(history.entries), failed, results


def report(label, seconds, requests, failed, results):
    ok = all(passed for _, passed, _ in results)
    details = "; ".join(f"{'ok' if passed else 'NOT'} {name}: {detail}" for name, passed, detail in results)
    result(label, ok, f"{seconds} s, {requests} requests, {failed} failed. {details}")


def wait_rolled(tag, timeout=600):
    def rolled():
        ok, _ = deployments_available()
        pods = kubectl_json("-n", NAMESPACE, "get", "pods")["items"]
        images = {c["image"] for p in pods if p["metadata"].get("deletionTimestamp") is None
                  for c in p["spec"]["containers"] if "helm.sh/hook" not in p["metadata"].get("annotations", {})}
        return ok and images == {f"ghcr.io/switchboard/switchboard:{tag}"}
    kube.wait_for(f"every pod of the release on tag {tag}", rolled, timeout, interval=2)


def upgrade(extra):
    def action():
        helm("upgrade", RELEASE, CHART, "-n", NAMESPACE, "--reuse-values", "--wait", "--timeout=600s",
             "--set", f"image.tag={SECOND_TAG}", *extra, timeout=700)
        wait_rolled(SECOND_TAG)
    return action


def rollback():
    helm("rollback", RELEASE, "1", "-n", NAMESPACE, "--wait", "--timeout=600s", timeout=700)
    wait_rolled(FIRST_TAG)


def delete_one_of_each():
    """One pod of each component deleted (the kubelet's SIGTERM, the drain, a new pod), one
    component after another, each time waiting until the Deployment is Available again."""
    for component in COMPONENTS:
        pods = [p["metadata"]["name"] for p in kubectl_json(
            "-n", NAMESPACE, "get", "pods", "-l", f"app.kubernetes.io/name={component}")["items"]
            if p["metadata"].get("deletionTimestamp") is None]
        kube.kubectl("-n", NAMESPACE, "delete", "pod", pods[0], "--wait=false")
        time.sleep(2)
        kube.wait_for(f"{component} Available again after deleting {pods[0]}",
                      lambda: deployments_available()[0], 300, interval=2)


# --- the database taken away ------------------------------------------------------------------

def ready_endpoints(component):
    subsets = kubectl_json("-n", NAMESPACE, "get", "endpoints", f"{RELEASE}-{component}").get("subsets") or []
    return sum(len(s.get("addresses") or []) for s in subsets)


def prove_database_outage():
    """PostgreSQL scaled to 0: the CRM's pods leave its Service (their readiness probe asks the
    gRPC health, NOT_SERVING without the database); scaled back, they return."""
    before = ready_endpoints("crm")
    started = time.monotonic()
    backing.scale_postgres(0)
    try:
        kube.wait_for("the CRM's endpoints to empty with PostgreSQL away",
                      lambda: ready_endpoints("crm") == 0, 120, interval=1)
        gone = round(time.monotonic() - started, 1)
    except TimeoutError as error:
        backing.scale_postgres(1)
        result("a component whose database is unreachable leaves its Service and comes back", False, str(error))
        return
    backing.scale_postgres(1)
    back_started = time.monotonic()
    try:
        kube.wait_for("the CRM's endpoints to return with PostgreSQL back",
                      lambda: ready_endpoints("crm") == before, 180, interval=1)
        ok, detail = True, (f"{before} ready CRM pods; with PostgreSQL scaled to 0 none after {gone} s; "
                            f"all {before} back {round(time.monotonic() - back_started, 1)} s after it returned")
    except TimeoutError as error:
        ok, detail = False, str(error)
    kube.wait_for("every Deployment Available after the outage", lambda: deployments_available()[0], 300, interval=2)
    result("a component whose database is unreachable leaves its Service and comes back", ok, detail)


def uninstall():
    helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout=300s", timeout=360)
    kube.kubectl("-n", NAMESPACE, "delete", "pvc", "--all", "--timeout=120s", timeout=180)
    backing.fresh_databases()


# --- the run ----------------------------------------------------------------------------------

def test():
    if not SWITCHBOARD_BIN:
        raise SystemExit("set SWITCHBOARD_BIN to the release binary the images were made from")
    started = time.monotonic()
    kube.wait_for("the node to be Ready", kube.node_ready, 60, interval=1)
    if kube.kubectl("get", "namespace", NAMESPACE, check=False).returncode == 0:
        # What an earlier run left (even one stopped halfway): its namespace goes whole, and
        # the databases are made again below.
        log(f"the namespace {NAMESPACE} of an earlier run: deleted")
        helm("uninstall", RELEASE, "-n", NAMESPACE, "--timeout=120s", check=False, timeout=180)
        kube.kubectl("delete", "namespace", NAMESPACE, "--timeout=240s", timeout=300)
        backing.install()
        backing.fresh_databases()
    else:
        backing.install()
    qdrant = f"http://qdrant-pods.{backing.NAMESPACE}:6334"

    log("install: default values, the knowledge base on the Qdrant pod, two replicas")
    FIGURES["install, default values, to all Ready (s)"] = install(
        [], ["--set", f"qdrant.url={qdrant}", "--set", "knowledgebase.replicas=2"])
    make_team()
    prove_installed("default values")
    prove_security("default values")
    prove_contained()

    state = checker_state()
    log("upgrade to a new image tag, under the workload (no retries)")
    seconds, *rest = during(state, "helm-upgrade", upgrade([]), retries=False, failures="none")
    FIGURES["helm upgrade to a new tag, to all rolled (s)"] = seconds
    report("helm upgrade under load: 0 failed requests", seconds, *rest)

    log("one pod of each component deleted, under the workload (writes retried)")
    report("kubectl delete pod of each component: 0 acknowledged writes lost",
           *during(state, "delete-pods", delete_one_of_each, retries=True, failures="retried"))

    log("rollback to the first revision, under the workload (no retries)")
    seconds, *rest = during(state, "helm-rollback", rollback, retries=False, failures="none")
    FIGURES["helm rollback to revision 1, to all rolled (s)"] = seconds
    report("helm rollback under load: 0 failed requests, back on the first tag", seconds, *rest)

    log("the database taken away")
    prove_database_outage()

    log("uninstall; install again with values-staging.yaml on fresh databases")
    uninstall()
    FIGURES["install, staging values, to all Ready (s)"] = install(
        [os.path.join(CHART, "values-staging.yaml")])
    make_team()
    prove_installed("staging values")
    prove_security("staging values")

    FIGURES["cluster memory, all pods running (MB)"] = kube.memory_mb()
    FIGURES["test duration (s)"] = round(time.monotonic() - started, 1)
    print("\nfigures:")
    for name, value in FIGURES.items():
        print(f"  {name}: {value}")
    passed = len([r for r in RESULTS if r[1]])
    failed = len(RESULTS) - passed
    print(f"\n{passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0
