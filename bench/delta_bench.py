"""Differential update benchmarks, run by bench.py in the same run as the full update.

Release v1 is the large set (1,000 files); v2 changes 2% of its files, adds 1% and removes 1%;
v3 changes another 2% of v2. Measured over the same loopback nginx:
- assetpatch v1 -> v2, v0 (bundle only) -> v2 (bundle digests hashed, then cached), v1 -> v3:
  bytes transferred against the compressed size of the changed and added entries, wall time;
- in the same run: the full update (differential=off) and the shell updater applying a
  hand-made zip of just the changed files over the old tree (curl + sha256sum + unzip + rm);
- disk of two kept releases;
- zchunk (zckdl with the old .zck as source), casync (chunk store over HTTP, the old tree as
  seed) and zsync (the old archive as seed) for v1 -> v2;
- the share of the archive above which ranges stop paying off, and many small ranges with
  TCP_QUICKACK on and off."""
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import time

MB = 1 << 20


def text(rnd, size):
    line = " ".join("".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 10))) for _ in range(12))
    return ((line + "\n") * (size // (len(line) + 1) + 1)).encode()[:size]


def derive(src, dst, seed, change, add, remove):
    """A later release: `src` with `change` files rewritten (same size, new bytes), `add` files
    added and `remove` files deleted, chosen by `seed`."""
    rnd = random.Random(seed)
    shutil.copytree(src, dst)
    files = sorted(os.path.relpath(os.path.join(dp, n), dst) for dp, _, ns in os.walk(dst) for n in ns)
    picked = rnd.sample(files, change + remove)
    for rel in picked[:change]:
        path = os.path.join(dst, rel)
        size = os.path.getsize(path)
        with open(path, "wb") as f:
            f.write(rnd.randbytes(size) if rel.endswith(".bin") else text(rnd, size))
    for rel in picked[change:]:
        os.remove(os.path.join(dst, rel))
    for i in range(add):
        rel = os.path.join(f"d{i % 10}", "new", f"added-{seed}-{i:03}.bin")
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        with open(os.path.join(dst, rel), "wb") as f:
            f.write(rnd.randbytes(int(min(8 * MB, max(1024, math.exp(rnd.gauss(11.0, 1.6)) * 0.6)))))


def gen_scattered(d, version, seed=9, count=2000):
    """2 KB files between 40 KB ones; v2 rewrites every tenth small file: 100 small ranges that no
    coalescing joins (the gaps are 40 KB and more)."""
    rnd, change = random.Random(seed), random.Random(seed + version)
    os.makedirs(d, exist_ok=True)
    for i in range(count):
        data = rnd.randbytes(2000 if i % 2 == 0 else 40_000)
        if version == 2 and i % 20 == 0:
            data = change.randbytes(2000)
        with open(os.path.join(d, f"f{i:05}.bin"), "wb") as f:
            f.write(data)


def entries_needed(old_manifest, new_manifest):
    """Compressed bytes (local header through data) of the entries whose content the old release
    lacks: what a perfect per-file differential update must transfer."""
    have = {f["sha256"] for f in old_manifest["files"]}
    seen, total, files = set(), 0, 0
    for f in new_manifest["files"]:
        if f["sha256"] in have or f["sha256"] in seen:
            continue
        seen.add(f["sha256"])
        z = f["zip"]
        total += z["data_offset"] + z["compressed_size"] - z["header_offset"]
        files += 1
    return total, files


class Access:
    """Bytes nginx sent, per request, from its access log (`$request_uri $status $body_bytes_sent`)."""

    def __init__(self, path):
        self.path = path

    def mark(self):
        time.sleep(0.05)
        with open(self.path) as f:
            return len(f.readlines())

    def since(self, mark, match):
        time.sleep(0.1)  # nginx writes the line when the response is done
        with open(self.path) as f:
            lines = f.readlines()[mark:]
        hits = [line.split() for line in lines if match(line.split()[0])]
        return sum(int(p[2]) for p in hits), len(hits)


def load(path):
    with open(path) as f:
        return json.load(f)


def bench_differential(tools, nginx, repos, work, runs, run_measured, stats, cli, quick):
    access = Access(nginx.access)
    src = os.path.join(work, "src-large")
    big = 4 if quick else 20
    for name, base, seed, change, add, remove in (("d2", src, 2, big, big // 2, big // 2),
                                                   ("d3", os.path.join(work, "src-d2"), 3, big, 0, 0)):
        derive(base, os.path.join(work, "src-" + name), seed, change, add, remove)
    for name, s, version in (("d1", src, 1), ("d2", os.path.join(work, "src-d2"), 2), ("d3", os.path.join(work, "src-d3"), 3)):
        subprocess.run([cli, "publish", s, "--repo", os.path.join(repos, name), "--package", "bench-delta", "--version", str(version)],
                       check=True, stdout=subprocess.DEVNULL)
    m = {n: load(os.path.join(repos, n, "manifest.json")) for n in ("d1", "d2", "d3")}
    url = {n: nginx.url(f"{n}/manifest.json") for n in ("d1", "d2", "d3")}
    ub = tools["update_bench"]
    base_v1 = os.path.join(work, "base-v1")
    subprocess.run([ub, base_v1, url["d1"]], check=True)
    runs_dir = os.path.join(work, "druns")
    run_dir = None

    def fresh(from_dir=None):
        """A new directory for each run; none is deleted until the end. Deleting the last
        run's tree just before a run made ext4 rescan the freed inodes (recently_deleted())
        in every mkdir of the run, which no device that updates now and then sees."""
        nonlocal run_dir
        os.makedirs(runs_dir, exist_ok=True)
        run_dir = os.path.join(runs_dir, str(len(os.listdir(runs_dir))))
        if from_dir:
            subprocess.run(["cp", "-a", from_dir, run_dir], check=True)
        else:
            os.makedirs(run_dir)
        subprocess.run(["sync"])
        return os.path.join(run_dir, "data") if not from_dir else run_dir

    def archive_of(name):
        return lambda uri: uri.startswith(f"/{name}/archives/")

    out = {"files": len(m["d1"]["files"]), "archive_bytes": m["d2"]["archive"]["size"], "scenarios": {}}

    def lib(label, target, start_from, bundle=None, options=(), needed=None, prepare=None):
        walls, sent, requests = [], [], []
        for _ in range(runs):
            data = fresh(start_from)
            if prepare:
                prepare(data)
            mk = access.mark()
            w, _ = run_measured([ub, data, url[target], bundle or "-", *options])
            b, n = access.since(mk, archive_of(target))
            mb, _ = access.since(mk, lambda uri: uri == f"/{target}/manifest.json")
            walls.append(w); sent.append(b); requests.append(n)
            manifest_bytes = mb
        r = {"wall": stats(walls), "bytes": statistics.median(sent), "requests": statistics.median(requests),
             "manifest_bytes": manifest_bytes}
        if needed:
            r["needed"] = needed
            r["ratio"] = r["bytes"] / needed[0]
        if target == "d2" and start_from == base_v1:
            r["disk"] = int(subprocess.run(["du", "-sb", run_dir], capture_output=True, text=True).stdout.split()[0])
            one = [d for d in os.listdir(os.path.join(run_dir, "releases")) if d.startswith("2-")][0]
            r["one_release"] = int(subprocess.run(["du", "-sb", os.path.join(run_dir, "releases", one)], capture_output=True,
                                                  text=True).stdout.split()[0])
        out["scenarios"][label] = r
        extra = f", {r['ratio']:.3f}x the changed entries" if needed else ""
        print(f"  {label}: {statistics.median(walls):.2f} s, {r['bytes']:,} bytes in {r['requests']} requests{extra}", flush=True)

    need12, need13 = entries_needed(m["d1"], m["d2"]), entries_needed(m["d1"], m["d3"])
    lib("v1 -> v2 differential", "d2", base_v1, needed=need12)
    lib("v1 -> v2 full (differential=off)", "d2", base_v1, options=["differential=off"])
    lib("v0 (bundle) -> v2, bundle hashed", "d2", None, bundle=src, needed=need12)

    def warm(data):  # the bundle's digests cached by an earlier check
        subprocess.run([cli, "check", "--data-dir", data, "--bundle-dir", src, "--url", url["d2"]], check=True, capture_output=True)
    lib("v0 (bundle) -> v2, digests cached", "d2", None, bundle=src, needed=need12, prepare=warm)
    lib("v1 -> v3 differential", "d3", base_v1, needed=need13)

    # The shell updater: a hand-made zip of the changed and added files, applied over the old tree.
    v1_files = {f["path"]: f["sha256"] for f in m["d1"]["files"]}
    v2_files = {f["path"]: f["sha256"] for f in m["d2"]["files"]}
    changed = sorted(p for p, h in v2_files.items() if v1_files.get(p) != h)
    removed = sorted(p for p in v1_files if p not in v2_files)
    tools_dir = os.path.join(repos, "tools")
    os.makedirs(tools_dir, exist_ok=True)
    delta_zip = os.path.join(tools_dir, "delta.zip")
    subprocess.run(["zip", "-q", "-X", delta_zip, "-@"], input="\n".join(changed) + "\n", text=True, cwd=os.path.join(work, "src-d2"),
                   check=True)
    with open(os.path.join(work, "removed.txt"), "w") as f:
        f.write("\n".join(removed) + "\n")
    delta_sha = subprocess.run(["sha256sum", delta_zip], capture_output=True, text=True).stdout.split()[0]
    pipeline = ('set -e; T="$1"; curl -sf -o "$T/../delta.zip" "$2"; echo "$3  $T/../delta.zip" | sha256sum -c --quiet; '
                'unzip -q -o "$T/../delta.zip" -d "$T"; cd "$T" && xargs -d "\\n" rm -f < "$4"')
    walls = []
    for _ in range(runs):
        d = fresh()
        tree = os.path.join(d, "tree")
        shutil.copytree(src, tree)
        subprocess.run(["sync"])
        w, _ = run_measured(["bash", "-c", pipeline, "pipeline", tree, nginx.url("tools/delta.zip"), delta_sha,
                             os.path.join(work, "removed.txt")])
        walls.append(w)
    out["scenarios"]["v1 -> v2 shell: hand-made delta zip"] = {"wall": stats(walls), "bytes": os.path.getsize(delta_zip), "requests": 1}
    print(f"  shell delta zip: {statistics.median(walls):.2f} s, {os.path.getsize(delta_zip):,} bytes", flush=True)

    out["tools"] = bench_delta_tools(nginx, access, repos, work, runs, run_measured, stats, m, need12)
    out["shares"] = bench_shares(tools, nginx, access, repos, work, run_measured, stats, cli, quick)
    out["quickack"] = bench_quickack(tools, nginx, access, repos, work, runs, run_measured, stats, cli)
    out["needed_v2"], out["needed_v3"] = need12, need13
    shutil.rmtree(runs_dir, ignore_errors=True)
    return out


def bench_delta_tools(nginx, access, repos, work, runs, run_measured, stats, m, needed):
    tools_dir = os.path.join(repos, "tools")
    src1, src2 = os.path.join(work, "src-large"), os.path.join(work, "src-d2")
    results = {}
    # zchunk: a tar of each release (sorted names), zck-compressed; the old .zck is the source.
    for v, s in (("v1", src1), ("v2", src2)):
        tar = os.path.join(work, f"{v}.tar")
        subprocess.run(["tar", "--sort=name", "--mtime=@0", "--owner=0", "--group=0", "-C", s, "-cf", tar, "."], check=True)
        subprocess.run(["zck", "-o", os.path.join(tools_dir, f"{v}.tar.zck"), tar], check=True, capture_output=True)
    # casync: one chunk store for both releases; the old tree is the seed.
    store = os.path.join(tools_dir, "castore")
    for v, s in (("v1", src1), ("v2", src2)):
        subprocess.run(["casync", "make", "--store=" + store, "--without=privileged", os.path.join(tools_dir, f"{v}.caidx"), s],
                       check=True, capture_output=True)
    # zsync: a control file for v2's archive; the v1 archive is the seed.
    a1 = os.path.join(repos, "d1", m["d1"]["archive"]["url"])
    a2 = os.path.join(repos, "d2", m["d2"]["archive"]["url"])
    subprocess.run(["zsyncmake", "-u", nginx.url("d2/" + m["d2"]["archive"]["url"]), "-o", os.path.join(tools_dir, "v2.zip.zsync"), a2],
                   check=True, capture_output=True)
    v2_zck = os.path.join(tools_dir, "v2.tar.zck")

    def same_file(a, b):
        return subprocess.run(["cmp", "-s", a, b]).returncode == 0

    def measure(label, cmd, match, setup, verify):
        walls, sent, requests = [], [], []
        for _ in range(runs):
            d = os.path.join(work, "toolrun")
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            setup(d)
            subprocess.run(["sync"])
            mk = access.mark()
            w, _ = run_measured(["bash", "-c", 'cd "$1" && shift && exec "$@"', "tool", d, *cmd(d)])
            b, n = access.since(mk, match)
            if not verify(d):
                raise RuntimeError(f"{label}: the result is not the new release")
            walls.append(w); sent.append(b); requests.append(n)
        shutil.rmtree(os.path.join(work, "toolrun"), ignore_errors=True)
        results[label] = {"wall": stats(walls), "bytes": statistics.median(sent), "requests": statistics.median(requests),
                          "ratio": statistics.median(sent) / needed[0]}
        print(f"  {label}: {statistics.median(walls):.2f} s, {statistics.median(sent):,} bytes, "
              f"{results[label]['ratio']:.2f}x the changed entries", flush=True)

    measure("zchunk (zckdl -s v1.tar.zck)", lambda d: ["zckdl", "-q", "-s", "v1.tar.zck", nginx.url("tools/v2.tar.zck")],
            lambda uri: uri == "/tools/v2.tar.zck",
            lambda d: shutil.copy(os.path.join(tools_dir, "v1.tar.zck"), d),
            lambda d: same_file(os.path.join(d, "v2.tar.zck"), v2_zck))
    measure("casync (extract --seed=v1 tree)",
            lambda d: ["casync", "extract", "--store=" + nginx.url("tools/castore"), "--seed=" + os.path.join(d, "seed"),
                       "--without=privileged", nginx.url("tools/v2.caidx"), os.path.join(d, "out")],
            lambda uri: uri.startswith("/tools/castore/") or uri == "/tools/v2.caidx",
            lambda d: shutil.copytree(src1, os.path.join(d, "seed")),
            lambda d: subprocess.run(["diff", "-r", "-q", src2, os.path.join(d, "out")], capture_output=True).returncode == 0)
    measure("zsync (-i v1.zip)", lambda d: ["zsync", "-q", "-i", "v1.zip", "-o", "v2.zip", nginx.url("tools/v2.zip.zsync")],
            lambda uri: uri == "/tools/v2.zip.zsync" or uri.startswith("/d2/archives/"),
            lambda d: shutil.copy(a1, os.path.join(d, "v1.zip")),
            lambda d: same_file(os.path.join(d, "v2.zip"), a2))
    return results


def bench_shares(tools, nginx, access, repos, work, run_measured, stats, cli, quick):
    """Differential (differential_max_percent=100) against the whole archive as more of the
    release changes: where ranges stop paying off on this link."""
    ub = tools["update_bench"]
    src = os.path.join(work, "src-large")
    base = os.path.join(work, "base-v1")
    out = {}
    for percent in ((25, 75) if quick else (10, 30, 50, 70, 90)):
        name = f"share{percent}"
        files = len([1 for _, _, ns in os.walk(src) for _ in ns])
        derive(src, os.path.join(work, "src-" + name), 100 + percent, files * percent // 100, 0, 0)
        subprocess.run([cli, "publish", os.path.join(work, "src-" + name), "--repo", os.path.join(repos, name), "--package",
                        "bench-delta", "--version", "50"], check=True, stdout=subprocess.DEVNULL)
        m = load(os.path.join(repos, name, "manifest.json"))
        row = {}
        for label, options in (("differential", ["differential_max_percent=100"]), ("whole", ["differential=off"])):
            d = os.path.join(work, "share-run")
            shutil.rmtree(d, ignore_errors=True)
            subprocess.run(["cp", "-a", base, d], check=True)
            subprocess.run(["sync"])
            mk = access.mark()
            w, _ = run_measured([ub, d, nginx.url(f"{name}/manifest.json"), "-", *options])
            b, n = access.since(mk, lambda uri: uri.startswith(f"/{name}/archives/"))
            row[label] = {"wall": w, "bytes": b, "requests": n}
        row["archive_bytes"] = m["archive"]["size"]
        out[percent] = row
        print(f"  {percent}% of files changed: differential {row['differential']['wall']:.2f} s "
              f"({row['differential']['bytes'] / row['archive_bytes']:.0%} of the archive in {row['differential']['requests']} requests), "
              f"whole {row['whole']['wall']:.2f} s", flush=True)
    shutil.rmtree(os.path.join(work, "share-run"), ignore_errors=True)
    return out


def bench_quickack(tools, nginx, access, repos, work, runs, run_measured, stats, cli):
    """100 small ranges (about 2 KB each, none coalesced): TCP_QUICKACK on and off, one
    connection and four."""
    ub = tools["update_bench"]
    for v in (1, 2):
        gen_scattered(os.path.join(work, f"src-scatter{v}"), v)
        subprocess.run([cli, "publish", os.path.join(work, f"src-scatter{v}"), "--repo", os.path.join(repos, f"scatter{v}"),
                        "--package", "bench-scatter", "--version", str(v)], check=True, stdout=subprocess.DEVNULL)
    base = os.path.join(work, "base-scatter")
    subprocess.run([ub, base, nginx.url("scatter1/manifest.json")], check=True)
    out = {}
    for quickack in ("1", "0"):
        for parallel in ("1", "4"):
            walls, per = [], []
            for _ in range(max(runs, 5)):
                d = os.path.join(work, "scatter-run")
                shutil.rmtree(d, ignore_errors=True)
                subprocess.run(["cp", "-a", base, d], check=True)
                mk = access.mark()
                w, _ = run_measured([ub, d, nginx.url("scatter2/manifest.json"), "-", f"tcp_quickack={quickack}",
                                     f"parallel_downloads={parallel}"])
                _, n = access.since(mk, lambda uri: uri.startswith("/scatter2/archives/"))
                walls.append(w)
                per.append(w / max(n, 1) * 1000)
                requests = n
            out[f"{quickack}/{parallel}"] = {"wall": stats(walls), "ms_per_request": stats(per), "requests": requests}
            print(f"  quickack={quickack} parallel={parallel}: {statistics.median(walls):.3f} s for {requests} ranges", flush=True)
    shutil.rmtree(os.path.join(work, "scatter-run"), ignore_errors=True)
    return out


def result_lines(d, fmt, full_update):
    mk = lambda ok: "yes" if ok else "**no**"
    sc = d["scenarios"]
    diff12 = sc["v1 -> v2 differential"]
    full = sc["v1 -> v2 full (differential=off)"]
    shell = sc["v1 -> v2 shell: hand-made delta zip"]
    lines = [
        "## Differential updates: 2% of 1,000 files changed, 1% added, 1% removed",
        "",
        f"v1 is the set above ({d['archive_bytes'] / MB:.1f} MiB archive); v2 rewrites 2% of its files, adds 1% and removes 1%; "
        "v3 rewrites another 2% of v2. \"Changed entries\" is the compressed size (local header through data) of the",
        f"entries whose content the client lacks: {d['needed_v2'][0]:,} bytes in {d['needed_v2'][1]} files for v2, "
        f"{d['needed_v3'][0]:,} bytes in {d['needed_v3'][1]} files for v3. Bytes are what nginx sent for the archive requests.",
        "",
        "| update | wall time (s) | bytes transferred | requests | vs changed entries |",
        "|---|---|---|---|---|",
    ]
    for label, r in sc.items():
        ratio = f"{r['ratio']:.3f}x" if "ratio" in r else "-"
        lines.append(f"| {label} | {fmt(r['wall'])} | {r['bytes']:,.0f} | {r['requests']:.0f} | {ratio} |")
    lines += [
        "",
        f"Wall time of the differential v1 -> v2 against the full update in the same run: "
        f"**{diff12['wall']['median'] / full['wall']['median']:.2f}x**; against the shell updater applying a hand-made zip of "
        f"just the changed files over the old tree (no staging, no atomic switch, no per-file hashes): "
        f"**{diff12['wall']['median'] / shell['wall']['median']:.2f}x**. The manifest, fetched once per update, is "
        f"{diff12['manifest_bytes']:,} bytes.",
        "",
        f"Disk after v1 -> v2 with v1 kept: {diff12['disk'] / MB:.1f} MiB for both releases, against "
        f"{diff12['one_release'] / MB:.1f} MiB for v2 alone (unchanged files are hard links).",
        "",
        "### Against the delta tools people use from a plain web server (v1 -> v2, same nginx)",
        "",
        "| tool | wall time (s) | bytes transferred | requests | vs changed entries |",
        "|---|---|---|---|---|",
        f"| assetpatch | {fmt(diff12['wall'])} | {diff12['bytes']:,.0f} | {diff12['requests']:.0f} | {diff12['ratio']:.3f}x |",
    ]
    for label, r in d["tools"].items():
        lines.append(f"| {label} | {fmt(r['wall'])} | {r['bytes']:,.0f} | {r['requests']:.0f} | {r['ratio']:.2f}x |")
    lines += [
        "",
        "zchunk, casync and zsync work on chunks or blocks of a file or tree: they win when a large file changes in a small "
        "part (assetpatch fetches the whole changed file), and lose bytes to chunk boundaries and indexes when whole files "
        "change. zchunk and zsync also need a second artifact per release (a .zck or .zsync file), casync a chunk store; "
        "assetpatch needs only the release archive.",
        "",
        "### Where ranges stop paying off",
        "",
        "The same v1 data directory updated to releases with more and more files rewritten, differentially "
        "(`differential_max_percent=100`) and as the whole archive (`differential=off`), one run each.",
        "",
        "| files changed | differential: bytes (of the archive) | requests | wall (s) | whole archive: wall (s) |",
        "|---|---|---|---|---|",
    ]
    for percent, row in d["shares"].items():
        dd, ww = row["differential"], row["whole"]
        lines.append(f"| {percent}% | {dd['bytes'] / MB:.1f} MiB ({dd['bytes'] / row['archive_bytes']:.0%}) | {dd['requests']} | "
                     f"{dd['wall']:.2f} | {ww['wall']:.2f} |")
    lines += [
        "",
        "### Many small ranges and TCP_QUICKACK",
        "",
        "100 changed files of 2 KB, each between unchanged 40 KB files, so every range is its own request.",
        "",
        "| tcp_quickack | parallel_downloads | wall time (s) | ms per range request |",
        "|---|---|---|---|",
    ]
    for key, r in d["quickack"].items():
        qa, par = key.split("/")
        lines.append(f"| {qa} | {par} | {fmt(r['wall'], digits=3)} | {fmt(r['ms_per_request'], digits=2)} |")
    ok_bytes = diff12["ratio"] <= 1.05 and sc["v1 -> v3 differential"]["ratio"] <= 1.05
    tools_bytes = min(r["bytes"] for r in d["tools"].values())
    tools_wall = min(r["wall"]["median"] for r in d["tools"].values())
    lines += [
        "",
        "Differential targets:",
        "",
        "| target | measured | met |",
        "|---|---|---|",
        f"| bytes <= 1.05x the changed entries (v1 -> v2, v1 -> v3) | {diff12['ratio']:.3f}x, "
        f"{sc['v1 -> v3 differential']['ratio']:.3f}x | {mk(ok_bytes)} |",
        f"| fewer bytes than zchunk, casync and zsync | {diff12['bytes']:,.0f} against {tools_bytes:,.0f} at best | "
        f"{mk(diff12['bytes'] < tools_bytes)} |",
        f"| less time than zchunk, casync and zsync | {diff12['wall']['median']:.2f} s against {tools_wall:.2f} s at best | "
        f"{mk(diff12['wall']['median'] < tools_wall)} |",
        f"| two kept releases close to one release plus the changes | {diff12['disk'] / MB:.1f} MiB against "
        f"{diff12['one_release'] / MB:.1f} MiB | {mk(diff12['disk'] < diff12['one_release'] * 1.1)} |",
        "",
    ]
    return lines
