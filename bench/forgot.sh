#!/usr/bin/env bash
# Whether POST /v1/auth/forgot tells a known address from an unknown one by its time (issue 53,
# finding 7): `switchboard dev` (release) pinned to core 0, the client (bench/forgot.py) on
# core 1; N known and N unknown addresses, interleaved, each asked once. Prints the CPU model,
# its SIMD flags and the host's steal time over the run; writes the "forgot" section of
# BENCHMARKS.md. SWITCHBOARD_BIN=<a built binary> skips the build; N (200) sets the count.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ensure_build_tools
ensure_packages util-linux
SWITCHBOARD_BIN="${SWITCHBOARD_BIN:-$(release_binary)}"
N="${N:-200}"
work="$(mktemp -d)"
trap 'kill "${DEV_PID:-}" 2>/dev/null; sleep 1; rm -rf "$work"' EXIT

read -r steal0 total0 < <(steal_ticks)
port="$(free_port)"
env RUST_LOG=warn SWITCHBOARD_SIGNUP=open SWITCHBOARD_TRUSTED_PROXIES=127.0.0.0/8 \
  SWITCHBOARD_RATE_LIMIT_AUTH=1000000 taskset -c 0 "$SWITCHBOARD_BIN" dev --data-dir "$work/data" \
  --listen "127.0.0.1:$port" >"$work/out" 2>"$work/err" &
DEV_PID=$!
for _ in $(seq 1 300); do grep -q "Stop with" "$work/out" 2>/dev/null && break; sleep 0.1; done
BASE_URL="$(sed -n 's/^ *API base URL: *//p' "$work/out")"
[ -n "$BASE_URL" ] || { cat "$work/err" >&2; echo "switchboard dev did not start" >&2; exit 1; }
result="$(taskset -c 1 timeout 900 python3 "$BENCH_DIR/forgot.py" "$BASE_URL" "$N")"
read -r steal1 total1 < <(steal_ticks)
steal="$(steal_percent "$steal0" "$total0" "$steal1" "$total1")"
flags="$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni|avx_vnni)$' | xargs)"
echo "$result"
section="$work/section.md"
python3 - "$result" "$(machine_line)" "$flags" "$steal" "$N" >"$section" <<'PY'
import json, sys
result, machine, flags, steal, n = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
print("## Password-reset requests: known and unknown addresses (issue 53)\n")
print(f"{machine} SIMD: {flags or 'none of avx2/avx512'}. Steal time over the run: {steal} %.\n")
print(f"`bench/forgot.sh`: release `switchboard dev` on core 0, one client on core 1, {n} addresses with an")
print("account and as many without, interleaved, each asked once from a client address of its own.")
print("The reference is the unknown address: the answer must not take longer for a known one.\n")
print("| address | median ms | p90 ms | p99 ms |")
print("|---|---|---|---|")
for kind in ("known", "unknown"):
    r = result[kind]
    print(f"| {kind} | {r['median']} | {r['p90']} | {r['p99']} |")
print(f"\nEvery answer the same 202 body but for the address: {'yes' if result['same_body'] else 'NO'}.")
PY
cat "$section"
replace_section forgot "$section"
