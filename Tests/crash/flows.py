"""The flows the crash-state explorer traces: how each prepares a data directory, the call it
traces, and what every crash state of it must serve, before and after that call returned."""
import json
import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Tuple, Union

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PREFIX = os.path.join(ROOT, "build", "prefix")
CLI = os.path.join(PREFIX, "bin", "assetpatch")
LIB = os.path.join(PREFIX, "lib", "libassetpatch.so.1")


@dataclass
class Expect:
    """What a crash state of a flow must serve. `before` and `after`: the versions it may
    serve (0: the bundle) at a crash before or after the traced call returned: once a call
    has returned, what it promised must survive any crash. `final`: what an update afterwards
    serves (by the version served, when it differs). `kept`: versions that must stay served or
    on disk, every file hashing as published. `marked_after`: the active release's mark_good
    must survive once the call returned."""
    before: List[int]
    after: List[int]
    final: Union[int, Dict[int, int]]
    kept: List[int] = field(default_factory=list)
    marked_after: bool = False
    refuses_after: str = ""  # a repository whose manifest must be refused once the call returned
    # An on-demand group (name, publish pattern): its files resolve all to their published bytes
    # or are all not local, never some; `group_after`: it must be local once the call returned.
    group: Tuple[str, ...] = ()
    group_after: bool = False


@dataclass
class Flow:
    prep: List[Tuple[str, dict]]
    traced: Tuple[str, dict]
    expect: Expect
    http: bool = False        # served by a private nginx (ranges, validators, 304s)
    chunked: bool = False     # published with a chunk threshold below the pack's size
    signed: str = ""          # "keep": signed, version 2 by a key a key document adds; "rotate": the
                              # document also retires the pinned key, and repo3 offers version 3
                              # signed by it alone (a thief's release)
    between: int = 0          # releases published between repo1's and repo2's, in repositories
                              # mid1.. (versions 2..); repo2's is then version between + 2
    then: bool = False        # a next release (repository "next", the version after repo2's) that
                              # an update after the crash state's own must install exactly: what
                              # the call left for later updates (the spare tree) is checked too


UPDATE = Expect(before=[1, 2], after=[2], final=2, kept=[1])

FLOWS = {
    "first_install": Flow([], ("update", {"differential": "auto"}), Expect([0, 2], [2], 2)),
    "full_update": Flow([("update1", {}), ("mark_good", {})], ("update", {"differential": "off"}), UPDATE),
    "differential_update": Flow([("update1", {}), ("mark_good", {})], ("update", {"differential": "auto"}), UPDATE),
    "rollback": Flow([("update1", {}), ("mark_good", {}), ("update", {})], ("rollback", {}),
                     Expect([1, 2], [1], {1: 1, 2: 2}, kept=[1])),
    "mark_good": Flow([("update1", {}), ("mark_good", {}), ("update", {})], ("mark_good", {}),
                      Expect([2], [2], 2, kept=[1, 2], marked_after=True)),
    "app_upgrade": Flow([("update1", {}), ("update", {}), ("stamp_bundle", {})], ("open", {}), Expect([0, 2], [0], 0)),
    "garbage_collection": Flow([("update1", {}), ("mark_good", {})], ("update", {"keep_versions": "0"}), Expect([1, 2], [2], 2)),
    "gc_while_served": Flow([("update1", {}), ("mark_good", {}), ("serve", {})], ("update", {"keep_versions": "0"}),
                            Expect([1, 2], [2], 2)),
    "resumed_download": Flow([("update1", {}), ("partial", {})], ("update", {"differential": "off"}), UPDATE, http=True),
    "chunked_update": Flow([("update1", {}), ("mark_good", {})], ("update", {"differential": "auto"}), UPDATE, chunked=True),
    "next_open_activation": Flow([("update1", {}), ("mark_good", {}), ("update", {"apply": "next_open"})], ("open", {}), UPDATE),
    "manifest_cache_http": Flow([("update1", {}), ("mark_good", {}), ("check", {})], ("update", {}), UPDATE, http=True),
    "key_document": Flow([("update1", {}), ("mark_good", {})], ("update", {}), UPDATE, signed="keep"),
    # Version 1 ends when the document retiring its key is followed (by design); once the update
    # returned, the retired key must stay retired: a power cut must not bring it back.
    "key_rotation": Flow([("update1", {}), ("mark_good", {})], ("update", {}),
                         Expect([0, 1, 2], [2], 2, refuses_after="repo3"), signed="rotate"),
    # Fetching an on-demand group of the release served: before the fetch returned the group is
    # on disk whole or absent; once it returned it stays, and the next update carries it.
    "group_fetch": Flow([("update1", {}), ("mark_good", {})], ("group_fetch", {}),
                        Expect([1], [1], 2, kept=[1], group=("lvl", "f0*"), group_after=True)),
    # Outcome events: an acknowledgement, then an event appended (a check). Every flow's verdict
    # also checks the outbox (verdict.outbox_problem); this one traces the acknowledgement.
    "outbox": Flow([("update1", {}), ("mark_good", {})], ("events_ack", {}), Expect([1], [1], 2, kept=[1])),
    # The spare tree (docs/architecture.md, "Installing a large catalog"): versions 1, 2 and 3
    # installed (keep_versions 1), so version 1 left at 3's activation and its tree is the
    # spare; the update to version 4 moves it into staging, changes only what 4 changes, and
    # at activation makes version 2, leaving, the next spare.
    "spare_tree": Flow([("update1", {}), ("mark_good", {}), ("update", {"repo": "mid1"}), ("mark_good", {}),
                        ("update", {"repo": "mid2"}), ("mark_good", {})], ("update", {"differential": "auto"}),
                       Expect([3, 4], [4], 4, kept=[3]), between=2, then=True),
    # A second crash: the open that recovers a crash state of full_update, traced and explored
    # in turn (explorer.py picks the first crash's states).
    "crash_during_recovery": Flow([], ("open", {}), Expect([1, 2], [1, 2], 2, kept=[1])),
}


def repositories(flow):
    """(repository, version) of each release a flow publishes: repo1's version 1, the releases
    between, repo2's last."""
    n = FLOWS[flow].between
    return [("repo1", 1)] + [(f"mid{i}", i + 1) for i in range(1, n + 1)] + [("repo2", n + 2)] + \
        ([("next", n + 3)] if FLOWS[flow].then else [])


def published_files(flow):
    """Each version's files by path, as sha256 (version 0: the bundle)."""
    import hashlib
    versions = [0] + [v for _, v in repositories(flow)]
    return {v: {p: hashlib.sha256(d).hexdigest() for p, d in release_files(v, flow).items()} for v in versions}


def release_files(version, flow):
    """Twelve files that change between releases, two that don't, and a pack: 9 KB, or, for
    the chunked flow, 96 KB cut into 4 KiB chunks of which version 2 rewrites a few. Version 0
    is the bundle: three files, one of a name the releases have too."""
    rnd = random.Random(version)
    if flow == "spare_tree" and version == 5:
        # The next release keeps what 4 changed but two files: built on the spare tree the call
        # made, a file the spare lost or kept from version 2 would show.
        files = release_files(4, flow)
        files["f05.bin"] = bytes(rnd.getrandbits(8) for _ in range(5500))
        # ... and one back at version 2's bytes: a spare naming version 2's record over version
        # 4's files would hold it "in place".
        files["f07.bin"] = release_files(2, flow)["f07.bin"]
        return files
    if version == 0:
        return {"bundle.txt": b"shipped with the app\n" * 10, "f00.bin": b"bundle copy of f00\n" * 50,
                "sub/bundle.bin": bytes(rnd.getrandbits(8) for _ in range(2000))}
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


def write_tree(root, files):
    for name, data in files.items():
        p = os.path.join(root, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)


def publish(repo, version, files, options=()):
    src = repo + f"-src{version}"
    shutil.rmtree(src, ignore_errors=True)
    write_tree(src, files)
    subprocess.run([CLI, "publish", src, "--repo", repo, "--package", "crash", "--version", str(version), *options],
                   check=True, stdout=subprocess.DEVNULL)


def publish_signed(work, name, chunking, how):
    """Version 1 signed by the pinned key in both repositories; repo2 then publishes key
    document 1 (a root key, signing keys pinned and s1, or s1 alone when `how` is "rotate";
    signed by the pinned and the root key) and version 2 signed by s1. "rotate" also publishes
    repo3: version 3 signed by the pinned key alone. Returns the client options: the pinned key."""
    keys = os.path.join(work, "keys")
    os.makedirs(keys)

    def cli(*args):
        subprocess.run([CLI, *map(str, args)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    for k in ("pinned", "root", "s1"):
        cli("keygen", "--out", f"{keys}/{k}.key")
    repo1, repo2 = os.path.join(work, "repo1"), os.path.join(work, "repo2")
    for repo in (repo1, repo2):
        publish(repo, 1, release_files(1, name), ("--key", f"{keys}/pinned.key", *chunking))
    # The pinned key stays a signing key beside s1: version 1, signed by it alone, stays trusted
    # (a document dropping it would end version 1 by design: docs/release-management.md).
    kept = ("--signing-key", f"{keys}/pinned.key.pub") if how == "keep" else ()
    cli("keys", "create", "--repo", repo2, "--root-key", f"{keys}/root.key.pub", *kept, "--signing-key", f"{keys}/s1.key.pub")
    for signer in ("pinned", "root"):
        cli("keys", "sign", os.path.join(repo2, "keys", "staged.json"), "--key", f"{keys}/{signer}.key")
    cli("keys", "publish", "--repo", repo2, "--pinned-key", f"{keys}/pinned.key.pub")
    publish(repo2, 2, release_files(2, name), ("--key", f"{keys}/s1.key", *chunking))
    if how == "rotate":
        publish(os.path.join(work, "repo3"), 3, release_files(3, name), ("--key", f"{keys}/pinned.key", *chunking))
    return {"public_keys": [open(f"{keys}/pinned.key.pub").read().strip()]}


DRIVER = r"""
import os, sys, json
import assetpatch
step, data, bundle, v1, v2, opts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], json.loads(sys.argv[6])
# A release between repo1's and repo2's: its repository beside them.
repo = opts.pop("repo", None)
if repo:
    v2 = v2[:v2.rindex("/repo2/")] + "/" + repo + "/head.json"
if step == "stamp_bundle":
    import subprocess
    subprocess.run([os.environ["ASSETPATCH_CLI"], "stamp-bundle", bundle, "--package", "crash", "--version", "2"], check=True,
                   stdout=subprocess.DEVNULL)
    sys.exit(0)

def returned():
    # Where the traced call returned to its caller: every later crash must keep its promise.
    log = os.environ.get("ASSETPATCH_FSTRACE")
    if log:
        with open(log, "a") as f:
            f.write("mark\treturned\n")

with assetpatch.Client(data, bundle, **opts) as c:
    if step in ("update", "update1", "partial", "check"):
        c.set("manifest_url", v1 if step == "update1" else v2)
        if step == "partial":
            c.set("differential", "off")
            try:
                c.update(progress=lambda p: p.phase == assetpatch.Phase.DOWNLOAD and p.bytes_done > 4000)
            except assetpatch.CancelledError:
                pass
        elif step == "check":
            c.check()
        else:
            c.update()
    elif step == "mark_good":
        c.mark_good()
    elif step == "events_ack":
        # Everything but the newest two acknowledged, then one more event (a check's).
        pending = c.events(max_bytes=1 << 20)
        c.ack_events(pending[-3]["seq"])
        c.set("manifest_url", v1)
        c.check()
    elif step == "group_fetch":
        c.fetch_groups("lvl")
    elif step == "rollback":
        c.rollback()
    elif step == "serve":
        # Serves what is active until told to stop (its lease held), then closes.
        print("serving", flush=True)
        sys.stdin.read()
    returned()
"""


def driver_env(work, trace=None):
    env = dict(os.environ, ASSETPATCH_LIBRARY=LIB, ASSETPATCH_CLI=CLI, PYTHONPATH=os.path.join(ROOT, "bindings", "python"))
    if trace:
        env.update(ASSETPATCH_FSTRACE=trace, ASSETPATCH_FSTRACE_ROOT=os.path.join(work, "data"),
                   LD_PRELOAD=os.path.join(work, "fstrace.so"))
    return env


def driver_args(work, step, opts, base_url=None, data=None):
    base = base_url or "file://" + work
    return [sys.executable, "-c", DRIVER, step, data or os.path.join(work, "data"), os.path.join(work, "bundle"),
            base + "/repo1/head.json", base + "/repo2/head.json", json.dumps(opts)]


def run_step(work, step, opts, trace=None, base_url=None, data=None):
    r = subprocess.run(driver_args(work, step, opts, base_url, data), env=driver_env(work, trace), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"step {step} failed: {r.stderr[-2000:]}")


def start_server(work, options=None):
    """A second process of the app serving the active release (its lease held) until stopped."""
    p = subprocess.Popen(driver_args(work, "serve", options or {}), env=driver_env(work), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "serving":
        raise RuntimeError("the serving process did not start")
    return p


def publish_options(flow):
    """The publish options of a flow: chunking, and its group."""
    f = FLOWS[flow]
    chunking = ("--chunk-threshold", "16384", "--chunk-size", "4096") if f.chunked else ()
    group = ("--group", f"{f.expect.group[0]}={f.expect.group[1]}") if f.expect.group else ()
    return chunking + group
