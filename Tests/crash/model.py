"""What a crash can leave: the trace of a flow's file-system calls, and the states a crash at
each point of it could leave under a file-system model.

Two models, reported apart:

- "ordered" (ext4, data=ordered, and journaling file systems that commit metadata in order):
  a name operation (create, rename, link, unlink, mkdir, rmdir) is durable once the directory
  it changes is fsync'ed after it, and name operations persist in the order they were made:
  one made durable makes every earlier one durable, the unsynced ones persist as a prefix.
- "directory" (btrfs-like, and ext4 with fast_commit): each directory's name operations are
  ordered only among themselves. A directory's fsync makes durable its own earlier
  operations, nothing else; across directories any combination of prefixes may persist.
  Lost or torn writes may leave garbage (the old contents of reused blocks), not only zeros.

In both, a write or truncate is durable once its file is fsync'ed or fdatasync'ed after it (or
sync/syncfs); until then it may be lost, or persist torn at a page (4 KiB) boundary; data and
names are independent (a rename may persist while the data written before it was lost).

States per crash point: everything issued (a kill); only what was durable (the strict power
cut); the durable state plus prefixes of the unsynced name operations (one global prefix each
in "ordered"; each directory's prefixes, and seeded combinations across directories, in
"directory"); the kill state without each single unsynced write, or with it torn; the kill state
without any unsynced write (several lost at once). "directory" adds garbage in place of each
lost or torn write. Not modelled: journals that reorder themselves, disks that lie about
flushes, metadata corruption.
"""
import hashlib
import os
import random
import re

PAGE = 4096
NAME_OPS = {"create", "rename", "link", "unlink", "mkdir", "rmdir"}
DATA_OPS = {"write", "truncate"}
SYNC_OPS = {"fsync", "fdatasync"}
MODELS = ("ordered", "directory")


class UnsupportedCall(Exception):
    """The traced process made a file call the model does not know."""


def parse(log):
    """The trace's operations. Inode numbers are made unique: the file system reuses a freed
    inode's number for a new file, while a crash state may still hold the old file (its unlink
    lost), so each create starts a new identity for its number. A line "mark<TAB>returned" is
    where the traced call returned to its caller."""
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
            elif kind in SYNC_OPS:
                ops.append({"op": kind, "path": parts[1], "ino": ident(int(parts[2])), "dir": parts[3:4] == ["d"]})
            elif kind == "create":
                generation += 1
                current[int(parts[2])] = ("g", generation)
                ops.append({"op": kind, "path": parts[1], "ino": current[int(parts[2])]})
            elif kind in ("rename", "link"):
                ops.append({"op": kind, "path": parts[1], "path2": parts[2]})
            elif kind in ("unlink", "rmdir", "mkdir", "sync"):
                ops.append({"op": kind, "path": parts[1]})
            elif kind == "mark":
                ops.append({"op": "mark", "what": parts[1]})
            elif kind == "unsupported":
                raise UnsupportedCall(f"{parts[1]} on {parts[2]}: the explorer does not model this call")
            else:
                raise UnsupportedCall(f"unknown trace line {kind!r}")
    return ops


def parent(p):
    return os.path.dirname(p)


def resolve(before_root, before_paths, ops):
    """Ties every name operation to directory identities, as the namespace was when the call
    was made: a crash state applies some of the operations, and an operation changes its
    directory's entries whether or not that directory is reachable in the state (a directory
    whose own entry was lost is an orphan, and the tree below it with it; a rename that
    persisted makes it reachable again). Adds "dir" (and "dir2"), "name" (and "name2"), and
    for links and renames "obj", the file or directory moved; syncs get "target"."""
    ns = dict(before_paths)  # path -> ("d", id) or ("f", ino)
    made = 0

    def split(p):
        return ns.get(parent(p), ("d", ("lost", parent(p))))[1], os.path.basename(p)

    for o in ops:
        k = o["op"]
        if k in ("create", "mkdir", "unlink", "rmdir"):
            o["dir"], o["name"] = split(o["path"])
        if k == "create":
            ns[o["path"]] = ("f", o["ino"])
        elif k == "mkdir":
            made += 1
            o["obj"] = ("d", ("m", made))
            ns[o["path"]] = o["obj"]
        elif k in ("unlink", "rmdir"):
            ns.pop(o["path"], None)
        elif k in ("link", "rename"):
            o["dir"], o["name"] = split(o["path"])
            o["dir2"], o["name2"] = split(o["path2"])
            o["obj"] = ns.get(o["path"])
            if k == "link":
                ns[o["path2"]] = o["obj"]
            else:
                a, b = o["path"], o["path2"]
                moved = {p: v for p, v in ns.items() if p == a or p.startswith(a + "/")}
                for p in moved:
                    del ns[p]
                for p, v in moved.items():
                    ns[b + p[len(a):]] = v
        elif k in SYNC_OPS:
            o["target"] = ns.get(o["path"], ("?", None))[1]
    return ops


def name_dir(o):
    """The directory (identity) a name operation puts its name in, or removes it from."""
    return o["dir2"] if o["op"] in ("rename", "link") else o["dir"]


def durable_at(ops, model):
    """For each op, the index of the sync that makes it durable (len(ops) when none does)."""
    n = len(ops)
    out = [n] * n
    for i, o in enumerate(ops):
        if o["op"] in NAME_OPS:
            d = name_dir(o)
            for j in range(i + 1, n):
                s = ops[j]
                if s["op"] == "sync" or (s["op"] == "fsync" and s.get("target") == d):
                    out[i] = j
                    break
        elif o["op"] in DATA_OPS:
            for j in range(i + 1, n):
                s = ops[j]
                if s["op"] == "sync" or (s["op"] in SYNC_OPS and s.get("ino") == o["ino"]):
                    out[i] = j
                    break
        else:
            out[i] = i
    # Name operations persist in order: globally ("ordered"), or within their directory.
    later = {}
    for i in range(n - 1, -1, -1):
        if ops[i]["op"] in NAME_OPS:
            scope = None if model == "ordered" else name_dir(ops[i])
            later[scope] = min(later.get(scope, n), out[i])
            out[i] = later[scope]
    return out


ROOT_ID = ("root",)


class State:
    """Directories by identity, each with its entries (name -> ("f", inode) or ("d", id)), and
    inode contents. What a state holds is what is reachable from the data directory."""

    def __init__(self, root, entries, data):
        self.root, self.entries, self.data = root, entries, data

    @classmethod
    def snapshot(cls, root):
        entries, data, paths = {}, {}, {}
        for d, subdirs, files in os.walk(root):
            did = ROOT_ID if d == root else ("s", d)
            entries.setdefault(did, {})
            paths[d] = ("d", did)
            for s in subdirs:
                entries[did][s] = ("d", ("s", os.path.join(d, s)))
            for f in files:
                p = os.path.join(d, f)
                ino = ("s", os.lstat(p).st_ino)
                entries[did][f] = ("f", ino)
                paths[p] = ("f", ino)
                if ino not in data:
                    with open(p, "rb") as fh:
                        data[ino] = fh.read()
        state = cls(root, entries, data)
        state.paths = paths
        return state

    def copy(self):
        return State(self.root, {d: dict(e) for d, e in self.entries.items()}, dict(self.data))

    def apply(self, o, damage=None):
        """Applies `o`; a write may be damaged: "torn" (only up to the first page boundary
        after its start persisted) or "garbage" (its blocks hold old contents: bytes of a
        seeded generator, the file extended as the write extended it)."""
        k = o["op"]
        if k == "write":
            cur = bytearray(self.data.get(o["ino"], b""))
            d = o["data"]
            if damage == "torn":
                cut = ((o["off"] // PAGE) + 1) * PAGE - o["off"]
                d = d[:max(0, cut)]
            elif damage == "garbage":
                d = random.Random(o["off"] * 31 + len(d)).randbytes(len(d))
            end = o["off"] + len(d)
            if len(cur) < end:
                cur.extend(b"\0" * (end - len(cur)))
            cur[o["off"]:end] = d
            self.data[o["ino"]] = bytes(cur)
        elif k == "truncate":
            cur = self.data.get(o["ino"], b"")
            self.data[o["ino"]] = cur[:o["len"]] + b"\0" * max(0, o["len"] - len(cur))
        elif k == "create":
            self.entries.setdefault(o["dir"], {}).setdefault(o["name"], ("f", o["ino"]))
            self.data.setdefault(o["ino"], b"")
        elif k == "mkdir":
            self.entries.setdefault(o["dir"], {}).setdefault(o["name"], o["obj"])
            self.entries.setdefault(o["obj"][1], {})
        elif k == "rmdir":
            e = self.entries.get(o["dir"], {})
            if o["name"] in e and not self.entries.get(e[o["name"]][1]):
                del e[o["name"]]
        elif k == "unlink":
            self.entries.get(o["dir"], {}).pop(o["name"], None)
        elif k == "link":
            if o["obj"]:
                self.entries.setdefault(o["dir2"], {}).setdefault(o["name2"], o["obj"])
        elif k == "rename":
            if o["obj"]:
                src = self.entries.get(o["dir"], {})
                if src.get(o["name"]) == o["obj"]:
                    del src[o["name"]]
                self.entries.setdefault(o["dir2"], {})[o["name2"]] = o["obj"]

    def walk(self):
        """(path, ("f", ino) or ("d", id)) of everything reachable, parents first."""
        out, stack, seen = [], [(self.root, ROOT_ID)], set()
        while stack:
            path, did = stack.pop()
            if did in seen:
                continue
            seen.add(did)
            for name in sorted(self.entries.get(did, {})):
                obj = self.entries[did][name]
                p = path + "/" + name
                out.append((p, obj))
                if obj[0] == "d":
                    stack.append((p, obj[1]))
        return out

    def reachable_paths(self):
        return [p for p, _ in self.walk()]

    def key(self):
        """What tells states apart: every reachable path, and each file's contents (by length and
        Python's hash of the bytes, which a bytes object computes once and keeps)."""
        return hash(tuple((p, obj[0]) if obj[0] == "d" else (p, len(self.data.get(obj[1], b"")), hash(self.data.get(obj[1], b"")))
                          for p, obj in sorted(self.walk())))

    def materialize(self, new_root):
        os.makedirs(new_root, exist_ok=True)
        first = {}
        for p, obj in self.walk():
            q = new_root + p[len(self.root):]
            if obj[0] == "d":
                os.makedirs(q, exist_ok=True)
            elif obj[1] in first:
                os.link(first[obj[1]], q)
            else:
                with open(q, "wb") as f:
                    f.write(self.data.get(obj[1], b""))
                first[obj[1]] = q
        # Release files are read-only on disk, as the installer leaves them.
        for d, _, files in os.walk(os.path.join(new_root, "releases")):
            for f in files:
                if "/files" in d:
                    os.chmod(os.path.join(d, f), 0o444)


def crash_states(before, ops, model, seed=0):
    """The distinct states a crash could leave under `model`: {(key, returned): (state, why)},
    `returned` telling whether the traced call had returned to its caller at that point."""
    dur = durable_at(ops, model)
    rng = random.Random(seed)
    seen = {}
    returned = False
    damages = ("torn", "garbage") if model == "directory" else ("torn",)

    def add(m, why):
        k = (m.key(), returned)
        if k not in seen:
            seen[k] = (m, why)

    def build(issued):
        m = before.copy()
        for i in issued:
            m.apply(ops[i])
        return m

    data_ops = {}  # inode -> indices of its writes and truncates
    for i, o in enumerate(ops):
        if o["op"] in DATA_OPS:
            data_ops.setdefault(o["ino"], []).append(i)

    def rewritten(state, k, skip=(), damaged=None, damage=None):
        """`state` (everything issued before op k) with the inodes of `skip` and `damaged`
        written again from their contents before the flow, without or with damage."""
        m = state.copy()
        for ino in {ops[i]["ino"] for i in (*skip, *(() if damaged is None else (damaged,)))}:
            m.data[ino] = before.data.get(ino, b"")
            for i in data_ops[ino]:
                if i >= k:
                    break
                if i == damaged:
                    m.apply(ops[i], damage)
                elif i not in skip:
                    m.apply(ops[i])
        return m

    kill = before.copy()
    for k in range(len(ops) + 1):
        if k:
            kill.apply(ops[k - 1])
            if ops[k - 1]["op"] == "mark":
                returned = True
        issued = list(range(k))
        durable = {i for i in issued if dur[i] < k}
        unsynced = [i for i in issued if dur[i] >= k and ops[i]["op"] in NAME_OPS | DATA_OPS]
        unsynced_names = [i for i in unsynced if ops[i]["op"] in NAME_OPS]
        unsynced_writes = [i for i in unsynced if ops[i]["op"] == "write"]
        add(kill.copy(), f"kill after op {k}")
        only_durable = [i for i in issued if i in durable]
        add(build(only_durable), f"power cut after op {k}: only durable ops")
        if model == "ordered":
            for cut in range(1, len(unsynced_names)):
                add(build(sorted(durable | set(unsynced_names[:cut]))),
                    f"power cut after op {k}: durable ops and names up to op {unsynced_names[cut - 1]}")
        else:
            by_dir = {}
            for i in unsynced_names:
                by_dir.setdefault(name_dir(ops[i]), []).append(i)
            for d, names in by_dir.items():
                for cut in range(1, len(names) + 1):
                    add(build(sorted(durable | set(names[:cut]))),
                        f"power cut after op {k}: durable ops and {d}'s names up to op {names[cut - 1]}")
            if len(by_dir) > 1:
                for _ in range(3):
                    keep = set(durable)
                    for names in by_dir.values():
                        keep |= set(names[:rng.randint(0, len(names))])
                    add(build(sorted(keep)), f"power cut after op {k}: durable ops and a prefix of each directory's names")
        for u in unsynced_writes:
            add(rewritten(kill, k, skip={u}), f"kill after op {k} with write {u} lost")
            for damage in damages:
                o = ops[u]
                if damage == "torn" and len(o["data"]) <= PAGE - o["off"] % PAGE:
                    continue
                add(rewritten(kill, k, damaged=u, damage=damage), f"kill after op {k} with write {u} {damage}")
        if len(unsynced_writes) > 1:
            add(rewritten(kill, k, skip=set(unsynced_writes)), f"kill after op {k} with every unsynced write lost")
    return seen


# ------------------------------------------------------------------ syncs, for the mutation gate

def sync_kind(o, root):
    """What a sync makes durable, as a pattern of the data directory's paths: each kind is one
    rule of the library's (the state file's data, a release's files, the releases directory's
    entries...), whatever the ids and digests of a run."""
    rel = o["path"][len(root):].lstrip("/") or "."
    rel = re.sub(r"\.tmp\.\d+\.\d+$", ".tmp", rel)
    rel = re.sub(r"^rollout-id\.\d+\.tmp", "rollout-id.<pid>.tmp", rel)
    rel = re.sub(r"[0-9a-f]{64}", "<sha256>", rel)
    rel = re.sub(r"\b\d+-[0-9a-f]{16}\b", "<id>", rel)
    rel = re.sub(r"/files/.+$", "/files/…", rel)
    what = "directory" if o.get("dir") else o["op"]
    return f"{what} {rel}"


def without_syncs(ops, root, kind):
    """The trace with every sync of `kind` taken out (as if the library had not issued it)."""
    return [o for o in ops if not (o["op"] in SYNC_OPS and sync_kind(o, root) == kind)]
