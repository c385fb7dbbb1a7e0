#!/usr/bin/env python3
"""assetpatch benchmarks against what a user would otherwise do, side by side in one run.

    bench/run.sh [--runs 3] [--quick]        (groups alone: python3 bench/groups_bench.py; transfer
                                             control alone: python3 bench/transfer_bench.py;
                                             mirrors alone: python3 bench/mirror_bench.py; every edit
                                             pattern alone: python3 bench/pairs_bench.py; installing
                                             at 100,000 files alone: python3 bench/install_bench.py)

Generates deterministic asset sets (seeded), publishes them with the CLI, serves them with
nginx on 127.0.0.1, measures and writes bench/RESULTS.md."""
import argparse
import json
import math
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PREFIX = os.path.join(ROOT, "build", "prefix")
CLI = os.path.join(PREFIX, "bin", "assetpatch")
LIB = os.path.join(PREFIX, "lib", "libassetpatch.so.1")
MB = 1 << 20
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunk_bench  # noqa: E402
import delta_bench  # noqa: E402
import speed_bench  # noqa: E402


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- asset sets

def text_pool(rnd, size):
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 10))) for _ in range(5000)]
    out = []
    n = 0
    while n < size:
        line = " ".join(rnd.choice(words) for _ in range(12)) + "\n"
        out.append(line)
        n += len(line)
    return "".join(out).encode()[:size]


def gen_large(d, seed=20261122, count=1000, total=200 * MB):
    """~1,000 files, ~200 MB, ~70% incompressible bytes, ~30% text, nested, log-normal 1 KB - 8 MB."""
    rnd = random.Random(seed)
    sizes = [math.exp(rnd.gauss(11.0, 1.6)) for _ in range(count)]
    scale = total / sum(sizes)
    sizes = [int(min(8 * MB, max(1024, s * scale))) for s in sizes]
    pool = text_pool(rnd, 16 * MB)
    text_budget = total * 0.3
    written = 0
    for i, size in enumerate(sizes):
        kind = "text" if text_budget > 0 and rnd.random() < 0.3 else "bin"
        path = os.path.join(d, f"d{i % 10}", f"s{(i // 10) % 10}", f"{i:04}.{'txt' if kind == 'text' else 'bin'}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            if kind == "text":
                start = rnd.randrange(0, len(pool) - min(size, len(pool) - 1))
                chunk = pool[start:start + size]
                while len(chunk) < size:
                    chunk += pool[:size - len(chunk)]
                f.write(chunk)
                text_budget -= size
            else:
                f.write(rnd.randbytes(size))
        written += size
    return written


def gen_small(d, count, seed=7):
    rnd = random.Random(seed)
    names = []
    for i in range(count):
        name = f"s{i % 97}/t{(i // 97) % 31}/f{i:06}.txt"
        path = os.path.join(d, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(rnd.randbytes(rnd.randint(16, 200)))
        names.append(name)
    return names


# ---------------------------------------------------------------- helpers

MEASURE = None


def run_measured(cmd):
    """Wall seconds and peak RSS (MiB, the largest process of the tree) of a command, measured
    by bench/measure.c so the numbers are the command's own."""
    r = subprocess.run([MEASURE, *cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd} exited {r.returncode}: {r.stderr}")
    wall, rss = r.stdout.split()[-2:]
    return float(wall), int(rss) / 1024


def settle(warm):
    """Starts a run from the same disk state whichever ran before: dirty data written out, and
    (as root) the caches dropped and only `warm` (what nginx serves) read back. Without the drop,
    ext4 spends much of a run creating files in scanning the inode table for the inodes the
    previous run just deleted (recently_deleted() in the kernel profile), which no device that
    updates now and then sees."""
    subprocess.run(["sync"])
    if os.geteuid() == 0:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        for path in warm:
            with open(path, "rb") as f:
                while f.read(1 << 20):
                    pass


def stats(values):
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def fmt(s, unit="", digits=2):
    return f"{s['min']:.{digits}f} / {s['median']:.{digits}f} / {s['max']:.{digits}f}{unit}"


class BenchNginx(Nginx):
    """nginx with an access log of body bytes per request, and /slow/ throttled for the resume run."""

    def __init__(self, root, d):
        self.access = os.path.join(d, "access.log")
        super().__init__(root, d, http="log_format bytes '$request_uri $status $body_bytes_sent'; sendfile on;",
                         access_log=f"{self.access} bytes",
                         locations="location /slow/ {{ alias {root}/; limit_rate 50m; }}")

    def archive_bytes(self):
        total = 0
        with open(self.access) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[0].endswith(".zip"):
                    total += int(parts[2])
        return total


def build_tools(work):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(PREFIX, "lib", "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "assetpatch"], env=env, capture_output=True, text=True,
                           check=True).stdout.split()
    tools = {}
    for name in ("update_bench", "resolve_bench", "check_bench", "dlopen_bench", "measure", "curl_floor"):
        out = os.path.join(work, name)
        extra = {"dlopen_bench": ["-ldl"], "measure": [], "curl_floor": ["-lcurl", "-lcrypto"]}.get(name, flags)
        subprocess.run(["cc", "-O2", os.path.join(ROOT, "bench", name + ".c"), *extra, "-Wl,-rpath," + os.path.join(PREFIX, "lib"),
                        "-o", out], check=True)
        tools[name] = out
    global MEASURE
    MEASURE = tools["measure"]
    return tools


# ---------------------------------------------------------------- benchmarks

def bench_full_update(tools, nginx, repo, work, runs):
    with open(os.path.join(repo, "manifest.json")) as f:
        m = json.load(f)
    url = nginx.url("large/manifest.json")
    archive_url = nginx.url("large/" + m["archive"]["url"])
    lib_wall, lib_rss, sh_wall, sh_rss = [], [], [], []
    pipeline = ('set -e; S="$1"; curl -sf -o "$S/a.zip" "$2"; echo "$3  $S/a.zip" | sha256sum -c --quiet; '
                'unzip -q "$S/a.zip" -d "$S/staging"; mv "$S/staging" "$S/final"')
    for i in range(runs):
        for which in ("lib", "shell") if i % 2 == 0 else ("shell", "lib"):
            d = os.path.join(work, "run")
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            settle([os.path.join(repo, m["archive"]["url"])])
            if which == "lib":
                w, r = run_measured([tools["update_bench"], os.path.join(d, "data"), url])
                lib_wall.append(w); lib_rss.append(r)
            else:
                w, r = run_measured(["bash", "-c", pipeline, "pipeline", d, archive_url, m["archive"]["sha256"]])
                sh_wall.append(w); sh_rss.append(r)
            log(f"  full update {which}: {w:.2f} s, {r:.0f} MiB")
    shutil.rmtree(os.path.join(work, "run"), ignore_errors=True)
    return {"archive_bytes": m["archive"]["size"], "files": len(m["files"]),
            "unpacked_bytes": sum(f["size"] for f in m["files"]),
            "lib_wall": stats(lib_wall), "lib_rss": stats(lib_rss), "shell_wall": stats(sh_wall), "shell_rss": stats(sh_rss),
            "ratio": statistics.median(lib_wall) / statistics.median(sh_wall)}


def bench_resume(tools, nginx, repo, work, runs):
    with open(os.path.join(repo, "manifest.json")) as f:
        size = json.load(f)["archive"]["size"]
    url = nginx.url("slow/large/manifest.json")
    results = []
    for _ in range(runs):
        d = os.path.join(work, "resume")
        shutil.rmtree(d, ignore_errors=True)
        before = nginx.archive_bytes()
        # The whole archive (`differential=off`): what this measures is a download's resume,
        # and a fresh install of this set takes ranges otherwise (chunks shared between files).
        p = subprocess.Popen([tools["update_bench"], d, url, "-", "differential=off"])
        killed_at = 0
        while p.poll() is None:
            parts = [os.path.join(d, "downloads", x) for x in os.listdir(os.path.join(d, "downloads"))] if os.path.isdir(os.path.join(d, "downloads")) else []
            have = sum(os.path.getsize(x) for x in parts if x.endswith(".part"))
            if have >= size // 2:
                p.send_signal(signal.SIGKILL)
                killed_at = have
                break
            time.sleep(0.005)
        p.wait()
        if not killed_at:
            raise RuntimeError("resume: the update ended before half the archive was on disk; nothing was resumed")
        time.sleep(0.3)  # let nginx log the cut request
        kept = sum(os.path.getsize(os.path.join(d, "downloads", x)) for x in os.listdir(os.path.join(d, "downloads"))
                   if x.endswith(".part"))
        after_kill = nginx.archive_bytes()
        subprocess.run([tools["update_bench"], d, nginx.url("large/manifest.json"), "-", "differential=off"], check=True)
        time.sleep(0.2)
        resumed = nginx.archive_bytes() - after_kill
        total = nginx.archive_bytes() - before
        # What the resuming update fetched beyond the bytes missing from disk (the resume's own
        # waste), and the total re-sent including bytes in flight when the process died.
        results.append({"killed_at": kept, "resumed_bytes": resumed, "missing": size - kept,
                        "resume_waste": resumed - (size - kept), "total_bytes": total, "retransferred": total - size})
        log(f"  resume: kept {kept / size:.1%}, resumed {resumed} bytes for {size - kept} missing; "
            f"re-sent in total {total - size} bytes")
    shutil.rmtree(os.path.join(work, "resume"), ignore_errors=True)
    return {"archive_bytes": size, "runs": results,
            "waste_pct": stats([100 * r["resume_waste"] / size for r in results]),
            "retransferred_pct": stats([100 * r["retransferred"] / size for r in results])}


def bench_resolve_and_open(tools, nginx, sets, work, lookups, runs):
    out = {}
    for label, (repo_dir, names) in sets.items():
        d = os.path.join(work, "idx-" + label)
        shutil.rmtree(d, ignore_errors=True)
        subprocess.run([tools["update_bench"], d, nginx.url(f"{label}/manifest.json")], check=True)
        bundle = os.path.join(work, "empty-bundle")
        os.makedirs(bundle, exist_ok=True)
        names_file = os.path.join(work, f"names-{label}.txt")
        with open(names_file, "w") as f:
            f.write("\n".join(names) + "\n")
        opens, res, naive, table, res_variants = [], [], [], [], []
        count = str(lookups)
        for _ in range(runs):
            r = subprocess.run([tools["resolve_bench"], d, bundle, names_file, count], capture_output=True, text=True, check=True)
            j = json.loads(r.stdout)
            opens.append(j["open_ns"] / 1e6)
            res.append(j["resolve_ns"]["median"])
            naive.append(j["naive_ns"]["median"])
            table.append(j["table_ns"]["median"])
            # The variants seed apps use: every name probed through the table resolved ahead.
            r = subprocess.run([tools["resolve_bench"], d, bundle, names_file, count, "@3x,@2x,"], capture_output=True, text=True,
                               check=True)
            res_variants.append(json.loads(r.stdout)["resolve_ns"]["median"])
        out[label] = {"files": len(names), "open_ms": stats(opens), "resolve_ns": stats(res), "naive_ns": stats(naive),
                      "speedup": statistics.median(naive) / statistics.median(res), "table_ns": stats(table),
                      "variants_ns": stats(res_variants), "table_ratio": statistics.median(res) / statistics.median(table)}
        log(f"  {label}: open {statistics.median(opens):.1f} ms, resolve {statistics.median(res):.0f} ns "
            f"({statistics.median(res_variants):.0f} ns with @3x,@2x,), C table {statistics.median(table):.0f} ns, "
            f"naive stat {statistics.median(naive):.0f} ns")
        if label == "small10k":
            sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
            os.environ.setdefault("ASSETPATCH_LIBRARY", LIB)
            import assetpatch
            rnd = random.Random(3)
            sample = [rnd.choice(names) for _ in range(100_000)]
            per = []
            with assetpatch.Client(d, bundle) as c:
                for _ in range(runs):
                    t0 = time.perf_counter_ns()
                    for n in sample:
                        c.resolve(n)
                    per.append((time.perf_counter_ns() - t0) / len(sample))
            out[label]["python_ns"] = stats(per)
            log(f"  python Client.resolve: {statistics.median(per):.0f} ns")
    return out


WRITER = """import os, sys
chunk = b"w" * (1 << 20)
with open(sys.argv[1], "wb") as f:
    print("ready", flush=True)
    while True:
        f.seek(0)
        for _ in range(1024):
            f.write(chunk)
"""


class DirtyWriter:
    """Another process rewriting a 1 GiB file without ever syncing it: about 1 GiB of dirty
    pages on the filesystem the update writes to."""

    def __init__(self, work):
        self.path = os.path.join(work, "other-writer.bin")
        self.proc = subprocess.Popen([sys.executable, "-c", WRITER, self.path], stdout=subprocess.PIPE, text=True)
        self.proc.stdout.readline()
        time.sleep(3)  # a full pass of 1 GiB is dirty by now

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        os.unlink(self.path)


def durability_schemes(d):
    """What each way of making 1,000 freshly written files of 200 KiB durable costs (seconds):
    syncfs, an fdatasync per file, and the library's scheme (writeback started as each file is
    written, fdatasync per file at the end)."""
    import ctypes
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    blob = os.urandom(200 << 10)

    def write(start_writeback):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        paths = []
        for i in range(1000):
            p = os.path.join(d, f"f{i}")
            fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o444)
            os.write(fd, blob)
            if start_writeback:
                libc.sync_file_range(fd, ctypes.c_long(0), ctypes.c_long(0), 2)
            os.close(fd)
            paths.append(p)
        return paths

    def per_file(paths):
        for p in paths:
            fd = os.open(p, os.O_RDONLY)
            os.fdatasync(fd)
            os.close(fd)
        fd = os.open(d, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)

    def syncfs(paths):
        fd = os.open(d, os.O_RDONLY)
        libc.syncfs(fd)
        os.close(fd)

    out = {}
    for name, early, finish in (("syncfs", False, syncfs), ("fdatasync", False, per_file), ("writeback+fdatasync", True, per_file)):
        subprocess.run(["sync"])
        t0 = time.monotonic()
        paths = write(early)
        t1 = time.monotonic()
        finish(paths)
        out[name] = {"write": t1 - t0, "sync": time.monotonic() - t1}
    shutil.rmtree(d, ignore_errors=True)
    return out


def bench_durability(tools, nginx, repo, work, runs):
    """The full update and the durability schemes, on a quiet filesystem and while another
    process keeps about 1 GiB dirty on it."""
    with open(os.path.join(repo, "manifest.json")) as f:
        m = json.load(f)
    url = nginx.url("large/manifest.json")
    r = {}
    for busy in (False, True):
        walls, schemes = [], []
        for _ in range(runs):
            d = os.path.join(work, "run")
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            settle([os.path.join(repo, m["archive"]["url"])])
            writer = DirtyWriter(work) if busy else None
            try:
                walls.append(run_measured([tools["update_bench"], os.path.join(d, "data"), url])[0])
                schemes.append(durability_schemes(os.path.join(work, "durability")))
            finally:
                if writer:
                    writer.stop()
            log(f"  durability busy={busy}: update {walls[-1]:.2f} s, " +
                ", ".join(f"{k} {v['sync']:.3f} s" for k, v in schemes[-1].items()))
        r["busy" if busy else "quiet"] = {
            "update": stats(walls),
            "schemes": {k: {"sync": stats([s[k]["sync"] for s in schemes]), "write": stats([s[k]["write"] for s in schemes])}
                        for k in schemes[0]}}
    shutil.rmtree(os.path.join(work, "run"), ignore_errors=True)
    return r


def bench_check(tools, nginx, work):
    """A check that finds nothing: after a full update of the 1,000-file set, 50 checks. Each
    sends the last manifest's validators and must get a 304 (counted in nginx's log); the
    kept manifest is then verified again like any manifest."""
    d = os.path.join(work, "check-data")
    shutil.rmtree(d, ignore_errors=True)
    url = nginx.url("large/manifest.json")
    subprocess.run([tools["update_bench"], d, url], check=True)
    def manifest_statuses():
        with open(nginx.access) as f:
            return [line.split()[1] for line in f if line.startswith("/large/manifest.json")]
    before = len(manifest_statuses())
    r = json.loads(subprocess.run([tools["check_bench"], d, url, "50"], capture_output=True, text=True, check=True).stdout)
    statuses = manifest_statuses()[before:]
    shutil.rmtree(d, ignore_errors=True)
    r["responses"] = len(statuses)
    r["not_modified"] = statuses.count("304")
    with open(os.path.join(work, "repos", "large", "manifest.json"), "rb") as f:
        r["manifest_bytes"] = len(f.read())
    log(f"  check with nothing new: {r['median_ms']:.2f} ms median, {r['not_modified']} of {r['responses']} answered 304")
    return r


def bench_library(tools, work, runs):
    stripped = os.path.join(work, "libassetpatch.stripped.so")
    shutil.copy(os.path.realpath(LIB), stripped)
    subprocess.run(["strip", stripped], check=True)
    times = []
    for _ in range(max(runs, 10)):
        r = subprocess.run([tools["dlopen_bench"], LIB], capture_output=True, text=True, check=True)
        times.append(int(r.stdout.split()[0]) / 1e6)
    needed = [l.split("[")[1].rstrip("]") for l in subprocess.run(["readelf", "-d", LIB], capture_output=True, text=True).stdout.splitlines()
              if "NEEDED" in l]
    return {"size": os.path.getsize(os.path.realpath(LIB)), "stripped": os.path.getsize(stripped), "dlopen_ms": stats(times),
            "needed": needed}


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    return {"cores": os.cpu_count(), "cpu": cpu, "memory_gib": round(mem, 1), "kernel": platform.release(),
            "curl": subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout.split()[1],
            "unzip": subprocess.run(["unzip", "-v"], capture_output=True, text=True).stdout.split()[1]}


def groups_section(g):
    import groups_bench
    return groups_bench.section(g)


def transfers_section(t):
    import transfer_bench
    return transfer_bench.section(t)


def mirrors_section(m):
    import mirror_bench
    return mirror_bench.section(m)


def rollout_targets(ro, mk):
    b, g, o = ro["bad"], ro["good"], ro["overhead"]
    reached = any(d["to"] == 100 for d in g["decisions"])
    return [f"| a release crash-looping on 30% halted, <= 2% of clients ever on it | {b['final']}, {b['share_ever_activated']:.2%} | "
            f"{mk(b['final'] == 'halt' and b['share_ever_activated'] <= 0.02)} |",
            f"| a healthy release reaches 100% in the policy's steps | {'100% after ' + str(len(g['decisions'])) + ' gate runs' if reached else 'not reached'} | {mk(reached)} |",
            f"| outcome events add <= 1% to the full update | {o['bound']:.2%} | {mk(o['bound'] <= 0.01)} |"]


def rollout_section(r):
    import rollout_sim
    return rollout_sim.section(r)


def pairs_section(p):
    import pairs_bench
    return pairs_bench.section(p)


def install_section(i):
    import install_bench
    return install_bench.section(i)


def write_results(path, r, args):
    fu, rs, lib, idx = r["full_update"], r["resume"], r["library"], r["index"]
    mk = lambda ok: "yes" if ok else "**no**"
    lines = [
        "# assetpatch benchmark results",
        "",
        f"Date: {r['date']}. Machine: {r['machine']['cores']} cores, {r['machine']['cpu']}, "
        f"{r['machine']['memory_gib']} GiB, Linux {r['machine']['kernel']}; curl {r['machine']['curl']}, unzip {r['machine']['unzip']}.",
        f"Runs per figure: {args.runs} (min / median / max). Reproduce: `bash bench/run.sh` "
        f"(`--runs N`; `--quick` for a small smoke run).",
        "",
        "## Full update, 1,000 files over loopback nginx",
        "",
        f"Archive {fu['archive_bytes'] / MB:.1f} MiB, {fu['files']} files, {fu['unpacked_bytes'] / MB:.1f} MiB unpacked.",
        "The shell pipeline is what a user would write: `curl -o a.zip URL && sha256sum -c && unzip -d staging && mv staging final`.",
        "The library plans from the archive's index: by ranges where chunks the files share spare bytes (this set's do), else",
        "the whole archive extracted while it arrives; either way it verifies every file's sha256 and",
        "makes the release durable (fdatasync per file, directories fsynced) before switching to it; the pipeline does neither.",
        "Each run starts from dropped caches with the archive read back (see `settle` in bench.py).",
        "",
        "| | wall time (s) | peak RSS (MiB) |",
        "|---|---|---|",
        f"| assetpatch_update | {fmt(fu['lib_wall'])} | {fmt(fu['lib_rss'], digits=0)} |",
        f"| curl + sha256sum + unzip + mv | {fmt(fu['shell_wall'])} | {fmt(fu['shell_rss'], digits=0)} |",
        f"| ratio (median) | **{fu['ratio']:.2f}x** | |",
        "",
    ]
    du = r["durability"]
    lines += [
        "## Durability while another process writes",
        "",
        "A second process rewrites a 1 GiB file without syncing it (about 1 GiB dirty on the same filesystem).",
        "The full update above, quiet and with that writer; then 1,000 new files of 200 KiB made durable three ways:",
        "syncfs (what releases up to 0.3 used), an fdatasync per file, and the library's scheme (writeback started as",
        "each file is completed, then an fdatasync per file). \"sync\" is the durability step alone.",
        "",
        "| | quiet (s) | with the dirty writer (s) |",
        "|---|---|---|",
        f"| full update (assetpatch_update) | {fmt(du['quiet']['update'])} | {fmt(du['busy']['update'])} |",
    ]
    for k in du["quiet"]["schemes"]:
        lines.append(f"| sync: {k} | {fmt(du['quiet']['schemes'][k]['sync'], digits=3)} | {fmt(du['busy']['schemes'][k]['sync'], digits=3)} |")
    lines.append("")
    ck = r["check"]
    lines += [
        "## A check that finds nothing new",
        "",
        f"50 `assetpatch_check` calls on an up-to-date data directory (the 1,000-file set; its manifest is {ck['manifest_bytes']:,} bytes):",
        f"each sends `If-None-Match` with the last manifest's ETag; nginx answered {ck['not_modified']} of {ck['responses']} with 304,",
        "and the kept manifest was verified again (signature, judgement) like any manifest.",
        "",
        "| | median (ms) | min (ms) | max (ms) |",
        "|---|---|---|---|",
        f"| assetpatch_check, nothing new | {ck['median_ms']:.2f} | {ck['min_ms']:.2f} | {ck['max_ms']:.2f} |",
        "",
    ]
    lines += delta_bench.result_lines(r["differential"], fmt, fu)
    lines += chunk_bench.result_lines(json.loads(json.dumps(r["chunks"])))
    lines += speed_bench.result_lines(r["speed"])
    lines += [
        "## Resume after a kill at ~50% of the archive",
        "",
        "The update downloads the whole archive (`differential=off`: by default a fresh install of this set takes ranges,",
        "its files' shared chunks fetched once, and resumes file by file). The resuming update sends `Range` + `If-Range` from the bytes on",
        "disk. \"Lost in flight\" are bytes nginx had sent",
        "that never reached the disk before the kill (socket buffers): a cost of the kill, not of resuming.",
        "",
        "| run | on disk at the kill | missing | the resuming update transferred | beyond the missing bytes | lost in flight at the kill |",
        "|---|---|---|---|---|---|",
    ]
    for i, run in enumerate(rs["runs"], 1):
        lost = run["retransferred"] - run["resume_waste"]
        lines.append(f"| {i} | {run['killed_at'] / rs['archive_bytes']:.1%} | {run['missing']:,} | {run['resumed_bytes']:,} | "
                     f"{run['resume_waste']:,} ({100 * run['resume_waste'] / rs['archive_bytes']:.3f}%) | "
                     f"{lost:,} ({100 * lost / rs['archive_bytes']:.2f}%) |")
    lines += [
        "",
        "## Resolve and open",
        "",
        "`assetpatch_resolve` from C over random names of the release (1,000,000 lookups, medians of batches of 1,000),",
        "with the plain name only and with `variants=@3x,@2x,`, against a plain C open-addressing hash table holding",
        "copies of the same names (hash, probe, compare, copy: the limit of the job) and the naive lookup (build the",
        "release path and `stat`; if missing, the bundle path and `stat`); `Client.resolve` from Python.",
        "At 100,000 names every lookup misses the caches twice or so, for the C table as for the library: those",
        "figures follow the machine's memory latency, which varies with what else runs on the host; the ratio to",
        "the C table in the same run is the stable figure.",
        "",
        "| release | files | assetpatch_client_open (ms) | assetpatch_resolve (ns) | with @3x,@2x, (ns) | C hash table (ns) | vs C table | naive stat lookup (ns) | speed-up | Python Client.resolve (ns) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, v in idx.items():
        py = fmt(v["python_ns"], digits=0) if "python_ns" in v else "-"
        lines.append(f"| {label} | {v['files']:,} | {fmt(v['open_ms'])} | {fmt(v['resolve_ns'], digits=0)} | "
                     f"{fmt(v['variants_ns'], digits=0)} | {fmt(v['table_ns'], digits=0)} | {v['table_ratio']:.1f}x | "
                     f"{fmt(v['naive_ns'], digits=0)} | {v['speedup']:.0f}x | {py} |")
    lines += [
        "",
        "## Library",
        "",
        f"libassetpatch.so.1: {lib['size'] / MB:.1f} MiB, stripped {lib['stripped'] / MB:.1f} MiB (the Swift runtime is linked in). "
        f"dlopen: {fmt(lib['dlopen_ms'], ' ms')}. NEEDED: {', '.join(lib['needed'])}.",
        "",
        *(groups_section(r["groups"]) if "groups" in r else []),
        *(transfers_section(r["transfers"]) if "transfers" in r else []),
        *(mirrors_section(r["mirrors"]) if "mirrors" in r else []),
        *(rollout_section(r["rollout"]) if "rollout" in r else []),
        *(pairs_section(r["pairs"]) if "pairs" in r else []),
        *(install_section(r["install"]) if "install" in r else []),
        "## Targets",
        "",
        "| target | measured | met |",
        "|---|---|---|",
        f"| full update <= 0.45x the pipeline | {fu['ratio']:.2f}x | {mk(fu['ratio'] <= 0.45)} |",
        f"| peak RSS <= 24 MiB in a C host | {fu['lib_rss']['max']:.0f} MiB | {mk(fu['lib_rss']['max'] <= 24)} |",
        f"| a check that finds nothing: one 304, <= 10 ms | {ck['median_ms']:.2f} ms, {ck['not_modified']} of {ck['responses']} 304 | "
        f"{mk(ck['median_ms'] <= 10 and ck['not_modified'] == ck['responses'])} |",
        f"| durability cost independent of other writers | the library's sync step {du['quiet']['schemes']['writeback+fdatasync']['sync']['median']:.3f} s quiet, "
        f"{du['busy']['schemes']['writeback+fdatasync']['sync']['median']:.3f} s with 1 GiB dirty elsewhere (syncfs: "
        f"{du['quiet']['schemes']['syncfs']['sync']['median']:.3f} s, {du['busy']['schemes']['syncfs']['sync']['median']:.3f} s) | "
        f"{mk(du['busy']['schemes']['writeback+fdatasync']['sync']['median'] <= 2 * du['quiet']['schemes']['writeback+fdatasync']['sync']['median'] + 0.02)} |",
        f"| resume re-transfers < 1% | {rs['waste_pct']['max']:.3f}% by the resume ({rs['retransferred_pct']['max']:.2f}% with bytes lost in flight) "
        f"| {mk(rs['waste_pct']['max'] < 1)} |",
        f"| resolve <= 200 ns median, >= 10x the stat lookup | {idx['small10k']['resolve_ns']['median']:.0f} ns, "
        f"{idx['small10k']['speedup']:.0f}x | {mk(idx['small10k']['resolve_ns']['median'] <= 200 and idx['small10k']['speedup'] >= 10)} |",
        f"| open <= 20 ms at 10,000 files | {idx['small10k']['open_ms']['median']:.1f} ms | {mk(idx['small10k']['open_ms']['median'] <= 20)} |",
        f"| resolve <= 100 ns at 10,000 files with and without variants | {idx['small10k']['resolve_ns']['median']:.0f} ns, "
        f"{idx['small10k']['variants_ns']['median']:.0f} ns | "
        f"{mk(max(idx['small10k']['resolve_ns']['median'], idx['small10k']['variants_ns']['median']) <= 100)} |",
        f"| resolve <= 150 ns at 100,000 files | {idx['small100k']['resolve_ns']['median']:.0f} ns, "
        f"{idx['small100k']['variants_ns']['median']:.0f} ns with variants | "
        f"{mk(max(idx['small100k']['resolve_ns']['median'], idx['small100k']['variants_ns']['median']) <= 150)} |",
        f"| Python Client.resolve <= 1 us | {idx['small10k']['python_ns']['median']:.0f} ns | {mk(idx['small10k']['python_ns']['median'] <= 1000)} |",
        f"| resolve <= 2.5x a C hash table | {idx['small10k']['table_ratio']:.1f}x at 10,000, {idx['small100k']['table_ratio']:.1f}x at 100,000 | "
        f"{mk(max(idx['small10k']['table_ratio'], idx['small100k']['table_ratio']) <= 2.5)} |",
        *(rollout_targets(r["rollout"], mk) if "rollout" in r else []),
        "",
    ]
    # Sections measured on their own (a catalog of a million files, run once) are kept from
    # the file being replaced, before "## Targets": a full run must not lose them.
    old = open(path).read() if os.path.exists(path) else ""
    made = {l for l in lines if l.startswith("## ")}
    kept = []
    for block in old.split("\n## ")[1:]:
        title = "## " + block.split("\n", 1)[0]
        if title not in made:
            kept += ("## " + block).rstrip("\n").split("\n") + [""]
    at = lines.index("## Targets")
    lines[at:at] = kept
    with open(path, "w") as f:
        f.write("\n".join(lines))


def splice(path, title, lines):
    """Puts a section into RESULTS.md: replacing its earlier version, else before "## Targets"."""
    text = open(path).read() if os.path.exists(path) else ""
    block = "\n".join(lines) + "\n"
    if title in text:
        start = text.index(title)
        nxt = text.find("\n## ", start + len(title))
        text = text[:start] + block + (text[nxt + 1:] if nxt >= 0 else "")
    elif "\n## Targets" in text:
        at = text.index("\n## Targets") + 1
        text = text[:at] + block + "\n" + text[at:]
    else:
        text += "\n" + block
    open(path, "w").write(text)


def standalone(title, run_all, section, prefix, json_name):
    """A section's benchmark run alone: measured, kept as build/JSON_NAME, printed, and (unless
    --quick) spliced into bench/RESULTS.md with the other sections left as they are."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "RESULTS.md"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    try:
        r = run_all(work, args.runs, args.quick)
        with open(os.path.join(ROOT, "build", json_name), "w") as f:
            json.dump(r, f, indent=1, default=str)
        lines = section(r)
        print("\n".join(lines))
        if not args.quick:
            splice(args.out, title, lines)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sets, for a smoke run")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "RESULTS.md"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="assetpatch-bench.", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    nginx = None
    try:
        tools = build_tools(work)
        repos = os.path.join(work, "repos")
        log("generating asset sets")
        large_total = 20 * MB if args.quick else 200 * MB
        gen_large(os.path.join(work, "src-large"), count=200 if args.quick else 1000, total=large_total)
        small10k = gen_small(os.path.join(work, "src-small10k"), 1000 if args.quick else 10_000)
        small100k = gen_small(os.path.join(work, "src-small100k"), 5000 if args.quick else 100_000)
        for label in ("large", "small10k", "small100k"):
            log(f"publishing {label}")
            subprocess.run([CLI, "publish", os.path.join(work, "src-" + label), "--repo", os.path.join(repos, label),
                            "--package", "bench-" + label], check=True, stdout=subprocess.DEVNULL)
        nginx = BenchNginx(repos, os.path.join(work, "nginx"))
        r = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine()}
        log("full update")
        r["full_update"] = bench_full_update(tools, nginx, os.path.join(repos, "large"), work, args.runs)
        log("durability under a concurrent writer")
        r["durability"] = bench_durability(tools, nginx, os.path.join(repos, "large"), work, args.runs)
        log("differential updates")
        r["differential"] = delta_bench.bench_differential(tools, nginx, repos, work, args.runs, run_measured, stats, CLI, args.quick)
        log("chunked files and the paged index")
        r["chunks"] = chunk_bench.run_all(tools, work, args.runs, args.quick)
        log("resume")
        r["resume"] = bench_resume(tools, nginx, os.path.join(repos, "large"), work, args.runs)
        log("check with nothing new")
        r["check"] = bench_check(tools, nginx, work)
        log("resolve and open")
        r["index"] = bench_resolve_and_open(tools, nginx, {"small10k": (None, small10k), "small100k": (None, small100k)}, work,
                                            100_000 if args.quick else 1_000_000, args.runs)
        r["library"] = bench_library(tools, work, args.runs)
        log("speed: resolve, the full update pairwise, publishing on every core")
        r["speed"] = speed_bench.run_all(tools, work, args.runs, args.quick)
        log("content on demand: groups")
        import groups_bench  # here: it reads this module's paths
        r["groups"] = groups_bench.run_all(work, args.runs, args.quick)
        log("transfer control")
        import transfer_bench  # here: it reads this module's paths
        r["transfers"] = transfer_bench.run_all(work, args.runs, args.quick)
        log("mirrors")
        import mirror_bench  # here: it reads this module's paths
        r["mirrors"] = mirror_bench.run_all(work, args.runs, args.quick)
        log("rollout health: 10,000 simulated clients and the gate")
        import rollout_sim  # here: it reads this module's paths
        r["rollout"] = rollout_sim.run_all(work, args.runs, args.quick)
        log("every edit pattern: real release pairs and synthetic packs against zsync, zchunk and casync")
        import pairs_bench  # here: it reads this module's paths
        r["pairs"] = pairs_bench.run_all(work, args.runs, args.quick)
        log("installing when the catalog is large and the change is small")
        import install_bench  # here: it reads this module's paths
        r["install"] = install_bench.run_all(work, args.runs, args.quick)
        with open(os.path.join(ROOT, "build", "bench-results.json"), "w") as f:
            json.dump(r, f, indent=1, default=str)
        write_results(args.out, r, args)
        print(open(args.out).read())
    finally:
        if nginx:
            nginx.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
