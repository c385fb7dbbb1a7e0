"""Runs one group fetch through the Python binding, printing each phase as it starts (flushed),
so the kill harness knows where it killed. Exit 0 fetched, 3 error.

    child_group.py DATA_DIR GROUP CLIENT_ID   (CLIENT_ID goes out as X-Client)"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import assetpatch  # noqa: E402
from child_update import phase_printer  # noqa: E402


def main():
    data, group, client_id = sys.argv[1:4]
    progress = phase_printer()

    try:
        with assetpatch.Client(data, stall_timeout_ms=30000, headers=[f"X-Client: {client_id}"]) as c:
            c.fetch_groups(group, progress=progress)
        sys.stdout.write("EXIT ok\n")
        return 0
    except assetpatch.AssetPatchError as e:
        sys.stdout.write(f"EXIT {e.name} {e.message}\n")
        return 3


if __name__ == "__main__":
    sys.exit(main())
