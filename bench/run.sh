#!/usr/bin/env bash
# The benchmark: installs what it needs, builds the library (release), runs bench/bench.py and
# writes bench/RESULTS.md. Not part of CI. Takes about 5-10 minutes.
#   bash bench/run.sh [--runs N] [--quick]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/deps.sh"
bash "$root/scripts/build.sh"
exec python3 "$root/bench/bench.py" "$@"
