#!/usr/bin/env python3
"""Content on demand (docs/groups.md), measured over loopback nginx, every byte it sent counted
(its access log: body bytes and the Range asked for, per request, head and index pages included).

- A 2 GiB release of 20 on-demand groups whose base is 5%: the first install against the base's
  bytes in the archive; one group fetched against its bytes; an update that changes only a group
  the client does not have against the bytes it moves (none of that group's).
- assetpatch_group_status at 100,000 files: time per call, and no system call (seccomp strict
  mode: any call but read, write and exit kills the process).
- A 200 MiB quota while 1 GiB of groups is fetched in random order with random pins: the groups'
  bytes on disk sampled every 20 ms, pins checked after every fetch, evicted groups fetched again
  and hashed.
- Variant art published with --scale-groups: what a device using only @3x (and only @2x) fetches
  against all three scales.

Run by bench.py in the full run, or alone, which splices its section into bench/RESULTS.md and
leaves the others as they are:
    python3 bench/groups_bench.py [--quick]"""
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import CLI, LIB, MB, PREFIX, ROOT, Nginx, standalone  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
os.environ.setdefault("ASSETPATCH_LIBRARY", LIB)
import assetpatch  # noqa: E402

SECTION = "## Content on demand: groups"


def log(*a):
    print("[groups]", *a, file=sys.stderr, flush=True)


class RangeNginx(Nginx):
    """nginx logging each request's URI, status, body bytes and the Range it was asked for."""

    def __init__(self, root, d):
        self.access = os.path.join(d, "access.log")
        super().__init__(root, d, http="log_format ranges '$request_uri $status $body_bytes_sent \"$http_range\"'; sendfile on;",
                         access_log=f"{self.access} ranges")

    def mark(self):
        return os.path.getsize(self.access) if os.path.exists(self.access) else 0

    def since(self, mark):
        """(bytes sent, archive ranges asked for as (start, end exclusive)) since `mark`."""
        time.sleep(0.2)  # nginx writes a request's line once it has sent its last byte
        sent, ranges = 0, []
        with open(self.access) as f:
            f.seek(mark)
            for line in f:
                m = re.match(r'(\S+) (\d+) (\d+) "([^"]*)"', line)
                if not m:
                    continue
                sent += int(m.group(3))
                r = re.match(r"bytes=(\d+)-(\d+)", m.group(4))
                if m.group(1).endswith(".zip") and r:
                    ranges.append((int(r.group(1)), int(r.group(2)) + 1))
        return sent, ranges


def gen_set(d, total, groups=20, base_share=0.05, seed=37):
    """A release of `total` bytes: the base (`base_share`) in 1 MiB files, then `groups` groups,
    each a tenth in 6 MiB files (chunked) and the rest in 1 MiB ones; random bytes (stored)."""
    rnd = random.Random(seed)
    unit = max(64 << 10, total // 2048)  # 1 MiB at 2 GiB
    def write(rel, size):
        path = os.path.join(d, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(rnd.randbytes(size))
    for i in range(int(total * base_share) // unit):
        write(f"base/{i:03}.bin", unit)
    per_group = int(total * (1 - base_share)) // groups
    for g in range(groups):
        big = max(1, per_group // 10 // (6 * unit))
        for i in range(big):
            write(f"groups/g{g:02}/big{i}.pak", 6 * unit)
        for i in range((per_group - big * 6 * unit) // unit):
            write(f"groups/g{g:02}/{i:03}.bin", unit)


def publish(src, repo, version, *args):
    out = subprocess.run([CLI, "publish", src, "--repo", repo, "--package", "bench-groups", "--version", str(version),
                          "--chunk-threshold", str(4 * MB if "--scale-groups" not in args else 1 << 40), "--json", *args],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def locations(repo):
    with open(os.path.join(repo, "manifest.json")) as f:
        m = json.load(f)
    return {e["path"]: (e["zip"]["header_offset"], e["zip"]["data_offset"] + e["zip"]["compressed_size"]) for e in m["files"]}


def covered(ranges, spans):
    """Bytes of `spans` that `ranges` asked for."""
    total = 0
    for a, b in spans:
        for x, y in ranges:
            total += max(0, min(b, y) - max(a, x))
    return total


def tree_bytes(paths):
    """Bytes of the regular files under `paths`, each inode once."""
    seen, total = set(), 0
    for p in paths:
        for dp, _, names in os.walk(p):
            for n in names:
                try:
                    st = os.lstat(os.path.join(dp, n))
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_size
    return total


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def bench_large(work, nginx, quick):
    total = (128 if quick else 2048) * MB
    src, repo = os.path.join(work, "large-src"), os.path.join(work, "www", "large")
    log(f"generating and publishing {total // MB} MiB in 20 groups")
    gen_set(src, total)
    pub = publish(src, repo, 1, *[f"--group=g{g:02}=groups/g{g:02}/*" for g in range(20)])
    spans = locations(repo)
    base = [s for p, s in spans.items() if p.startswith("base/")]
    base_bytes = sum(b - a for a, b in base)
    url = nginx.url("large/head.json")
    data = os.path.join(work, "large-data")
    out = {"archive_bytes": pub["archive_bytes"], "groups": len(pub["groups"]), "base_bytes": base_bytes}

    mark = nginx.mark()
    with assetpatch.Client(data, manifest_url=url) as c:
        t0 = time.monotonic()
        c.update()
        out["install_s"] = time.monotonic() - t0
    sent, ranges = nginx.since(mark)
    out["install_sent"] = sent
    out["install_group_bytes"] = covered(ranges, [s for p, s in spans.items() if p.startswith("groups/")])

    group = "g07"
    g_spans = [s for p, s in spans.items() if p.startswith(f"groups/{group}/")]
    g_info = next(g for g in pub["groups"] if g["name"] == group)
    mark = nginx.mark()
    with assetpatch.Client(data) as c:
        t0 = time.monotonic()
        c.fetch_groups(group)
        out["fetch_s"] = time.monotonic() - t0
    sent, ranges = nginx.since(mark)
    with open(os.path.join(repo, "head.json")) as f:
        head = json.load(f)
    index = head["index"] if "index" in head else json.loads(__import__("base64").b64decode(head["payload"]))["index"]
    out.update(fetch_sent=sent, fetch_group_archive_bytes=g_info["archive_bytes"], fetch_group_bytes=g_info["bytes"],
               fetch_index=covered(ranges, [(index["offset"], index["offset"] + index["size"])]),
               fetch_other=sum(b - a for a, b in ranges) - covered(ranges, g_spans)
               - covered(ranges, [(index["offset"], index["offset"] + index["size"])]))

    # v2 changes only g03, which this client does not have.
    changed = os.path.join(src, "groups", "g03")
    for name in sorted(os.listdir(changed))[:3]:
        with open(os.path.join(changed, name), "r+b") as f:
            f.write(random.Random(name).randbytes(4096))
    publish(src, repo, 2, *[f"--group=g{g:02}=groups/g{g:02}/*" for g in range(20)])
    spans2 = locations(repo)
    mark = nginx.mark()
    with assetpatch.Client(data, manifest_url=url) as c:
        check = c.check()
        c.update()
        assert c.group(group).state == "local"
    sent, ranges = nginx.since(mark)
    absent = [s for p, s in spans2.items() if p.startswith("groups/") and not p.startswith(f"groups/{group}/")]
    out.update(update_sent=sent, update_check_bytes=check[1], update_absent_bytes=covered(ranges, absent))
    shutil.rmtree(data)
    return out, src, repo, url


def bench_quota(work, src_repo_url, quick):
    _, repo, url = src_repo_url
    quota = (12 if quick else 200) * MB
    data = os.path.join(work, "quota-data")
    with open(os.path.join(repo, "manifest.json")) as f:
        files = json.load(f)["files"]
    hashes = {e["path"]: e["sha256"] for e in files}
    rnd = random.Random(5)
    order = [f"g{g:02}" for g in rnd.sample(range(20), 11)]
    order += rnd.sample(order, 4)  # some fetched again, after eviction
    samples, stop = [], threading.Event()
    out = {"quota": quota, "fetches": len(order), "quota_refusals": 0, "pinned_evicted": 0, "refetched_identical": 0,
           "refetched": 0}
    with assetpatch.Client(data, manifest_url=url, group_quota_bytes=quota) as c:
        c.update()
        release = os.path.dirname(os.path.dirname(os.path.dirname(c.resolve(next(p for p in hashes if p.startswith("base/"))))))
        sizes = {g.name: g.total_bytes for g in c.groups()}
        out["largest_group"] = max(sizes.values())
        out["fetched_bytes"] = sum(sizes[g] for g in order)

        def sample():
            while not stop.is_set():
                samples.append(tree_bytes([os.path.join(release, "groups"), os.path.join(data, "downloads", "groups")]))
                time.sleep(0.02)
        t = threading.Thread(target=sample)
        t.start()
        pinned, seen = set(), set()
        for g in order:
            try:
                c.fetch_groups(g)
            except assetpatch.QuotaError:
                out["quota_refusals"] += 1
                victim = sorted(pinned)[0]
                c.pin_group(victim, False)
                pinned.discard(victim)
                c.fetch_groups(g)
            if g in seen:
                out["refetched"] += 1
                ok = all(sha(c.resolve(p)) == h for p, h in hashes.items() if p.startswith(f"groups/{g}/"))
                out["refetched_identical"] += ok
            seen.add(g)
            if rnd.random() < 0.3:
                c.pin_group(g)
                pinned.add(g)
            out["pinned_evicted"] += sum(c.group(p).state != "local" for p in pinned)
        stop.set()
        t.join()
    out["max_on_disk"] = max(samples)
    out["samples"] = len(samples)
    shutil.rmtree(data)
    return out


def gen_art(d, count=300, seed=11):
    """Variant art at three scales: each image's bytes follow its pixels (1 : 4 : 9), random as
    compressed images are; a few plain files without variants."""
    rnd = random.Random(seed)
    for i in range(count):
        w = rnd.randint(24, 96)
        for suffix, scale in (("", 1), ("@2x", 2), ("@3x", 3)):
            path = os.path.join(d, "art", f"{i // 50}", f"sprite{i:03}{suffix}.png")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(rnd.randbytes(w * w * scale * scale))
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    with open(os.path.join(d, "data", "sprites.json"), "w") as f:
        json.dump({"sprites": count}, f)


def bench_variants(work, nginx):
    src, repo = os.path.join(work, "art-src"), os.path.join(work, "www", "art")
    gen_art(src)
    pub = publish(src, repo, 1, "--scale-groups")
    by = {g["name"]: g["archive_bytes"] for g in pub["groups"]}
    out = {"all_scales": sum(by.values()), "groups": by}
    for scale, variants in (("3x", "@3x,"), ("2x", "@2x,")):
        data = os.path.join(work, f"art-{scale}")
        mark = nginx.mark()
        with assetpatch.Client(data, manifest_url=nginx.url("art/head.json"), variants=variants, groups=f"scale-{scale}") as c:
            c.update()
            assert c.resolve_variant("art/0/sprite000.png")[1] == 0
        out[scale] = nginx.since(mark)[0]
        shutil.rmtree(data)
    return out


def bench_status(work, tools, quick, runs):
    files = 20_000 if quick else 100_000
    src, repo = os.path.join(work, "status-src"), os.path.join(work, "status-repo")
    for i in range(files):
        path = os.path.join(src, f"g{i % 20:02}", f"{i // 1000:03}", f"{i:06}.txt")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(f"file {i}\n")
    publish(src, repo, 1, *[f"--group=g{g:02}=g{g:02}/*" for g in range(20)])
    data = os.path.join(work, "status-data")
    with assetpatch.Client(data, manifest_url="file://" + os.path.join(repo, "head.json")) as c:
        c.update()
        c.fetch_groups(["g00", "g05"])
    medians, strict = [], []
    for _ in range(runs):
        r = subprocess.run([tools["group_status_bench"], data, "1000000", *[f"g{g:02}" for g in range(20)]],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"group_status_bench exited {r.returncode} (-9: a system call under seccomp): {r.stdout} {r.stderr}")
        j = json.loads(r.stdout)
        medians.append(j["median_ns"])
        strict.append(j["strict_calls"])
    shutil.rmtree(data)
    return {"files": files, "median_ns": medians, "strict_calls": min(strict), "syscalls": 0}


def build_tools(work):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(PREFIX, "lib", "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "assetpatch"], env=env, capture_output=True, text=True,
                           check=True).stdout.split()
    out = os.path.join(work, "group_status_bench")
    subprocess.run(["cc", "-O2", os.path.join(ROOT, "bench", "group_status_bench.c"), *flags,
                    "-Wl,-rpath," + os.path.join(PREFIX, "lib"), "-o", out], check=True)
    return {"group_status_bench": out}


def run_all(work, runs, quick):
    os.makedirs(os.path.join(work, "www"), exist_ok=True)
    tools = build_tools(work)
    nginx = RangeNginx(os.path.join(work, "www"), os.path.join(work, "groups-nginx"))
    try:
        large, src, repo, url = bench_large(work, nginx, quick)
        log("quota")
        quota = bench_quota(work, (src, repo, url), quick)
        log("variants")
        variants = bench_variants(work, nginx)
    finally:
        nginx.stop()
    log("status")
    status = bench_status(work, tools, quick, runs)
    return {"large": large, "quota": quota, "variants": variants, "status": status}


def section(r):
    lg, q, v, s = r["large"], r["quota"], r["variants"], r["status"]
    mk = lambda ok: "yes" if ok else "**no**"
    med = statistics.median(s["median_ns"])
    install_ratio = lg["install_sent"] / lg["base_bytes"]
    fetch_over = lg["fetch_sent"] - lg["fetch_group_archive_bytes"]
    r3, r2 = v["3x"] / v["all_scales"], v["2x"] / v["all_scales"]
    return [
        SECTION,
        "",
        f"A release of {lg['archive_bytes'] / MB:,.0f} MiB in {lg['groups']} on-demand groups whose base is 5% "
        f"({lg['base_bytes']:,} bytes in the archive); a tenth of each group in 6 MiB files (chunked). Bytes are every body byte "
        "nginx sent (head, index pages, files), from its access log; ranges asked for come from the same log.",
        "",
        "| step | bytes sent | against | time (s) |",
        "|---|---|---|---|",
        f"| first install (base only) | {lg['install_sent']:,} | base {lg['base_bytes']:,}: **{install_ratio:.4f}x**; "
        f"{lg['install_group_bytes']:,} bytes of groups | {lg['install_s']:.2f} |",
        f"| fetch group g07 ({lg['fetch_group_bytes'] / MB:.0f} MiB) | {lg['fetch_sent']:,} | its archive bytes "
        f"{lg['fetch_group_archive_bytes']:,}: {fetch_over:+,} bytes, of which {lg['fetch_index']:,} are the chunk lists of its "
        f"chunked files (index pages: what lets a killed fetch resume chunk by chunk) and {lg['fetch_other']:,} other files' | {lg['fetch_s']:.2f} |",
        f"| update changing only g03 (not local) | {lg['update_sent']:,} | check planned {lg['update_check_bytes']:,}; "
        f"{lg['update_absent_bytes']:,} bytes of groups not local | |",
        "",
        f"`assetpatch_group_status` at {s['files']:,} files in 20 groups: {statistics.median(s['median_ns']):.0f} ns median per call "
        f"(runs: {', '.join(f'{x:.0f}' for x in s['median_ns'])}), and {s['strict_calls']:,} calls under seccomp's strict mode, "
        "which kills a process at any system call but read, write and exit: none was made.",
        "",
        f"Quota {q['quota'] / MB:.0f} MiB; {q['fetches']} fetches in random order ({q['fetched_bytes'] / MB:,.0f} MiB, groups up to "
        f"{q['largest_group'] / MB:.0f} MiB), a random 30% pinned after their fetch: the groups' bytes on disk (group directories and "
        f"fetches in flight, each inode once) sampled {q['samples']:,} times peaked at {q['max_on_disk'] / MB:.1f} MiB; "
        f"{q['pinned_evicted']} pinned group evicted; {q['quota_refusals']} fetch refused with ERR_QUOTA (pins alone left no room: one "
        f"unpinned, then fetched); {q['refetched_identical']} of {q['refetched']} groups fetched again after eviction byte-identical.",
        "",
        f"Variant art (300 sprites at 1x, 2x and 3x, bytes following pixels 1 : 4 : 9, `--scale-groups`): all three scales "
        f"{v['all_scales']:,} bytes in the archive; a device with `variants=@3x,` and `groups=scale-3x` received {v['3x']:,} bytes "
        f"(**{r3:.2f}x**), one with `@2x` {v['2x']:,} (**{r2:.2f}x**). By pixels alone 3x is 9/14 = 0.64 of the three.",
        "",
        "| target | measured | met |",
        "|---|---|---|",
        f"| first install <= base + 1% | {install_ratio:.4f}x | {mk(install_ratio <= 1.01)} |",
        f"| a 100 MiB group <= its bytes + one chunk (8 KiB) | {fetch_over:+,} bytes ({fetch_over - lg['fetch_index']:+,} besides its chunk lists) "
        f"| {mk(fetch_over <= 8192)} |",
        f"| an update of a group not local moves none of it | {lg['update_absent_bytes']:,} bytes | {mk(lg['update_absent_bytes'] == 0)} |",
        f"| group_status <= 1 us median at 100,000 files, no system call | {med:.0f} ns, 0 calls | {mk(med <= 1000 and s['files'] >= 100_000)} |",
        f"| quota: on disk <= quota + one group in flight; pins kept; refetch identical | {q['max_on_disk'] / MB:.1f} MiB <= "
        f"{(q['quota'] + q['largest_group']) / MB:.1f}; {q['pinned_evicted']} pins lost | "
        f"{mk(q['max_on_disk'] <= q['quota'] + q['largest_group'] and q['pinned_evicted'] == 0 and q['refetched_identical'] == q['refetched'])} |",
        f"| @3x only <= 0.40x of all scales | {r3:.2f}x (@2x {r2:.2f}x) | {mk(r3 <= 0.40)} |",
        "",
    ]


def main():
    standalone(SECTION, run_all, section, "assetpatch-groups.", "bench-groups.json")


if __name__ == "__main__":
    main()
