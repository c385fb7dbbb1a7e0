#!/usr/bin/env bash
# The full crash-state exploration (Tests/crash/crashstates.py opens every distinct state of
# every flow; the test command opens a sample). The model, in the explorer's header:
# - a file's writes are durable once it is fsync'ed/fdatasync'ed after them; until then they
#   may be lost, or persist torn at a 4 KiB boundary;
# - a name operation (create, rename, link, unlink, mkdir, rmdir) is durable once the
#   directory it changes is fsync'ed after it; name operations persist in the order they were
#   made (one durable makes every earlier one durable; unsynced ones persist as a prefix);
# - data and names are independent: a rename can persist while the data written before it
#   was lost.
# Not modelled: journals that reorder themselves, disks that lie about flushes, torn sectors
# inside a page, metadata corruption, other file systems' weaker orderings (e.g. ext4
# data=writeback, where a file's size can persist before its data).
# The last line reads "N crash states, M inconsistent".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[[ -x $root/build/prefix/bin/assetpatch ]] || bash "$root/scripts/build.sh"
exec python3 "$root/Tests/crash/crashstates.py" "$@"
