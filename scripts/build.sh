#!/usr/bin/env bash
# Builds everything into build/: the library with CMake (installed into build/prefix with
# its header, pkg-config file and CMake package), and the command-line tool with SwiftPM
# (installed as build/prefix/bin/assetpatch). Any failed step stops the script with the
# build's own error output.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
build="$root/build"
prefix="$build/prefix"
config=${ASSETPATCH_BUILD_CONFIG:-release}
mkdir -p "$build"
log="$build/build.log"

run() {  # run STEP COMMAND...: quiet when it works, the whole output when it fails
  local step=$1; shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    echo "build failed: $step" >&2
    exit 1
  fi
}

echo "== swift build ($config): assetpatch CLI"
# The Swift runtime linked in, as the packages ship it (scripts/package.sh): the same flags
# there make its build a no-op instead of a second build from scratch.
static=$([[ $config == release ]] && echo --static-swift-stdlib || true)
run "swift build" swift build --package-path "$root" -c "$config" --product assetpatch-cli $static

echo "== cmake: libassetpatch.so"
cmake_type=$([[ $config == release ]] && echo Release || echo Debug)
run "cmake configure" cmake -G Ninja -S "$root" -B "$build/cmake" -DCMAKE_BUILD_TYPE="$cmake_type" -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib
run "cmake build" cmake --build "$build/cmake"
run "cmake install" cmake --install "$build/cmake"
install -D -m 0755 "$root/.build/$config/assetpatch-cli" "$prefix/bin/assetpatch"
echo "installed into $prefix"
