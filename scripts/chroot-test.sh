#!/usr/bin/env bash
# Proof that users need no Swift toolchain: in a fresh Debian 12 root (debootstrap
# --variant=minbase bookworm), with only Debian's own packages besides ours,
#   1. the wheel: a venv, `pip install` of dist/*.whl, a Python session that updates over file://
#      and resolves, and the wheel's `assetpatch` command publishing that release;
#   2. the .debs: `apt-get install ./dist/*.deb` (apt pulls in their Depends from Debian), the
#      README's C example built with pkg-config and run against a release over file:// and over
#      HTTP (python3's http.server in the root), and the CMake consumer's find_package.
# Prints the time from an empty directory to the first working update for each.
#
# Needs root and the network (deb.debian.org) for debootstrap and apt: CI skips it when the
# mirror is unreachable (it says so); run it before a release:
#   bash scripts/chroot-test.sh            (builds dist/ with scripts/package.sh first if empty)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
target=${ASSETPATCH_CHROOT:-/var/tmp/assetpatch-chroot}
passed=0; failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
fail() { failed=$((failed + 1)); echo "not ok - $1"; }
check() { local name=$1; shift; if "$@" >"$target.log" 2>&1; then ok "$name"; else fail "$name"; tail -20 "$target.log" | sed 's/^/    /'; fi; }
in_root() { chroot "$target" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

[[ $(id -u) -eq 0 ]] || { echo "chroot-test.sh needs root" >&2; exit 1; }
if ! curl -fsS -m 10 -o /dev/null "$mirror/dists/bookworm/Release"; then
  echo "skipped: $mirror is unreachable (the chroot proof needs Debian's archive)"
  exit 0
fi
ls "$root"/dist/*.deb >/dev/null 2>&1 && ls "$root"/dist/*.whl >/dev/null 2>&1 || bash "$root/scripts/package.sh"
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null

cleanup() {
  for m in proc dev/pts dev; do mountpoint -q "$target/$m" && umount -l "$target/$m"; done
  [[ -f $target.http.pid ]] && kill "$(cat "$target.http.pid")" 2>/dev/null || true
  rm -f "$target.http.pid"
}
trap cleanup EXIT
cleanup
rm -rf "$target"

echo "== debootstrap --variant=minbase bookworm"
t0=$(date +%s.%N)
debootstrap --variant=minbase bookworm "$target" "$mirror" >"$target.debootstrap.log" 2>&1 \
  || { tail -20 "$target.debootstrap.log"; exit 1; }
mount -t proc proc "$target/proc"
mount --bind /dev "$target/dev"
mount --bind /dev/pts "$target/dev/pts"
cp /etc/resolv.conf "$target/etc/resolv.conf"
t_root=$(date +%s.%N)
check "the root has no Swift toolchain" in_root sh -c '! command -v swift && ! command -v swiftc && ! test -e /opt/swift'

# The release every step updates to: the demo's bundle content, published by the host's CLI
# (any publisher writes the same format).
mkdir -p "$target/work"
cp "$root"/dist/* "$target/work/"
cp -a "$root/examples/v1" "$target/work/assets"
python3 - "$root/README.md" "$target/work/example.c" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
after = text[text.index("Use it from C"):]
block = re.search(r"```c\n(.*?)```", after, re.S).group(1)
# The README's paths, made the test's: the manifest URL comes from the environment.
block = block.replace('"https://cdn.example/mygame/head.json"', 'getenv("MANIFEST_URL")')
block = block.replace('"/var/lib/mygame/assets"', 'getenv("DATA_DIR")').replace('"/usr/share/mygame"', 'getenv("BUNDLE_DIR")')
if "#include <stdlib.h>" not in block:
    block = "#include <stdlib.h>\n" + block
open(sys.argv[2], "w").write(block)
EOF
mkdir -p "$target/work/bundle"

echo "== the wheel, in a venv (before any .deb is installed)"
t1=$(date +%s.%N)
check "apt installs python3-venv from Debian" in_root sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null'
check "pip installs the wheel" in_root sh -c 'python3 -m venv /work/venv && /work/venv/bin/pip install -q --no-index /work/*.whl'
check "the wheel's assetpatch command publishes" in_root /work/venv/bin/assetpatch publish /work/assets --repo /work/repo --package chroot
cat >"$target/work/session.py" <<'EOF'
import assetpatch, os, sys
with assetpatch.Client("/work/py-data", "/work/bundle", manifest_url="file:///work/repo/head.json", variants=["@3x", "@2x", ""]) as c:
    assert c.update() is True and c.current_version == 1, c.last_check
    path = c.resolve("sub/sample.png")
    assert "/work/py-data/releases/" in path and "/sub/sample@" in path and os.path.getsize(path) > 0, path
    lib = [l.split()[-1] for l in open("/proc/self/maps") if "libassetpatch.so.1" in l]
    print("resolved", path, "with", lib[0])
    assert "/site-packages/assetpatch/" in lib[0], lib
EOF
check "a Python session updates and resolves with the wheel's own library" in_root /work/venv/bin/python /work/session.py
t_wheel=$(date +%s.%N)

echo "== the .debs, with apt"
t2=$(date +%s.%N)
check "apt installs the three packages and pulls their Depends from Debian" in_root sh -c \
  'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /work/libassetpatch1_*.deb /work/libassetpatch-dev_*.deb /work/assetpatch_*.deb gcc libc6-dev pkg-config >/dev/null'
check "every other installed package comes from Debian's archive" in_root sh -c '
  for p in $(dpkg-query -W -f="\${Package}\n"); do
    case $p in libassetpatch1|libassetpatch-dev|assetpatch) continue;; esac
    apt-cache policy "$p" | grep -q "deb.debian.org\|/var/lib/dpkg/status" || { echo "$p: not from Debian"; exit 1; }
  done'
check "pkg-config finds assetpatch" in_root pkg-config --exists assetpatch
check "the README's C example builds with pkg-config" in_root sh -c 'cc -Wall -Wextra -Werror /work/example.c $(pkg-config --cflags --libs assetpatch) -o /work/example'
check "it updates over file:// and resolves" in_root sh -c \
  'MANIFEST_URL=file:///work/repo/head.json DATA_DIR=/work/c-data BUNDLE_DIR=/work/bundle /work/example | grep -q "^/work/c-data/releases/.*/sub/sample@"'
t_deb=$(date +%s.%N)
port=$((20000 + RANDOM % 20000))
in_root python3 -m http.server --bind 127.0.0.1 --directory /work "$port" >/dev/null 2>&1 &
echo $! >"$target.http.pid"
for _ in $(seq 1 100); do curl -fsS -m 1 -o /dev/null "http://127.0.0.1:$port/repo/head.json" 2>/dev/null && break; sleep 0.2; done
check "it updates over HTTP (python3 http.server in the root)" in_root sh -c \
  "MANIFEST_URL=http://127.0.0.1:$port/repo/head.json DATA_DIR=/work/http-data BUNDLE_DIR=/work/bundle /work/example | grep -q '^/work/http-data/releases/.*/sub/sample@'"
check "the packaged CLI verifies the repository" in_root assetpatch verify /work/repo
check "the package installs the manual page and bash, zsh and fish completions" in_root sh -c \
  'zcat /usr/share/man/man1/assetpatch.1.gz | grep -q "^\.Sh SYNOPSIS" && zcat /usr/share/man/man1/assetpatch.1.gz | grep -q "rollback-release" && grep -q assetpatch /usr/share/bash-completion/completions/assetpatch &&
   test -s /usr/share/zsh/vendor-completions/_assetpatch && test -s /usr/share/fish/vendor_completions.d/assetpatch.fish' 
check "the CMake package is found (find_package)" in_root sh -c '
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cmake make >/dev/null &&
  mkdir -p /work/cm && printf "cmake_minimum_required(VERSION 3.25)\nproject(c C)\nfind_package(assetpatch REQUIRED)\nadd_executable(example /work/example.c)\ntarget_link_libraries(example assetpatch::assetpatch)\n" >/work/cm/CMakeLists.txt &&
  cmake -S /work/cm -B /work/cm/build >/dev/null && cmake --build /work/cm/build >/dev/null'
check "the wheel's and the package's libraries export the same symbols" bash -c "
  diff <(nm -D --defined-only \$(ls -d '$target'/work/venv/lib/python3*/site-packages/assetpatch/_native)/libassetpatch.so.1 | awk '{print \$3}' | sort) \
       <(nm -D --defined-only '$target'/usr/lib/*/libassetpatch.so.1 | awk '{print \$3}' | sort)"

secs() { python3 -c "print(f'{$2 - $1:.1f}')"; }
echo "times: debootstrap $(secs "$t0" "$t_root") s; wheel path (python3-venv, pip install, first update) $(secs "$t1" "$t_wheel") s; .deb path (apt install with gcc and pkg-config, build, first update) $(secs "$t2" "$t_deb") s"
echo "sizes: $(cd "$root/dist" && for f in *; do printf '%s %s KiB; ' "$f" "$(du -k "$f" | cut -f1)"; done)"
echo "$passed passed, $failed failed"
((failed == 0))
