#!/usr/bin/env bash
# Writes Sources/AssetPatch/hot-symbols.txt: the functions of libassetpatch.so that a host's
# session runs, which the link lays out together (CMakeLists.txt, docs/architecture.md
# "Memory"). The kernel maps a shared object's code in 64 KiB blocks, so code an update runs
# that is not in the list costs a block of mapped memory wherever it falls.
#
# The session (scripts/hot-symbols/host.c) runs under valgrind's callgrind, which names every
# function executed: full updates of a signed 1,000-file release over a private nginx (by its
# head and index pages, and by its single manifest), then a differential update to the next
# release, each followed by resolves with variants and the fetch of the release's group; and a
# full update from file://. Run it after changes to the code an update runs (the e2e tests
# fail when more than 2% of the list is no longer in the library), then rebuild.
#   scripts/hot-symbols.sh        (uses build/prefix; builds it first when missing)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix="$root/build/prefix"
out="$root/Sources/AssetPatch/hot-symbols.txt"
export PATH="/opt/swift/usr/bin:$PATH"

if ! command -v valgrind >/dev/null; then
  [[ $(id -u) == 0 ]] || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
  apt-get install -y -q valgrind >/dev/null
fi
[[ -f "$prefix/lib/libassetpatch.so.1" ]] || "$root/scripts/build.sh"
lib=$(readlink -f "$prefix/lib/libassetpatch.so.1")
cli="$prefix/bin/assetpatch"

work=$(mktemp -d "${TMPDIR:-/tmp}/assetpatch-hot.XXXXXX")
source "$root/Tests/e2e/nginx.sh"
trap 'nginx_stop; rm -rf "$work"' EXIT
cc -O2 -Wall -I"$prefix/include" "$root/scripts/hot-symbols/host.c" -L"$prefix/lib" -lassetpatch -o "$work/host"
export LD_LIBRARY_PATH="$prefix/lib"

# A release like a game's: many small files in folders, variants, a large pack file (chunked).
python3 - "$work/v1" "$work/bundle" <<'PY'
import os, random, sys
src, bundle = sys.argv[1], sys.argv[2]
rnd = random.Random(7)
for i in range(1000):
    d = os.path.join(src, f"levels/{i % 97:02d}/{i % 5}" if i % 3 else f"images/{i // 3 % 10}")
    os.makedirs(d, exist_ok=True)
    j = i // 3  # every third file an image, each in three variants
    name = f"asset{i}.txt" if i % 3 else f"sprite{j // 30}{['', '@2x', '@3x'][j // 10 % 3]}.png"
    body = (f"asset {i}\n" * rnd.randint(10, 400)).encode() if i % 3 else rnd.randbytes(rnd.randint(1000, 20000))
    open(os.path.join(d, name), "wb").write(body)
open(os.path.join(src, "pack.bin"), "wb").write(rnd.randbytes(6 << 20))
os.makedirs(os.path.join(bundle, "images"), exist_ok=True)
open(os.path.join(bundle, "images/icon.png"), "wb").write(b"bundled")
PY
cp -a "$work/v1" "$work/v2"
python3 - "$work/v2" <<'PY'
import os, random, sys
src = sys.argv[1]
rnd = random.Random(8)
for i in range(0, 1000, 37):
    p = os.path.join(src, f"levels/{i % 97:02d}/{i % 5}/asset{i}.txt")
    if os.path.exists(p): open(p, "a").write("changed\n")
with open(os.path.join(src, "pack.bin"), "r+b") as f:
    f.seek(3 << 20); f.write(rnd.randbytes(100000))
PY

"$cli" keygen --out "$work/key" >/dev/null
key=$(cat "$work/key.pub")
"$cli" publish "$work/v1" --repo "$work/repo" --package hot --key "$work/key" --group 'far=levels/9*' >/dev/null
nginx_start "$work" "$work/nginx"
url="http://127.0.0.1:$NGINX_PORT/repo/head.json"
names="levels/01/1/asset1.txt images/3/sprite1.png images/icon.png pack.bin missing.txt"

profile() {  # profile NAME DATA_DIR URL KEY: one session under callgrind
  valgrind --tool=callgrind --callgrind-out-file="$work/$1.cg" --demangle=no --compress-strings=no --compress-pos=no \
    "$work/host" "$2" "$3" "$work/bundle" "$4" $names 2>"$work/$1.log" || { cat "$work/$1.log" >&2; exit 1; }
}
echo "== profiling: full update over HTTP, signed head and index pages"
profile http-full "$work/data" "$url" "$key"
echo "== profiling: full update over HTTP, single manifest"
profile http-manifest "$work/data-manifest" "http://127.0.0.1:$NGINX_PORT/repo/manifest.json" -
"$cli" publish "$work/v2" --repo "$work/repo" --key "$work/key" --group 'far=levels/9*' >/dev/null
echo "== profiling: differential update over HTTP"
profile http-diff "$work/data" "$url" "$key"
echo "== profiling: full update from file://"
profile file-full "$work/data-file" "file://$work/repo/head.json" "$key"

# Every function of the library that ran, by the name the library's symbol table gives it
# (callgrind marks a function entered again inside its own call with a 'N suffix).
python3 - "$lib" "$out" "$work"/*.cg <<'PY'
import re, subprocess, sys
lib, out, profiles = sys.argv[1], sys.argv[2], sys.argv[3:]
defined = set(l.split()[-1] for l in subprocess.run(["nm", "--defined-only", lib], capture_output=True, text=True, check=True).stdout.splitlines())
ran = set()
for path in profiles:
    obj = ""
    for line in open(path):
        if line.startswith("ob="):
            obj = line[3:].strip()
        elif line.startswith("fn=") and "libassetpatch" in obj:
            ran.add(re.sub(r"'\d+$", "", line[3:].strip()))
hot = sorted(ran & defined)
open(out, "w").write("".join(n + "\n" for n in hot))
print(f"{len(hot)} functions written to {out} ({len(ran - defined)} without a symbol)")
PY
