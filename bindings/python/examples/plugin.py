#!/usr/bin/env python3
"""Update a data directory and call the greeter plugin of examples/plugin through ctypes.

    plugin.py DATA_DIR MANIFEST_URL PUBLIC_KEY

Only a release signed by PUBLIC_KEY (base64 Ed25519) may bring plugins in."""
import ctypes
import sys

import assetpatch


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    data, url, key = sys.argv[1:]
    with assetpatch.Client(data, manifest_url=url, public_keys=[key]) as c:
        try:
            c.update()
        except assetpatch.AssetPatchError as e:
            print(f"update: {e}", file=sys.stderr)
        print(f"active release: {c.current_version}")
        for p in c.plugins:
            print(f"plugin {p.name} {p.version} (entry {p.entry}, abi {p.abi})")
        greet = ctypes.CFUNCTYPE(ctypes.c_char_p)(c.load_plugin("greeter"))
        print("greeter says:", greet().decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
