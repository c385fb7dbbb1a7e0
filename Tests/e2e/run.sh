#!/usr/bin/env bash
# End-to-end tests against the installed library (build/prefix): the C ABI over file:// and
# over a real nginx on 127.0.0.1, the CLI's contract, the shared object's exports and
# dependencies, and a CMake find_package consumer. Closes with "N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix="$root/build/prefix"
work=$(mktemp -d "${TMPDIR:-/tmp}/assetpatch-e2e.XXXXXX")
source "$here/nginx.sh"
trap 'nginx_stop; rm -rf "$work"' EXIT

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cli="$prefix/bin/assetpatch"
passed=0
failed=0

check() {  # check NAME COMMAND...: one shell-level assertion
  local name=$1; shift
  if "$@" >"$work/check.out" 2>&1; then
    passed=$((passed + 1)); echo "ok - $name"
  else
    failed=$((failed + 1)); echo "not ok - $name"; sed 's/^/    /' "$work/check.out" | tail -20
  fi
}

count_program() {  # adds a test program's closing "N passed, N failed" line to the totals
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
  if [[ -z $line ]]; then
    failed=$((failed + 1)); echo "not ok - $2 printed no summary"; return
  fi
  passed=$((passed + $(awk '{print $1}' <<<"$line")))
  failed=$((failed + $(awk '{print $3}' <<<"$line")))
}

echo "== shared object"
lib="$prefix/lib/libassetpatch.so.1"
check "soname is libassetpatch.so.1" bash -c "readelf -d '$lib' | grep -q 'Library soname: \[libassetpatch.so.1\]'"
check "no Swift runtime among NEEDED" bash -c "! readelf -d '$lib' | grep NEEDED | grep -Eq 'libswift|libFoundation|libdispatch|libBlocksRuntime'"
check "exports only assetpatch_* symbols" bash -c "nm -D --defined-only '$lib' | awk '{print \$3}' | grep -v '^assetpatch_' | grep -v '^LIBASSETPATCH_1$' | (! grep .)"
check "libstdc++ is inside, hidden: not NEEDED, no GLIBCXX symbol asked for" bash -c "
  ! readelf -d '$lib' | grep NEEDED | grep -q 'libstdc++' && ! nm -D --undefined-only '$lib' | grep -Eq 'GLIBCXX|CXXABI'"
# The layout of the code an update runs comes from a profile by name (scripts/hot-symbols.sh):
# names that changed since lie where the link put them, and each costs a 64 KiB block.
check "hot-symbols.txt still names the library's code (>= 98%; else run scripts/hot-symbols.sh)" bash -c "
  total=\$(wc -l <'$root/Sources/AssetPatch/hot-symbols.txt')
  found=\$(nm --defined-only '$lib' | awk '{print \$3}' | sort -u | comm -12 - <(sort -u '$root/Sources/AssetPatch/hot-symbols.txt') | wc -l)
  echo \"\$found of \$total\"; (( total > 1000 && found * 50 >= total * 49 ))"
check "exports equal the header's functions" bash -c "
  diff <(nm -D --defined-only '$lib' | awk '{print \$3}' | sed 's/@.*//' | grep '^assetpatch_' | sort) \
       <(grep -oE '^[A-Za-z_ *]*\bassetpatch_[a-z_]+\(' '$prefix/include/assetpatch.h' | grep -oE 'assetpatch_[a-z_]+\(' | tr -d '(' | sort -u)"

echo "== build the C programs against the installed library (pkg-config)"
cflags=$(pkg-config --cflags --libs assetpatch)
check "example builds with pkg-config" cc -Wall -Wextra -Werror "$root/bindings/c/example.c" $cflags -o "$work/example"
check "ABI tests build with pkg-config" cc -Wall -Wextra -Werror "$root/bindings/c/tests/test_abi.c" $cflags -o "$work/test_abi"

echo "== fixtures"
check "fixtures are published" python3 "$here/fixtures.py" --cli "$cli" --out "$work/fx"
for z in "$work"/fx/repos/v1/archives/*.zip "$work"/fx/repos/v2/archives/*.zip; do
  check "unzip -t accepts $(basename "$(dirname "$(dirname "$z")")")/$(basename "$z" | cut -c1-12)" unzip -tq "$z"
done

echo "== C ABI over file://"
mkdir -p "$work/file"
"$work/test_abi" "$work/fx" "file://$work/fx/repos" "$work/file" | tee "$work/abi-file.log"
count_program "$work/abi-file.log" "test_abi (file://)"

echo "== C ABI over nginx on 127.0.0.1"
if nginx_start "$work/fx" "$work/nginx"; then
  mkdir -p "$work/http"
  "$work/test_abi" "$work/fx" "http://127.0.0.1:$NGINX_PORT/repos" "$work/http" | tee "$work/abi-http.log"
  count_program "$work/abi-http.log" "test_abi (http)"
  check "example updates over http and resolves" bash -c "
    '$work/example' '$work/ex-http' '$work/fx/bundle' 'http://127.0.0.1:$NGINX_PORT/repos/v2/manifest.json' readme.txt sub/sample.png \
      | grep -q 'sub/sample.png -> $work/ex-http/releases/.*/sub/sample@3x.png'"
  check "cli inspect reads an http manifest" bash -c "'$cli' inspect 'http://127.0.0.1:$NGINX_PORT/repos/v2/manifest.json' | grep -q 'version:  2'"
  nginx_stop
else
  failed=$((failed + 1)); echo "not ok - nginx did not start"
fi

echo "== command-line tool"
bash "$here/cli.sh" "$cli" "$work/cli" | tee "$work/cli.log"
count_program "$work/cli.log" "cli.sh"

echo "== release management: channels, promotion, rollouts, key rotation (the CLI)"
bash "$here/release_management.sh" "$cli" "$work/rm" | tee "$work/rm.log"
count_program "$work/rm.log" "release_management.sh"

echo "== C++ wrapper (g++ -std=c++17 with pkg-config, and through CMake)"
check "C++ tests build with g++ and pkg-config" g++ -std=c++17 -Wall -Wextra -Werror -I"$root/bindings/cpp" \
  "$root/bindings/cpp/tests/test_wrapper.cpp" $cflags -o "$work/test_wrapper"
mkdir -p "$work/cpp"
"$work/test_wrapper" "$work/fx" "$work/cpp" | tee "$work/cpp.log"
count_program "$work/cpp.log" "test_wrapper (g++)"
check "C++ try_* tests build with -fno-exceptions" g++ -std=c++17 -Wall -Wextra -Werror -fno-exceptions -I"$root/bindings/cpp" \
  "$root/bindings/cpp/tests/test_no_exceptions.cpp" $cflags -o "$work/test_no_exceptions"
mkdir -p "$work/cpp-noexc"
"$work/test_no_exceptions" "$work/fx" "$work/cpp-noexc" | tee "$work/cpp-noexc.log"
count_program "$work/cpp-noexc.log" "test_no_exceptions (g++ -fno-exceptions)"
# A throwing call compiles with exceptions and is not declared without them (it could only abort).
throwing='#include "assetpatch.hpp"
int main() { assetpatch::client c("/tmp/x"); return (int)c.resolve("a").string().size(); }'
check "C++ throwing calls compile with exceptions" bash -c "g++ -std=c++17 -fsyntax-only -I'$root/bindings/cpp' $cflags -x c++ - <<< '$throwing'"
check "C++ throwing calls are not declared under -fno-exceptions" bash -c "! g++ -std=c++17 -fno-exceptions -fsyntax-only -I'$root/bindings/cpp' $cflags -x c++ - <<< '$throwing' 2>/dev/null"
check "C++ tests build with ThreadSanitizer" g++ -std=c++17 -g -O1 -fsanitize=thread -I"$root/bindings/cpp" \
  "$root/bindings/cpp/tests/test_wrapper.cpp" $cflags -o "$work/test_wrapper_tsan"
mkdir -p "$work/cpp-tsan"
TSAN_OPTIONS="halt_on_error=1 exitcode=66 suppressions=$root/bindings/cpp/tests/tsan.supp" "$work/test_wrapper_tsan" "$work/fx" "$work/cpp-tsan" > "$work/cpp-tsan.log" 2>&1
tsan_status=$?
count_program "$work/cpp-tsan.log" "test_wrapper (ThreadSanitizer)"
check "ThreadSanitizer reports no race in the C++ wrapper" bash -c "(( $tsan_status == 0 )) && ! grep -q 'ThreadSanitizer' '$work/cpp-tsan.log' || { cat '$work/cpp-tsan.log'; false; }"
check "C++ example and tests build through CMake find_package" bash -c "
  cmake -G Ninja -S '$root/bindings/cpp' -B '$work/cpp-cmake' -DCMAKE_PREFIX_PATH='$prefix' >/dev/null && cmake --build '$work/cpp-cmake' >/dev/null"
mkdir -p "$work/cpp2"
"$work/cpp-cmake/test_wrapper" "$work/fx" "$work/cpp2" > "$work/cpp2.log"
count_program "$work/cpp2.log" "test_wrapper (CMake)"
check "C++ example updates and resolves" bash -c "
  '$work/cpp-cmake/assetpatch-example-cpp' '$work/cpp-ex' '$work/fx/bundle' 'file://$work/fx/repos/v2/manifest.json' readme.txt 2>/dev/null \
    | grep -q 'readme.txt -> $work/cpp-ex/releases/'"

echo "== CMake consumer (find_package)"
check "find_package(assetpatch) consumer builds" cmake -G Ninja -S "$here/cmake-consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix"
check "consumer compiles and links" cmake --build "$work/consumer"
check "consumer runs" "$work/consumer/consumer"

echo "== Swift package: examples/swift (depends on this repository by path) updates and resolves"
swift_example="$root/examples/swift"
if swift build --package-path "$swift_example" >"$work/swift-example.log" 2>&1; then
  passed=$((passed + 1)); echo "ok - examples/swift builds with AssetPatchKit"
  mkdir -p "$work/swift-ex/assets/sprites" "$work/swift-ex/bundle/sprites"
  echo "hero 2x" >"$work/swift-ex/assets/sprites/hero@2x.png"
  echo "bundle hero" >"$work/swift-ex/bundle/sprites/hero.png"
  echo "readme" >"$work/swift-ex/assets/readme.txt"
  "$cli" keygen --out "$work/swift-ex/key" >/dev/null
  "$cli" publish "$work/swift-ex/assets" --repo "$work/swift-ex/repo" --key "$work/swift-ex/key" >/dev/null
  demo_bin="$swift_example/.build/debug/UpdateDemo"
  demo_args=("$work/swift-ex/data" "$work/swift-ex/bundle" "file://$work/swift-ex/repo/manifest.json" "$(cat "$work/swift-ex/key.pub")" sprites/hero.png readme.txt)
  "$demo_bin" "${demo_args[@]}" >"$work/swift-ex/out1" 2>&1
  "$demo_bin" "${demo_args[@]}" >"$work/swift-ex/out2" 2>&1
  sed 's/^/    /' "$work/swift-ex/out1"
  check "the Swift example installs version 1 with progress through every phase" bash -c '
    grep -q "^installed version 1$" "$1" && for p in check download install activate done; do grep -q "^  $p " "$1" || exit 1; done' _ "$work/swift-ex/out1"
  hero=$(sed -n 's/^sprites\/hero\.png -> \(.*\) (variant 1)$/\1/p' "$work/swift-ex/out1")
  check "it resolves the release's @2x file (variant 1)" bash -c '[[ $1 == "$2"/data/releases/*/files/sprites/hero@2x.png ]] && cmp "$1" "$2/assets/sprites/hero@2x.png"' _ "$hero" "$work/swift-ex"
  check "and a plain file (variant 2, the plain name)" grep -qE "^readme.txt -> $work/swift-ex/data/releases/[^ ]+/files/readme.txt \(variant 2\)$" "$work/swift-ex/out1"
  check "a second run finds it current" grep -q '^already current (version 1)$' "$work/swift-ex/out2"
  check "a wrong public key is a signature error" bash -c '
    ! "$1" "$2/data2" "$2/bundle" "file://$2/repo/manifest.json" AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= >"$2/out3" 2>&1 &&
      grep -q ASSETPATCH_ERR_SIGNATURE "$2/out3"' _ "$demo_bin" "$work/swift-ex"
else
  failed=$((failed + 1)); echo "not ok - examples/swift builds with AssetPatchKit"; tail -30 "$work/swift-example.log" | sed 's/^/    /'
fi

echo "== documentation: every code block of the README and docs/, compiled or run"
mkdir -p "$work/docs"
python3 "$here/docblocks.py" "$root" "$prefix" "$work/docs" > "$work/docs.log" 2>&1
cat "$work/docs.log"
count_program "$work/docs.log" "docblocks.py"

echo "== the core's folders are layers: no file uses a type of a folder above its own"
check "no upward reference between the core's folders (layers.py)" python3 "$here/layers.py" "$root"

echo "== one source for each fact: version and status tables against the header"
python3 "$here/consistency.py" "$root" "$prefix" | tee "$work/consistency.log"
count_program "$work/consistency.log" "consistency.py"

echo "== the header's hand-made mirrors: Python ctypes structures (sizeof, offsetof) and prototypes"
python3 "$here/abi_mirrors.py" "$prefix/include" "$root/bindings/python" "$work/mirrors" > "$work/mirrors.log" 2>&1
grep -v '^ok - ' "$work/mirrors.log" || true
count_program "$work/mirrors.log" "abi_mirrors.py"

echo "$passed passed, $failed failed"
((failed == 0))
