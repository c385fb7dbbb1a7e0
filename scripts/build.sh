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

run() {  # run LOG STEP COMMAND...: quiet when it works, the whole output when it fails
  local log=$1 step=$2; shift 2
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    echo "build failed: $step" >&2
    return 1
  fi
}

cmake_library() {
  local log="$build/build-cmake.log"
  local cmake_type=$([[ $config == release ]] && echo Release || echo Debug)
  run "$log" "cmake configure" cmake -G Ninja -S "$root" -B "$build/cmake" -DCMAKE_BUILD_TYPE="$cmake_type" \
      -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib &&
    run "$log" "cmake build" cmake --build "$build/cmake" &&
    run "$log" "cmake install" cmake --install "$build/cmake"
}

# The two builds side by side: a release build of the core optimises the whole module, which
# runs on one core for most of its time, so the library and the tool take a core each.
echo "== cmake: libassetpatch.so, beside swift build ($config): assetpatch CLI"
cmake_library &
cmake_job=$!
# The Swift runtime linked in, as the packages ship it (scripts/package.sh): the same flags
# there make its build a no-op instead of a second build from scratch.
static=$([[ $config == release ]] && echo --static-swift-stdlib || true)
swift_status=0
run "$build/build-swift.log" "swift build" swift build --package-path "$root" -c "$config" --product assetpatch-cli $static \
  || swift_status=$?
cmake_status=0
wait "$cmake_job" || cmake_status=$?
((swift_status == 0 && cmake_status == 0)) || exit 1
install -D -m 0755 "$root/.build/$config/assetpatch-cli" "$prefix/bin/assetpatch"
echo "installed into $prefix"
