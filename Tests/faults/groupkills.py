#!/usr/bin/env python3
"""The kill -9 harness's group mode: kills a process fetching an on-demand group at random
moments (seeded), and after each kill checks, from another process, that every file of the group
either resolves to bytes with its signed sha256 or is ERR_NOT_LOCAL (never a path to a partial
or unverified file), and a reader thread checks the same all along. Each restarted fetcher may
not ask for a file or chunk an earlier one verified (kept under downloads/groups/): what the
client asked for, from the server's log, whatever sat in socket buffers. The group is a 6 MiB
pack file (chunked) and 60 files of 40 KB.

    groupkills.py [--kills 60] [--seed 4] [--rate BYTES_PER_S]

Needs build/prefix (scripts/build.sh). Prints a report and "N passed, N failed"."""
import argparse
import collections
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from conftest import CLI, FaultServer, make_tree, sha256_file, Repo  # noqa: E402
from killharness import Child, PHASES  # noqa: E402
import indexpages  # noqa: E402
import assetpatch  # noqa: E402


def release():
    rnd = random.Random(9)
    files = {"base/readme.txt": b"base\n", "level/pack.bin": rnd.randbytes(6 << 20)}
    files.update({f"level/tiles/{i:02}.bin": rnd.randbytes(40_000) for i in range(60)})
    files.update({f"other/{i}.bin": rnd.randbytes(30_000) for i in range(5)})
    return files


def check(data, repo):
    """Opens the data directory as a new process would; returns an error or None."""
    try:
        with assetpatch.Client(data) as c:
            local = c.group("level").state == "local"
            for name, digest in repo.hashes.items():
                if not name.startswith("level/"):
                    continue
                try:
                    got = sha256_file(c.resolve(name))
                except assetpatch.NotLocalError:
                    if local:
                        return f"{name}: not local though the group is"
                    continue
                if got != digest:
                    return f"{name} hashes to {got[:12]}, the index says {digest[:12]}"
                if not local:
                    return f"{name} resolved while the group is {c.group('level').state}"
            return None
    except assetpatch.AssetPatchError as e:
        return f"open/resolve failed: {e}"


def kept_ranges(data, repo, index):
    """Archive ranges of the files and chunks a fetcher finds verified under downloads/groups/."""
    files, chunks = set(), set()
    root = os.path.join(data, "downloads", "groups")
    for d in (os.listdir(root) if os.path.isdir(root) else []):
        for kind, into in (("files", files), ("chunks", chunks)):
            p = os.path.join(root, d, kind)
            if os.path.isdir(p):
                into.update(n for n in os.listdir(p) if len(n) == 64)
    out = [(f["zip"]["header_offset"], f["zip"]["data_offset"] + f["zip"]["compressed_size"] - 1)
           for f in repo.manifest["files"] if f["sha256"] in files]
    for f in index["files"]:
        out += [(c["offset"], c["offset"] + c["compressed_size"] - 1) for c in f["chunks"] if c["sha256"] in chunks]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=60)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--rate", type=int, default=10_000_000)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="assetpatch-groupkill.")
    server = None
    try:
        base = os.path.join(work, "repos")
        files = release()
        make_tree(os.path.join(base, "src"), files)
        subprocess.run([CLI, "publish", os.path.join(base, "src"), "--repo", os.path.join(base, "v1"), "--package", "groupkill",
                        "--group", "level=level/*", "--group", "other=other/*"], check=True, stdout=subprocess.DEVNULL)
        repo = Repo(os.path.join(base, "v1"), files, 1)
        index = indexpages.read(os.path.join(base, "v1", "head.json"), os.path.join(base, "v1", repo.manifest["archive"]["url"]))
        group_bytes = sum(f["zip"]["data_offset"] + f["zip"]["compressed_size"] - f["zip"]["header_offset"]
                          for f in repo.manifest["files"] if f["path"].startswith("level/"))
        server = FaultServer(base, work)
        pristine = os.path.join(work, "pristine")
        subprocess.run([CLI, "update", "--data-dir", pristine, "--url", server.url("v1").replace("manifest.json", "head.json")],
                       check=True, capture_output=True)
        data = os.path.join(work, "data")
        server.control("normal", rate=a.rate)
        shutil.copytree(pristine, data)
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "child_group.py"), data, "level", "timing"],
                              capture_output=True, text=True)
        full = time.monotonic() - t0
        assert proc.returncode == 0, proc.stdout
        shutil.rmtree(data)

        failures, kills_by_phase = [], collections.Counter()
        stop, swap, reader_checks = threading.Event(), threading.Lock(), [0]

        def reader():
            while not stop.is_set():
                with swap:
                    if os.path.isdir(data):
                        err = check(data, repo)
                        if err:
                            failures.append(f"concurrent reader: {err}")
                        reader_checks[0] += 1
                time.sleep(0.01)

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        total, sequences = 0, []
        while total < a.kills:
            with swap:
                shutil.copytree(pristine, data)
            server.get("/_reset")
            server.control("normal", rate=a.rate)
            kept, n = {}, 0
            while True:
                client = f"{len(sequences)}-{n}"
                kept[client] = kept_ranges(data, repo, index)
                child = GroupChild(data, client)
                time.sleep(rnd.uniform(0, full * 1.1))
                phase = child.kill()
                if phase is None:
                    break
                n += 1
                total += 1
                kills_by_phase[PHASES.get(phase, phase)] += 1
                with swap:
                    err = check(data, repo)
                if err:
                    failures.append(f"kill {total} in {PHASES.get(phase, phase)}: {err}")
                if n > 200:
                    failures.append("the fetch never completed")
                    break
            with swap:
                with assetpatch.Client(data) as c:
                    if c.group("level").state != "local":
                        failures.append(f"sequence {len(sequences) + 1}: the group is not local after a completed fetch")
                err = check(data, repo)
            if err:
                failures.append(f"after sequence {len(sequences) + 1}: {err}")
            stats = server.stats()
            sequences.append((n, stats["bytes_sent"]))
            for entry in stats["archive_log"]:
                asked = (entry["start"], entry["end"])
                again = [r for r in kept.get(entry["client"], []) if r[0] <= asked[1] and asked[0] <= r[1]]
                if again:
                    failures.append(f"sequence {len(sequences)}, fetcher {entry['client']}: asked for {asked}, which holds "
                                    f"files or chunks verified before it started: {again[:3]}")
            with swap:
                shutil.rmtree(data)
        stop.set()
        t.join(10)
        sent = sum(s for _, s in sequences)
        print(f"group: {group_bytes} bytes in the archive (a 6 MiB pack, chunked, and 60 files); uninterrupted fetch {full:.2f} s; seed {a.seed}")
        print(f"kills: {total} over {len(sequences)} sequences; by phase: " +
              ", ".join(f"{p} {k}" for p, k in kills_by_phase.items()))
        print(f"bytes the server wrote: {sent} for {len(sequences)} completed fetches ({sent / (group_bytes * len(sequences)):.3f}x "
              "the group; the excess is what sat in socket buffers at the kills)")
        print(f"concurrent reader: {reader_checks[0]} checks while fetches ran and were killed")
        print(f"consistency failures: {len(failures)}")
        for f in failures[:20]:
            print("  " + f)
        checks = total + len(sequences)
        print(f"{checks - len(failures)} passed, {len(failures)} failed")
        return 1 if failures else 0
    finally:
        if server:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


def GroupChild(data, client_id):
    """A child_group.py process fetching the group, its phases read as an update child's are."""
    return Child(data, None, argv=[os.path.join(os.path.dirname(__file__), "child_group.py"), data, "level", client_id])


if __name__ == "__main__":
    sys.exit(main())
