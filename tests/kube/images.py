#!/usr/bin/env python3
"""Builds the test cluster's container images from folders, with no registry and no docker.

Each image is one layer: a tar made here with Python's tarfile from files on this machine, put in an
OCI image layout archive (oci-layout, index.json, blobs/sha256/...) whose index names the full ref,
so that `ctr -n k8s.io images import ARCHIVE` lists it under exactly that ref.

    python3 tests/kube/images.py build  --switchboard-bin PATH --tags 0.1.0,0.1.1 [--cache DIR]
    python3 tests/kube/images.py import --address SOCK [same build arguments] [--force]

`build` prints `<ref> <archive>` per image. Archives are kept in the cache (default
$KUBE_CACHE/images, KUBE_CACHE defaulting to ~/.cache/switchboard/kube) under a key of their
inputs (sizes and mtimes of the files that go in, the tag, the recipe version), so a second build
reuses them without rewriting. Layers are deterministic (sorted entries, fixed mtimes, gzip without
a timestamp): the same inputs give the same digests. Also importable: build_all() and import_all().

The images:
  switchboard.local/pause:3.2              the pause binary (static), the sandbox image
  ghcr.io/switchboard/switchboard:<tag>    the switchboard binary, its libraries, the model
  docker.io/library/busybox:1.36           Debian's busybox-static (for `helm test` pods)
  switchboard.local/debian-data:bookworm   debootstrap'd bookworm with PostgreSQL 15 and Redis
  switchboard.local/qdrant:1               the Qdrant server from shared/bin
"""

import argparse
import datetime
import fcntl
import glob
import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import time

# Bump when what a recipe puts into an image changes, so that cached archives are remade.
RECIPE_VERSION = 3
# Every entry of every layer gets this mtime (2023-06-10, bookworm's release day).
FIXED_MTIME = 1686355200
GZIP_LEVEL = 3
DEBOOTSTRAP_TIMEOUT = 20 * 60
MIRROR = "http://deb.debian.org/debian"
DEBIAN_PACKAGES = "postgresql,redis-server,busybox"

HOME = os.path.expanduser("~")
KUBE_CACHE = os.environ.get("KUBE_CACHE", os.path.join(HOME, ".cache", "switchboard", "kube"))
DEFAULT_CACHE = os.path.join(KUBE_CACHE, "images")
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

APP_UID = 10001
APP_USER = "switchboard"
STD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


class ImageError(Exception):
    pass


def log(message):
    print(f"[images] {message}", file=sys.stderr, flush=True)


def run(cmd, what, timeout, **kwargs):
    """Runs cmd, capturing its output; raises ImageError naming `what` and the output's tail."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    try:
        result = subprocess.run(cmd, timeout=timeout, text=True, **kwargs)
    except subprocess.TimeoutExpired:
        raise ImageError(f"{what}: timed out after {timeout} s: {' '.join(cmd)}") from None
    except OSError as e:
        raise ImageError(f"{what}: cannot run {cmd[0]}: {e}") from None
    if result.returncode != 0:
        tail = ((result.stdout or "") + (result.stderr or "")).strip()[-3000:]
        raise ImageError(f"{what}: `{' '.join(cmd)}` exited {result.returncode}:\n{tail}")
    return result


# --- layers ------------------------------------------------------------------------------------

class Entry:
    __slots__ = ("kind", "mode", "uid", "gid", "src", "data", "target", "inode")

    def __init__(self, kind, mode, uid=0, gid=0, src=None, data=None, target=None, inode=None):
        self.kind, self.mode, self.uid, self.gid = kind, mode, uid, gid
        self.src, self.data, self.target, self.inode = src, data, target, inode


class Layer:
    """The files of one layer, by path in the image (no leading slash)."""

    def __init__(self):
        self.entries = {}

    def _put(self, path, entry):
        name = path.strip("/")
        if not name:
            raise ImageError(f"empty path in layer: {path!r}")
        parts = name.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            existing = self.entries.get(parent)
            if existing is None:
                self.entries[parent] = Entry("dir", 0o755)
            elif existing.kind != "dir":
                raise ImageError(f"layer: /{name} would be under /{parent}, which is a {existing.kind}")
        self.entries[name] = entry

    def dir(self, path, mode=0o755, uid=0, gid=0):
        self._put(path, Entry("dir", mode, uid, gid))

    def file(self, path, src=None, data=None, mode=None, uid=0, gid=0):
        if src is not None:
            st = os.stat(src)
            if not stat.S_ISREG(st.st_mode):
                raise ImageError(f"layer: {src} is not a regular file")
            if mode is None:
                mode = stat.S_IMODE(st.st_mode)
        elif isinstance(data, str):
            data = data.encode()
        self._put(path, Entry("file", 0o644 if mode is None else mode, uid, gid, src=src, data=data))

    def symlink(self, path, target):
        self._put(path, Entry("symlink", 0o777, target=target))

    def host_path(self, host_path, depth=0):
        """Adds a host file at its own path, with every symlink met on the way (/lib -> usr/lib,
        /lib64/ld-linux-x86-64.so.2 -> ...) as a symlink, and the file it ends at."""
        if depth > 40:
            raise ImageError(f"layer: too many symlinks resolving {host_path}")
        parts = os.path.normpath(host_path).strip("/").split("/")
        current = "/"
        for i, part in enumerate(parts):
            current = os.path.join(current, part)
            if os.path.islink(current):
                target = os.readlink(current)
                self.symlink(current, target)
                resolved = os.path.normpath(os.path.join(os.path.dirname(current), target))
                rest = parts[i + 1:]
                self.host_path(os.path.join(resolved, *rest) if rest else resolved, depth + 1)
                return
            if i < len(parts) - 1:
                if current.strip("/") not in self.entries:
                    self.dir(current)
        self.file(host_path, src=host_path)

    def tree(self, root, skip=lambda rel: False):
        """Adds a whole host folder as the image's root, keeping modes, owners, symlinks and hard
        links. `skip(rel)` leaves out a path (and, for a folder, what is in it); folders on
        another filesystem (mounts) are kept empty."""
        root_dev = os.lstat(root).st_dev
        stack = [""]
        while stack:
            rel = stack.pop()
            with os.scandir(os.path.join(root, rel)) as it:
                children = sorted(it, key=lambda d: d.name)
            for child in children:
                crel = f"{rel}/{child.name}" if rel else child.name
                if skip(crel):
                    continue
                st = child.stat(follow_symlinks=False)
                mode = stat.S_IMODE(st.st_mode)
                if stat.S_ISDIR(st.st_mode):
                    self.entries[crel] = Entry("dir", mode, st.st_uid, st.st_gid)
                    if st.st_dev == root_dev:
                        stack.append(crel)
                elif stat.S_ISREG(st.st_mode):
                    inode = (st.st_dev, st.st_ino) if st.st_nlink > 1 else None
                    self.entries[crel] = Entry("file", mode, st.st_uid, st.st_gid,
                                               src=child.path, inode=inode)
                elif stat.S_ISLNK(st.st_mode):
                    self.entries[crel] = Entry("symlink", 0o777, st.st_uid, st.st_gid,
                                               target=os.readlink(child.path))
                else:
                    log(f"leaving out /{crel}: not a file, folder or symlink")


class _Hasher:
    """A write-only stream that hashes and counts what goes through it."""

    def __init__(self, out):
        self.out, self.sha, self.size = out, hashlib.sha256(), 0

    def write(self, data):
        self.sha.update(data)
        self.size += len(data)
        return self.out.write(data)

    def flush(self):
        self.out.flush()

    def digest(self):
        return "sha256:" + self.sha.hexdigest()


def _tarinfo(name, entry):
    info = tarfile.TarInfo(name)
    info.mode, info.uid, info.gid = entry.mode, entry.uid, entry.gid
    info.uname = info.gname = ""
    info.mtime = FIXED_MTIME
    return info


def write_layer(layer, out_path):
    """Writes the layer as a gzip'd tar, streaming; returns (diff_id, digest, size)."""
    seen = {}
    with open(out_path, "wb") as raw:
        compressed = _Hasher(raw)
        with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, compresslevel=GZIP_LEVEL,
                           mtime=0) as gz:
            plain = _Hasher(gz)
            with tarfile.open(fileobj=plain, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for name in sorted(layer.entries):
                    entry = layer.entries[name]
                    info = _tarinfo(name, entry)
                    if entry.kind == "dir":
                        info.type = tarfile.DIRTYPE
                        tar.addfile(info)
                    elif entry.kind == "symlink":
                        info.type, info.linkname = tarfile.SYMTYPE, entry.target
                        tar.addfile(info)
                    elif entry.inode is not None and entry.inode in seen:
                        info.type, info.linkname = tarfile.LNKTYPE, seen[entry.inode]
                        tar.addfile(info)
                    elif entry.src is not None:
                        if entry.inode is not None:
                            seen[entry.inode] = name
                        with open(entry.src, "rb") as f:
                            info.size = os.fstat(f.fileno()).st_size
                            tar.addfile(info, f)
                    else:
                        info.size = len(entry.data)
                        tar.addfile(info, io.BytesIO(entry.data))
    return plain.digest(), compressed.digest(), compressed.size


def _json(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def write_archive(out_path, ref, layer, image_config, work_dir):
    """Writes the OCI image layout tar for one single-layer image; returns the manifest digest."""
    blob = os.path.join(work_dir, f".layer-{os.getpid()}.tar.gz")
    try:
        diff_id, layer_digest, layer_size = write_layer(layer, blob)
        created = datetime.datetime.fromtimestamp(FIXED_MTIME, datetime.timezone.utc)
        created = created.strftime("%Y-%m-%dT%H:%M:%SZ")
        config = _json({
            "architecture": "amd64",
            "os": "linux",
            "created": created,
            "config": image_config,
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created": created, "created_by": "tests/kube/images.py"}],
        })
        config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
        manifest = _json({
            "schemaVersion": 2,
            "mediaType": MT_MANIFEST,
            "config": {"mediaType": MT_CONFIG, "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": MT_LAYER_GZIP, "digest": layer_digest, "size": layer_size}],
        })
        manifest_digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
        index = _json({
            "schemaVersion": 2,
            "mediaType": MT_INDEX,
            "manifests": [{
                "mediaType": MT_MANIFEST,
                "digest": manifest_digest,
                "size": len(manifest),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": ref,
                    "org.opencontainers.image.ref.name": ref,
                },
            }],
        })
        tmp = out_path + f".tmp-{os.getpid()}"
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            def add_bytes(name, data):
                info = _tarinfo(name, Entry("file", 0o644))
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))

            def add_dir(name):
                info = _tarinfo(name, Entry("dir", 0o755))
                info.type = tarfile.DIRTYPE
                tar.addfile(info)

            add_bytes("oci-layout", _json({"imageLayoutVersion": "1.0.0"}))
            add_bytes("index.json", index)
            add_dir("blobs")
            add_dir("blobs/sha256")
            add_bytes("blobs/sha256/" + config_digest[7:], config)
            add_bytes("blobs/sha256/" + manifest_digest[7:], manifest)
            info = _tarinfo("blobs/sha256/" + layer_digest[7:], Entry("file", 0o644))
            info.size = layer_size
            with open(blob, "rb") as f:
                tar.addfile(info, f)
        os.replace(tmp, out_path)
        return manifest_digest
    finally:
        for leftover in (blob, out_path + f".tmp-{os.getpid()}"):
            if os.path.exists(leftover):
                os.unlink(leftover)


def archive_digest(path):
    """The manifest digest and ref that an archive's index.json names."""
    with tarfile.open(path) as tar:
        member = tar.extractfile("index.json")
        if member is None:
            raise ImageError(f"{path}: no index.json")
        descriptor = json.load(member)["manifests"][0]
    return descriptor["digest"], descriptor["annotations"]["io.containerd.image.name"]


# --- inputs ------------------------------------------------------------------------------------

def file_key(path):
    st = os.stat(path)
    return [os.path.realpath(path), st.st_size, st.st_mtime_ns]


def ldd_paths(binary):
    """The libraries and loader that `ldd` names for a binary ([] for a static one)."""
    result = subprocess.run(["ldd", binary], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=60)
    if "not a dynamic executable" in result.stdout or "statically linked" in result.stdout:
        return []
    if result.returncode != 0:
        raise ImageError(f"ldd {binary} failed:\n{result.stdout}")
    paths = []
    for line in result.stdout.splitlines():
        line = line.strip()
        if "not found" in line:
            raise ImageError(f"ldd {binary}: a library is missing: {line}")
        if "=>" in line:
            path = line.split("=>", 1)[1].strip().split(" (")[0].strip()
        else:
            path = line.split(" (")[0].strip()
        if path.startswith("/"):
            paths.append(path)
    if not paths:
        raise ImageError(f"ldd {binary} named no library:\n{result.stdout}")
    return paths


def passwd_files(layer, with_root_shell="/sbin/nologin", home="/tmp"):
    layer.file("/etc/passwd", data=(
        f"root:x:0:0:root:/root:{with_root_shell}\n"
        f"{APP_USER}:x:{APP_UID}:{APP_UID}:{APP_USER}:{home}:/sbin/nologin\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"))
    layer.file("/etc/group", data=f"root:x:0:\n{APP_USER}:x:{APP_UID}:\nnogroup:x:65534:\n")


CA_CERTS = "/etc/ssl/certs/ca-certificates.crt"


def host_ca_certs():
    if not os.path.isfile(CA_CERTS):
        raise ImageError(f"{CA_CERTS} is missing on this machine (apt-get install ca-certificates)")
    return os.path.realpath(CA_CERTS)


def base_dirs(layer):
    layer.dir("/tmp", 0o1777)
    layer.dir("/proc")
    layer.dir("/sys")
    layer.dir("/dev")
    layer.dir("/etc")


# --- the images --------------------------------------------------------------------------------

def kubernetes_tree():
    trees = sorted(glob.glob(os.path.join(KUBE_CACHE, "src", "kubernetes-*")))
    trees = [t for t in trees if os.path.isdir(t)]
    if not trees:
        raise ImageError(f"no Kubernetes source tree under {KUBE_CACHE}/src "
                         "(tests/kube/build-kubernetes.sh unpacks it)")
    return trees[0]


def pause_image(work_dir):
    ref = "switchboard.local/pause:3.2"
    prebuilt = os.path.join(KUBE_CACHE, "bin", "pause")
    if os.access(prebuilt, os.X_OK):
        source = prebuilt
    else:
        source = os.path.join(kubernetes_tree(), "build", "pause", "linux", "pause.c")
        if not os.path.isfile(source):
            raise ImageError(f"no pause source at {source}")

    def make():
        binary = prebuilt
        if source != prebuilt:
            binary = os.path.join(work_dir, f".pause-{os.getpid()}")
            run(["nice", "-n", "10", "gcc", "-Os", "-static", "-o", binary, source],
                "building pause", 300)
        layer = Layer()
        try:
            with open(binary, "rb") as f:
                layer.file("/pause", data=f.read(), mode=0o755)
        finally:
            if binary != prebuilt:
                os.unlink(binary)
        return layer, {"Entrypoint": ["/pause"], "Env": [f"PATH={STD_PATH}"]}

    return ref, {"pause": file_key(source)}, make


def switchboard_image(binary, tag):
    ref = f"ghcr.io/switchboard/switchboard:{tag}"
    model_dir = os.environ.get("SWITCHBOARD_EMBEDDING_MODEL_DIR") or os.path.join(
        HOME, ".cache", "switchboard", "models", "all-MiniLM-L6-v2")
    for needed in ("config.json", "tokenizer.json", "model.safetensors"):
        if not os.path.isfile(os.path.join(model_dir, needed)):
            raise ImageError(f"the embedding model folder {model_dir} has no {needed} "
                             "(set SWITCHBOARD_EMBEDDING_MODEL_DIR)")
    model_files = []
    for folder, dirs, files in os.walk(model_dir):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            model_files.append((os.path.relpath(path, model_dir), path))
    libs = ldd_paths(binary)
    certs = host_ca_certs()
    model_in_image = "/opt/switchboard/models/all-MiniLM-L6-v2"
    inputs = {"binary": file_key(binary), "tag": tag, "libs": [file_key(p) for p in libs],
              "certs": file_key(certs), "model": [[rel] + file_key(p) for rel, p in model_files]}

    def make():
        layer = Layer()
        base_dirs(layer)
        layer.file("/usr/local/bin/switchboard", src=binary, mode=0o755)
        for lib in libs:
            layer.host_path(lib)
        for rel, path in model_files:
            layer.file(f"{model_in_image}/{rel}", src=path, mode=0o644)
        passwd_files(layer, home=f"/home/{APP_USER}")
        layer.dir(f"/home/{APP_USER}", 0o755, APP_UID, APP_UID)
        layer.file("/etc/nsswitch.conf", data="passwd: files\ngroup: files\nhosts: files dns\n")
        layer.file(CA_CERTS, src=certs, mode=0o644)
        layer.file("/etc/switchboard-image-tag", data=tag + "\n")
        return layer, {
            "Entrypoint": ["/usr/local/bin/switchboard"],
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin",
                    f"SWITCHBOARD_EMBEDDING_MODEL_DIR={model_in_image}"],
            "User": f"{APP_UID}:{APP_UID}",
            "WorkingDir": "/",
        }

    return ref, inputs, make


def ensure_busybox_static():
    status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "busybox-static"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=60)
    if status.stdout.strip() == "install ok installed":
        return
    log("installing Debian's busybox-static")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        run(["apt-get", "install", "-y", "-q", "busybox-static"], "apt-get install busybox-static",
            600, env=env)
    except ImageError:
        run(["apt-get", "update", "-q"], "apt-get update", 600, env=env)
        run(["apt-get", "install", "-y", "-q", "busybox-static"], "apt-get install busybox-static",
            600, env=env)


def busybox_image():
    # Debian's busybox (the busybox-static package, 1.35), published under the ref that the
    # chart's `helm test` pods name (busybox:1.36): Docker Hub cannot be reached here.
    ref = "docker.io/library/busybox:1.36"
    ensure_busybox_static()
    busybox = "/bin/busybox"
    if ldd_paths(busybox):
        raise ImageError(f"{busybox} is not statically linked (is busybox-static installed?)")
    applets = run([busybox, "--list"], "busybox --list", 60).stdout.split()
    applets = sorted(a for a in set(applets) if a and "/" not in a and a != "busybox")
    if "sh" not in applets or "wget" not in applets:
        raise ImageError(f"{busybox} lacks sh or wget")

    def make():
        layer = Layer()
        base_dirs(layer)
        layer.file("/bin/busybox", src=os.path.realpath(busybox), mode=0o755)
        for applet in applets:
            layer.symlink(f"/bin/{applet}", "busybox")
        passwd_files(layer, with_root_shell="/bin/sh")
        layer.dir("/root", 0o700)
        layer.dir("/var")
        return layer, {"Cmd": ["sh"], "Env": [f"PATH={STD_PATH}"]}

    return ref, {"busybox": file_key(busybox), "applets": applets}, make


def mounts_under(folder):
    """Mount points at or under folder, deepest first."""
    folder = os.path.realpath(folder)
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4]
            point = point.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")
            point = point.replace("\\134", "\\")
            if point == folder or point.startswith(folder + "/"):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def unmount_all(folder):
    for point in mounts_under(folder):
        log(f"unmounting {point}")
        try:
            run(["umount", point], f"umount {point}", 60)
        except ImageError:
            run(["umount", "-l", point], f"umount -l {point}", 60)
    left = mounts_under(folder)
    if left:
        raise ImageError(f"still mounted under {folder}: {left}")


def processes_rooted_in(folder):
    folder = os.path.realpath(folder)
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                root = os.readlink(f"/proc/{pid}/root")
            except OSError:
                continue
            if root == folder or root.startswith(folder + "/"):
                pids.append(int(pid))
    return pids


def debian_rootfs(cache):
    """The debootstrap'd folder, made once. The marker beside it is written last: a folder
    without it is a half-made one, unmounted, removed and made again."""
    rootfs = os.path.join(cache, "rootfs", "debian-data")
    marker = rootfs + ".complete"
    if os.path.isfile(marker) and os.path.isdir(rootfs):
        return rootfs, marker
    if os.path.lexists(marker):
        os.unlink(marker)
    if os.path.lexists(rootfs):
        log(f"removing the half-made {rootfs}")
        unmount_all(rootfs)
        shutil.rmtree(rootfs)
    os.makedirs(os.path.dirname(rootfs), exist_ok=True)
    cmd = ["nice", "-n", "19", "debootstrap", "--variant=minbase", f"--include={DEBIAN_PACKAGES}",
           "bookworm", rootfs, MIRROR]
    log_path = rootfs + ".log"
    log(f"debootstrap into {rootfs} (a few minutes; log: {log_path})")
    started = time.monotonic()
    with open(log_path, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=DEBOOTSTRAP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    if code != 0:
        with open(log_path) as f:
            tail = f.read()[-3000:]
        try:
            unmount_all(rootfs)
        except ImageError as e:
            log(str(e))
        why = "timed out" if code is None else f"exited {code}"
        raise ImageError(f"debootstrap {why} (log {log_path}):\n{tail}")
    unmount_all(rootfs)
    stray = processes_rooted_in(rootfs)
    if stray:
        raise ImageError(f"processes started inside {rootfs} by package scripts are running: {stray}")
    for needed in ("usr/lib/postgresql/15/bin/postgres", "usr/lib/postgresql/15/bin/initdb",
                   "usr/bin/redis-server", "bin/busybox"):
        if not os.path.exists(os.path.join(rootfs, needed)):
            raise ImageError(f"debootstrap finished but /{needed} is missing in {rootfs}")
    # The uid the chart's pods run as, so that initdb and friends can name their user.
    for name, line in (("passwd", f"{APP_USER}:x:{APP_UID}:{APP_UID}:{APP_USER}:/tmp:/usr/sbin/nologin\n"),
                       ("group", f"{APP_USER}:x:{APP_UID}:\n")):
        path = os.path.join(rootfs, "etc", name)
        with open(path) as f:
            present = any(l.startswith(f"{APP_USER}:") for l in f)
        if not present:
            with open(path, "a") as f:
                f.write(line)
    for deb in glob.glob(os.path.join(rootfs, "var", "cache", "apt", "archives", "*.deb")):
        os.unlink(deb)
    with open(marker, "w") as f:
        json.dump({"command": cmd, "finished": time.time(),
                   "seconds": round(time.monotonic() - started)}, f)
    log(f"debootstrap done in {time.monotonic() - started:.0f} s")
    return rootfs, marker


def owner_ids(rootfs, user):
    with open(os.path.join(rootfs, "etc", "passwd")) as f:
        for line in f:
            fields = line.split(":")
            if fields[0] == user:
                return int(fields[2]), int(fields[3])
    raise ImageError(f"no user {user} in {rootfs}/etc/passwd")


def debian_data_image(cache):
    ref = "switchboard.local/debian-data:bookworm"
    rootfs, marker = debian_rootfs(cache)
    with open(marker) as f:
        made = f.read()

    def skip(rel):
        top = rel.split("/", 1)
        # The runtime mounts /dev, /proc and /sys, and /tmp starts empty: the folders, not
        # what debootstrap left in them.
        if len(top) == 2 and top[0] in ("dev", "proc", "sys", "tmp"):
            return True
        return rel.startswith("var/cache/apt/archives/") and rel.endswith(".deb") or \
            rel.startswith("var/lib/apt/lists/") and rel != "var/lib/apt/lists/partial"

    def make():
        unmount_all(rootfs)
        layer = Layer()
        layer.tree(rootfs, skip)
        layer.dir("/tmp", 0o1777)
        # PostgreSQL's default socket folder; at boot a tmpfiles.d rule would make it. Open to
        # every uid, so that a pod running as postgres or as 10001 can put its socket there.
        postgres = owner_ids(rootfs, "postgres")
        layer.dir("/run/postgresql", 0o1777, *postgres)
        return layer, {
            "Cmd": ["/bin/bash"],
            "Env": [f"PATH=/usr/lib/postgresql/15/bin:{STD_PATH}", "LANG=C.UTF-8"],
        }

    return ref, {"rootfs": made}, make


def qdrant_binary():
    for path in (os.environ.get("QDRANT_BIN", ""),
                 os.path.join(os.path.dirname(REPO), "shared", "bin", "qdrant"),
                 "/work/shared/bin/qdrant"):
        if path and os.path.isfile(path):
            return path
    raise ImageError("no Qdrant binary: expected ../shared/bin/qdrant beside the repo (or QDRANT_BIN)")


def qdrant_image():
    ref = "switchboard.local/qdrant:1"
    binary = qdrant_binary()
    libs = ldd_paths(binary)
    certs = host_ca_certs()

    def make():
        layer = Layer()
        base_dirs(layer)
        # Its working folder is its own: it writes `.qdrant-initialized` there at start-up.
        layer.dir("/qdrant", 0o755, APP_UID, APP_UID)
        layer.file("/qdrant/qdrant", src=binary, mode=0o755)
        for lib in libs:
            layer.host_path(lib)
        layer.dir("/qdrant/storage", 0o755, APP_UID, APP_UID)
        layer.dir("/qdrant/snapshots", 0o755, APP_UID, APP_UID)
        passwd_files(layer, home="/qdrant")
        # Its HTTP client panics at start-up without system CA certificates.
        layer.file(CA_CERTS, src=certs, mode=0o644)
        return layer, {
            "Entrypoint": ["/qdrant/qdrant"],
            # Telemetry would try to reach the outside: off by default in this image.
            "Env": [f"PATH={STD_PATH}", "QDRANT__TELEMETRY_DISABLED=true"],
            "User": f"{APP_UID}:{APP_UID}",
            "WorkingDir": "/qdrant",
        }

    return ref, {"binary": file_key(binary), "libs": [file_key(p) for p in libs],
                 "certs": file_key(certs)}, make


# --- build and import --------------------------------------------------------------------------

def _safe(ref):
    return ref.replace("/", "_").replace(":", "_")


def build_one(cache, ref, inputs, make):
    key = hashlib.sha256(_json({"recipe": RECIPE_VERSION, "ref": ref, "mtime": FIXED_MTIME,
                                "gzip": GZIP_LEVEL, "inputs": inputs})).hexdigest()[:16]
    path = os.path.join(cache, f"{_safe(ref)}--{key}.tar")
    if os.path.isfile(path):
        log(f"{ref}: cached")
        return path
    started = time.monotonic()
    layer, config = make()
    digest = write_archive(path, ref, layer, config, cache)
    for old in glob.glob(os.path.join(cache, f"{_safe(ref)}--*.tar")):
        if old != path:
            os.unlink(old)
    log(f"{ref}: built {os.path.getsize(path) / 2**20:.1f} MiB, {len(layer.entries)} entries, "
        f"{digest} in {time.monotonic() - started:.1f} s")
    return path


def build_all(switchboard_bin, tags, cache=DEFAULT_CACHE):
    """Builds (or finds in the cache) every archive; returns [(ref, path)]."""
    if not switchboard_bin or not os.path.isfile(switchboard_bin):
        raise ImageError(f"no switchboard binary at {switchboard_bin!r} (pass --switchboard-bin "
                         "or SWITCHBOARD_BIN)")
    tags = [t.strip() for t in tags if t.strip()]
    if not tags:
        raise ImageError("no image tag given")
    os.makedirs(cache, exist_ok=True)
    with open(os.path.join(cache, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # With the lock held, temporary files are what an interrupted build left.
        for stale in glob.glob(os.path.join(cache, "*.tmp-*")) + glob.glob(os.path.join(cache, ".layer-*")) \
                + glob.glob(os.path.join(cache, ".pause-*")):
            os.unlink(stale)
        work_dir = cache
        recipes = [lambda: pause_image(work_dir)]
        recipes += [lambda tag=tag: switchboard_image(switchboard_bin, tag) for tag in tags]
        recipes += [busybox_image, lambda: debian_data_image(cache), qdrant_image]
        archives = []
        for recipe in recipes:
            ref, inputs, make = recipe()
            archives.append((ref, build_one(cache, ref, inputs, make)))
        return archives


def listed_images(address):
    """{ref: digest} of the images in containerd's k8s.io namespace."""
    out = run(["ctr", "--address", address, "-n", "k8s.io", "images", "ls"],
              "listing containerd's images", 60).stdout
    listed = {}
    for line in out.splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 3:
            listed[cols[0]] = cols[2]
    return listed


def import_all(address, archives, force=False):
    """Imports each (ref, archive) into containerd's k8s.io namespace, skipping those whose ref
    is already there with the archive's digest."""
    listed = listed_images(address)
    for ref, path in archives:
        digest, named = archive_digest(path)
        if named != ref:
            raise ImageError(f"{path} names {named}, not {ref}")
        if listed.get(ref) == digest and not force:
            log(f"{ref}: already imported ({digest})")
            continue
        started = time.monotonic()
        run(["ctr", "--address", address, "-n", "k8s.io", "images", "import", path],
            f"importing {ref} from {path}", 600)
        log(f"{ref}: imported in {time.monotonic() - started:.1f} s")
    listed = listed_images(address)
    for ref, path in archives:
        digest, _ = archive_digest(path)
        if listed.get(ref) != digest:
            raise ImageError(f"after import, containerd lists {ref} as {listed.get(ref)}, "
                             f"not {digest}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("build", "import"):
        p = sub.add_parser(name)
        p.add_argument("--switchboard-bin", default=os.environ.get("SWITCHBOARD_BIN", ""),
                       help="the switchboard release binary (default $SWITCHBOARD_BIN)")
        p.add_argument("--tags", default="0.1.0", help="comma-separated switchboard image tags")
        p.add_argument("--cache", default=DEFAULT_CACHE, help=f"default {DEFAULT_CACHE}")
        if name == "import":
            p.add_argument("--address", required=True, help="containerd's socket")
            p.add_argument("--force", action="store_true", help="import even if already there")
    args = parser.parse_args(argv)
    try:
        archives = build_all(args.switchboard_bin, args.tags.split(","), args.cache)
        if args.command == "import":
            import_all(args.address, archives, force=args.force)
    except ImageError as e:
        print(f"images.py: {e}", file=sys.stderr)
        return 1
    for ref, path in archives:
        print(ref, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
