#!/usr/bin/env bash
# Everything the crash-state explorer has (the test command runs a sample of it):
# - every crash state of every flow under both file-system models (Tests/crash/model.py says
#   what each allows), each opened by the library and checked (Tests/crash/verdict.py);
# - the mutation gate: each kind of sync the library issues taken out of the traces in turn,
#   which must allow a state that fails the check, or be listed with the reason it is not
#   needed (Tests/crash/crashstates.py, NOT_NEEDED);
# - the real file systems: flows stopped mid-way on loop-mounted ext4, xfs and btrfs images,
#   the images copied unsynced, repaired, mounted and checked the same way, and the same with
#   every fsync turned into a no-op, which must be caught (Tests/crash/realfs.py; skipped with
#   a line saying why where loop devices or the file systems' tools are missing).
# Writes bench/CRASHSTATES.md.
#   scripts/crashstates.sh [--sample N]      (N: states a flow and model; default every state)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[[ -x $root/build/prefix/bin/assetpatch ]] || bash "$root/scripts/build.sh"
if [[ $(id -u) == 0 ]] && ! { command -v mkfs.xfs && command -v mkfs.btrfs; } >/dev/null; then
  apt-get install -y -q xfsprogs btrfs-progs >/dev/null || echo "xfsprogs and btrfs-progs could not be installed: those file systems are skipped"
fi
results="$root/bench/CRASHSTATES.md"
work=$(mktemp -d "${TMPDIR:-/var/tmp}/assetpatch-crashstates.XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
python3 "$root/Tests/crash/crashstates.py" --mutation-cap 150 --gate-tries 4 --results "$work/explorer.md" "$@" || status=1
python3 "$root/Tests/crash/realfs.py" --points 10 --results "$work/realfs.md" || status=1
python3 "$root/Tests/crash/realfs.py" --points 4 --self-test --results "$work/realfs-self-test.md" || status=1
cat "$work/explorer.md" "$work/realfs.md" "$work/realfs-self-test.md" > "$results"
echo "wrote $results"
exit $status
