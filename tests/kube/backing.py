"""What the chart expects beside it, installed by `scripts/kube test` as a staging operator
would: PostgreSQL, Redis and a Qdrant server as pods in the namespace `switchboard-data`, the
Secret the chart names (`existingSecret`), and PersistentVolumes for the knowledge base's and the
conversations' claims (this cluster has no storage provisioner). PostgreSQL's data is a host folder, so scaling it to 0
and back keeps it.

The images come from tests/kube/images.py: Debian's postgresql and redis-server in one
debootstrap root filesystem, and ../shared/bin/qdrant.
"""

import base64
import json
import os
import shutil
import uuid

import kube

NAMESPACE = "switchboard-data"
RELEASE_NAMESPACE = "switchboard"
DATA_IMAGE = "switchboard.local/debian-data:bookworm"
QDRANT_IMAGE = "switchboard.local/qdrant:1"
DATABASES = ["identity", "agents", "knowledgebase", "conversations", "crm", "webhooks"]
# Fixed for the cluster's life: every install of the release and the host's checkers share them.
SERVICE_TOKEN = "kube-service-token-" + "0" * 16
ENCRYPTION_KEYS = "kube:" + base64.b64encode(b"kube-test-only-key-of-32-bytes!!").decode()


def volume(name, owner):
    """A host folder under KUBE_DIR for a pod's data, owned by the pod's user."""
    folder = kube.path("volumes", name)
    os.makedirs(folder, exist_ok=True)
    os.chown(folder, owner, owner)
    return folder


def postgres_uid():
    """The postgres user of the image's root filesystem: initdb wants a user it can name."""
    passwd = os.path.join(kube.KUBE_CACHE, "images", "rootfs", "debian-data", "etc", "passwd")
    with open(passwd) as file:
        for line in file:
            fields = line.split(":")
            if fields[0] == "postgres":
                return int(fields[2])
    raise RuntimeError(f"no postgres user in {passwd}")


def deployment(name, image, command, port, uid, volumes=(), env=None):
    mounts = [{"name": v, "mountPath": path} for v, path, _ in volumes]
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": 1, "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "securityContext": {"runAsUser": uid, "runAsGroup": uid, "runAsNonRoot": True,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "terminationGracePeriodSeconds": 10,
                    "containers": [{
                        "name": name, "image": image, "imagePullPolicy": "Never",
                        "command": command,
                        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
                        "ports": [{"containerPort": port, "protocol": "TCP"}],
                        "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1},
                        "volumeMounts": mounts,
                        "securityContext": {"allowPrivilegeEscalation": False,
                                            "capabilities": {"drop": ["ALL"]}},
                    }],
                    "volumes": [{"name": v, "hostPath": {"path": host, "type": "Directory"}}
                                for v, _, host in volumes],
                },
            },
        },
    }


def service(name, ports, headless=False):
    spec = {"selector": {"app": name.removesuffix("-pods")},
            "ports": [{"name": n, "port": p, "targetPort": p, "protocol": "TCP"} for n, p in ports]}
    if headless:
        spec["clusterIP"] = "None"
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


def apply(*objects):
    kube.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))


def install():
    for namespace in (NAMESPACE, RELEASE_NAMESPACE):
        if kube.kubectl("get", "namespace", namespace, check=False).returncode != 0:
            kube.kubectl("create", "namespace", namespace)
    uid = postgres_uid()
    postgres = ("set -e; D=/data/pg; "
                "if [ ! -s $D/PG_VERSION ]; then initdb -D $D -U switchboard --auth=trust >/dev/null; "
                "echo 'host all all 0.0.0.0/0 trust' >> $D/pg_hba.conf; fi; "
                "exec postgres -D $D -c listen_addresses='*' -c unix_socket_directories=/tmp "
                "-c max_connections=400 -c shared_buffers=64MB")
    apply(
        deployment("postgres", DATA_IMAGE, ["sh", "-c", postgres], 5432, uid,
                   [("data", "/data", volume("postgres", uid))]),
        service("postgres", [("postgres", 5432)]),
        # The release reaches PostgreSQL and Redis at their pods' own addresses (headless
        # Services): through a ClusterIP, every packet would pass kube-proxy's userspace proxy,
        # which only this cluster has (docs/deploy.md), and Redis calls would miss the
        # gateways' 50 ms deadline on this machine far more often than on a real cluster.
        service("postgres-pods", [("postgres", 5432)], headless=True),
        service("redis-pods", [("redis", 6379)], headless=True),
        deployment("redis", DATA_IMAGE, ["redis-server", "--bind", "0.0.0.0", "--port", "6379",
                                         "--protected-mode", "no", "--save", "", "--appendonly", "no"],
                   6379, 10001),
        service("redis", [("redis", 6379)]),
        deployment("qdrant", QDRANT_IMAGE, ["/qdrant/qdrant"], 6334, 10001,
                   [("storage", "/qdrant/storage", volume("qdrant", 10001))],
                   env={"QDRANT__STORAGE__STORAGE_PATH": "/qdrant/storage",
                        "QDRANT__STORAGE__SNAPSHOTS_PATH": "/qdrant/storage/snapshots",
                        "QDRANT__TELEMETRY_DISABLED": "true"}),
        service("qdrant", [("http", 6333), ("grpc", 6334)]),
        service("qdrant-pods", [("http", 6333), ("grpc", 6334)], headless=True),
    )
    for name in ("postgres", "redis", "qdrant"):
        kube.kubectl("-n", NAMESPACE, "rollout", "status", f"deployment/{name}", "--timeout=180s", timeout=200)
    for database in DATABASES:
        if sql("postgres", f"SELECT 1 FROM pg_database WHERE datname = '{database}'") != "1":
            sql("postgres", f"CREATE DATABASE {database}")
    secret()
    persistent_volumes()


def database_url(database, in_cluster=False):
    host = f"postgres-pods.{NAMESPACE}" if in_cluster else kube.service_ip("postgres", NAMESPACE)
    return f"postgres://switchboard@{host}:5432/{database}"


def sql(database, statement):
    """One statement through psql on the host, to the PostgreSQL pod's ClusterIP; its rows."""
    answer = kube.run("psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", database_url(database), "-c", statement,
                      timeout=60)
    return answer.stdout.strip()


def secret(test_api_key=None):
    """The chart's Secret; with the key of a team kept for `helm test` when there is one."""
    data = {f"{d.upper()}_DATABASE_URL": database_url(d, in_cluster=True) for d in DATABASES}
    data.update({"REDIS_URL": f"redis://redis-pods.{NAMESPACE}:6379/", "SERVICE_TOKEN": SERVICE_TOKEN,
                 "ENCRYPTION_KEYS": ENCRYPTION_KEYS})
    if test_api_key:
        data["TEST_API_KEY"] = test_api_key
    apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
           "metadata": {"name": "switchboard", "namespace": RELEASE_NAMESPACE}, "stringData": data})


def persistent_volumes():
    """Host folders as the volumes the chart's two claims bind (the knowledge base's and the
    conversations'; no class, as the claims): two new ones for each install. Those an
    uninstalled release let go of (Released) go, with their folders."""
    for pv in json.loads(kube.kubectl("get", "pv", "-o", "json").stdout)["items"]:
        if pv["status"].get("phase") == "Released":
            kube.kubectl("delete", "pv", pv["metadata"]["name"], "--wait=false")
            shutil.rmtree(pv["spec"]["hostPath"]["path"], ignore_errors=True)
    for _ in range(2):
        persistent_volume()


def persistent_volume():
    name = f"switchboard-data-{uuid.uuid4().hex[:8]}"
    apply({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
           "spec": {"capacity": {"storage": "20Gi"}, "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "hostPath": {"path": volume(name, 10001), "type": "Directory"}}})


def scale_postgres(replicas):
    kube.kubectl("-n", NAMESPACE, "scale", "deployment/postgres", f"--replicas={replicas}")
    if replicas:
        kube.kubectl("-n", NAMESPACE, "rollout", "status", "deployment/postgres", "--timeout=180s", timeout=200)


def fresh_databases():
    """Every component's database dropped and made again, and a new volume for the knowledge
    base, for an install that starts from nothing."""
    for database in DATABASES:
        sql("postgres", f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        sql("postgres", f"CREATE DATABASE {database}")
    persistent_volumes()
