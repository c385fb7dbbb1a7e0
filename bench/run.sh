#!/usr/bin/env bash
# The benchmark: installs what it needs, builds the library (release), runs bench/bench.py and
# writes bench/RESULTS.md. Not part of CI. Takes about 30-40 minutes.
#   bash bench/run.sh [--runs N] [--quick]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/deps.sh"
# The delta tools the differential benchmark compares with (Debian packages), and strace, which
# counts an install's system calls.
tools=(zchunk casync zsync strace)
missing=()
for p in "${tools[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if ((${#missing[@]})); then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
bash "$root/scripts/build.sh"
# The publish benchmark builds the 0.3.0 CLI from git to compare with.
export PATH="/opt/swift/usr/bin:$PATH"
exec python3 "$root/bench/bench.py" "$@"
