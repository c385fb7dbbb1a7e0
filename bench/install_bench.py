"""Installing a release when the catalog is large and the change is small.

A catalog of small files (512 B to 1.5 KiB, 100 per directory, 100 x 10 directories, as
chunk_bench's catalog) with one 100 KiB file changed, read from `file://` so that only the
install is measured (chunk_bench counts the same update's bytes over nginx). In one run:

- the update, by a minimal C host (bench/update_bench.c), wall time and peak RSS, from a copy of
  a data directory that installed v1, caches dropped;
- `cp -al` of the installed release's files (what the update must at least do to build a
  complete tree of links), caches dropped; and the same pair with warm caches;
- the system calls the update made that scale with the catalog (`strace -f -c`), counted;
- a fresh install of the catalog against `unzip -q` of its archive followed by `sync`.

Run alone:
    python3 bench/install_bench.py [--quick] [--runs N]     (spliced into bench/RESULTS.md)
    python3 bench/install_bench.py --files N --runs 1        (another catalog size, in a section
                                                              of its own; a client installs at
                                                              most 4,000,000 archive entries,
                                                              the index's among them)"""
import os
import random
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import CLI, standalone  # noqa: E402
from chunk_bench import KB, build_tools, drop_caches, log, measure, publish, stats  # noqa: E402

SECTION = "## Installing when the catalog is large and the change is small"
# --files: another catalog size, in a section of its own.
FILES = None
COUNTED = ("link", "linkat", "newfstatat", "lstat", "mkdir", "mkdirat", "fsync", "fdatasync", "openat", "rename")


def catalog(src, count, rnd):
    for i in range(count):
        d = os.path.join(src, f"d{i % 100:02}", f"e{(i // 100) % 10}")
        if i < 1000:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"asset-{i:06}.dat"), "wb") as f:
            f.write(rnd.randbytes(512 + rnd.randrange(1024)))
    changed = os.path.join(src, "d00", "e0", "asset-000000.dat")
    return changed


def release_files(data, version):
    rel = os.path.join(data, "releases")
    (only,) = [d for d in os.listdir(rel) if d.startswith(f"{version}-")]
    return os.path.join(rel, only, "files")


def syscalls(ub, data, url):
    """The counts of COUNTED calls an update made (strace -f -c)."""
    out = subprocess.run(["strace", "-f", "-c", "-e", "trace=" + ",".join(COUNTED), ub, data, url],
                         capture_output=True, text=True, check=True).stderr
    counts = {}
    for line in out.splitlines():
        p = line.split()
        if len(p) >= 5 and p[-1] in COUNTED:
            counts[p[-1]] = int(p[3])
    return counts


def run_all(work, runs, quick):
    count = FILES or (10_000 if quick else 100_000)
    tools = build_tools(work)
    ub, ms = tools["update_bench"], tools["measure"]
    src = os.path.join(work, "catalog")
    rnd = random.Random(7)
    log(f"install: a catalog of {count:,} files")
    changed = catalog(src, count, rnd)
    repo1, repo2 = os.path.join(work, "repo1"), os.path.join(work, "repo2")
    publish(src, repo1, 1, package="bench-install")
    with open(changed, "wb") as f:
        f.write(rnd.randbytes(100 * KB))
    new_bytes = open(changed, "rb").read()
    # v2 is published over v1's repository, as a publisher would.
    shutil.copytree(repo1, repo2)
    publish(src, repo2, 2, package="bench-install")
    url1, url2 = "file://" + os.path.join(repo1, "head.json"), "file://" + os.path.join(repo2, "head.json")
    # v3 and v4 add a 100 KiB file each: from v3's activation on a release leaves the store
    # (keep_versions 1), and its tree is the spare the next update builds on.
    urls = {1: url1, 2: url2}
    previous = repo2
    for v in (3, 4):
        other = os.path.join(src, "d50", "e0", f"asset-{5000 + v:06}.dat")
        with open(other, "wb") as f:
            f.write(rnd.randbytes(100 * KB))
        repo = os.path.join(work, f"repo{v}")
        shutil.copytree(previous, repo)
        publish(src, repo, v, package="bench-install")
        urls[v] = "file://" + os.path.join(repo, "head.json")
        previous = repo

    log("install: fresh installs against unzip + sync")
    base = os.path.join(work, "base")
    fresh, unzip = [], []
    (archive,) = [os.path.join(repo1, "archives", n) for n in os.listdir(os.path.join(repo1, "archives")) if n.endswith(".zip")]
    for i in range(runs):
        shutil.rmtree(base, ignore_errors=True)
        drop_caches()
        fresh.append(measure(ms, [ub, base, url1]))
        out = os.path.join(work, "unzipped")
        shutil.rmtree(out, ignore_errors=True)
        drop_caches()
        unzip.append(measure(ms, ["sh", "-c", f"unzip -q {archive} -d {out} && sync"])[0])
    files1 = release_files(base, 1)

    # The steady state: v2 and v3 installed over v1, so that v1 left at v3's activation and
    # its tree is the spare (DATA_DIR/spare/<v3>); the update to v4 builds on it.
    steady = os.path.join(work, "steady")
    subprocess.run(["cp", "-a", base, steady], check=True)
    for v in (2, 3):
        subprocess.run([ub, steady, urls[v]], check=True, stdout=subprocess.DEVNULL)
    spares = os.listdir(os.path.join(steady, "spare"))
    assert spares and spares[0].startswith("3-"), spares
    files3 = release_files(steady, 3)

    log("install: the update against cp -al")
    run, copy = os.path.join(work, "run"), os.path.join(work, "links")
    res = {m: {"update": [], "rss": [], "cp": []} for m in ("cold", "warm", "steady", "steady_warm")}
    for i in range(runs):
        for mode in ("cold", "warm", "steady", "steady_warm"):
            for d in (run, copy):
                shutil.rmtree(d, ignore_errors=True)
            subprocess.run(["cp", "-a", steady if mode.startswith("steady") else base, run], check=True)
            from_files, url, version = (files3, urls[4], 4) if mode.startswith("steady") else (files1, url2, 2)
            changed_path = ("d50", "e0", "asset-005004.dat") if version == 4 else ("d00", "e0", "asset-000000.dat")
            def prepare():
                # The same before each of the two: dropped caches, or what both read read once
                # by a tree of links made and deleted (so each runs just after a deletion of
                # 100,000 links, which the file system's inode allocator notices).
                if mode in ("cold", "steady"):
                    drop_caches()
                else:
                    subprocess.run(["cp", "-al", from_files, copy], check=True)
                    shutil.rmtree(copy)
                    subprocess.run(["sync"])
            prepare()
            wall, rss = measure(ms, [ub, run, url])
            with open(os.path.join(release_files(run, version), *changed_path), "rb") as f:
                assert len(f.read()) == 100 * KB, "the update did not install the changed file"
            if version == 2:
                with open(os.path.join(release_files(run, 2), *changed_path), "rb") as f:
                    assert f.read() == new_bytes
            prepare()
            res[mode]["update"].append(wall)
            res[mode]["rss"].append(rss)
            res[mode]["cp"].append(measure(ms, ["cp", "-al", from_files, copy])[0])
    calls = {}
    for mode, data, url in (("first", base, url2), ("steady", steady, urls[4])):
        shutil.rmtree(run, ignore_errors=True)
        subprocess.run(["cp", "-a", data, run], check=True)
        calls[mode] = syscalls(ub, run, url)
    for d in (run, copy, base, steady, os.path.join(work, "unzipped")):
        shutil.rmtree(d, ignore_errors=True)
    out = {"files": count, "fresh": stats([w for w, _ in fresh]), "fresh_rss": max(r for _, r in fresh), "unzip": stats(unzip),
           "calls": calls["first"], "steady_calls": calls["steady"]}
    for mode, v in res.items():
        out[mode] = {"update": stats(v["update"]), "rss": max(v["rss"]), "cp": stats(v["cp"]),
                     "ratio": statistics.median(v["update"]) / statistics.median(v["cp"])}
    for mode in ("cold", "steady"):
        log(f"  {mode}: update {out[mode]['update']['median']:.2f} s against cp -al {out[mode]['cp']['median']:.2f} s "
            f"({out[mode]['ratio']:.2f}x), peak RSS {out[mode]['rss']:.0f} MiB")
    return out


def title(files):
    return SECTION if files == 100_000 else f"## Installing a catalog of {files:,} files"


def section(r):
    mk = lambda ok: "yes" if ok else "**no**"
    c, w = r["cold"], r["warm"]
    # Sections measured before the spare tree have no steady state.
    s, sw = r.get("steady"), r.get("steady_warm")
    f = lambda s: f"{s['min']:.2f} / {s['median']:.2f} / {s['max']:.2f}"
    listed = lambda calls: ", ".join(f"{calls[k]:,} {k}" for k in COUNTED if calls.get(k))
    row = lambda name, m: f"| {name} | {f(m['update'])} | {f(m['cp'])} | **{m['ratio']:.2f}x** | {m['rss']:.0f} |"
    return [
        title(r["files"]),
        "",
        f"{r['files']:,} files of 512 B to 1.5 KiB in 1,000 directories; v2 changes one of them to 100 KiB. Read from `file://`, so "
        "that the install alone is measured (\"Updates that cost what changed\" counts the same update's bytes over nginx). The update "
        "is a minimal C host's `assetpatch_update` from a copy of a data directory that installed v1; the baseline is `cp -al` of "
        "the installed release's files, the least that builds a complete tree of links to them. Each is timed after the same "
        "preparation: caches dropped, or (warm) a tree of links to the release made and deleted, which reads what both read. "
        "Wall time min / median / max.",
        "",
        *([] if s is None else [
            "The steady state: v3 and v4 each add a file of 100 KiB, and the update to v4 runs from a data directory "
            "that installed v1, v2 and v3 (keep_versions 1): v1 left at v3's activation and its tree is the spare the update "
            "builds on (docs/architecture.md, \"Installing a large catalog\"); that update also makes v2, which leaves, the next "
            "spare. Its baseline is `cp -al` of v3's files. The first update (from v1 alone) has no release leaving, so no spare.",
            "",
        ]),
        "| update | update (s) | cp -al (s) | ratio (median) | update peak RSS (MiB) |",
        "|---|---|---|---|---|",
        *([] if s is None else [row("steady state, caches dropped", s), row("steady state, warm", sw)]),
        row("first, caches dropped" if s else "caches dropped", c),
        row("first, warm" if s else "warm", w),
        "",
        f"System calls of one update that grow with the catalog (`strace -f -c`): {listed(r['calls'])}"
        + ("." if s is None else f" (the first); {listed(r['steady_calls'])} (the steady state)."),
        "",
        f"A fresh install of the same {r['files']:,} files: {f(r['fresh'])} s (peak RSS {r['fresh_rss']:.0f} MiB), against "
        f"`unzip -q` of its archive then `sync`: {f(r['unzip'])} s; "
        f"{r['fresh']['median'] / r['unzip']['median']:.2f}x (the install makes every file durable on its own, "
        "docs/architecture.md, \"One update\").",
        "",
        *([] if r["files"] > 100_000 else [
            "| target | measured | met |",
            "|---|---|---|",
            *([] if s is None else [
                f"| the update <= 0.5x cp -al of the release (steady state, caches dropped) | {s['ratio']:.2f}x | {mk(s['ratio'] <= 0.5)} |"]),
            f"| the {'first ' if s else ''}update <= 0.5x cp -al of the release (caches dropped) | {c['ratio']:.2f}x | {mk(c['ratio'] <= 0.5)} |",
            f"| peak RSS <= 48 MiB in a minimal C host | {max(c['rss'], s['rss'] if s else 0):.0f} MiB | {mk(max(c['rss'], s['rss'] if s else 0) <= 48)} |",
            "",
        ]),
    ]


def main():
    global FILES
    if "--files" in sys.argv:
        i = sys.argv.index("--files")
        FILES = int(sys.argv[i + 1])
        del sys.argv[i:i + 2]
    standalone(title(FILES or 100_000), run_all, section, "assetpatch-install.", f"bench-install-{FILES or 100_000}.json")


if __name__ == "__main__":
    main()
