#!/usr/bin/env bash
# Builds everything into build/: the library with CMake (installed into build/prefix with
# its header, pkg-config file and CMake package), and the command-line tool with SwiftPM
# (installed as build/prefix/bin/assetpatch).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
build="$root/build"
prefix="$build/prefix"
config=${ASSETPATCH_BUILD_CONFIG:-release}

echo "== swift build ($config): assetpatch CLI"
swift build --package-path "$root" -c "$config" --product assetpatch-cli 2>&1 | grep -vE '^\[[0-9]+/[0-9]+\]' || true
test -x "$root/.build/$config/assetpatch-cli"

echo "== cmake: libassetpatch.so"
cmake_type=$([[ $config == release ]] && echo Release || echo Debug)
cmake -G Ninja -S "$root" -B "$build/cmake" -DCMAKE_BUILD_TYPE="$cmake_type" -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build "$build/cmake" >/dev/null
cmake --install "$build/cmake" >/dev/null
install -D -m 0755 "$root/.build/$config/assetpatch-cli" "$prefix/bin/assetpatch"
echo "installed into $prefix"
