"""A one-node Kubernetes 1.20 on this machine, from binaries built out of Debian's source
package (tests/kube/build-kubernetes.sh), for issue 56.

`up` makes a bridge (sbk0, 10.89.0.1/24) that is the pod network and the node's address, and
starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd (runc, the CNI
bridge plugin), kubelet and kube-proxy, plus a stand-in for cluster DNS: dnsmasq on the bridge
address, answering Service names from a hosts file that a small loop (`dns-sync`) keeps equal to
the Services and ready endpoints the API server holds. `down` removes every process, mount,
network namespace, iptables chain and cgroup that `up` made, and restores the sysctls kubelet and
kube-proxy write.

Why it is built this way:
- Nothing a pod sends may leave the machine. Pods get no default route (only the Service range,
  through the bridge address) and `ip_forward` stays off. So kube-proxy runs in its `userspace`
  mode: a ClusterIP is redirected to a proxy process on the bridge address, which connects to
  the pod itself. The iptables mode would need forwarding between pods through the host.
- One identity (`system:masters`, a client certificate) serves every component and the tests.
  This is a test cluster on one machine; the authorization that matters here is the chart's.
- There is no CoreDNS in any registry reached from here, hence dnsmasq.

Every wait has a bound and says what it waited for.
"""

import json
import os
import shlex
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request

KUBE_CACHE = os.environ.get("KUBE_CACHE", os.path.expanduser("~/.cache/switchboard/kube"))
BIN = os.path.join(KUBE_CACHE, "bin")
DIR = os.environ.get("KUBE_DIR", "/tmp/switchboard-kube")
STATE = os.path.join(DIR, "state.json")
BRIDGE, HOST, PREFIX = "sbk0", "10.89.0.1", 24
POD_FIRST, POD_LAST = "10.89.0.16", "10.89.0.250"
SERVICE_CIDR, API_SERVICE_IP = "10.89.128.0/24", "10.89.128.1"
NODE = "switchboard-kube"
API_PORT, ETCD_PORT, ETCD_PEER_PORT = 6443, 23791, 23801
API = f"https://{HOST}:{API_PORT}"
# What kubelet and kube-proxy write, restored by `down`.
SYSCTLS = ["net.ipv4.ip_forward", "net.ipv4.conf.all.route_localnet", "vm.overcommit_memory",
           "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops", "kernel.keys.root_maxkeys",
           "kernel.keys.root_maxbytes", "net.bridge.bridge-nf-call-iptables",
           "net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_tcp_timeout_established",
           "net.netfilter.nf_conntrack_tcp_timeout_close_wait"]
SANDBOX_IMAGE = "switchboard.local/pause:3.2"


def log(message):
    print(f"[kube {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def path(*parts):
    return os.path.join(DIR, *parts)


def run(*command, check=True, timeout=60, capture=True, **kwargs):
    result = subprocess.run(command, check=False, timeout=timeout, text=True,
                            capture_output=capture, **kwargs)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {result.returncode}: "
                           f"{(result.stderr or '').strip()[-2000:]}")
    return result


def kubectl(*args, timeout=120, check=True, input=None):
    return run(os.path.join(BIN, "kubectl"), f"--kubeconfig={path('pki', 'admin.kubeconfig')}", *args,
               timeout=timeout, check=check, input=input)


def wait_for(what, predicate, timeout, interval=0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception as error:  # noqa: BLE001 - the last failure is reported below
            last = error
        time.sleep(interval)
    raise TimeoutError(f"waited {timeout} s for {what}" + (f"; last error: {last}" if last else ""))


def load_state():
    try:
        with open(STATE) as file:
            return json.load(file)
    except FileNotFoundError:
        return {}


def save_state(state):
    os.makedirs(DIR, exist_ok=True)
    with open(STATE + ".part", "w") as file:
        json.dump(state, file, indent=1)
    os.replace(STATE + ".part", STATE)


# --- certificates -----------------------------------------------------------------------------

def make_pki():
    pki = path("pki")
    os.makedirs(pki, exist_ok=True)

    def openssl(*args):
        run("openssl", *args, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj",
            "/CN=switchboard-kube-ca", "-keyout", f"{pki}/ca.key", "-out", f"{pki}/ca.crt")

    def signed(name, subject, extensions):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout",
                f"{pki}/{name}.key", "-out", f"{pki}/{name}.csr")
        with open(f"{pki}/{name}.ext", "w") as file:
            file.write(extensions)
        openssl("x509", "-req", "-in", f"{pki}/{name}.csr", "-CA", f"{pki}/ca.crt", "-CAkey",
                f"{pki}/ca.key", "-CAcreateserial", "-days", "30", "-extfile",
                f"{pki}/{name}.ext", "-out", f"{pki}/{name}.crt")

    names = ["kubernetes", "kubernetes.default", "kubernetes.default.svc",
             "kubernetes.default.svc.cluster.local", "localhost", NODE]
    alt = ",".join([f"DNS:{n}" for n in names] + [f"IP:{ip}" for ip in (HOST, API_SERVICE_IP, "127.0.0.1")])
    signed("apiserver", "/CN=kube-apiserver",
           f"subjectAltName={alt}\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n")
    signed("admin", "/O=system:masters/CN=switchboard-admin",
           "extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n")
    openssl("genrsa", "-out", f"{pki}/sa.key", "2048")
    openssl("rsa", "-in", f"{pki}/sa.key", "-pubout", "-out", f"{pki}/sa.pub")
    with open(f"{pki}/admin.kubeconfig", "w") as file:
        file.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: switchboard-kube, cluster: {{server: "{API}", certificate-authority: {pki}/ca.crt}}}}]
users: [{{name: admin, user: {{client-certificate: {pki}/admin.crt, client-key: {pki}/admin.key}}}}]
contexts: [{{name: switchboard-kube, context: {{cluster: switchboard-kube, user: admin}}}}]
current-context: switchboard-kube
""")


def api_context():
    context = ssl.create_default_context(cafile=path("pki", "ca.crt"))
    context.load_cert_chain(path("pki", "admin.crt"), path("pki", "admin.key"))
    return context


def api_get(resource, context=None, timeout=5, parse=json.loads):
    request = urllib.request.Request(API + resource)
    with urllib.request.urlopen(request, context=context or api_context(), timeout=timeout) as answer:
        return parse(answer.read())


# --- processes --------------------------------------------------------------------------------

def start(state, name, command, env=None):
    """Starts a component in a session of its own, its output in DIR/logs/NAME.log."""
    os.makedirs(path("logs"), exist_ok=True)
    with open(path("logs", f"{name}.log"), "ab") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True,
                                   env={**os.environ, **(env or {})})
    state.setdefault("pids", {})[name] = process.pid
    save_state(state)
    return process.pid


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def stop(state, name, grace=10):
    pid = state.get("pids", {}).pop(name, None)
    if pid is None or not alive(pid):
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if alive(pid):
        log(f"{name} did not stop in {grace} s: killed")
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    save_state(state)


def require_running(state, name):
    pid = state.get("pids", {}).get(name)
    if pid is None or not alive(pid):
        tail = ""
        try:
            with open(path("logs", f"{name}.log")) as file:
                tail = "".join(file.readlines()[-15:])
        except FileNotFoundError:
            pass
        raise RuntimeError(f"{name} is not running; the end of its log:\n{tail}")


# --- the network ------------------------------------------------------------------------------

def read_sysctl(name):
    try:
        with open("/proc/sys/" + name.replace(".", "/")) as file:
            return file.read().strip()
    except (FileNotFoundError, PermissionError):
        return None


def write_sysctl(name, value):
    try:
        with open("/proc/sys/" + name.replace(".", "/"), "w") as file:
            file.write(value)
    except (FileNotFoundError, PermissionError, OSError) as error:
        log(f"could not restore {name} to {value!r}: {error}")


def make_bridge():
    if run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
        run("ip", "link", "add", BRIDGE, "type", "bridge")
    if f"{HOST}/{PREFIX}" not in run("ip", "-o", "addr", "show", "dev", BRIDGE).stdout:
        run("ip", "addr", "add", f"{HOST}/{PREFIX}", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")
    # The Service range is on the bridge too: a ClusterIP that kube-proxy has no rule for (yet)
    # is then asked for on the bridge, where nobody answers, instead of leaving by the host's
    # default route.
    if SERVICE_CIDR not in run("ip", "route", "show", SERVICE_CIDR).stdout:
        run("ip", "route", "add", SERVICE_CIDR, "dev", BRIDGE)


def netns_names():
    return {line.split()[0] for line in run("ip", "netns", "list", check=False).stdout.splitlines()
            if line.strip()}


# --- the components ---------------------------------------------------------------------------

def write(name, text):
    os.makedirs(os.path.dirname(name), exist_ok=True)
    with open(name, "w") as file:
        file.write(text)


def configure():
    pki = path("pki")
    write(path("containerd.toml"), f"""version = 2
root = "{path('containerd', 'root')}"
state = "{path('containerd', 'state')}"
[grpc]
  address = "{path('containerd.sock')}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{SANDBOX_IMAGE}"
  # Root here lacks CAP_SYS_RESOURCE: without this every sandbox fails to start.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{path('cni')}"
""")
    # Pods reach each other on the bridge and the Service range through the bridge address:
    # no default route. Not `isGateway`: with it the bridge plugin turns ip_forward on at
    # every pod it adds (the bridge's address is the host's own, set by make_bridge()).
    write(path("cni", "10-switchboard.conflist"), json.dumps({
        "cniVersion": "0.4.0", "name": "switchboard", "plugins": [{
            "type": "bridge", "bridge": BRIDGE, "isGateway": False, "isDefaultGateway": False,
            "ipMasq": False, "hairpinMode": False,
            "ipam": {"type": "host-local", "dataDir": path("cni-ipam"),
                     "ranges": [[{"subnet": f"10.89.0.0/{PREFIX}", "rangeStart": POD_FIRST,
                                  "rangeEnd": POD_LAST, "gateway": HOST}]],
                     "routes": [{"dst": SERVICE_CIDR, "gw": HOST}]}}]}, indent=1))
    write(path("resolv.conf"), "# pods ask the cluster DNS stand-in only\n")
    write(path("kubelet.yaml"), f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
address: {HOST}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication: {{anonymous: {{enabled: false}}, webhook: {{enabled: false}}, x509: {{clientCAFile: {pki}/ca.crt}}}}
authorization: {{mode: AlwaysAllow}}
clusterDNS: [{HOST}]
clusterDomain: cluster.local
resolvConf: {path('resolv.conf')}
failSwapOn: false
serializeImagePulls: false
# The machine's disk is shared with build caches: eviction would take the pods for it.
evictionHard: {{memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
""")
    write(path("kube-proxy.yaml"), f"""apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: userspace
bindAddress: {HOST}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: 10.89.0.0/{PREFIX}
clientConnection: {{kubeconfig: {pki}/admin.kubeconfig}}
# The userspace proxier reads Endpoints, not EndpointSlices: with slices it never syncs.
featureGates: {{EndpointSliceProxying: false}}
conntrack: {{maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
""")


def up():
    if load_state().get("pids"):
        raise RuntimeError(f"a cluster is already recorded in {STATE}: run `scripts/kube down` first")
    for binary in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"):
        if not os.access(os.path.join(BIN, binary), os.X_OK):
            raise RuntimeError(f"{BIN}/{binary} is missing: tests/kube/build-kubernetes.sh builds it")
    started = time.monotonic()
    shutil.rmtree(DIR, ignore_errors=True)
    os.makedirs(DIR)
    state = {"sysctls": {name: read_sysctl(name) for name in SYSCTLS},
             "netns_before": sorted(netns_names()), "pids": {}}
    save_state(state)
    make_pki()
    configure()
    make_bridge()
    pki = path("pki")
    start(state, "etcd", ["etcd", "--name", "switchboard-kube", "--data-dir", path("etcd"),
                          "--listen-client-urls", f"http://127.0.0.1:{ETCD_PORT}",
                          "--advertise-client-urls", f"http://127.0.0.1:{ETCD_PORT}",
                          "--listen-peer-urls", f"http://127.0.0.1:{ETCD_PEER_PORT}",
                          "--initial-advertise-peer-urls", f"http://127.0.0.1:{ETCD_PEER_PORT}",
                          "--initial-cluster", f"switchboard-kube=http://127.0.0.1:{ETCD_PEER_PORT}",
                          "--log-level", "warn"])
    start(state, "kube-apiserver", [
        f"{BIN}/kube-apiserver", f"--etcd-servers=http://127.0.0.1:{ETCD_PORT}",
        f"--bind-address={HOST}", f"--advertise-address={HOST}", f"--secure-port={API_PORT}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--tls-cert-file={pki}/apiserver.crt", f"--tls-private-key-file={pki}/apiserver.key",
        f"--client-ca-file={pki}/ca.crt", f"--service-account-key-file={pki}/sa.pub",
        f"--service-account-signing-key-file={pki}/sa.key",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--authorization-mode=Node,RBAC", "--allow-privileged=true",
        f"--kubelet-client-certificate={pki}/admin.crt", f"--kubelet-client-key={pki}/admin.key",
        "--kubelet-preferred-address-types=InternalIP", "--v=1"])
    start(state, "containerd", ["containerd", "--config", path("containerd.toml")])
    context = api_context()
    wait_for("the API server's /readyz", lambda: api_get("/readyz", context, parse=bytes.decode) == "ok", 90)
    kubeconfig = f"--kubeconfig={pki}/admin.kubeconfig"
    start(state, "kube-controller-manager", [
        f"{BIN}/kube-controller-manager", kubeconfig, "--leader-elect=false",
        f"--service-account-private-key-file={pki}/sa.key", f"--root-ca-file={pki}/ca.crt",
        "--bind-address=127.0.0.1", "--port=0", "--v=1"])
    start(state, "kube-scheduler", [f"{BIN}/kube-scheduler", kubeconfig, "--leader-elect=false",
                                    "--bind-address=127.0.0.1", "--port=0", "--v=1"])
    wait_for("containerd's socket", lambda: os.path.exists(path("containerd.sock")), 30)
    import_images()
    start(state, "kubelet", [
        f"{BIN}/kubelet", f"--config={path('kubelet.yaml')}", kubeconfig,
        "--container-runtime=remote", f"--container-runtime-endpoint=unix://{path('containerd.sock')}",
        f"--node-ip={HOST}", f"--hostname-override={NODE}", f"--root-dir={path('kubelet')}",
        f"--cert-dir={path('kubelet-pki')}", "--v=1"])
    start(state, "kube-proxy", [f"{BIN}/kube-proxy", f"--config={path('kube-proxy.yaml')}",
                                f"--hostname-override={NODE}", "--v=1"])
    write(path("dns", "hosts"), "")
    start(state, "dnsmasq", ["dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts",
                             f"--addn-hosts={path('dns', 'hosts')}", f"--listen-address={HOST}",
                             "--bind-interfaces", "--except-interface=lo",
                             "--local=/cluster.local/", "--local-ttl=1", "--neg-ttl=1",
                             f"--pid-file={path('dnsmasq.pid')}", "--log-facility=-",
                             "--user=root"])
    start(state, "dns-sync", [sys.executable, os.path.abspath(__file__), "dns-sync"])

    def components_and_node_ready():
        for name in ("etcd", "kube-apiserver", "containerd", "kubelet", "kube-proxy", "dnsmasq"):
            require_running(state, name)
        return node_ready()

    wait_for(f"node {NODE} to be Ready", components_and_node_ready, 120, interval=1)
    state["up_seconds"] = round(time.monotonic() - started, 1)
    save_state(state)
    log(f"cluster up in {state['up_seconds']} s: kubectl --kubeconfig={pki}/admin.kubeconfig get nodes")


def import_images():
    """Loads the images made from folders (tests/kube/images.py) into containerd."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import images  # noqa: E402 - beside this file

    switchboard_bin = os.environ.get("SWITCHBOARD_BIN", "")
    tags = os.environ.get("KUBE_IMAGE_TAGS", "0.1.0,0.1.1").split(",")
    archives = images.build_all(switchboard_bin, tags, os.path.join(KUBE_CACHE, "images"))
    images.import_all(path("containerd.sock"), archives)


# --- the DNS stand-in -------------------------------------------------------------------------

def dns_sync():
    """Keeps DIR/dns/hosts equal to the Services (their ClusterIP) and, for headless ones, their
    ready endpoints, and tells dnsmasq to read it again when it changes. Runs until killed."""
    context = api_context()
    hosts = path("dns", "hosts")
    previous = None
    while True:
        try:
            services = api_get("/api/v1/services", context)["items"]
            endpoints = {(e["metadata"]["namespace"], e["metadata"]["name"]): e
                         for e in api_get("/api/v1/endpoints", context)["items"]}
            lines = []
            for service in services:
                namespace, name = service["metadata"]["namespace"], service["metadata"]["name"]
                fqdn = f"{name}.{namespace}.svc.cluster.local"
                ip = service["spec"].get("clusterIP")
                if ip and ip != "None":
                    lines.append(f"{ip} {fqdn}")
                    continue
                for subset in endpoints.get((namespace, name), {}).get("subsets") or []:
                    for address in subset.get("addresses") or []:
                        lines.append(f"{address['ip']} {fqdn}")
            text = "\n".join(sorted(lines)) + "\n"
            if text != previous:
                with open(hosts + ".part", "w") as file:
                    file.write(text)
                os.replace(hosts + ".part", hosts)
                with open(path("dnsmasq.pid")) as file:
                    os.kill(int(file.read().strip()), signal.SIGHUP)
                previous = text
        except Exception as error:  # noqa: BLE001 - the loop outlives an API server restart
            print(f"dns-sync: {error}", file=sys.stderr, flush=True)
        time.sleep(0.5)


# --- what the proofs read ---------------------------------------------------------------------

def node_ready():
    node = api_get(f"/api/v1/nodes/{NODE}")
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])


def service_ip(name, namespace):
    return api_get(f"/api/v1/namespaces/{namespace}/services/{name}")["spec"]["clusterIP"]


def ctr(*args, timeout=30):
    return run("ctr", "--address", path("containerd.sock"), "-n", "k8s.io", *args, timeout=timeout)


def release_containers(namespace):
    """The running containers of a namespace's pods (no sandboxes): (pod, container, host pid)."""
    pids = {}
    for line in ctr("tasks", "ls").stdout.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "RUNNING":
            pids[fields[0]] = int(fields[1])
    out = []
    for container, pid in sorted(pids.items()):
        labels = json.loads(ctr("containers", "info", container).stdout).get("Labels") or {}
        if labels.get("io.cri-containerd.kind") == "container" and labels.get("io.kubernetes.pod.namespace") == namespace:
            out.append((labels.get("io.kubernetes.pod.name"), labels.get("io.kubernetes.container.name"), pid))
    return out


def proc_status(pid):
    with open(f"/proc/{pid}/status") as file:
        return dict(line.rstrip("\n").split(":\t", 1) for line in file if ":\t" in line)


def root_read_only(pid):
    with open(f"/proc/{pid}/mountinfo") as file:
        for line in file:
            fields = line.split()
            if fields[4] == "/":
                return "ro" in fields[5].split(",")
    return False


def default_routes(pid):
    """The routes to anywhere (0.0.0.0/0) in the network namespace of a process."""
    with open(f"/proc/{pid}/net/route") as file:
        return [line.split()[0] for line in file.readlines()[1:] if line.split()[1] == "00000000"]


def memory_mb():
    """What the cluster holds in memory: its own processes' resident sets, and the pods' (the
    kubepods memory cgroup)."""
    state = load_state()
    resident = 0
    for pid in state.get("pids", {}).values():
        try:
            with open(f"/proc/{pid}/status") as file:
                resident += next(int(line.split()[1]) for line in file if line.startswith("VmRSS:")) * 1024
        except (FileNotFoundError, StopIteration):
            pass
    pods = 0
    try:
        with open("/sys/fs/cgroup/memory/kubepods/memory.usage_in_bytes") as file:
            pods = int(file.read())
    except (FileNotFoundError, ValueError):
        pass
    return f"{round(resident / 2**20)} control plane and node processes + {round(pods / 2**20)} pods"


# --- down -------------------------------------------------------------------------------------

def down():
    state = load_state()
    if not state and not os.path.isdir(DIR):
        log("no cluster recorded")
        return
    pids = state.get("pids", {})
    # The pods first, while kubelet and containerd can still stop them cleanly.
    if pids.get("kube-apiserver") and alive(pids["kube-apiserver"]):
        kubectl("delete", "namespace", "--all", "--wait=false", check=False, timeout=30)
        kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=1", "--timeout=40s",
                check=False, timeout=60)
    for name in ("dns-sync", "dnsmasq", "kube-proxy", "kubelet"):
        stop(state, name)
    if pids.get("containerd") and alive(pids["containerd"]):
        ctr = ["ctr", "--address", path("containerd.sock"), "-n", "k8s.io"]
        tasks = run(*ctr, "tasks", "ls", "-q", check=False, timeout=30).stdout.split()
        for task in tasks:
            run(*ctr, "tasks", "kill", "-s", "SIGKILL", task, check=False, timeout=30)
        for task in tasks:
            run(*ctr, "tasks", "delete", "-f", task, check=False, timeout=30)
        for container in run(*ctr, "containers", "ls", "-q", check=False, timeout=30).stdout.split():
            run(*ctr, "containers", "delete", container, check=False, timeout=30)
    for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "containerd", "etcd"):
        stop(state, name)
    # Shims left by a containerd that died first.
    run("pkill", "-KILL", "-f", f"containerd-shim.*{path('containerd.sock')}", check=False)
    for name in sorted(netns_names() - set(state.get("netns_before", []))):
        if name.startswith("cni-"):
            run("ip", "netns", "delete", name, check=False)
    unmount_under(DIR)
    remove_kube_chains()
    run("ip", "link", "delete", BRIDGE, check=False)
    remove_cgroups()
    for name, value in (state.get("sysctls") or {}).items():
        if value is not None and read_sysctl(name) != value:
            write_sysctl(name, value)
    shutil.rmtree(DIR, ignore_errors=True)
    log("cluster down")


def unmount_under(root):
    for attempt in range(3):
        with open("/proc/mounts") as file:
            points = [line.split()[1].encode().decode("unicode_escape") for line in file]
        ours = sorted({p for p in points if p == root or p.startswith(root + "/")}, key=len, reverse=True)
        if not ours:
            return
        for point in ours:
            run("umount", "-l" if attempt else "-R", point, check=False)


def remove_kube_chains():
    """Every rule that jumps to a KUBE-* chain, then the chains: what kubelet and kube-proxy
    add, in the filter, nat and mangle tables, for IPv4 and IPv6."""
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            rules = run(tool, "-w", "5", "-t", table, "-S", check=False).stdout.splitlines()
            for rule in rules:
                parts = shlex.split(rule)
                if parts[:1] == ["-A"] and "-j" in parts and parts[parts.index("-j") + 1].startswith("KUBE-") \
                        and not parts[1].startswith("KUBE-"):
                    run(tool, "-w", "5", "-t", table, "-D", *parts[1:], check=False)
            chains = [r.split()[1] for r in rules if r.startswith("-N KUBE-")]
            for chain in chains:
                run(tool, "-w", "5", "-t", table, "-F", chain, check=False)
            for chain in chains:
                run(tool, "-w", "5", "-t", table, "-X", chain, check=False)


def remove_cgroups():
    for root in sorted(os.listdir("/sys/fs/cgroup")) if os.path.isdir("/sys/fs/cgroup") else []:
        top = os.path.join("/sys/fs/cgroup", root, "kubepods")
        if not os.path.isdir(top):
            continue
        for current, _, _ in sorted(os.walk(top), key=lambda entry: len(entry[0]), reverse=True):
            try:
                os.rmdir(current)
            except OSError:
                pass


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "up":
        up()
    elif command == "down":
        down()
    elif command == "dns-sync":
        dns_sync()
    elif command == "test":
        import fcntl

        import proofs  # noqa: E402 - beside this file
        if not os.path.isdir(DIR):
            raise SystemExit(f"no cluster in {DIR}: run `scripts/kube up` first")
        # Two runs on one cluster would uninstall each other's release.
        lock = open(path("test.lock"), "w")  # noqa: SIM115 - held until the process ends
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit("another `scripts/kube test` is running on this cluster") from None
        sys.exit(proofs.test())
    else:
        print("usage: kube.py up|test|down|dns-sync", file=sys.stderr)
        sys.exit(2)
