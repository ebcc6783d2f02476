#!/usr/bin/env bash
# Builds the Kubernetes server binaries once, from Debian bookworm's `kubernetes` source package
# (1.20.5+really1.20.2, the whole tree with vendor/), offline with Debian's Go; and the pause
# image's binary from the same tree. No registry or Go module proxy is reachable here
# (../shared/design/TOOLCHAIN.md). The result lives outside the work tree, in KUBE_CACHE/bin;
# a second call finds it there and returns at once. With --check it only says whether they are
# there (exit 0) or not (exit 3).
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
KUBE_CACHE="${KUBE_CACHE:-$HOME/.cache/switchboard/kube}"
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
bin="$KUBE_CACHE/bin"

patches="$(cd "$(dirname "$0")" && pwd)/patches"
# The binaries are made from the source with these patches: another set makes them again.
patch_sum=$(cat "$patches"/*.patch | sha256sum | cut -c1-16)
built() {
  [ "$(cat "$bin/patches.sum" 2>/dev/null)" = "$patch_sum" ] || return 1
  for binary in "${BINARIES[@]}" pause; do [ -x "$bin/$binary" ] || return 1; done
}
if built; then exit 0; fi
# --check: only say whether they are built (exit 3 when not).
if [ "${1:-}" = --check ]; then exit 3; fi

started=$(date +%s)
if [ ! -f /etc/apt/sources.list.d/switchboard-deb-src.sources ]; then
  # The source package's line, beside the machine's own binary lines.
  sed -n '/^Types: deb$/,/^$/p' /etc/apt/sources.list.d/debian.sources | sed 's/^Types: deb$/Types: deb-src/' \
    | as_root tee /etc/apt/sources.list.d/switchboard-deb-src.sources >/dev/null
  as_root apt-get update -q >/dev/null
fi
ensure_packages dpkg-dev golang-go golang-github-modern-go-reflect2-dev build-essential rsync

src="$KUBE_CACHE/src"
mkdir -p "$src" "$bin"
tree=$(find "$src" -maxdepth 1 -type d -name 'kubernetes-*' | head -n 1)
if [ -z "$tree" ]; then
  (cd "$src" && apt-get source -q kubernetes >/dev/null 2>&1) || { echo "apt-get source kubernetes failed" >&2; exit 1; }
  tree=$(find "$src" -maxdepth 1 -type d -name 'kubernetes-*' | head -n 1)
fi
# reflect2 1.0.1 reads runtime internals that Go 1.18 changed; 1.0.2 is the fixed release.
reflect2="$tree/vendor/github.com/modern-go/reflect2"
replace_reflect2() {
  rsync -a --delete --exclude '.switchboard-1.0.2' /usr/share/gocode/src/github.com/modern-go/reflect2/ "$reflect2/"
  touch "$reflect2/.switchboard-1.0.2"
}
[ -f "$reflect2/.switchboard-1.0.2" ] || replace_reflect2
# Each patch once; a tree patched with another set is unpacked again.
if [ "$(cat "$tree/.switchboard-patches.sum" 2>/dev/null || echo none)" != "$patch_sum" ]; then
  if [ -f "$tree/.switchboard-patches.sum" ]; then
    rm -rf "$tree"
    (cd "$src" && dpkg-source -x -q ./*.dsc >/dev/null) || { echo "unpacking the source again failed" >&2; exit 1; }
    replace_reflect2
  fi
  for file in "$patches"/*.patch; do
    patch -d "$tree" -p1 -s --forward <"$file" || { echo "patch $file failed" >&2; exit 1; }
  done
  echo "$patch_sum" >"$tree/.switchboard-patches.sum"
  rm -f "${BINARIES[@]/#/$bin/}"
fi
export GOFLAGS=-mod=vendor GO111MODULE=on GOPROXY=off GOTOOLCHAIN=local
for binary in "${BINARIES[@]}"; do
  [ -x "$bin/$binary" ] && continue
  echo "building $binary (once; cached in $bin)" >&2
  (cd "$tree" && nice -n 19 make WHAT="cmd/$binary" >"$KUBE_CACHE/build-$binary.log" 2>&1) \
    || { tail -n 30 "$KUBE_CACHE/build-$binary.log" >&2; exit 1; }
  cp "$tree/_output/bin/$binary" "$bin/$binary"
done
if [ ! -x "$bin/pause" ]; then
  gcc -Os -static -DVERSION=switchboard -o "$bin/pause" "$tree/build/pause/linux/pause.c"
fi
echo "$patch_sum" >"$bin/patches.sum"
echo "kubernetes built in $(( $(date +%s) - started )) s" | tee -a "$KUBE_CACHE/build-time.txt" >&2
