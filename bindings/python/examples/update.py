#!/usr/bin/env python3
"""Update a data directory and resolve names, with a tqdm progress bar when tqdm is installed
(plain lines otherwise).

    python3 update.py DATA_DIR BUNDLE_DIR MANIFEST_URL [NAME...]
"""
import sys

import assetpatch

try:
    from tqdm import tqdm
except ImportError:
    tqdm = None


class Bar:
    def __init__(self):
        self.phase = None
        self.bar = None

    def __call__(self, p: assetpatch.Progress) -> None:
        if p.phase != self.phase:
            self.close()
            self.phase = p.phase
            if tqdm and p.bytes_total:
                self.bar = tqdm(total=p.bytes_total, unit="B", unit_scale=True, desc=p.phase.name.lower(), file=sys.stderr)
            else:
                print(p.phase.name.lower(), file=sys.stderr)
        if self.bar is not None:
            self.bar.n = p.bytes_done
            self.bar.refresh()

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 1
    data, bundle, url, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    bar = Bar()
    with assetpatch.Client(data, bundle, manifest_url=url, variants=("@3x", "@2x", "")) as client:
        try:
            installed = client.update(progress=bar)
            bar.close()
            print(f"{'updated' if installed else 'no update'}: version {client.current_version}")
        except assetpatch.AssetPatchError as e:
            bar.close()
            print(f"update failed ({e.name}): {e.message}; still serving version {client.current_version}", file=sys.stderr)
        for name in names:
            try:
                print(f"{name} -> {client.resolve(name)}")
            except assetpatch.NotFoundError:
                print(f"{name} -> (not found)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
