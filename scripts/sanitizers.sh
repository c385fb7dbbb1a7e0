#!/usr/bin/env bash
# Runs the Swift test suite under AddressSanitizer and ThreadSanitizer (separate build
# folders). The suite includes resolving from several threads while an update runs.
#   scripts/sanitizers.sh [address] [thread]      (default: both)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
kinds=("$@")
((${#kinds[@]})) || kinds=(address thread)
status=0
for kind in "${kinds[@]}"; do
  echo "== swift test -sanitize=$kind"
  # halt_on_error: the first report fails the run; detect_leaks is off because the Swift
  # runtime keeps metadata caches alive until exit by design.
  set +e
  ASAN_OPTIONS=halt_on_error=1:detect_leaks=0 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    swift test --package-path "$root" --scratch-path "$root/.build-$kind" -Xswiftc -sanitize="$kind" 2>&1 \
    | grep -vE '^\[[0-9]+/[0-9]+\]|✔ Test [^ (]+\('
  rc=${PIPESTATUS[0]}
  set -e
  if ((rc != 0)); then status=1; echo "sanitizer $kind: FAILED (exit $rc)"; else echo "sanitizer $kind: clean"; fi
done
exit $status
