"""Transfer control: a bandwidth cap shared by every transfer of a client, pause and resume
(connections closed during a long pause, ranges asked again from the byte they reached),
background work holding behind foreground work, and metered networks refusing before a byte of
the archive moves. Bytes are counted from what the client asked the server for; no assertion
bounds a duration from above (a slow machine only makes the lower bounds safer)."""
import hashlib
import os
import random
import shutil
import signal
import subprocess
import threading
import time

import pytest

import assetpatch
from conftest import CLI, FaultServer, make_tree, sha256_file

FILES = 40
SIZE = 40_000


def tree(version, changed=range(0, FILES, 2)):
    """Random files; `version` 2 changes every other one, so that a differential update asks
    for many separate ranges (which run in parallel)."""
    files = {}
    for i in range(FILES):
        seed = version if i in changed else 1
        files[f"data/{i:03}.bin"] = random.Random(seed * 1000 + i).randbytes(SIZE)
    files["readme.txt"] = f"release {version}\n".encode()
    return files


def publish(src, repo, version, files, *extra):
    shutil.rmtree(src, ignore_errors=True)
    make_tree(src, files)
    subprocess.run([CLI, "publish", str(src), "--repo", str(repo), "--package", "transfers", "--version", str(version),
                    *extra], check=True, stdout=subprocess.DEVNULL)


@pytest.fixture
def site(tmp_path):
    """v1 installed into `data`, v2 published: the update to it is differential, in ranges."""
    root = tmp_path / "site"
    root.mkdir()
    publish(tmp_path / "src", root / "repo", 1, tree(1))
    server = FaultServer(str(root), str(tmp_path))

    class Site:
        pass
    s = Site()
    s.server, s.tmp, s.url = server, tmp_path, f"{server.base}/repo/head.json"
    s.repo = root / "repo"
    with assetpatch.Client(str(tmp_path / "data"), manifest_url=s.url) as c:
        assert c.update()
    publish(tmp_path / "src", root / "repo", 2, tree(2))
    s.files = tree(2)
    yield s
    server.stop()


def asked(server):
    """The archive bytes the client asked for, request by request: (start, end exclusive)."""
    return [(e["start"], e["end"] + 1) for e in server.stats()["archive_log"]]


def assert_installed(c, files):
    for path, data in files.items():
        assert sha256_file(c.resolve(path)) == hashlib.sha256(data).hexdigest(), path


def plan_bytes(c):
    """What the update will transfer, as check plans it."""
    version, size = c.check()
    assert version == 2
    return size


def test_a_cap_is_one_budget_for_every_parallel_range(site):
    """Four parallel ranges under a 200 KiB/s cap take at least their bytes over the cap: a
    per-request cap (libcurl's own) would let them finish in about a quarter of that."""
    cap = 200 << 10
    with assetpatch.Client(str(site.tmp / "data"), manifest_url=site.url, parallel_downloads=4, max_recv_speed=cap) as c:
        planned = plan_bytes(c)
        assert planned > 600_000
        site.server.reset()
        start = time.monotonic()
        assert c.update()
        elapsed = time.monotonic() - start
        assert_installed(c, site.files)
    ranges = asked(site.server)
    assert len(ranges) >= 8, "many ranges, run four at a time"
    moved = sum(b - a for a, b in ranges)
    burst = 64 << 10  # what the bucket holds when the update starts, and pieces in flight
    assert elapsed >= (moved - burst) / cap, f"{moved} bytes in {elapsed:.2f} s: faster than the cap"


def test_a_cap_set_while_an_update_runs_holds_from_then_on(site):
    """No cap at first; once the first range is in, a 150 KiB/s cap: the rest takes at least its
    bytes over the cap."""
    cap = 150 << 10
    site.server.control(rate=4 << 20)  # slow enough that the update is still running when the cap is set
    with assetpatch.Client(str(site.tmp / "data"), manifest_url=site.url) as c:
        planned = plan_bytes(c)
        marks = {}

        def progress(p):
            if p.phase == assetpatch.Phase.DOWNLOAD and p.bytes_done > 0 and "at" not in marks:
                c.set("max_recv_speed", cap)
                marks["at"], marks["done"] = time.monotonic(), p.bytes_done
        assert c.update(progress)
        elapsed = time.monotonic() - marks["at"]
        assert_installed(c, site.files)
    rest = planned - marks["done"]
    assert rest > 400_000
    assert elapsed >= (rest - (64 << 10)) / cap, f"{rest} bytes in {elapsed:.2f} s after the cap was set"


def test_pause_closes_connections_and_resume_asks_only_for_what_is_missing(site):
    site.server.control(rate=300 << 10)
    with assetpatch.Client(str(site.tmp / "data"), manifest_url=site.url, parallel_downloads=4) as c:
        planned = plan_bytes(c)
        site.server.reset()
        site.server.control(rate=300 << 10)
        seen = []
        paused_at = threading.Event()

        def progress(p):
            seen.append(p)
            if p.phase == assetpatch.Phase.DOWNLOAD and p.bytes_done > 100_000 and not paused_at.is_set():
                c.pause()
                paused_at.set()
        c.start_update(progress)
        assert paused_at.wait(60)
        # Held, then taken apart: no connection stays open (released after 2 s; 60 s allowed).
        deadline = time.monotonic() + 60
        while site.server.stats()["archive_connections_open"] > 0:
            assert time.monotonic() < deadline, "connections held open during the pause"
            time.sleep(0.1)
        assert any(p.paused for p in seen), "progress reports the pause"
        # Once the connections are closed, nothing is asked for or sent until the resume.
        log = site.server.stats()["archive_log"]
        time.sleep(1)
        stats = site.server.stats()
        assert stats["archive_log"] == log and stats["archive_connections_open"] == 0
        assert seen[-1].paused
        c.resume()
        assert c.wait(120)
        assert_installed(c, site.files)
    sent = sum(e["sent"] for e in site.server.stats()["archive_log"])
    # What the server sent twice: bytes that sat in buffers when the connections closed.
    assert sent - planned <= 64 << 10, f"{sent - planned} bytes sent twice ({sent} for {planned})"


def test_background_work_holds_while_foreground_work_runs(site, tmp_path):
    """Client A's update (background) holds while client B fetches a group (foreground) on the
    same data directory, then completes, byte-identical."""
    # v3: the same files, plus an on-demand group; installed by A, then v4 changes the base.
    root = site.repo.parent
    extra = {f"level/{i:02}.bin": random.Random(7000 + i).randbytes(60_000) for i in range(10)}
    publish(tmp_path / "src", root / "repo", 3, {**site.files, **extra}, "--group", "level=level/*")
    with assetpatch.Client(str(site.tmp / "data"), manifest_url=site.url) as a:
        assert a.update()
    files4 = {**tree(4), **extra}
    publish(tmp_path / "src", root / "repo", 4, files4, "--group", "level=level/*")
    site.server.control(rate=200 << 10)
    with assetpatch.Client(str(site.tmp / "data"), manifest_url=site.url) as a, \
            assetpatch.Client(str(site.tmp / "data")) as b:
        seen = []
        started = threading.Event()

        def progress(p):
            seen.append(p)
            if p.phase == assetpatch.Phase.DOWNLOAD and p.bytes_done > 50_000:
                started.set()
        a.start_update(progress)
        assert started.wait(60)
        mark = len(seen)
        b.fetch_groups("level")
        during = [p for p in seen[mark:] if p.phase == assetpatch.Phase.DOWNLOAD]
        assert any(p.paused for p in during), "A reported holding behind B's fetch"
        held = [p.bytes_done for p in during if p.paused]
        # While it held, A took at most what its four ranges in flight had (each a file):
        # read from the connections before they closed; no range started.
        assert max(held) - min(held) <= 4 * (SIZE + 100), "A moved while it held"
        assert a.wait(120)
        assert_installed(a, tree(4))
        assert_installed(b, {k: v for k, v in extra.items()})


def test_a_metered_network_refuses_before_a_byte_of_the_archive_moves(site):
    with assetpatch.Client(str(site.tmp / "data"), manifest_url=site.url, metered=True, metered_max_bytes=10_000) as c:
        site.server.reset()
        with pytest.raises(assetpatch.MeteredError) as e:
            c.update()
        planned = plan_bytes(c)
        assert str(planned) in str(e.value), "the message gives the planned bytes"
        index_pages = sum(b - a for a, b in asked(site.server))
        # The head and the index pages only: not one file's bytes.
        assert index_pages < 16 << 10 < planned, f"{index_pages} bytes of the archive asked for"
        c.set("metered_max_bytes", planned)
        site.server.reset()
        assert c.update()
        assert_installed(c, site.files)
        assert sum(b - a for a, b in asked(site.server)) <= planned + (16 << 10)


def test_metered_and_priority_options_refuse_bad_values(site):
    with assetpatch.Client(str(site.tmp / "data")) as c:
        for option, value in (("update_priority", "urgent"), ("fetch_priority", ""), ("max_recv_speed", "-1"), ("metered", "maybe")):
            with pytest.raises(assetpatch.ArgumentError):
                c.set(option, value)


def test_the_cli_pauses_on_sigusr1_resumes_on_sigusr2_and_asks_on_a_metered_network(site):
    data = site.tmp / "data"
    out = subprocess.run([CLI, "update", "--data-dir", str(data), "--url", site.url, "--metered", "--metered-max-bytes", "1000"],
                         capture_output=True, text=True)
    assert out.returncode == 3 and "metered" in out.stderr, out.stderr
    site.server.reset()
    site.server.control(rate=100 << 10)
    bad = subprocess.run([CLI, "update", "--data-dir", str(data), "--url", site.url, "--priority", "urgent"], capture_output=True, text=True)
    assert bad.returncode != 0 and "urgent" in bad.stderr, bad.stderr
    p = subprocess.Popen([CLI, "update", "--data-dir", str(data), "--url", site.url, "--priority", "foreground"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not site.server.stats()["archive_log"]:
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.05)
        p.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 60
        while site.server.stats()["archive_connections_open"] > 0:
            assert time.monotonic() < deadline, "connections held open during the pause"
            time.sleep(0.1)
        log = site.server.stats()["archive_log"]
        time.sleep(1)
        assert site.server.stats()["archive_log"] == log and p.poll() is None, "paused: nothing asked for"
        p.send_signal(signal.SIGUSR2)
        stdout, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, stderr
    assert "paused" in stderr and "resumed" in stderr
    with assetpatch.Client(str(data)) as c:
        assert_installed(c, site.files)


def test_a_host_transport_carries_ranges_retries_and_the_cap(site):
    """Python's http.client in place of libcurl: a differential update by range over it survives
    a connection reset (retried, what arrived kept) and is held to the cap."""
    calls = []
    transport = assetpatch.HTTPClientTransport()

    def perform(method, url, headers, response):
        calls.append((method, url, [h for h in headers if h.lower().startswith(("range", "if-"))]))
        transport(method, url, headers, response)
    cap = 300 << 10
    site.server.control(mode="reset", n=200_000, times=1)
    with assetpatch.Client(str(site.tmp / "data"), manifest_url=site.url, max_recv_speed=cap) as c:
        c.set_transport(perform)
        planned = plan_bytes(c)
        site.server.reset()
        site.server.control(mode="reset", n=200_000, times=1)
        start = time.monotonic()
        assert c.update()
        elapsed = time.monotonic() - start
        assert_installed(c, site.files)
    ranges = [h for _, _, hs in calls for h in hs if h.lower().startswith("range")]
    assert len(ranges) >= 8, "ranges went through the host's transport"
    assert any(e["sent"] < e["end"] - e["start"] + 1 for e in site.server.stats()["archive_log"]), "a reset happened"
    assert elapsed >= (planned - (64 << 10)) / cap, "held to the cap"
