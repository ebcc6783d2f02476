# Shared by the benchmark scripts. Sourced, not run.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BENCHMARKS_MD="$SWITCHBOARD_ROOT/BENCHMARKS.md"

# json_field PATH: prints PATH (e.g. '["data"]["id"]') of the JSON document on stdin.
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# release_binary: builds the switchboard binary with BENCH_PROFILE (release unless set; the
# gateway bench uses release-lto, the profile the container image ships) and prints its path.
# scifact_and_binary: the SciFact corpus (SCIFACT_DIR, by default the shared copy beside the
# repository) must be there, and SWITCHBOARD_BIN names a binary (a release build by default).
scifact_and_binary() {
  SCIFACT_DIR="${SCIFACT_DIR:-$SWITCHBOARD_ROOT/../shared/data/scifact}"
  [ -f "$SCIFACT_DIR/corpus.jsonl" ] || { echo "no SciFact corpus in $SCIFACT_DIR" >&2; return 1; }
  if [ -z "${SWITCHBOARD_BIN:-}" ]; then
    ensure_build_tools
    SWITCHBOARD_BIN="$(release_binary)"
  fi
}

# team_key DATA_DIR NAME: makes a team with credits in `dev`'s DATA_DIR and prints a key of it.
team_key() {
  local team
  team="$("$SWITCHBOARD_BIN" admin --data-dir "$1" create-team --name "$2" --credits 1000000 | json_field '["id"]')"
  "$SWITCHBOARD_BIN" admin --data-dir "$1" create-key --team "$team" --name bench | json_field '["key"]'
}

# simd_line: the CPU's SIMD flags that the encoder's speed depends on.
simd_line() {
  echo "SIMD: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni|fma)$' | xargs)"
}

release_binary() {
  local profile="${BENCH_PROFILE:-release}"
  # Explicit: errexit does not reach into the command substitution this runs in.
  (cd "$SWITCHBOARD_ROOT" && cargo build --profile "$profile" --bin switchboard >&2) ||
    { echo "$profile build failed" >&2; return 1; }
  echo "$CARGO_TARGET_DIR/$profile/switchboard"
}

# start_dev DATA_DIR [ENV=VALUE...]: starts `switchboard dev` in the background on a free
# port; sets DEV_PID, BASE_URL, DEMO_KEY and KNOWLEDGEBASE_GRPC.
start_dev() {
  local data_dir="$1"; shift
  local port out
  port="$(free_port)"
  out="$data_dir.out"
  mkdir -p "$data_dir"
  env RUST_LOG=warn "$@" "$SWITCHBOARD_BIN" dev --data-dir "$data_dir" --listen "127.0.0.1:$port" >"$out" 2>"$data_dir.err" &
  DEV_PID=$!
  for _ in $(seq 1 300); do
    grep -q "Stop with" "$out" 2>/dev/null && break
    sleep 0.1
  done
  BASE_URL="$(sed -n 's/^ *API base URL: *//p' "$out")"
  DEMO_KEY="$(sed -n 's/^ *API key (shown once, keep it): *//p' "$out")"
  KNOWLEDGEBASE_GRPC="$(sed -n 's/^ *knowledgebase gRPC: *//p' "$out")"
  [ -n "$BASE_URL" ] || { cat "$data_dir.err" >&2; echo "switchboard dev did not start" >&2; return 1; }
}

# replace_section NAME FILE: puts FILE's content between the NAME markers of BENCHMARKS.md.
replace_section() {
  local name="$1" content="$2"
  python3 - "$BENCHMARKS_MD" "$name" "$content" <<'PY'
import pathlib, sys
path, name, content = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3]).read_text()
start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
text = path.read_text() if path.exists() else "# Benchmarks\n"
block = f"{start}\n{content.rstrip()}\n{end}"
if start in text and end in text:
    before, rest = text.split(start, 1)
    _, after = rest.split(end, 1)
    text = before + block + after
else:
    text = text.rstrip() + "\n\n" + block + "\n"
path.write_text(text)
PY
}

# steal_ticks: the host's stolen CPU ticks and all ticks so far; steal_percent S0 T0 S1 T1: the
# share stolen between two readings, in percent.
steal_ticks() { awk '/^cpu / {print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
steal_percent() { python3 -c "print(round(100 * ($3 - $1) / max(1, $4 - $2), 1))"; }

machine_line() {
  echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u +%Y-%m-%d)."
}

# Each component its own release `serve` process, as in a deployment.
# bench_begin NAME: $work (scratch), $bench_db (a fresh PostgreSQL database), a service token,
# and a free gRPC port and URL variable per component (${port[name]}). Whatever bench_serve and
# bench_gateway start is stopped, and the database dropped (kept with KEEP_DATABASE=1, for
# EXPLAIN ANALYZE), when the script exits; on failure the components' logs are shown.
bench_begin() {
  work="$(mktemp -d)"
  bench_database="sbbench_$1_$$"
  pids=()
  trap bench_end EXIT
  psql "$TEST_DATABASE_URL" -qc "create database $bench_database" >/dev/null
  bench_db="${TEST_DATABASE_URL%/*}/$bench_database"
  export SWITCHBOARD_SERVICE_TOKEN="sbt_bench_$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
  # serve identity seals TOTP secrets with it (docs/configuration.md).
  export SWITCHBOARD_ENCRYPTION_KEYS="bench:$(python3 -c 'import base64, secrets; print(base64.b64encode(secrets.token_bytes(32)).decode())')"
  declare -gA port
  local component
  extra_databases=()
  for component in identity agents knowledgebase conversations crm webhooks; do
    port[$component]="$(free_port)"
    export "SWITCHBOARD_${component^^}_URL=http://127.0.0.1:${port[$component]}"
  done
  mkdir -p "$work/data"
}

bench_end() {
  local status=$?
  if [ "$status" -ne 0 ]; then
    for log in "$work"/*.err; do echo "== $log" >&2; tail -n 20 "$log" >&2; done
  fi
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -z "${KEEP_DATABASE:-}" ]; then
    for database in "$bench_database" "${extra_databases[@]}"; do
      psql "$TEST_DATABASE_URL" -qc "drop database if exists $database" >/dev/null 2>&1 || true
    done
  fi
  rm -rf "$work"
}

# bench_extra_database SUFFIX: another fresh PostgreSQL database (for a second service: each
# has its own migrations table), dropped with the first; prints its URL.
bench_extra_database() {
  local name="${bench_database}_$1"
  psql "$TEST_DATABASE_URL" -qc "create database $name" >/dev/null
  extra_databases+=("$name")
  echo "${TEST_DATABASE_URL%/*}/$name"
}

# bench_serve COMPONENT DATABASE_URL [NAME=VALUE...]: starts it with that environment, waits
# for its "listening" line; sets SERVED_PID.
bench_serve() {
  local component="$1" url="$2"
  shift 2
  env RUST_LOG=warn DATABASE_URL="$url" SWITCHBOARD_DATA_DIR="$work/data" \
    SWITCHBOARD_GRPC_LISTEN="127.0.0.1:${port[$component]}" "$@" \
    "$SWITCHBOARD_BIN" serve "$component" >"$work/$component.out" 2>"$work/$component.err" &
  SERVED_PID=$!
  pids+=("$SERVED_PID")
  for _ in $(seq 1 300); do
    grep -q "listening on" "$work/$component.out" 2>/dev/null && return 0
    sleep 0.1
  done
  cat "$work/$component.err" >&2
  echo "$component did not start in 30 s" >&2
  return 1
}

# bench_gateway [NAME=VALUE...]: the gateway with the standard rate limit out of the way (and
# the given environment); sets $base.
bench_gateway() {
  env RUST_LOG=warn SWITCHBOARD_LISTEN="127.0.0.1:0" SWITCHBOARD_RATE_LIMIT_STANDARD=1000000000 "$@" \
    "$SWITCHBOARD_BIN" serve gateway >"$work/gateway.out" 2>"$work/gateway.err" &
  pids+=("$!")
  for _ in $(seq 1 300); do grep -q "gateway listening on" "$work/gateway.out" 2>/dev/null && break; sleep 0.1; done
  base="$(sed -n 's/^gateway listening on *//p' "$work/gateway.out")"
  [ -n "$base" ] || { cat "$work/gateway.err" >&2; echo "the gateway did not start in 30 s" >&2; return 1; }
}

# bench_wrk PATHS OUT KEY: wrk through the gateway cycling through the paths of the file PATHS
# (one per line, below /v1), 3 s of warm-up then $DURATION with $CONNECTIONS connections; the
# report goes to OUT. Any answer but 200 fails the run.
bench_wrk() {
  local paths="$1" out="$2" key="$3"
  [ -f "$work/paths.lua" ] || cat >"$work/paths.lua" <<'LUA'
local paths, i = {}, 0
function init(args)
  for line in io.lines(args[1]) do paths[#paths + 1] = line end
end
request = function()
  i = i + 1
  return wrk.format("GET", wrk.path .. paths[(i % #paths) + 1])
end
response = function(status)
  if status ~= 200 then io.stderr:write("status " .. status .. "\n") end
end
LUA
  wrk -t1 -c"$CONNECTIONS" -d3s -H "X-API-Key: $key" -s "$work/paths.lua" "$base" -- "$paths" >/dev/null
  wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency -H "X-API-Key: $key" -s "$work/paths.lua" "$base" -- "$paths" \
    2>"$out.err" | tee "$out" >&2
  if [ -s "$out.err" ]; then sort "$out.err" | uniq -c >&2; echo "non-200 answers above" >&2; return 1; fi
}

# owner_session TEAM ROOT WORKDIR: accepts an owner's invitation to TEAM (admin needs
# SWITCHBOARD_BIN and WORKDIR/data) and prints the portal session token (the cookie's value).
owner_session() {
  local team="$1" root="$2" dir="$3" url token
  url="$("$SWITCHBOARD_BIN" admin --data-dir "$dir/data" invite --team "$team" --email "bench-$team@bench.example" \
    --role owner --base-url "$root" | json_field '["url"]')"
  curl -s -D "$dir/accept.headers" -o /dev/null -H 'Content-Type: application/json' \
    -d "{\"token\": \"${url##*/}\", \"password\": \"Bench-quiet-lantern-9f2c\", \"firstName\": \"Bench\", \"lastName\": \"Mark\"}" \
    "$root/v1/auth/accept-invite"
  token="$(sed -n 's/^[Ss]et-[Cc]ookie: switchboard_session=\([A-Za-z0-9]*\);.*/\1/p' "$dir/accept.headers")"
  [ -n "$token" ] || { cat "$dir/accept.headers" >&2; echo "no session cookie" >&2; return 1; }
  echo "$token"
}

# start_nginx DIR: nginx serving DIR's files on a free loopback port, its pid file and error log
# in DIR's parent; sets NGINX_PORT. The caller's trap stops it (kill "$(cat PARENT/nginx.pid)").
start_nginx() {
  local root="$1" parent
  parent="$(dirname "$root")"
  NGINX_PORT="$(free_port)"
  # nginx's workers run as another user: let them read the files.
  chmod -R a+rX "$root"; chmod a+x "$parent"
  cat > "$parent/nginx.conf" <<CONF
worker_processes auto;
pid $parent/nginx.pid;
error_log $parent/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  default_type application/json;
  server { listen 127.0.0.1:$NGINX_PORT; root $root; keepalive_requests 1000000; }
}
CONF
  nginx -c "$parent/nginx.conf"
  sleep 0.3
}
