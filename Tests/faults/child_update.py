"""Runs one update through the Python binding, printing each phase as it starts (flushed), so
the kill harness knows where it killed. Exit 0 installed/no update, 3 error.

    child_update.py DATA_DIR MANIFEST_URL [CLIENT_ID]   (CLIENT_ID goes out as X-Client)

ASSETPATCH_TEST_MIRRORS, when set, is the client's option mirrors."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python"))
import assetpatch  # noqa: E402


def phase_printer():
    """A progress callback printing each phase as it starts (flushed): what the harness reads."""
    last = [0]

    def progress(p):
        if p.phase != last[0]:
            last[0] = p.phase
            sys.stdout.write(f"PHASE {int(p.phase)}\n")
            sys.stdout.flush()
    return progress


def main():
    data, url = sys.argv[1], sys.argv[2]
    headers = [f"X-Client: {sys.argv[3]}"] if len(sys.argv) > 3 else []
    progress = phase_printer()

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # another process may hold the lock for a moment (the checker)
        try:
            extra = {"mirrors": os.environ["ASSETPATCH_TEST_MIRRORS"]} if os.environ.get("ASSETPATCH_TEST_MIRRORS") else {}
            with assetpatch.Client(data, manifest_url=url, stall_timeout_ms=30000, headers=headers, **extra) as c:
                c.update(progress=progress)
            sys.stdout.write("EXIT ok\n")
            return 0
        except assetpatch.BusyError:
            time.sleep(0.01)
        except assetpatch.AssetPatchError as e:
            sys.stdout.write(f"EXIT {e.name} {e.message}\n")
            return 3
    return 3


if __name__ == "__main__":
    sys.exit(main())
