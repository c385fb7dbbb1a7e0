#!/usr/bin/env python3
"""The speed measures, each against its comparison in the same run.

    python3 bench/speed_bench.py [--runs 3] [--quick] [--only resolve,update,publish] [--out FILE]
    (bench/run.sh runs it too)

- resolve: `assetpatch_resolve` over 10,000 names drawn at random (1,000,000 calls), plain and
  with the variants `@3x,@2x,`, against a plain C open-addressing table over the same names
  (bench/resolve_bench.c);
- full update: the 200 MiB / 1,000-file set (bench.py's) over loopback nginx with
  `assetpatch_update` in a small C host (bench/update_bench.c), against
  curl + sha256sum + unzip + mv; the runs alternate, every one from dropped caches, and the
  ratio is the median of the pairs' ratios; the peak RSS is the C host's, next to the floor
  under it: a C host that only downloads the archive with libcurl and hashes it
  (bench/curl_floor.c);
- publish: the same set published by the CLI with 1 thread and with every core, against
  `zip -r` (Info-ZIP, level 6) of the same tree; the archives of the two thread counts must be
  byte-identical.
Writes the results as JSON to --out (bench.py folds them into RESULTS.md) and prints them."""
import argparse
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

MB = 1 << 20


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def bench_resolve(tools, work, names, runs, lookups):
    """Medians of batches of 1,000 calls, per run; the ratio to the C table in the same run."""
    data = os.path.join(work, "resolve-data")
    out = {"plain": [], "variants": [], "table": []}
    names_file = os.path.join(work, "names.txt")
    with open(names_file, "w") as f:
        f.write("\n".join(names) + "\n")
    bundle = os.path.join(work, "empty-bundle")
    os.makedirs(bundle, exist_ok=True)
    for _ in range(runs):
        for key, extra in (("plain", []), ("variants", ["@3x,@2x,"])):
            r = subprocess.run([tools["resolve_bench"], data, bundle, names_file, str(lookups), *extra],
                               capture_output=True, text=True, check=True)
            j = json.loads(r.stdout)
            out[key].append(j["resolve_ns"]["median"])
            out["table"].append(j["table_ns"]["median"])
        log(f"  resolve {out['plain'][-1]:.0f} ns, with variants {out['variants'][-1]:.0f} ns, "
            f"C table {out['table'][-1]:.0f} ns")
    table = statistics.median(out["table"])
    return {"names": len(names), "lookups": lookups, "plain_ns": bench.stats(out["plain"]),
            "variants_ns": bench.stats(out["variants"]), "table_ns": bench.stats(out["table"]),
            "plain_ratio": statistics.median(out["plain"]) / table, "variants_ratio": statistics.median(out["variants"]) / table}


def bench_update(tools, nginx, repo, work, runs):
    """Pairs of (library, pipeline) runs in alternating order, each from dropped caches."""
    with open(os.path.join(repo, "manifest.json")) as f:
        m = json.load(f)
    archive = os.path.join(repo, m["archive"]["url"])
    url = nginx.url("large/manifest.json")
    archive_url = nginx.url("large/" + m["archive"]["url"])
    pipeline = ('set -e; S="$1"; curl -sf -o "$S/a.zip" "$2"; echo "$3  $S/a.zip" | sha256sum -c --quiet; '
                'unzip -q "$S/a.zip" -d "$S/staging"; mv "$S/staging" "$S/final"')
    pairs, lib, shell, rss, floor = [], [], [], [], []
    for i in range(runs):
        bench.settle([archive])
        floor.append(bench.run_measured([tools["curl_floor"], archive_url])[1])
        times = {}
        for which in ("lib", "shell") if i % 2 == 0 else ("shell", "lib"):
            d = os.path.join(work, "run")
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            bench.settle([archive])
            if which == "lib":
                w, r = bench.run_measured([tools["update_bench"], os.path.join(d, "data"), url])
                rss.append(r)
            else:
                w, r = bench.run_measured(["bash", "-c", pipeline, "pipeline", d, archive_url, m["archive"]["sha256"]])
            times[which] = w
            log(f"  full update, {which}: {w:.2f} s, {r:.1f} MiB")
        lib.append(times["lib"])
        shell.append(times["shell"])
        pairs.append(times["lib"] / times["shell"])
    shutil.rmtree(os.path.join(work, "run"), ignore_errors=True)
    return {"archive_bytes": m["archive"]["size"], "files": len(m["files"]),
            "unpacked_bytes": sum(f["size"] for f in m["files"]),
            "lib_wall": bench.stats(lib), "shell_wall": bench.stats(shell), "lib_rss_mib": bench.stats(rss),
            "curl_floor_rss_mib": bench.stats(floor),
            "pair_ratios": pairs, "ratio": statistics.median(pairs)}


def bench_publish(src, work, runs):
    """The CLI with --jobs 1 and with every core, and zip -r, alternating, warm caches (all
    read the same tree); the two CLI archives compared byte for byte."""
    cores = os.cpu_count() or 1
    times = {"one": [], "all": [], "zip": []}
    archives = {}
    for i in range(runs):
        order = ("one", "all", "zip") if i % 2 == 0 else ("zip", "all", "one")
        for which in order:
            out = os.path.join(work, f"pub-{which}")
            shutil.rmtree(out, ignore_errors=True)
            subprocess.run(["sync"])
            if which == "zip":
                os.makedirs(out)
                w, _ = bench.run_measured(["bash", "-c", 'cd "$1" && zip -q -r "$2" .', "zip", src, os.path.join(out, "a.zip")])
            else:
                jobs = "1" if which == "one" else str(cores)
                w, _ = bench.run_measured([bench.CLI, "publish", src, "--repo", out, "--package", "bench-publish",
                                           "--version", "1", "--jobs", jobs])
                with open(os.path.join(out, "manifest.json")) as f:
                    archives[which] = os.path.join(out, json.load(f)["archive"]["url"])
            times[which].append(w)
            log(f"  publish, {which}: {w:.2f} s")
        identical = filecmp.cmp(archives["one"], archives["all"], shallow=False)
        if not identical:
            raise RuntimeError("publish with 1 thread and with every core wrote different archives")
    zip_median = statistics.median(times["zip"])
    result = {"cores": cores, "one": bench.stats(times["one"]), "all": bench.stats(times["all"]), "zip": bench.stats(times["zip"]),
              "ratio_all": statistics.median(times["all"]) / zip_median, "ratio_one": statistics.median(times["one"]) / zip_median,
              "identical": True, "archive_bytes": os.path.getsize(archives["all"]),
              "zip_bytes": os.path.getsize(os.path.join(work, "pub-zip", "a.zip"))}
    for which in ("one", "all", "zip"):
        shutil.rmtree(os.path.join(work, f"pub-{which}"), ignore_errors=True)
    return result


def run_all(tools, work, runs, quick, only=("resolve", "update", "publish")):
    """The measures named in `only`, on sets generated under `work`."""
    bench.MEASURE = tools["measure"]  # run_measured's helper, also when bench.py runs as __main__
    results = {}
    src = os.path.join(work, "speed-src-large")
    repos = os.path.join(work, "speed-repos")
    if "update" in only or "publish" in only:
        log("speed: generating the 200 MiB set")
        bench.gen_large(src, count=200 if quick else 1000, total=20 * MB if quick else 200 * MB)
    if "resolve" in only:
        small = os.path.join(work, "speed-src-small")
        names = bench.gen_small(small, 1000 if quick else 10_000)
        subprocess.run([bench.CLI, "publish", small, "--repo", os.path.join(repos, "small"), "--package", "bench-small"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([bench.CLI, "update", "--data-dir", os.path.join(work, "resolve-data"),
                        "--url", "file://" + os.path.join(repos, "small", "manifest.json")],
                       check=True, stdout=subprocess.DEVNULL)
        log("speed: resolve")
        results["resolve"] = bench_resolve(tools, work, names, runs, 100_000 if quick else 1_000_000)
    if "update" in only:
        subprocess.run([bench.CLI, "publish", src, "--repo", os.path.join(repos, "large"), "--package", "bench-large"],
                       check=True, stdout=subprocess.DEVNULL)
        nginx = bench.BenchNginx(repos, os.path.join(work, "speed-nginx"))
        try:
            log("speed: full update")
            results["update"] = bench_update(tools, nginx, os.path.join(repos, "large"), work, runs)
        finally:
            nginx.stop()
    if "publish" in only:
        log("speed: publish")
        results["publish"] = bench_publish(src, work, runs)
    return results


def result_lines(r):
    """The speed section of bench/RESULTS.md."""
    mk = lambda ok: "yes" if ok else "**no**"
    fmt = bench.fmt
    lines = ["## Speed: resolve, the full update, publishing", ""]
    targets = []
    if "resolve" in r:
        rv = r["resolve"]
        lines += [
            f"`assetpatch_resolve` over {rv['names']:,} names drawn at random ({rv['lookups']:,} calls, medians of batches of 1,000), "
            "plain and with `variants=@3x,@2x,`, against a plain C open-addressing table over the same names in the same run "
            "(bench/resolve_bench.c: FNV-1a, linear probing, the key compared and the path copied). Every run a fresh process.",
            "",
            "| | ns per call | vs the C table |",
            "|---|---|---|",
            f"| assetpatch_resolve | {fmt(rv['plain_ns'], digits=1)} | {rv['plain_ratio']:.2f}x |",
            f"| with @3x,@2x, | {fmt(rv['variants_ns'], digits=1)} | {rv['variants_ratio']:.2f}x |",
            f"| C table | {fmt(rv['table_ns'], digits=1)} | |",
            "",
        ]
        worst = max(rv["plain_ns"]["median"], rv["variants_ns"]["median"])
        targets.append(("resolve <= 100 ns, plain and with variants", f"{rv['plain_ns']['median']:.0f} ns, {rv['variants_ns']['median']:.0f} ns",
                        worst <= 100))
        targets.append(("resolve <= 3x the C table", f"{max(rv['plain_ratio'], rv['variants_ratio']):.2f}x",
                        max(rv["plain_ratio"], rv["variants_ratio"]) <= 3))
    if "update" in r:
        u = r["update"]
        lines += [
            f"The full update of bench.py's set ({u['files']:,} files, {u['unpacked_bytes'] / MB:.0f} MiB, archive {u['archive_bytes'] / MB:.1f} MiB) "
            "over loopback nginx by `assetpatch_update` in a small C host (bench/update_bench.c), against "
            "curl + sha256sum + unzip + mv; the two alternate, each from dropped caches, and the ratio is the median of the "
            "pairs' ratios. The library verifies every file's sha256 and makes the release durable; the pipeline does neither.",
            "",
            "| | wall time (s) | peak RSS (MiB) |",
            "|---|---|---|",
            f"| assetpatch_update | {fmt(u['lib_wall'])} | {fmt(u['lib_rss_mib'], digits=1)} |",
            f"| curl + sha256sum + unzip + mv | {fmt(u['shell_wall'])} | |",
            f"| ratio, pairwise | **{u['ratio']:.2f}x** ({', '.join(f'{x:.2f}' for x in u['pair_ratios'])}) | |",
            f"| the floor: libcurl + sha256 of the archive alone (bench/curl_floor.c) | | {fmt(u['curl_floor_rss_mib'], digits=1)} |",
            "",
            f"Of the update's peak, {u['curl_floor_rss_mib']['median']:.1f} MiB is what any libcurl host maps (libcurl and what it "
            f"loads, OpenSSL, GnuTLS, Kerberos, LDAP); the library's own share is "
            f"{u['lib_rss_mib']['median'] - u['curl_floor_rss_mib']['median']:.1f} MiB (docs/architecture.md, \"Memory\").",
            "",
        ]
        targets.append(("full update <= 0.40x the pipeline (pairwise median)", f"{u['ratio']:.2f}x", u["ratio"] <= 0.40))
        targets.append(("peak RSS of that update <= 16 MiB in a small C host", f"{u['lib_rss_mib']['max']:.1f} MiB",
                        u["lib_rss_mib"]["max"] <= 16))
    if "publish" in r:
        p = r["publish"]
        lines += [
            f"Publishing the same set with the CLI on 1 thread and on every core ({p['cores']}), against `zip -r` (Info-ZIP, level 6) "
            "of the same tree, warm caches, alternating. The archives of the two thread counts were compared byte for byte: "
            f"{'identical' if p['identical'] else 'DIFFERENT'} ({p['archive_bytes']:,} bytes; zip -r wrote {p['zip_bytes']:,}).",
            "",
            "| | wall time (s) | vs zip -r |",
            "|---|---|---|",
            f"| assetpatch publish --jobs {p['cores']} | {fmt(p['all'])} | {p['ratio_all']:.2f}x |",
            f"| assetpatch publish --jobs 1 | {fmt(p['one'])} | {p['ratio_one']:.2f}x |",
            f"| zip -r | {fmt(p['zip'])} | |",
            "",
        ]
        targets.append((f"publish <= 0.6x zip -r on {p['cores']} cores, the same archive whatever the thread count",
                        f"{p['ratio_all']:.2f}x, {'identical' if p['identical'] else 'different'}", p["ratio_all"] <= 0.6 and p["identical"]))
    lines += ["Targets:", "", "| target | measured | met |", "|---|---|---|"]
    lines += [f"| {t} | {m} | {mk(ok)} |" for t, m, ok in targets]
    lines.append("")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="resolve,update,publish")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "speed-results.json"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="assetpatch-speed.", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    try:
        tools = bench.build_tools(work)
        r = run_all(tools, work, args.runs, args.quick, only=args.only.split(","))
        with open(args.out, "w") as f:
            json.dump(r, f, indent=1)
        print("\n".join(result_lines(r)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
