#!/usr/bin/env python3
"""Mirrors (docs/hosting.md), over loopback nginx: one nginx, one port per source, each
request logged with its port.

- Two mirrors each limited to 5 MiB/s (a proxy per mirror holds all its connections to it:
  transfer_bench's CountingProxy with a rate),
  no other source: a differential update of 200 MiB of ranges, its
  aggregate rate against one mirror's.
- A black-holed primary (a port whose listen queue is full: every SYN dropped) before a healthy
  mirror: the same small update's wall time against the mirror alone (the added time against
  the hedge, 500 ms).
- A healthy primary with a mirror configured: requests the mirror saw during a differential update.

Run by bench.py in the full run, or alone, which splices its section into bench/RESULTS.md:
    python3 bench/mirror_bench.py [--quick]"""
import os
import random
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import CLI, LIB, MB, ROOT, standalone  # noqa: E402
from transfer_bench import CountingProxy  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
os.environ.setdefault("ASSETPATCH_LIBRARY", LIB)
import assetpatch  # noqa: E402

SECTION = "## Mirrors"
LIMIT = 5 * MB


def log(*a):
    print("[mirrors]", *a, file=sys.stderr, flush=True)


def files(version, count, size):
    """`count` random files; version 2 changes every other one (a differential update of half)."""
    return {f"r/{i:03}.bin": random.Random(i * 7 + (version if i % 2 == 0 else 1) * 100003).randbytes(size) for i in range(count)}


def publish(work, repo, version, fs):
    src = os.path.join(work, f"mirror-src-{os.path.basename(repo)}{version}")
    for rel, data in fs.items():
        os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
        with open(os.path.join(src, rel), "wb") as f:
            f.write(data)
    subprocess.run([CLI, "publish", src, "--repo", repo, "--package", "mirrors", "--version", str(version)],
                   check=True, stdout=subprocess.DEVNULL)


class Farm(Nginx):
    """nginx over the repositories on the main port and `m1`, `m2` (the mirrors' own logs),
    each mirror behind a proxy that holds it to 5 MiB/s."""

    def __init__(self, root, d):
        self.access = os.path.join(d, "access.log")
        servers = "".join(f"""
  server {{{{ listen 127.0.0.1:{{{name}}}; root {root}; }}}}""" for name in ("m1", "m2"))
        super().__init__(root, d, http="log_format src '$server_port $request_uri $status $body_bytes_sent'; sendfile on;",
                         servers=servers, ports=("m1", "m2"), access_log=f"{self.access} src")
        self.throttles = {f"slow{i}": CountingProxy(self.ports[f"m{i}"], rate=LIMIT) for i in (1, 2)}

    def url(self, name, repo="r"):
        port = self.throttles[name].port if name in self.throttles else self.port
        return f"http://127.0.0.1:{port}/{repo}/head.json"

    def stop(self):
        for t in self.throttles.values():
            t.close()
        super().stop()

    def count(self):
        """Archive requests and body bytes per port so far."""
        time.sleep(0.2)
        out = {}
        with open(self.access) as f:
            for line in f:
                port, uri, status, sent = line.split()
                if uri.endswith(".zip"):
                    n, b = out.get(int(port), (0, 0))
                    out[int(port)] = (n + 1, b + int(sent))
        return out


def black_hole():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(0)
    fillers = []
    for _ in range(3):
        f = socket.socket()
        f.setblocking(False)
        f.connect_ex(s.getsockname())
        fillers.append(f)
    return s, fillers


def fresh_v1(work, name, farm, repo):
    data = os.path.join(work, "mirror-" + name)
    with assetpatch.Client(data, manifest_url=farm.url("main", repo)) as c:
        assert c.update()
    return data


def run_all(work, runs, quick):
    repos = os.path.join(work, "mirror-repos")
    count = 80 if quick else 400
    size = MB
    publish(work, os.path.join(repos, "r"), 1, files(1, count, size))
    small = {f"s/{i:02}.bin": random.Random(i).randbytes(200_000) for i in range(20)}
    publish(work, os.path.join(repos, "s"), 1, small)
    farm = Farm(repos, os.path.join(work, "mirror-nginx"))
    try:
        datas = [fresh_v1(work, f"agg{i}", farm, "r") for i in range(runs)]
        healthy = fresh_v1(work, "healthy", farm, "r")
        publish(work, os.path.join(repos, "r"), 2, files(2, count, size))
        small2 = dict(small, **{f"s/{i:02}.bin": random.Random(1000 + i).randbytes(200_000) for i in range(0, 20, 4)})
        publish(work, os.path.join(repos, "s"), 2, small2)

        log("two mirrors at 5 MiB/s each")
        rates, planned = [], 0
        for data in datas:
            with assetpatch.Client(data, manifest_url=farm.url("slow1"), mirrors=farm.url("slow2")) as c:
                planned = c.check()[1]
                t = time.monotonic()
                assert c.update()
                rates.append(planned / (time.monotonic() - t))
        per = farm.count()
        both = per.get(farm.ports["m1"], (0, 0))[1] > 0 and per.get(farm.ports["m2"], (0, 0))[1] > 0

        log("a black-holed primary")
        alone, holed = [], []
        for i in range(runs):
            for kind in ("alone", "holed"):
                data = os.path.join(work, f"mirror-s-{kind}{i}")
                hole, fillers = black_hole()
                primary = f"http://127.0.0.1:{hole.getsockname()[1]}/s/head.json"
                try:
                    opts = dict(manifest_url=primary, mirrors=farm.url("main", "s")) if kind == "holed" else dict(manifest_url=farm.url("main", "s"))
                    with assetpatch.Client(data, **opts) as c:
                        t = time.monotonic()
                        assert c.update()
                        (holed if kind == "holed" else alone).append(time.monotonic() - t)
                finally:
                    for f in fillers:
                        f.close()
                    hole.close()

        log("a healthy primary")
        before = farm.count().get(farm.ports["m2"], (0, 0))[0]
        with assetpatch.Client(healthy, manifest_url=farm.url("main"), mirrors=farm.url("slow2")) as c:
            assert c.update()
        after = farm.count().get(farm.ports["m2"], (0, 0))[0]
        return {"planned": planned, "rates": rates, "both": both, "alone_s": alone, "holed_s": holed,
                "healthy_mirror_requests": after - before, "limit": LIMIT}
    finally:
        farm.stop()


def section(r):
    mk = lambda ok: "yes" if ok else "**no**"
    agg = statistics.median(r["rates"])
    added = statistics.median(r["holed_s"]) - statistics.median(r["alone_s"])
    return [
        SECTION,
        "",
        "Loopback nginx, one port per source (docs/hosting.md, \"Mirrors\"); medians of "
        f"{len(r['rates'])} runs.",
        "",
        f"- Two mirrors limited to {r['limit'] / MB:.0f} MiB/s each (a proxy holding all of a mirror's connections to it), a differential "
        f"update of {r['planned'] / MB:.0f} MiB of ranges: **{agg / MB:.2f} MiB/s** aggregate "
        f"({agg / r['limit']:.2f}x one mirror; both served ranges: {r['both']}). The second joins after the first second, "
        "when the rest would take longer than 8 s.",
        f"- A black-holed primary (every SYN dropped) before a healthy mirror, the first install of a 4 MB release: "
        f"{statistics.median(r['holed_s']):.2f} s against {statistics.median(r['alone_s']):.2f} s from the mirror alone "
        f"(**+{added:.2f} s**; the hedge is 0.5 s, the connect timeout 10 s).",
        f"- A healthy primary with a mirror configured: the mirror saw {r['healthy_mirror_requests']} archive requests.",
        "",
        "| target | measured | met |",
        "|---|---|---|",
        f"| two 5 MiB/s mirrors: >= 9 MiB/s aggregate | {agg / MB:.2f} MiB/s | {mk(agg >= 9 * MB)} |",
        f"| black-holed primary: added wall time <= hedge + 1 s | +{added:.2f} s | {mk(added <= 1.5)} |",
        f"| healthy primary: 0 mirror requests | {r['healthy_mirror_requests']} | {mk(r['healthy_mirror_requests'] == 0)} |",
        "",
    ]


def main():
    standalone(SECTION, run_all, section, "assetpatch-mirrors.", "bench-mirrors.json")


if __name__ == "__main__":
    main()
