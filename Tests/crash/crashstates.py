#!/usr/bin/env python3
"""Crash-state explorer: what a power cut during an update can leave, opened by the library.

For each flow (a first install, a full update, a differential update, a rollback, mark_good, an
app upgrade that drops a stale overlay, a garbage collection, a resumed download) it
1. snapshots the data directory before the flow, and runs the flow in a process whose
   file-system calls under the data directory are recorded (fstrace.so, LD_PRELOAD);
2. builds, from the snapshot and the trace, the states a crash at each point could leave under
   the model below, and keeps the distinct ones;
3. opens each state with the library in a fresh process and checks what the kill harness
   checks: the state file parses, the client serves exactly one complete release (every
   resolved file hashes to that release's record), no release the flow started from (active,
   or marked good) is lost, and an update afterwards succeeds and serves the newest release.

The model (conservative for ext4, data=ordered, and most journaling file systems):
- A write or truncate of a file is durable once that file is fsync'ed or fdatasync'ed after it
  (or sync/syncfs). Until then it may be lost, or persist torn at a page (4 KiB) boundary.
- A name operation (create, rename, link, unlink, mkdir, rmdir) is durable once the directory
  it puts the name in (or removes it from) is fsync'ed after it. Until then it may be lost.
  Name operations persist in the order they were made (the journal commits metadata in
  order): one made durable makes every earlier one durable, and the unsynced ones persist as a
  prefix, so the states take every prefix of them.
- Data and names are independent: a rename may persist while the data written before it was
  lost (the zero-length-file case), and the reverse.
States per crash point: everything issued (a kill), only what was durable (the strict power cut),
the durable state plus each prefix of the unsynced name operations, and the kill state without
each single unsynced write or with it torn. Not modelled: a file system that reorders the
journal itself, lost fsyncs (lying disks), partial sector writes, metadata-only corruption.

    crashstates.py [--flows a,b,...] [--sample N] [--seed S] [--work DIR]
The last line reads "N crash states, M inconsistent".
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PREFIX = os.path.join(ROOT, "build", "prefix")
CLI = os.path.join(PREFIX, "bin", "assetpatch")
LIB = os.path.join(PREFIX, "lib", "libassetpatch.so.1")
PAGE = 4096
NAME_OPS = {"create", "rename", "link", "unlink", "mkdir", "rmdir"}
DATA_OPS = {"write", "truncate"}


# ------------------------------------------------------------------ the trace and the model

def parse(log):
    """The trace's operations. Inode numbers are made unique: the file system reuses a freed
    inode's number for a new file, while a crash state may still hold the old file (its unlink
    lost), so each create starts a new identity for its number."""
    ops = []
    current = {}  # inode number -> identity of the file that has it now
    generation = 0

    def ident(n):
        return current.get(n, ("s", n))

    with open(log) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            kind = parts[0]
            if kind == "write":
                ops.append({"op": kind, "path": parts[1], "ino": ident(int(parts[2])), "off": int(parts[3]),
                            "data": bytes.fromhex(parts[4])})
            elif kind == "truncate":
                ops.append({"op": kind, "path": parts[1], "ino": ident(int(parts[2])), "len": int(parts[3])})
            elif kind in ("fsync", "fdatasync"):
                ops.append({"op": kind, "path": parts[1], "ino": ident(int(parts[2]))})
            elif kind == "create":
                generation += 1
                current[int(parts[2])] = ("g", generation)
                ops.append({"op": kind, "path": parts[1], "ino": current[int(parts[2])]})
            elif kind in ("rename", "link"):
                ops.append({"op": kind, "path": parts[1], "path2": parts[2]})
            elif kind in ("unlink", "rmdir", "mkdir", "sync"):
                ops.append({"op": kind, "path": parts[1]})
    return ops


def parent(p):
    return os.path.dirname(p)


def durable_at(ops):
    """For each op, the index of the sync that makes it durable (len(ops) when none does)."""
    n = len(ops)
    out = [n] * n
    for i, o in enumerate(ops):
        if o["op"] in DATA_OPS:
            need = lambda s: (s["op"] in ("fsync", "fdatasync") and s.get("ino") == o["ino"])
        elif o["op"] in NAME_OPS:
            # The new name's directory: a rename or link appears once the directory it puts a
            # name in is synced.
            dirs = {parent(o["path2"]) if o["op"] in ("rename", "link") else parent(o["path"])}
            pending = set(dirs)
            for j in range(i + 1, n):
                s = ops[j]
                if s["op"] == "sync":
                    pending.clear()
                elif s["op"] == "fsync" and s["path"] in pending:
                    pending.discard(s["path"])
                if not pending:
                    out[i] = j
                    break
            continue
        else:
            out[i] = i
            continue
        for j in range(i + 1, n):
            if ops[j]["op"] == "sync" or need(ops[j]):
                out[i] = j
                break
    # Name operations persist in the order they were made (the journal commits metadata in
    # order): one made durable makes every earlier one durable too.
    later = n
    for i in range(n - 1, -1, -1):
        if ops[i]["op"] in NAME_OPS:
            later = min(later, out[i])
            out[i] = later
    return out


class Model:
    """Names (files by inode, directories) and inode contents."""

    def __init__(self, names, dirs, data):
        self.names, self.dirs, self.data = names, dirs, data

    @classmethod
    def snapshot(cls, root):
        names, dirs, data = {}, set(), {}
        for d, subdirs, files in os.walk(root):
            dirs.add(d)
            for f in files:
                p = os.path.join(d, f)
                st = os.lstat(p)
                ino = ("s", st.st_ino)
                names[p] = ino
                if ino not in data:
                    with open(p, "rb") as fh:
                        data[ino] = fh.read()
        return cls(names, dirs, data)

    def copy(self):
        return Model(dict(self.names), set(self.dirs), dict(self.data))

    def apply(self, o, torn=False):
        k = o["op"]
        if k == "write":
            cur = bytearray(self.data.get(o["ino"], b""))
            d = o["data"]
            if torn:  # only the part up to the first page boundary after its start persisted
                cut = ((o["off"] // PAGE) + 1) * PAGE - o["off"]
                d = d[:max(0, cut)]
            end = o["off"] + len(d)
            if len(cur) < end:
                cur.extend(b"\0" * (end - len(cur)))
            cur[o["off"]:end] = d
            self.data[o["ino"]] = bytes(cur)
        elif k == "truncate":
            cur = self.data.get(o["ino"], b"")
            self.data[o["ino"]] = cur[:o["len"]] + b"\0" * max(0, o["len"] - len(cur))
        elif k == "create":
            if parent(o["path"]) in self.dirs and o["path"] not in self.names:
                self.names[o["path"]] = o["ino"]
            self.data.setdefault(o["ino"], b"")
        elif k == "mkdir":
            if parent(o["path"]) in self.dirs:
                self.dirs.add(o["path"])
        elif k == "rmdir":
            if not any(p.startswith(o["path"] + "/") for p in self.names) and \
                    not any(d.startswith(o["path"] + "/") for d in self.dirs):
                self.dirs.discard(o["path"])
        elif k == "unlink":
            self.names.pop(o["path"], None)
        elif k == "link":
            if o["path"] in self.names and parent(o["path2"]) in self.dirs and o["path2"] not in self.names:
                self.names[o["path2"]] = self.names[o["path"]]
        elif k == "rename":
            a, b = o["path"], o["path2"]
            if a in self.names and parent(b) in self.dirs:
                self.names[b] = self.names.pop(a)
            elif a in self.dirs and parent(b) in self.dirs:
                pre = a + "/"
                self.dirs = {b + d[len(a):] if d == a or d.startswith(pre) else d for d in self.dirs}
                self.names = {(b + p[len(a):] if p.startswith(pre) else p): i for p, i in self.names.items()}

    def key(self):
        h = hashlib.sha256()
        for p in sorted(self.dirs):
            h.update(b"d" + p.encode() + b"\0")
        for p in sorted(self.names):
            h.update(b"f" + p.encode() + b"\0" + hashlib.sha256(self.data.get(self.names[p], b"")).digest())
        return h.hexdigest()

    def materialize(self, old_root, new_root):
        for d in sorted(self.dirs, key=len):
            os.makedirs(new_root + d[len(old_root):], exist_ok=True)
        first = {}
        for p in sorted(self.names):
            ino = self.names[p]
            q = new_root + p[len(old_root):]
            if ino in first:
                os.link(first[ino], q)
            else:
                with open(q, "wb") as f:
                    f.write(self.data.get(ino, b""))
                first[ino] = q
        # Release files are read-only on disk, as the installer leaves them.
        for d, _, files in os.walk(os.path.join(new_root, "releases")):
            for f in files:
                if "/files" in d:
                    os.chmod(os.path.join(d, f), 0o444)


def crash_states(before, ops):
    """Distinct models a crash could leave, with a description of each."""
    dur = durable_at(ops)
    seen = {}

    def add(m, why):
        k = m.key()
        if k not in seen:
            seen[k] = (m, why)

    for k in range(len(ops) + 1):
        issued = list(range(k))
        durable = [i for i in issued if dur[i] < k]
        unsynced = [i for i in issued if dur[i] >= k and ops[i]["op"] in NAME_OPS | DATA_OPS]
        kill = before.copy()
        for i in issued:
            kill.apply(ops[i])
        add(kill, f"kill after op {k}")
        lost = before.copy()
        for i in durable:
            lost.apply(ops[i])
        add(lost, f"power cut after op {k}: only durable ops")
        # The durable state plus each prefix of the unsynced name operations.
        names = [i for i in unsynced if ops[i]["op"] in NAME_OPS]
        for cut in range(1, len(names)):
            keep = set(durable) | set(names[:cut])
            m = before.copy()
            for i in issued:
                if i in keep:
                    m.apply(ops[i])
            add(m, f"power cut after op {k}: durable ops and names up to op {names[cut - 1]}")
        # Everything issued but one unsynced write, dropped or torn.
        for u in unsynced:
            if ops[u]["op"] != "write":
                continue
            for torn in (False, True):
                if torn and len(ops[u]["data"]) <= PAGE - ops[u]["off"] % PAGE:
                    continue
                m = before.copy()
                for i in issued:
                    if i == u:
                        if torn:
                            m.apply(ops[i], torn=True)
                        continue
                    m.apply(ops[i])
                add(m, f"kill after op {k} with write {u} {'torn' if torn else 'lost'}")
    return list(seen.values())


# ------------------------------------------------------------------ flows

def publish(repo, version, files, options=()):
    src = repo + f"-src{version}"
    shutil.rmtree(src, ignore_errors=True)
    for name, data in files.items():
        p = os.path.join(src, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    subprocess.run([CLI, "publish", src, "--repo", repo, "--package", "crash", "--version", str(version), *options],
                   check=True, stdout=subprocess.DEVNULL)


def release_files(version, flow):
    """Twelve files that change between releases, two that don't, and a pack: 9 KB, or, for
    the chunked flow, 96 KB cut into 4 KiB chunks of which version 2 rewrites a few."""
    rnd = random.Random(version)
    files = {f"f{i:02d}.bin": bytes(rnd.getrandbits(8) for _ in range(3000 + 500 * i)) for i in range(12)}
    files["same.txt"] = b"unchanged in every release\n" * 40
    files["sub/same.bin"] = bytes(random.Random(0).getrandbits(8) for _ in range(5000))
    if flow == "chunked_update":
        pack = bytearray(random.Random(7).getrandbits(8) for _ in range(96 * 1024))
        if version == 2:
            for at in (5000, 40000, 81000):
                pack[at:at + 700] = bytes(rnd.getrandbits(8) for _ in range(700))
        files["big/pack.bin"] = bytes(pack)
    else:
        files["big/pack.bin"] = bytes(rnd.getrandbits(8) for _ in range(9000)) if version % 2 else b"p" * 9000
    return files


# Each flow: how to prepare the data directory (a list of driver steps), and the traced step.
FLOWS = {
    "first_install": ([], ("update", {"differential": "auto"})),
    "full_update": ([("update1", {}), ("mark_good", {})], ("update", {"differential": "off"})),
    "differential_update": ([("update1", {}), ("mark_good", {})], ("update", {"differential": "auto"})),
    "rollback": ([("update1", {}), ("mark_good", {}), ("update", {})], ("rollback", {})),
    "mark_good": ([("update1", {}), ("mark_good", {}), ("update", {})], ("mark_good", {})),
    "app_upgrade": ([("update1", {}), ("update", {}), ("stamp_bundle", {})], ("open", {})),
    "garbage_collection": ([("update1", {}), ("mark_good", {})], ("update", {"keep_versions": "0"})),
    "resumed_download": ([("update1", {}), ("partial", {})], ("update", {"differential": "off"})),
    "chunked_update": ([("update1", {}), ("mark_good", {})], ("update", {"differential": "auto"})),
    "next_open_activation": ([("update1", {}), ("mark_good", {}), ("update", {"apply": "next_open"})], ("open", {})),
}

DRIVER = r"""
import os, sys, json
import assetpatch
step, data, bundle, v1, v2, opts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], json.loads(sys.argv[6])
if step == "stamp_bundle":
    import subprocess
    subprocess.run([os.environ["ASSETPATCH_CLI"], "stamp-bundle", bundle, "--package", "crash", "--version", "2"], check=True,
                   stdout=subprocess.DEVNULL)
    sys.exit(0)
with assetpatch.Client(data, bundle, **opts) as c:
    if step in ("update", "update1", "partial"):
        c.set("manifest_url", v1 if step == "update1" else v2)
        if step == "partial":
            c.set("differential", "off")
            seen = [0]
            def stop(p):
                seen[0] = max(seen[0], p.bytes_done)
                return p.phase == assetpatch.Phase.DOWNLOAD and p.bytes_done > 4000
            try:
                c.update(progress=stop)
            except assetpatch.CancelledError:
                pass
        else:
            c.update()
    elif step == "mark_good":
        c.mark_good()
    elif step == "rollback":
        c.rollback()
"""


def run_step(work, step, opts, trace=None, base_url=None):
    env = dict(os.environ, ASSETPATCH_LIBRARY=LIB, ASSETPATCH_CLI=CLI, PYTHONPATH=os.path.join(ROOT, "bindings", "python"))
    if trace:
        env.update(ASSETPATCH_FSTRACE=trace, ASSETPATCH_FSTRACE_ROOT=os.path.join(work, "data"),
                   LD_PRELOAD=os.path.join(work, "fstrace.so"))
    r = subprocess.run([sys.executable, "-c", DRIVER, step, os.path.join(work, "data"), os.path.join(work, "bundle"),
                        (base_url or "file://" + work) + "/repo1/head.json", (base_url or "file://" + work) + "/repo2/head.json",
                        json.dumps(opts)], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"step {step} failed: {r.stderr[-2000:]}")


def check_state(data, bundle, url, must):
    """Runs in a forked child that has not loaded the library yet: it opens the state as a
    fresh process of the app would. Returns an error message, or None."""
    import assetpatch

    def served(c):
        v = c.current_version
        if v == 0:
            return 0
        state = json.load(open(os.path.join(data, "state.json")))
        record = json.load(open(os.path.join(data, "releases", state["active"]["id"], "release.json")))
        for f in record["files"]:
            with open(c.resolve(f["path"]), "rb") as fh:
                if hashlib.sha256(fh.read()).hexdigest() != f["sha256"]:
                    return f"{f['path']} of version {v} does not match its record"
        return v

    with assetpatch.Client(data, bundle) as c:
        v = served(c)
        if isinstance(v, str):
            return v
        state = json.load(open(os.path.join(data, "state.json")))
        on_disk = {r["version"] for r in [state.get("active")] + state.get("kept", []) + [state.get("pending")] if r}
        for keep in must.get("kept_or_active", []):
            if keep not in on_disk and v != keep:
                return f"version {keep}, active or marked good before the flow, is gone (state has {sorted(on_disk)})"
        if v not in must["served"]:
            return f"serves version {v}, expected one of {must['served']}"
        c.set("manifest_url", url)
        c.update()
        v2 = served(c)
        final = must["final"][str(v)] if isinstance(must["final"], dict) else must["final"]
        if v2 != final:
            return f"the update after the crash serves version {v2}, not {final}"
    return None


def check_in_child(args):
    """Forks; the child checks the state and reports on a pipe. (message or None)"""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        # The library's own log (warnings about what the state holds) is not the verdict.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        try:
            msg = check_state(*args)
        except BaseException as e:  # noqa: BLE001 - any failure of the library is the finding
            msg = f"{type(e).__name__}: {e}"
        os.write(w, (msg or "").encode()[:4000])
        os._exit(0)
    os.close(w)
    return pid, r


def collect(pid, r):
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    msg = b"".join(chunks).decode()
    if status != 0 and not msg:
        msg = f"the checking process died (status {status})"
    return msg or None


def expectations(flow):
    """What a state of `flow` may serve, what must survive, what an update then serves."""
    return {
        "first_install": {"served": [0, 2], "final": 2},
        "full_update": {"served": [1, 2], "kept_or_active": [1], "final": 2},
        "differential_update": {"served": [1, 2], "kept_or_active": [1], "final": 2},
        "rollback": {"served": [1, 2], "kept_or_active": [1], "final": {"1": 1, "2": 2}},
        "mark_good": {"served": [2], "kept_or_active": [1, 2], "final": 2},
        "app_upgrade": {"served": [0, 2], "final": 0},
        "garbage_collection": {"served": [1, 2], "final": 2},
        "resumed_download": {"served": [1, 2], "kept_or_active": [1], "final": 2},
        "chunked_update": {"served": [1, 2], "kept_or_active": [1], "final": 2},
        "next_open_activation": {"served": [1, 2], "kept_or_active": [1], "final": 2},
    }[flow]


def explore(flow, base, sample, rng, verbose, jobs=2):
    work = os.path.join(base, flow)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    shutil.copy(os.path.join(base, "fstrace.so"), os.path.join(work, "fstrace.so"))
    chunking = ("--chunk-threshold", "16384", "--chunk-size", "4096") if flow == "chunked_update" else ()
    for v, repo in ((1, "repo1"), (2, "repo2")):
        publish(os.path.join(work, repo), v, release_files(v, flow), chunking)
    os.makedirs(os.path.join(work, "bundle"))
    os.makedirs(os.path.join(work, "data"))
    prep, traced = FLOWS[flow]
    data = os.path.join(work, "data")
    trace = os.path.join(work, "trace.log")
    # A download resumes only over HTTP (a file:// archive is read in place): that flow's
    # release comes from a private nginx, which answers ranges.
    server = None
    if flow == "resumed_download":
        sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
        from nginxctl import Nginx
        os.makedirs(os.path.join(work, "nginx"))
        server = Nginx(work, os.path.join(work, "nginx"))
        server.__enter__()
    try:
        base_url = server.url("").rstrip("/") if server else None
        for step, opts in prep:
            run_step(work, step, opts, base_url=base_url)
        if server:
            # The cancelled update may have got further than the cancel over loopback: cut its
            # partial archive to 40% and drop what it extracted, so the traced update resumes
            # with a Range request for the rest.
            downloads = os.path.join(data, "downloads")
            parts = [os.path.join(downloads, p) for p in os.listdir(downloads) if p.endswith(".part")]
            if not parts or not os.path.getsize(parts[0]):
                raise RuntimeError("the cancelled update left no partial archive to resume")
            os.truncate(parts[0], os.path.getsize(parts[0]) * 2 // 5)
            for p in os.listdir(downloads):
                if p.endswith(".files"):
                    shutil.rmtree(os.path.join(downloads, p))
        before = Model.snapshot(data)
        run_step(work, traced[0], traced[1], trace=trace, base_url=base_url)
    finally:
        if server:
            server.__exit__(None, None, None)
    ops = parse(trace)
    states = crash_states(before, ops)
    chosen = states if sample is None or sample >= len(states) else rng.sample(states, sample)
    bad = 0
    must = expectations(flow)
    # A rollback's "final" is what it rolled back to: version 2 is then bad and skipped.
    url = "file://" + os.path.join(work, "repo2", "head.json")
    running = []

    def finish(entry):
        nonlocal bad
        (pid, r), d, why = entry
        msg = collect(pid, r)
        if msg:
            bad += 1
            if verbose or bad <= 3:
                print(f"  inconsistent: {flow}, {why}: {msg.splitlines()[-1]}")
        shutil.rmtree(d, ignore_errors=True)

    for n, (model, why) in enumerate(chosen):
        d = os.path.join(work, f"state-{n}")
        shutil.rmtree(d, ignore_errors=True)
        model.materialize(data, d)
        running.append((check_in_child((d, os.path.join(work, "bundle"), url, must)), d, why))
        if len(running) >= jobs:
            finish(running.pop(0))
    for entry in running:
        finish(entry)
    print(f"{flow}: {len(ops)} operations traced, {len(states)} distinct crash states, {len(chosen)} opened, {bad} inconsistent")
    return len(chosen), bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flows", default=",".join(FLOWS))
    ap.add_argument("--sample", type=int, default=None, help="open at most this many states per flow (random, seeded)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", default=None)
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    base = a.work or tempfile.mkdtemp(prefix="assetpatch-crash.", dir=os.environ.get("TMPDIR", "/var/tmp"))
    os.makedirs(base, exist_ok=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", os.path.join(base, "fstrace.so"), os.path.join(HERE, "fstrace.c"),
                    "-ldl", "-lpthread"], check=True)
    os.environ["ASSETPATCH_LIBRARY"] = LIB
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import assetpatch  # noqa: F401 - the module only; each checking child loads the library
    print(f"seed {a.seed}" + (f", {a.sample} states a flow" if a.sample else ", every state"))
    rng = random.Random(a.seed)
    total = bad = 0
    try:
        for flow in a.flows.split(","):
            n, b = explore(flow, base, a.sample, rng, a.verbose)
            total += n
            bad += b
    finally:
        if not a.work:
            shutil.rmtree(base, ignore_errors=True)
    print(f"{total} crash states, {bad} inconsistent")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
