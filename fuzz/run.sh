#!/usr/bin/env bash
# Builds the libFuzzer targets (swiftc -sanitize=fuzzer,address, the core compiled into each
# target) and runs them.
#   fuzz/run.sh [TARGET...] [-- SECONDS]     targets: manifest zip name range elf inflate index keys delta (default: all); 60 s each
# New crashing inputs land in fuzz/crashes/TARGET/; keep them as regression inputs in
# fuzz/regressions/TARGET/ (replayed by fuzz/run.sh --regressions and by the test suite).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
out="$root/build/fuzz"
# A failed precondition is libFuzzer's to report: Swift's own backtracer, racing ASan's
# handler, can leave the process hanging instead of exiting.
export SWIFT_BACKTRACE=enable=no
mkdir -p "$out"

targets=()
seconds=60
regressions=0
while (($#)); do
  case $1 in
    --) seconds=$2; shift 2;;
    --regressions) regressions=1; shift;;
    *) targets+=("$1"); shift;;
  esac
done
((${#targets[@]})) || targets=(manifest zip name range elf inflate index keys delta)

build() {
  local t=$1 src
  case $t in manifest) src=FuzzManifest.swift;; zip) src=FuzzZip.swift;; name) src=FuzzName.swift;; range) src=FuzzRange.swift;; elf) src=FuzzELF.swift;; inflate) src=FuzzInflate.swift;; index) src=FuzzIndex.swift;; keys) src=FuzzKeys.swift;; delta) src=FuzzDelta.swift;;
    *) echo "unknown target $t" >&2; exit 1;; esac
  if [[ ! -x $out/$t || $root/fuzz/$src -nt $out/$t || -n $(find "$root/Sources/AssetPatchCore" -newer "$out/$t" -name '*.swift' | head -1) ]]; then
    mapfile -t core < <(find "$root/Sources/AssetPatchCore" -name '*.swift' | sort)
    echo "== building fuzz target $t"
    swiftc -parse-as-library -sanitize=fuzzer,address -O -g -module-name AssetPatchFuzz -package-name assetpatch \
      -I "$root/Sources/CCurl" -I "$root/Sources/CZlib" -I "$root/Sources/CCrypto" -I "$root/Sources/CSystem" -I "$root/Sources/CAssetPatchABI" \
      "${core[@]}" "$root/fuzz/$src" -lcurl -lz -lcrypto -o "$out/$t"
  fi
}

for t in "${targets[@]}"; do
  build "$t"
  mkdir -p "$root/fuzz/corpus/$t" "$root/fuzz/regressions/$t" "$root/fuzz/crashes/$t" "$out/corpus-$t"
  if ((regressions)); then
    files=("$root/fuzz/regressions/$t"/*)
    [[ -e ${files[0]} ]] || continue
    echo "== $t: replaying ${#files[@]} regression inputs"
    "$out/$t" "${files[@]}"
    continue
  fi
  echo "== fuzzing $t for $seconds s"
  # Work corpus in build/ (grows); the committed seeds in fuzz/corpus stay small.
  set +e
  "$out/$t" -max_total_time="$seconds" -print_final_stats=1 -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$root/fuzz/crashes/$t/" "$out/corpus-$t" "$root/fuzz/corpus/$t" >"$out/$t.log" 2>&1
  rc=$?
  set -e
  grep -E '^#[0-9]+[[:space:]]+(DONE|INITED)|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|SUMMARY|failure' "$out/$t.log" || true
  if ((rc != 0)); then echo "fuzz target $t FAILED (exit $rc); inputs in fuzz/crashes/$t/, log $out/$t.log"; exit 1; fi
done
