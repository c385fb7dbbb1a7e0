"""Every edit pattern, against the delta tools people use from a plain web server.

Real release pairs, downloaded from PyPI (each tree is a wheel's contents, as an app would ship
it), and synthetic patterns on one 32 MiB pack file. For each, in one run over one loopback
nginx that counts every byte it sends (status lines, headers, bodies; control files and
indexes included):

- assetpatch: v1 installed from its head by a minimal C host, then the update to v2's head;
- zsync: the tree as an uncompressed tar (names sorted), `zsync -i old.tar`;
- zchunk: the same tars as .zck, `zckdl -s old.zck`;
- casync: the tree as a directory index (`casync make` of the directory), `casync extract
  --seed=old tree`;

and a fresh install's archive against `zip -r -6` of the tree. Run alone:
    python3 bench/pairs_bench.py [--quick]
(spliced into bench/RESULTS.md; needs zsync, zchunk, casync and the built library)."""
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import CLI, MB, standalone  # noqa: E402
from chunk_bench import KB, WireNginx, build_tools, log, publish, same  # noqa: E402

SECTION = "## Every edit pattern: real release pairs and synthetic packs"

# (label, what it is, PyPI requirement of v1, of v2)
PAIRS = [
    ("api-client", "a Python API client: ~500 JSON discovery documents, most changed by a few lines",
     "google-api-python-client==2.150.0", "google-api-python-client==2.151.0"),
    ("game-library", "a game library: rebuilt native libraries (manylinux wheel)",
     "pygame==2.6.0", "pygame==2.6.1"),
    ("data-tree", "a data tree: the time zone database, small binary files",
     "tzdata==2024.1", "tzdata==2024.2"),
    ("large-text", "one large text file changed in part (a Python data module)",
     "emoji==2.12.1", "emoji==2.13.0"),
]


def fetch_tree(req, work):
    """The wheel `req` (py3, manylinux x86_64 for CPython 3.11 when it has native code), unpacked."""
    d = os.path.join(work, "wheels", req.replace("==", "-"))
    if not os.path.isdir(d):
        dl = d + ".dl"
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.11", "--platform", "manylinux2014_x86_64", "--platform", "any",
                        "--implementation", "cp", "-d", dl, req], check=True)
        whl = [n for n in os.listdir(dl) if n.endswith(".whl")][0]
        with zipfile.ZipFile(os.path.join(dl, whl)) as z:
            z.extractall(d)
    return d


def tree_tar(tree, path):
    """An uncompressed tar of `tree`, names sorted, times and owners fixed: what zsync and
    zchunk get (they move single files)."""
    names = sorted(os.path.relpath(os.path.join(dp, n), tree) for dp, _, ns in os.walk(tree) for n in ns)
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as t:
        for n in names:
            info = t.gettarinfo(os.path.join(tree, n), arcname=n)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(os.path.join(tree, n), "rb") as f:
                t.addfile(info, f)


def tree_bytes(tree):
    return sum(os.path.getsize(os.path.join(dp, n)) for dp, _, ns in os.walk(tree) for n in ns)


def plain_zip(tree, work):
    out = os.path.join(work, "plain.zip")
    if os.path.exists(out):
        os.unlink(out)
    subprocess.run(["zip", "-q", "-r", "-6", "-X", out, "."], cwd=tree, check=True)
    return os.path.getsize(out)


def same_tree(a, b):
    return subprocess.run(["diff", "-rq", a, b], capture_output=True).returncode == 0


def one_pair(tools, nginx, work, name, v1, v2):
    """Bytes nginx sent for v1 -> v2 by assetpatch and each tool; the fresh archive's size."""
    root = nginx.root
    ub = tools["update_bench"]
    out = {"tree_bytes": tree_bytes(v2), "zip": plain_zip(v2, work)}
    names = sorted(os.path.relpath(os.path.join(dp, n), v2) for dp, _, ns in os.walk(v2) for n in ns)

    def ours(label, *options):
        """assetpatch published with `options`: bytes of the update, requests, the archive's size."""
        repo = os.path.join(root, name + label)
        shutil.rmtree(repo, ignore_errors=True)
        shutil.rmtree(repo + "-v2", ignore_errors=True)
        publish(v1, repo, 1, *options, package="pairs-" + name)
        shutil.copytree(repo, repo + "-v2")
        publish(v2, repo + "-v2", 2, *options, package="pairs-" + name)
        head = json.load(open(os.path.join(repo + "-v2", "head.json")))
        data = os.path.join(work, "data-" + name + label)
        shutil.rmtree(data, ignore_errors=True)
        subprocess.run([ub, data, nginx.url(f"{name}{label}/head.json")], check=True, capture_output=True)
        mk = nginx.mark()
        subprocess.run([ub, data, nginx.url(f"{name}{label}-v2/head.json")], check=True, capture_output=True)
        sent, requests = nginx.since(mk, f"/{name}{label}-v2/")
        for at in range(0, len(names), 500):
            part = names[at:at + 500]
            paths = subprocess.run([CLI, "resolve", "--data-dir", data, "--", *part], capture_output=True, text=True,
                                   check=True).stdout.splitlines()
            bad = [n for n, p in zip(part, paths) if not same(p, os.path.join(v2, n))]
            if len(paths) != len(part) or bad:
                raise RuntimeError(f"{name}{label}: the update does not serve v2's bytes: {bad[:3]}")
        return sent, requests, head["archive"]["size"]

    # The defaults, and for fleets of 0.5 clients alone every file from 64 KiB with chunks that
    # share history (--chunk-threshold 0: none cut on its own, which clients since 0.4 fetch).
    out["assetpatch"], out["assetpatch_requests"], out["archive"] = ours("")
    out["linked"], _, out["linked_archive"] = ours("-linked", "--chunk-threshold", "0")
    out["linked4"], _, out["linked4_archive"] = ours("-linked4", "--chunk-threshold", "0", "--chunk-size", "4096")

    tdir = os.path.join(root, name + "-tools")
    shutil.rmtree(tdir, ignore_errors=True)
    os.makedirs(tdir)
    for v, tree in (("v1", v1), ("v2", v2)):
        tree_tar(tree, os.path.join(tdir, f"{v}.tar"))
        subprocess.run(["zck", "-o", os.path.join(tdir, f"{v}.tar.zck"), os.path.join(tdir, f"{v}.tar")], check=True, capture_output=True)
        subprocess.run(["casync", "make", "--store=" + os.path.join(tdir, "castore"), os.path.join(tdir, f"{v}.caidx"), tree],
                       check=True, capture_output=True)
    subprocess.run(["zsyncmake", "-u", nginx.url(f"{name}-tools/v2.tar"), "-o", os.path.join(tdir, "v2.tar.zsync"),
                    os.path.join(tdir, "v2.tar")], check=True, capture_output=True)
    run = os.path.join(work, "toolrun")

    def tool(label, cmd, check):
        shutil.rmtree(run, ignore_errors=True)
        os.makedirs(run)
        shutil.copy(os.path.join(tdir, "v1.tar"), os.path.join(run, "old.tar"))
        shutil.copy(os.path.join(tdir, "v1.tar.zck"), os.path.join(run, "v1.tar.zck"))
        mk = nginx.mark()
        subprocess.run(cmd, cwd=run, check=True, capture_output=True)
        sent, _ = nginx.since(mk, f"/{name}-tools/")
        if not check():
            raise RuntimeError(f"{name}: {label}'s result is not v2")
        out[label] = sent

    tool("zsync", ["zsync", "-q", "-i", "old.tar", "-o", "new.tar", nginx.url(f"{name}-tools/v2.tar.zsync")],
         lambda: same(os.path.join(run, "new.tar"), os.path.join(tdir, "v2.tar")))
    tool("zchunk", ["zckdl", "-q", "-s", "v1.tar.zck", nginx.url(f"{name}-tools/v2.tar.zck")],
         lambda: same(os.path.join(run, "v2.tar.zck"), os.path.join(tdir, "v2.tar.zck")))
    tool("casync", ["casync", "extract", "--store=" + nginx.url(f"{name}-tools/castore"), "--seed=" + v1,
                    nginx.url(f"{name}-tools/v2.caidx"), os.path.join(run, "tree")],
         lambda: same_tree(os.path.join(run, "tree"), v2))
    shutil.rmtree(run, ignore_errors=True)
    best = min(("zsync", "zchunk", "casync"), key=lambda k: out[k])
    out["best"], out["ratio"], out["linked_ratio"] = best, out["assetpatch"] / out[best], out["linked"] / out[best]
    out["linked4_ratio"] = out["linked4"] / out[best]
    log(f"  {name}: assetpatch {out['assetpatch']:,} bytes ({out['linked']:,} all linked), zsync {out['zsync']:,}, "
        f"zchunk {out['zchunk']:,}, casync {out['casync']:,}: {out['ratio']:.2f}x the best ({best}), "
        f"{out['linked_ratio']:.2f}x all linked, {out['linked4_ratio']:.2f}x at 4 KiB; archive {out['archive'] / out['zip']:.3f}x zip -6 "
        f"({out['linked_archive'] / out['zip']:.3f}x all linked, {out['linked4_archive'] / out['zip']:.3f}x at 4 KiB)")
    return out


# ---------------------------------------------------------------- synthetic packs

def words(rnd, size):
    vocab = [b"texture", b"mesh", b"sound", b"level", b"bank", b"shader", b"of", b"asset", b"frame", b"{\"id\": ", b"},\n"]
    out = bytearray()
    while len(out) < size:
        out += rnd.choice(vocab) + b" "
    return bytes(out[:size])


def records(seed, total):
    rnd = random.Random(seed)
    out, size = [], 0
    while size < total:
        n = rnd.choice((4 * KB, 16 * KB, 64 * KB, 256 * KB))
        out.append(rnd.randbytes(n) if rnd.random() < 0.5 else words(rnd, n))
        size += n
    return out


def patterns(total):
    """(name, what, v1 records, v2 records, new bytes) for each synthetic edit pattern."""
    base = records(1, total)
    rnd = random.Random(2)
    out = []
    v2 = list(base)
    picked = rnd.sample(range(len(base)), 16)
    new = 0
    for i in picked:
        v2[i] = rnd.randbytes(len(base[i]))
        new += len(base[i])
    out.append(("in-place", "16 records rewritten in place", base, v2, new))
    v2 = list(base)
    for i in sorted(rnd.sample(range(len(base)), 16), reverse=True):
        v2.insert(i, rnd.randbytes(16 * KB))
    out.append(("insertions", "16 records of 16 KiB inserted", base, v2, 16 * 16 * KB))
    v2 = list(base)
    for i in sorted(rnd.sample(range(len(base)), 16), reverse=True):
        del v2[i]
    out.append(("deletions", "16 records deleted", base, v2, 0))
    out.append(("append", "1 MiB of records appended", base, base + [rnd.randbytes(256 * KB) for _ in range(4)], MB))
    pack = bytearray(b"".join(base))
    for _ in range(200):
        at = rnd.randrange(len(pack) - 64)
        pack[at:at + 40] = words(rnd, 40)
    out.append(("scattered", "200 edits of 40 bytes scattered over the pack", base, [bytes(pack)], 200 * 40))
    blocks = [base[i::8] for i in range(8)]
    rnd.shuffle(blocks)
    out.append(("re-ordered", "the same records in another order (8 interleaved runs)", base, [r for b in blocks for r in b], 0))
    return out


def run_all(work, runs, quick):
    tools = build_tools(work)
    repos = os.path.join(work, "pair-repos")
    os.makedirs(repos, exist_ok=True)
    nginx = WireNginx(repos, os.path.join(work, "pair-nginx"))
    r = {"pairs": {}, "patterns": {}}
    try:
        for name, what, a, b in PAIRS[:2] if quick else PAIRS:
            log(f"{name}: {a} -> {b}")
            r["pairs"][name] = {"what": what, "from": a, "to": b,
                                **one_pair(tools, nginx, work, name, fetch_tree(a, work), fetch_tree(b, work))}
        for name, what, v1, v2, new in patterns((8 if quick else 32) * MB):
            trees = []
            for v, recs in (("v1", v1), ("v2", v2)):
                d = os.path.join(work, f"pattern-{name}-{v}")
                shutil.rmtree(d, ignore_errors=True)
                os.makedirs(os.path.join(d, "data"))
                with open(os.path.join(d, "data", "pack.bin"), "wb") as f:
                    f.write(b"".join(recs))
                trees.append(d)
            log(f"{name}: {what}")
            r["patterns"][name] = {"what": what, "new": new, **one_pair(tools, nginx, work, name, *trees)}
    finally:
        nginx.stop()
    return r


def section(r):
    mk = lambda ok: "yes" if ok else "**no**"  # noqa: E731
    lines = [SECTION, "",
             "Every byte nginx sent for the update (status lines, headers, bodies: heads, index pages, control files, "
             "indexes, chunks), one run each, v1 installed, all tools from the same nginx. zsync and zchunk move the tree "
             "as one uncompressed tar (names sorted), casync as a directory index seeded with the old tree. Archive: "
             "a fresh install's archive against `zip -r -6` of the same tree. assetpatch as published by default "
             "(files of 4 MiB and more cut into chunks that decode on their own, which clients since 0.4 fetch; "
             "from 64 KiB, chunks that share history, which clients since 0.5 fetch; each changed file also as a delta "
             "against v1's, which clients since 0.5 that have v1 fetch instead), and *all linked* "
             "(`--chunk-threshold 0`: every file from 64 KiB with chunks that share history, for fleets of 0.5 "
             "clients), and all linked with 4 KiB chunks (`--chunk-size 4096`).", "",
             "| pair | v2 unpacked | assetpatch | all linked | 4 KiB | zsync | zchunk | casync | x best | all linked, x best "
             "| 4 KiB, x best | archive / zip -6 | all linked | 4 KiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = list(r["pairs"].items()) + list(r["patterns"].items())
    for name, p in rows:
        label = f"{name}: {p['from']} -> {p['to'].split('==')[1]}" if "from" in p else f"{name} ({p['what']})"
        lines.append(f"| {label} | {p['tree_bytes']:,} | {p['assetpatch']:,} | {p['linked']:,} | {p['linked4']:,} | {p['zsync']:,} | "
                     f"{p['zchunk']:,} | {p['casync']:,} | {p['ratio']:.2f}x ({p['best']}) | {p['linked_ratio']:.2f}x | "
                     f"{p['linked4_ratio']:.2f}x | {p['archive'] / p['zip']:.3f}x | {p['linked_archive'] / p['zip']:.3f}x | "
                     f"{p['linked4_archive'] / p['zip']:.3f}x |")
    # New bytes say what an update must move where the edit brings them (in place, inserted,
    # appended); deletions, re-ordering and 40-byte edits bring next to none, and are judged
    # against the tools alone.
    large = [p for p in r["patterns"].values() if p["new"] >= 256 * KB]
    mean = sum(p["assetpatch"] / p["new"] for p in large) / len(large) if large else 0
    lines += ["", "Targets:", "", "| target | measured | met |", "|---|---|---|",
              f"| every pair and pattern: bytes <= the best of zsync, zchunk and casync | "
              f"{sum(p['ratio'] <= 1 for _, p in rows)} of {len(rows)} | {mk(all(p['ratio'] <= 1 for _, p in rows))} |",
              f"| ... all linked | {sum(p['linked_ratio'] <= 1 for _, p in rows)} of {len(rows)} | "
              f"{mk(all(p['linked_ratio'] <= 1 for _, p in rows))} |",
              f"| ... all linked, 4 KiB chunks | {sum(p['linked4_ratio'] <= 1 for _, p in rows)} of {len(rows)} | "
              f"{mk(all(p['linked4_ratio'] <= 1 for _, p in rows))} |",
              f"| large-file patterns: <= 1.05x the new bytes on average (in place, insertions, append: "
              f"{', '.join('%.2fx' % (p['assetpatch'] / p['new']) for p in large)}) | {mean:.3f}x | {mk(mean <= 1.05)} |",
              f"| a fresh install's archive <= 1.05x zip -r -6 | {max(p['archive'] / p['zip'] for _, p in rows):.3f}x at most | "
              f"{mk(all(p['archive'] / p['zip'] <= 1.05 for _, p in rows))} |",
              f"| ... all linked | {max(p['linked_archive'] / p['zip'] for _, p in rows):.3f}x at most | "
              f"{mk(all(p['linked_archive'] / p['zip'] <= 1.05 for _, p in rows))} |",
              f"| ... all linked, 4 KiB chunks | {max(p['linked4_archive'] / p['zip'] for _, p in rows):.3f}x at most | "
              f"{mk(all(p['linked4_archive'] / p['zip'] <= 1.05 for _, p in rows))} |", ""]
    return lines


def main():
    standalone(SECTION, run_all, section, "assetpatch-pairs.", "bench-pairs.json")


if __name__ == "__main__":
    main()
