#!/usr/bin/env python3
"""Transfer control (docs/transfers.md), measured over loopback nginx through a counting proxy
(the bytes it forwards to the client, timestamped, and the connections open), and nginx's own
access log (body bytes per request, what it sent).

- A cap of 2 MiB/s over a differential update of parallel ranges (parallel_downloads 4): the
  rate over every 2-second window after the first, against the cap; the cap raised to 8 MiB/s
  mid-update: how long until the rate is there.
- Pause for 10 s mid-update, then resume: bytes nginx sent beyond what the update needed
  (fetched twice), connections open during the pause, the release byte-identical.
- A 20 MiB foreground group fetch started while a 200 MiB background update of the same client
  runs under a shared 20 MiB/s cap: its time against its time alone; the update then completes.
- Metered with a 10 MiB threshold and a 200 MiB update: archive bytes sent before the host
  allows it.
- A transport of the host's own (Python's http.client through the Python package) against
  libcurl: the full update of the benchmark's 1,000-file release, from the same Python client.

Run by bench.py in the full run, or alone, which splices its section into bench/RESULTS.md:
    python3 bench/transfer_bench.py [--quick]"""
import hashlib
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import CLI, LIB, MB, ROOT, gen_large, standalone  # noqa: E402
from groups_bench import RangeNginx  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
os.environ.setdefault("ASSETPATCH_LIBRARY", LIB)
import assetpatch  # noqa: E402

SECTION = "## Transfer control"


def log(*a):
    print("[transfers]", *a, file=sys.stderr, flush=True)


class CountingProxy:
    """A TCP proxy to `port`: records (monotonic time, bytes) of what it forwards to clients
    and how many client connections are open. Its own buffers are small (16 KiB each way), so
    what it forwards is what crossed the link to the client: a model of the network between a
    server and a client, where nginx's count also has what sat in its own socket buffer.
    `rate`: every connection together gets that many bytes per second towards the client (one
    host's bandwidth; nginx's `limit_rate` is per request, and lets a request's first second's
    worth through at once)."""

    def __init__(self, port, rate=0):
        self.target = port
        self.rate = rate
        self.next_free = time.monotonic()
        self.lock = threading.Lock()
        self.events = []
        self.open = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
            server.connect(("127.0.0.1", self.target))
            with self.lock:
                self.open += 1
            threading.Thread(target=self.pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self.pipe, args=(server, client, True), daemon=True).start()

    def pipe(self, src, dst, counted):
        try:
            while True:
                data = src.recv(16384)
                if not data:
                    break
                if counted and self.rate:
                    with self.lock:
                        at = max(self.next_free, time.monotonic())
                        self.next_free = at + len(data) / self.rate
                    time.sleep(max(0.0, at - time.monotonic()))
                dst.sendall(data)
                if counted:
                    with self.lock:
                        self.events.append((time.monotonic(), len(data)))
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            if counted:
                with self.lock:
                    self.open -= 1
                src.close()
                dst.close()

    def bytes_between(self, a, b):
        with self.lock:
            return sum(n for t, n in self.events if a <= t < b)

    def mark(self):
        with self.lock:
            self.events = []

    def total(self):
        with self.lock:
            return sum(n for _, n in self.events)

    def last(self):
        with self.lock:
            return self.events[-1][0] if self.events else 0

    def close(self):
        self.sock.close()


def write_files(d, files):
    shutil.rmtree(d, ignore_errors=True)
    for rel, data in files.items():
        path = os.path.join(d, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def publish(src, repo, version, files, *extra):
    write_files(src, files)
    subprocess.run([CLI, "publish", src, "--repo", repo, "--package", "transfers", "--version", str(version), *extra],
                   check=True, stdout=subprocess.DEVNULL)


def ranged(version, count, size, seed):
    """`count` random files of `size`; version 2 changes every other one (many separate ranges)."""
    return {f"r/{i:03}.bin": random.Random(seed * 100000 + (version if i % 2 == 0 else 1) * 1000 + i).randbytes(size)
            for i in range(count)}


def verified(c, files):
    for rel, data in files.items():
        with open(c.resolve(rel), "rb") as f:
            if hashlib.sha256(f.read()).digest() != hashlib.sha256(data).digest():
                return False
    return True


def installed_v1(work, url, name, files, **options):
    data = os.path.join(work, name)
    shutil.rmtree(data, ignore_errors=True)
    with assetpatch.Client(data, manifest_url=url, **options) as c:
        assert c.update()
    return data


def run_update(c, result):
    try:
        result["installed"] = c.update()
    except Exception as e:  # reported, not raised in the thread
        result["error"] = repr(e)


def bench_cap(work, proxy, url, v2, quick):
    cap, raised = 2 * MB, 8 * MB
    out = {}
    data = os.path.join(work, "cap")
    with assetpatch.Client(data, manifest_url=url, parallel_downloads=4, max_recv_speed=cap) as c:
        planned = c.check()[1]
        proxy.mark()
        result = {}
        t0 = time.monotonic()
        th = threading.Thread(target=run_update, args=(c, result))
        th.start()
        th.join()
        t1 = time.monotonic()
        assert result.get("installed"), result
        out["verified"] = verified(c, v2)
    # 2-second windows from the end of the first to the last whole one before the last byte.
    windows = []
    t, end = t0 + 2, proxy.last()
    while t + 2 <= end:
        windows.append(proxy.bytes_between(t, t + 2) / 2)
        t += 2
    out.update(cap=cap, planned=planned, seconds=t1 - t0, windows=[w / cap for w in windows])
    return out


def bench_raise(work, proxy, url, v2):
    cap, raised = 2 * MB, 8 * MB
    data = os.path.join(work, "raise")
    with assetpatch.Client(data, manifest_url=url, parallel_downloads=4, max_recv_speed=cap) as c:
        proxy.mark()
        result = {}
        th = threading.Thread(target=run_update, args=(c, result))
        th.start()
        time.sleep(3)
        t_set = time.monotonic()
        c.set("max_recv_speed", raised)
        th.join()
        t_end = time.monotonic()
        assert result.get("installed"), result
        ok = verified(c, v2)
    # The first moment after the change from which the last 500 ms averaged >= 90% of the new cap.
    latency = None
    t = t_set + 0.5
    while t <= t_end:
        if proxy.bytes_between(t - 0.5, t) / 0.5 >= 0.9 * raised:
            latency = t - t_set
            break
        t += 0.05
    return {"raised": raised, "latency_s": latency, "verified": ok}


def bench_pause(work, proxy, nginx, url, v2, planned):
    data = os.path.join(work, "pause")
    with assetpatch.Client(data, manifest_url=url, parallel_downloads=4, max_recv_speed=8 * MB) as c:
        mark = nginx.mark()
        proxy.mark()
        result = {}
        th = threading.Thread(target=run_update, args=(c, result))
        th.start()
        time.sleep(1)
        c.pause()
        t_pause = time.monotonic()
        open_after = []
        while time.monotonic() < t_pause + 10:
            time.sleep(0.1)
            if time.monotonic() > t_pause + 2.5:
                open_after.append(proxy.open)
        c.resume()
        th.join()
        assert result.get("installed"), result
        ok = verified(c, v2)
    sent, _ = nginx.since(mark)
    carried = proxy.total()
    return {"planned": planned, "sent": sent, "carried": carried, "twice": carried - planned, "nginx_twice": sent - planned,
            "open_during": max(open_after), "verified": ok}


def bench_metered(work, nginx, url_fg, data_v1):
    data = os.path.join(work, "metered")
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(data_v1, data)
    with assetpatch.Client(data, manifest_url=url_fg, metered=True, metered_max_bytes=10 * MB) as c:
        planned = c.check()[1]
        mark = nginx.mark()
        refused = False
        try:
            c.update()
        except assetpatch.MeteredError:
            refused = True
        sent, ranges = nginx.since(mark)
        c.set("metered_max_bytes", planned)
        allowed = c.update()
    return {"planned": planned, "refused": refused, "sent_before": sent, "ranges_before": len(ranges), "allowed": allowed}


def run_all(work, runs, quick):
    os.makedirs(os.path.join(work, "repos"), exist_ok=True)
    count, size = (48, 256 << 10) if quick else (96, 512 << 10)
    v1, v2 = ranged(1, count, size, 5), ranged(2, count, size, 5)
    src, repo = os.path.join(work, "src"), os.path.join(work, "repos", "ranges")
    publish(src, repo, 1, v1)
    nginx = RangeNginx(os.path.join(work, "repos"), os.path.join(work, "nginx"))
    proxy = CountingProxy(nginx.port)
    try:
        url = f"http://127.0.0.1:{proxy.port}/ranges/head.json"
        direct = f"http://127.0.0.1:{nginx.port}/ranges/head.json"
        for name in ("cap", "raise", "pause"):
            installed_v1(work, direct, name, v1)
        publish(src, repo, 2, v2)
        log("cap")
        cap = bench_cap(work, proxy, url, v2, quick)
        log("cap raised mid-update")
        raised = bench_raise(work, proxy, url, v2)
        log("pause and resume")
        pause = bench_pause(work, proxy, nginx, url, v2, cap["planned"])
        log("foreground before background")
        scale = 4 if quick else 1
        fg_url = f"http://127.0.0.1:{nginx.port}/fg/head.json"
        src_fg, repo_fg = os.path.join(work, "src-fg"), os.path.join(work, "repos", "fg")
        group = {f"level/{i:02}.bin": random.Random(900 + i).randbytes(MB) for i in range(20 // scale)}
        b1 = {f"base/{i:03}.bin": random.Random(1000 + i).randbytes(2 * MB) for i in range(100 // scale)}
        b2 = {f"base/{i:03}.bin": random.Random(2000 + i).randbytes(2 * MB) for i in range(100 // scale)}
        publish(src_fg, repo_fg, 1, {**b1, **group}, "--group", "level=level/*")
        v1_dir = installed_v1(work, fg_url, "fg-v1", b1)
        foreground = bench_fg(work, fg_url, v1_dir, b2, group, src_fg, repo_fg, runs)
        log("metered")
        metered = bench_metered(work, nginx, fg_url, v1_dir)
        log("a transport of the host's own")
        transport = bench_transport(work, nginx, runs, quick)
        return {"cap": cap, "raise": raised, "pause": pause, "foreground": foreground, "metered": metered,
                "transport": transport, "release_after_s": 2.0}
    finally:
        nginx.stop()


def bench_fg(work, url, v1_dir, b2, group, src, repo, runs):
    cap = 20 * MB
    alone = []
    for run in range(runs):
        data = os.path.join(work, f"fg-alone-{run}")
        shutil.rmtree(data, ignore_errors=True)
        shutil.copytree(v1_dir, data)
        with assetpatch.Client(data, max_recv_speed=cap) as c:
            t = time.monotonic()
            c.fetch_groups("level")
            alone.append(time.monotonic() - t)
    publish(src, repo, 2, {**b2, **group}, "--group", "level=level/*")
    during, ok = [], True
    for run in range(runs):
        data = os.path.join(work, f"fg-{run}")
        shutil.rmtree(data, ignore_errors=True)
        shutil.copytree(v1_dir, data)
        with assetpatch.Client(data, manifest_url=url, max_recv_speed=cap) as c:
            seen = threading.Event()
            c.start_update(lambda p: seen.set() if p.phase == assetpatch.Phase.DOWNLOAD and p.bytes_done > 4 * MB else None)
            seen.wait(120)  # the background update well under way
            t = time.monotonic()
            c.fetch_groups("level")
            during.append(time.monotonic() - t)
            ok &= bool(c.wait(600)) and verified(c, b2)
    # The update ran from v1 with a client that fetched the group of v1: moved forward.
    return {"cap": cap, "alone_s": alone, "during_s": during, "ratio": statistics.median(during) / statistics.median(alone),
            "updates_ok": ok, "group_bytes": sum(len(v) for v in group.values()), "update_bytes": sum(len(v) for v in b2.values())}


def bench_transport(work, nginx, runs, quick):
    src, repo = os.path.join(work, "src-large"), os.path.join(work, "repos", "large")
    total = gen_large(src, count=200 if quick else 1000, total=20 * MB if quick else 200 * MB)
    subprocess.run([CLI, "publish", src, "--repo", repo, "--package", "bench-large"], check=True, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{nginx.port}/large/head.json"
    times = {"libcurl": [], "http.client": []}
    for run in range(runs):
        for name in times:  # alternated, so that neither always runs on a warmer cache
            data = os.path.join(work, f"transport-{name}")
            shutil.rmtree(data, ignore_errors=True)
            with assetpatch.Client(data, manifest_url=url) as c:
                if name == "http.client":
                    c.set_transport(assetpatch.HTTPClientTransport())
                t = time.monotonic()
                assert c.update()
                times[name].append(time.monotonic() - t)
    curl, host = statistics.median(times["libcurl"]), statistics.median(times["http.client"])
    return {"bytes": total, "libcurl_s": times["libcurl"], "host_s": times["http.client"], "ratio": host / curl}


def section(r):
    c, ra, p, f, m, tr = r["cap"], r["raise"], r["pause"], r["foreground"], r["metered"], r["transport"]
    mk = lambda ok: "yes" if ok else "**no**"
    lo, hi = min(c["windows"], default=0), max(c["windows"], default=0)
    return [
        SECTION,
        "",
        "Loopback nginx behind a counting proxy (what it forwards to the client, timestamped; the connections open) and "
        "nginx's access log (body bytes it sent). A differential update of "
        f"{c['planned'] / MB:.0f} MiB in separate ranges, `parallel_downloads=4`.",
        "",
        f"- Cap {c['cap'] / MB:.0f} MiB/s: the rate over each of {len(c['windows'])} 2-second windows after the first was "
        f"{lo:.3f}x to {hi:.3f}x the cap (update {c['seconds']:.1f} s; byte-identical: {c['verified']}).",
        f"- Cap raised to {ra['raised'] / MB:.0f} MiB/s mid-update: the last 500 ms averaged 90% of it "
        f"{ra['latency_s']:.2f} s after the change (the window's own length included)." if ra["latency_s"] is not None else
        "- Cap raised mid-update: the update ended before the rate could be measured.",
        f"- Paused 10 s mid-update (cap 8 MiB/s), then resumed: the link carried {p['carried']:,} bytes (responses, headers "
        f"included) for {p['planned']:,} planned ({p['twice']:+,}: fetched twice, and the requests' response headers); nginx "
        f"handed its kernel {p['sent']:,} body bytes ({p['nginx_twice']:+,}: what sat in its socket buffers when the "
        f"connections closed, never sent); connections open from 2.5 s into the pause: at most {p['open_during']}; "
        f"byte-identical: {p['verified']}.",
        f"- A {f['group_bytes'] / MB:.0f} MiB foreground group fetch while a {f['update_bytes'] / MB:.0f} MiB background update "
        f"of the same client ran under a shared {f['cap'] / MB:.0f} MiB/s cap: {statistics.median(f['during_s']):.2f} s against "
        f"{statistics.median(f['alone_s']):.2f} s alone (**{f['ratio']:.2f}x**); the updates then completed byte-identical: "
        f"{f['updates_ok']}.",
        f"- Metered, threshold 10 MiB, an update planning {m['planned'] / MB:.0f} MiB: refused ({m['refused']}) after nginx sent "
        f"{m['sent_before']:,} bytes (the head and {m['ranges_before']} index-page ranges, no file's bytes); allowed, it installed: {m['allowed']}.",
        f"- A transport of the host's own, Python's http.client through the Python package (`HTTPClientTransport`), for the full "
        f"update of the {tr['bytes'] / MB:.0f} MB 1,000-file release: {statistics.median(tr['host_s']):.2f} s against "
        f"{statistics.median(tr['libcurl_s']):.2f} s over libcurl from the same Python client (**{tr['ratio']:.2f}x**; "
        "the whole archive in 64 KiB pieces through ctypes, one request at a time). The package's HTTP tests pass over it "
        "(the test command runs them both ways).",
        "",
        "| target | measured | met |",
        "|---|---|---|",
        f"| 2 MiB/s cap, 4 transfers: every 2 s window after the first within ±5% | {lo:.3f}x - {hi:.3f}x | "
        f"{mk(len(c['windows']) > 0 and lo >= 0.95 and hi <= 1.05)} |",
        f"| cap change takes effect within 1 s | {ra['latency_s'] if ra['latency_s'] is None else round(ra['latency_s'], 2)} s | "
        f"{mk(ra['latency_s'] is not None and ra['latency_s'] <= 1.0)} |",
        f"| pause 10 s: <= 64 KiB fetched twice; byte-identical; no connection held past {r['release_after_s']:.0f} s | "
        f"{p['twice']:+,} bytes; {p['verified']}; {p['open_during']} open | "
        f"{mk(p['twice'] <= 64 << 10 and p['verified'] and p['open_during'] == 0)} |",
        f"| foreground fetch within 1.3x its time alone; the background update completes | {f['ratio']:.2f}x; {f['updates_ok']} | "
        f"{mk(f['ratio'] <= 1.3 and f['updates_ok'])} |",
        f"| metered: 0 archive file bytes before the host allows it | {m['sent_before']:,} bytes of head and index pages | "
        f"{mk(m['refused'] and m['sent_before'] < 64 << 10 and m['allowed'])} |",
        f"| a host transport: the HTTP tests pass over it; its overhead on the 1,000-file full update reported | "
        f"{tr['ratio']:.2f}x libcurl's time | reported |",
        "",
    ]


def main():
    standalone(SECTION, run_all, section, "assetpatch-transfers.", "bench-transfers.json")


if __name__ == "__main__":
    main()
