#!/usr/bin/env python3
"""kill -9 harness: kills an updating process at random moments spread over every phase
(seeded, reproducible), and after each kill checks, from another process, that the data
directory serves exactly one complete release (every resolved file hashes to the active
release's manifest) and that resuming wastes nothing: every archive request a restarted updater
makes starts exactly where the bytes it found on disk end (0 when they can't be resumed). That
is what the client asked for, whatever the scheduler did; the bytes the server wrote (they
include what sat in socket buffers at each kill) are reported, not asserted.

With --differential, v2 changes a tenth of v1's files, so updates fetch only those entries'
byte ranges; then no restarted updater may ask for an entry whose file an earlier one verified
(the files kept under downloads/<archive>.files/), and every request must be a range.

With --chunked, the releases are a 12 MiB pack file (chunked), a 600 KiB document (chunks that
share history: kept compressed until its rebuild) and small files, updated from their format-2
heads; v2 rewrites, inserts and deletes records of the pack and edits the document in places.
No restarted updater may ask for a chunk an earlier one kept (under
downloads/<archive>.chunks/, or written in place in a file being rebuilt whose bytes there
still match), and every request must be a range.

With --groups, the kills hit fetches of an on-demand group instead (groupkills.py).

    killharness.py [--kills 50] [--seed 1] [--rate BYTES_PER_S] [--soak] [--differential | --chunked | --groups]

Needs build/prefix (scripts/build.sh). Prints a report and "N passed, N failed"."""
import argparse
import collections
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from conftest import CLI, FaultServer, make_tree, release_files, sha256_file, Repo, without_head  # noqa: E402
import indexpages  # noqa: E402
import assetpatch  # noqa: E402

PHASES = {0: "start", 1: "check", 2: "download", 3: "install", 4: "activate", 5: "cleanup/done"}


def pack_releases():
    rnd = random.Random(5)
    records = [rnd.randbytes(rnd.choice((8192, 32768, 65536))) for _ in range(300)]
    words = [b"door", b"light", b"spawn", b"{", b"}", b"\"x\":", b"\"y\":", b"item", b"key", b"1", b"2", b"\n"]
    world = b" ".join(rnd.choice(words) for _ in range(120_000))[:600 << 10]
    v1 = {"data/pack.bin": b"".join(records), "readme.txt": b"release 1\n", "levels/a.json": b"{}", "levels/world.json": world}
    for i in range(10, 290, 35):
        records[i] = rnd.randbytes(len(records[i]))
    records.insert(100, rnd.randbytes(65536))
    del records[200]
    edited = bytearray(world)
    for at in range(50_000, len(edited) - 100, 120_000):
        edited[at:at + 12] = b"EDITED WORLD"
    v2 = dict(v1, **{"data/pack.bin": b"".join(records), "readme.txt": b"release 2\n", "levels/world.json": bytes(edited)})
    return v1, v2


def publish(base, differential=False, chunked=False):
    if chunked:
        v1, v2 = pack_releases()
    elif differential:
        v1 = release_files(1, 120, 100_000)
        v2 = dict(v1)
        rnd = random.Random(2)
        for name in sorted(v1)[::10]:
            v2[name] = rnd.randbytes(len(v1[name]))
        v2["added.bin"] = rnd.randbytes(100_000)
    else:
        v1, v2 = release_files(1, 8, 20_000), release_files(2, 120, 100_000)
    for name, files, version in (("v1", v1, 1), ("v2", v2, 2)):
        make_tree(os.path.join(base, "src-" + name), files)
        if name == "v2":
            shutil.copytree(os.path.join(base, "v1"), os.path.join(base, "v2"))
        # The whole-archive harness: no chunks that share history, whose chunk lists would make
        # the index entry big enough that ranges of the rest beat resuming some kills.
        whole = [] if differential or chunked else ["--link-threshold", "0"]
        subprocess.run([CLI, "publish", os.path.join(base, "src-" + name), "--repo", os.path.join(base, name),
                        "--package", "kill", "--version", str(version)] + whole, check=True, stdout=subprocess.DEVNULL)
        without_head(os.path.join(base, name, "manifest.json"))
    return Repo(os.path.join(base, "v1"), v1, 1), Repo(os.path.join(base, "v2"), v2, 2)


def consistent(data, repos, while_updating=False):
    """Opens the data directory as a new process would and checks it; returns an error or None.
    While another process updates, staging may legitimately exist."""
    try:
        with assetpatch.Client(data) as c:
            v = c.current_version
            if v not in repos:
                return f"active version {v}"
            for name, digest in repos[v].hashes.items():
                got = sha256_file(c.resolve(name))
                if got != digest:
                    return f"version {v}: {name} hashes to {got[:12]}, manifest says {digest[:12]}"
            staging = os.path.join(data, "staging")
            if not while_updating and os.path.isdir(staging) and os.listdir(staging):
                # Only acceptable while another updater holds the lock; here none runs.
                return f"staging not cleaned: {os.listdir(staging)}"
            return None
    except assetpatch.AssetPatchError as e:
        return f"open/resolve failed: {e}"


def verified_ranges(data, repo, index=None):
    """The archive ranges of the entries whose files a differential updater finds verified on
    disk (named by sha256 under downloads/*.files/), and of the chunks (downloads/*.chunks/):
    none of them may be asked for again."""
    have, chunks = set(), set()
    downloads = os.path.join(data, "downloads")
    for d in (os.listdir(downloads) if os.path.isdir(downloads) else []):
        if d.endswith(".files") or d.endswith(".chunks"):
            names = os.listdir(os.path.join(downloads, d))
            (have if d.endswith(".files") else chunks).update(n for n in names if len(n) == 64)
            if d.endswith(".chunks"):
                # A linked chunk kept compressed: <sha256>.<archive offset>.
                chunks.update(n for n in names if len(n) > 65 and n[64] == ".")
    out = [(f["zip"]["header_offset"], f["zip"]["data_offset"] + f["zip"]["compressed_size"] - 1)
           for f in repo.manifest["files"] if f["sha256"] in have]
    for f in (index or {}).get("files", []) + (index or {}).get("linked", []):
        out += [(c["offset"], c["offset"] + c["compressed_size"] - 1) for c in f["chunks"]
                if c["sha256"] in chunks or f"{c['sha256']}.{c['offset']}" in chunks]
        out += in_place(downloads, f)
    return out


def in_place(downloads, f):
    """The archive ranges of the chunks of `f` written in place in its file being rebuilt
    (downloads/*.files/.<sha256>.rebuild) whose bytes there match: an updater hashes them again
    and must not ask for them."""
    out = []
    for d in (os.listdir(downloads) if os.path.isdir(downloads) else []):
        partial = os.path.join(downloads, d, "." + f["sha256"] + ".rebuild")
        if not d.endswith(".files") or not os.path.isfile(partial):
            continue
        with open(partial, "rb") as p:
            at = 0
            for c in f["chunks"]:
                p.seek(at)
                if hashlib.sha256(p.read(c["size"])).hexdigest() == c["sha256"]:
                    out.append((c["offset"], c["offset"] + c["compressed_size"] - 1))
                at += c["size"]
    return out


def resumable_bytes(data, digest):
    """What an updater starting now resumes from: the partial's size when its record says the
    bytes are the file's own (not decoded from an encoding), else 0 (the client's own rule for
    format-1 archives, which are named and checked by their sha256)."""
    part = os.path.join(data, "downloads", digest + ".part")
    meta = os.path.join(data, "downloads", digest + ".meta")
    try:
        with open(meta) as f:
            record = json.load(f)
        if record.get("coding"):
            return 0
        return os.path.getsize(part)
    except (OSError, ValueError):
        return 0


class Child:
    """A child process printing its phases (child_update.py, or the script `argv` names)."""

    def __init__(self, data, url, client_id="", argv=None):
        argv = argv or [os.path.join(os.path.dirname(__file__), "child_update.py"), data, url, client_id]
        self.proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.phase = 0
        self.exit_line = None
        self.seen = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.seen:
                if line.startswith("PHASE "):
                    self.phase = int(line.split()[1])
                elif line.startswith("EXIT"):
                    self.exit_line = line.strip()
                self.seen.notify_all()

    def wait_phase(self, phase, timeout):
        end = time.monotonic() + timeout
        with self.seen:
            while self.phase < phase and self.proc.poll() is None and time.monotonic() < end:
                self.seen.wait(0.005)

    def kill(self):
        """SIGKILL; returns the phase it was in, or None when it had already finished."""
        phase = self.phase
        if self.proc.poll() is not None:
            self.reader.join(2)
            return None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.reader.join(2)
        return phase if self.exit_line is None else None


def main():
    if "--groups" in sys.argv:
        import groupkills
        sys.argv.remove("--groups")
        return groupkills.main()
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=int, default=12_000_000, help="archive bytes per second the server sends")
    ap.add_argument("--soak", action="store_true", help="500 kills")
    ap.add_argument("--differential", action="store_true", help="v2 changes a tenth of v1: range requests")
    ap.add_argument("--chunked", action="store_true", help="a pack file changed in part, updated from heads: chunk ranges")
    a = ap.parse_args()
    ranges_only = a.differential or a.chunked
    if a.soak:
        a.kills = max(a.kills, 500)
    rnd = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="assetpatch-kill.")
    server = None
    try:
        base = os.path.join(work, "repos")
        r1, r2 = publish(base, a.differential, a.chunked)
        repos = {1: r1, 2: r2}
        digest = r2.manifest["archive"]["sha256"]
        server = FaultServer(base, work)
        url = (lambda repo: server.url(repo).replace("/manifest.json", "/head.json")) if a.chunked else server.url
        index1 = index2 = None
        if a.chunked:
            index1 = indexpages.read(os.path.join(base, "v1", "head.json"),
                                     os.path.join(base, "v1", r1.manifest["archive"]["url"]))
            index2 = indexpages.read(os.path.join(base, "v2", "head.json"),
                                     os.path.join(base, "v2", r2.manifest["archive"]["url"]))
        pristine = os.path.join(work, "pristine")
        subprocess.run([CLI, "update", "--data-dir", pristine, "--url", url("v1")], check=True, capture_output=True)
        server.control("normal", rate=a.rate)

        # Time one uninterrupted update to spread random kill times over it.
        data = os.path.join(work, "data")
        shutil.copytree(pristine, data)
        t0 = time.monotonic()
        timing = Child(data, url("v2"))
        timing.proc.wait()
        full = time.monotonic() - t0
        shutil.rmtree(data)

        kills_by_phase = collections.Counter()
        failures = []

        # A second reader, all along: it opens the data directory while updates run and get
        # killed, and must always see one complete release, never a mix of two.
        stop_reader = threading.Event()
        reader_checks = [0]

        swap = threading.Lock()  # held while the harness replaces the data directory itself

        def reader():
            while not stop_reader.is_set():
                with swap:
                    if os.path.isdir(data):
                        try:
                            err = consistent(data, repos, while_updating=True)
                        except OSError as e:
                            err = f"reading a resolved file failed: {e}"
                        if err:
                            failures.append(f"concurrent reader: {err}")
                        reader_checks[0] += 1
                time.sleep(0.01)

        reader_thread = threading.Thread(target=reader, daemon=True)
        reader_thread.start()
        sequences = []
        total_kills = 0
        while total_kills < a.kills:
            with swap:
                shutil.copytree(pristine, data)
            server.get("/_reset")
            server.control("normal", rate=a.rate)
            seq_kills = 0
            expected_starts = {}  # client id -> where its first archive request must start
            verified = {}  # client id -> ranges of entries verified on disk when it started
            while True:
                client_id = f"{len(sequences)}-{seq_kills}"
                expected_starts[client_id] = resumable_bytes(data, digest)
                verified[client_id] = verified_ranges(data, r2, index2)
                child = Child(data, url("v2"), client_id)
                if rnd.random() < 0.5:
                    time.sleep(rnd.uniform(0, full * 1.1))
                else:
                    # Activation and cleanup last milliseconds: kill right as they start.
                    target = rnd.choice([1, 2, 2, 3, 3, 4, 4, 4, 5])
                    child.wait_phase(target, full * 3)
                    time.sleep(rnd.uniform(0, {1: 0.005, 2: 0.3, 3: 0.05}.get(target, 0.002)))
                phase = child.kill()
                if phase is None:
                    break  # completed before the kill
                seq_kills += 1
                total_kills += 1
                kills_by_phase[PHASES[phase]] += 1
                with swap:  # the concurrent reader's own open could be recovering right now
                    err = consistent(data, repos)
                if err:
                    failures.append(f"kill {total_kills} in {PHASES[phase]}: {err}")
                if seq_kills > 200:
                    failures.append("update never completed")
                    break
            # The sequence ends with a completed update.
            with swap:
                err = consistent(data, repos)
                with assetpatch.Client(data) as c:
                    if c.current_version != 2:
                        err = err or f"after completion the active version is {c.current_version}"
            if err:
                failures.append(f"after sequence {len(sequences) + 1}: {err}")
            stats = server.stats()
            sent = stats["bytes_sent"]
            sequences.append((seq_kills, sent))
            if ranges_only:
                for entry in stats["archive_log"]:
                    asked = (entry["start"], entry["end"])
                    if entry["end"] == r2.archive_size - 1 and entry["start"] == 0:
                        failures.append(f"sequence {len(sequences)}, updater {entry['client']}: asked for the whole archive")
                    again = [r for r in verified.get(entry["client"], []) if r[0] <= asked[1] and asked[0] <= r[1]]
                    if again:
                        failures.append(f"sequence {len(sequences)}, updater {entry['client']}: asked for {asked}, "
                                        f"which holds entries verified before it started: {again}")
                with swap:
                    shutil.rmtree(data)
                continue
            by_client = collections.defaultdict(list)
            for entry in stats["archive_log"]:
                by_client[entry["client"]].append(entry["start"])
            for client_id, starts in by_client.items():
                want = expected_starts.get(client_id)
                if want is None or starts[0] != want or starts != sorted(starts):
                    failures.append(f"sequence {len(sequences)}, updater {client_id}: requests started at {starts}, "
                                    f"{want} bytes were resumable")
            with swap:
                shutil.rmtree(data)

        stop_reader.set()
        reader_thread.join(10)
        print(f"archive: {r2.archive_size} bytes, {len(r2.hashes)} files; uninterrupted update {full:.2f} s; seed {a.seed}")
        print(f"kills: {total_kills} over {len(sequences)} sequences; by phase: " +
              ", ".join(f"{p} {kills_by_phase[p]}" for p in PHASES.values() if kills_by_phase[p]))
        sent_total = sum(s for _, s in sequences)
        # What one uninterrupted update transfers: the archive, or the changed entries' ranges.
        old = {f["sha256"] for f in r1.manifest["files"]}
        trees2 = (index2 or {}).get("files", []) + (index2 or {}).get("linked", [])
        chunked_paths = {f["path"] for f in trees2 if f["chunks"]}
        one = r2.archive_size if not ranges_only else sum(
            f["zip"]["data_offset"] + f["zip"]["compressed_size"] - f["zip"]["header_offset"]
            for f in r2.manifest["files"] if f["sha256"] not in old and f["path"] not in chunked_paths)
        if a.chunked:
            old_chunks = {c["sha256"] for f in index1["files"] + index1["linked"] for c in f["chunks"]}
            new_chunks = {(c["sha256"], c["offset"] if f in index2["linked"] else 0): c["compressed_size"]
                          for f in trees2 for c in f["chunks"] if c["sha256"] not in old_chunks}
            new_pages = {p for p in index2["pages"]} - {p for p in index1["pages"]}
            one += sum(new_chunks.values()) + sum(size for _, size in new_pages)
        ideal = one * len(sequences)
        print(f"archive bytes the server wrote: {sent_total} for {len(sequences)} completed updates "
              f"({sent_total / ideal:.3f}x {'the archive' if not ranges_only else 'the new entries, chunks and index pages'}; "
              f"worst sequence {max(s / one for _, s in sequences):.3f}x; "
              "the excess is what sat in socket buffers at the kills)")
        print(f"concurrent reader: {reader_checks[0]} full checks while updates ran and were killed")
        print(f"consistency failures: {len(failures)}")
        for f in failures:
            print("  " + f)
        checks = total_kills + len(sequences)
        print(f"{checks - len(failures)} passed, {len(failures)} failed")
        return 1 if failures else 0
    finally:
        if server:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
