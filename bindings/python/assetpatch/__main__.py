"""`python -m assetpatch ARGS` (and the `assetpatch` command a wheel installs): the
command-line tool. A wheel carries it in `_native/`; otherwise the one on PATH runs."""
import os
import shutil
import sys
from typing import Dict


def ca_environment() -> Dict[str, str]:
    """What the wheel's tool needs in its environment: its libcurl looks for the CA bundle where
    Debian keeps it, so elsewhere it is pointed at the system's own (ASSETPATCH_CA_FILE), as the
    Python client is. Nothing when the caller set it already."""
    if "ASSETPATCH_CA_FILE" in os.environ:
        return {}
    from . import _system_ca_bundle
    ca = _system_ca_bundle()
    return {} if ca is None else {"ASSETPATCH_CA_FILE": ca}


def main() -> int:
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native", "assetpatch")
    exe = bundled if os.access(bundled, os.X_OK) else shutil.which("assetpatch")
    if exe is not None and exe != bundled:
        with open(exe, "rb") as f:
            if f.read(2) == b"#!":  # a script (a wheel's own launcher), not the tool
                exe = None
    if exe is None:
        print("assetpatch: the command-line tool is not installed (the wheel carries it; or install the "
              "Debian package assetpatch)", file=sys.stderr)
        return 127
    if exe == bundled:
        os.environ.update(ca_environment())
    os.execv(exe, ["assetpatch", *sys.argv[1:]])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
