# Shared by the benchmark scripts. Sourced, not run.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BENCHMARKS_MD="$SWITCHBOARD_ROOT/BENCHMARKS.md"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

release_binary() {
  (cd "$SWITCHBOARD_ROOT" && cargo build --release --bin switchboard >&2)
  echo "$CARGO_TARGET_DIR/release/switchboard"
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

machine_line() {
  echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u +%Y-%m-%d)."
}
