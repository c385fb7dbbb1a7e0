"""Several sources of one repository (option mirrors), over real nginx instances on 127.0.0.1:
a primary that refuses, black-holes, answers 503 or HTML for everything; a mirror that
corrupts a range; a mirror a version behind; a healthy primary; kill -9 in the middle. Each
test asserts the bytes installed and what every server was asked for (access logs)."""
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time

import pytest

import assetpatch
from conftest import CLI, FaultServer, make_tree, sha256_file

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from nginxctl import Nginx, free_port  # noqa: E402

HERE = os.path.dirname(__file__)
LOG = """log_format src escape=none '$server_port $request_uri $status "$http_range" $body_bytes_sent $http_x_secret';"""


def files(version):
    """40 files of 60 KB; version 2 changes 12 of them (a differential update)."""
    out = {f"data/{i:02}.bin": random.Random(i * 10 + (version if i % 10 < 3 else 1)).randbytes(60_000) for i in range(40)}
    out["readme.txt"] = f"release {version}\n".encode()
    return out


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """One repository published at versions 1 and 2; `fresh` and `mirror` serve version 2,
    `stale` a copy taken at version 1 (a mirror a version behind)."""
    base = tmp_path_factory.mktemp("mirrors")
    repo = base / "fresh" / "repo"
    for v in (1, 2):
        src = base / f"src{v}"
        make_tree(src, files(v))
        subprocess.run([CLI, "publish", str(src), "--repo", str(repo), "--package", "mirrors", "--version", str(v)],
                       check=True, stdout=subprocess.DEVNULL)
        if v == 1:
            shutil.copytree(repo, base / "stale" / "repo")
    # Channel beta at version 3: its head in channels/beta/, its archive two levels up.
    make_tree(base / "src3", files(3))
    subprocess.run([CLI, "publish", str(base / "src3"), "--repo", str(repo), "--package", "mirrors", "--version", "3", "--channel", "beta"],
                   check=True, stdout=subprocess.DEVNULL)
    shutil.copytree(repo, base / "mirror" / "repo")
    return base


def site(port_name, root, extra=""):
    return f"""
  server {{{{
    listen 127.0.0.1:{{{port_name}}};
    root {root};
    {extra.replace("{", "{{").replace("}", "}}")}
  }}}}"""


class Farm:
    """nginx serving the sites, one port each, every request logged with its port; plus the
    misbehaving primaries a test asks for."""

    def __init__(self, base, work, primary="fresh", primary_extra=""):
        self.work = work
        os.makedirs(work, exist_ok=True)
        servers = site("mirror", base / "mirror") + site("stale", base / "stale") + site("broken", base / "fresh", primary_extra)
        self.nginx = Nginx(str(base / primary), str(work), http=LOG, servers=servers, ports=("mirror", "stale", "broken"),
                           access_log=f"{work}/access.log src")
        self.ports = dict(self.nginx.ports, primary=self.nginx.port)

    def url(self, name):
        return f"http://127.0.0.1:{self.ports[name]}/repo/head.json"

    def requests(self, name, secrets=False):
        """(uri, status, range, bytes) of each request the named server answered (after stop),
        and the X-Secret header it came with (`secrets`)."""
        out = []
        with open(f"{self.work}/access.log") as f:
            for line in f:
                port, uri, status, rng, sent, secret = line.rstrip("\n").split(" ")
                if int(port) == self.ports.get(name, -1):
                    out.append((uri, int(status), rng.strip('"'), int(sent)) + ((secret,) if secrets else ()))
        return out

    def stop(self):
        self.nginx.stop()


def assert_version_2(client, base):
    assert client.current_version == 2
    for name, data in files(2).items():
        assert sha256_file(client.resolve(name)) == sha256_file(base / "src2" / name), name


def test_a_healthy_primary_leaves_the_mirrors_alone(tmp_path, sites):
    farm = Farm(sites, tmp_path / "nginx")
    try:
        with assetpatch.Client(str(tmp_path / "fresh"), manifest_url=farm.url("primary"), mirrors=farm.url("mirror")) as c:
            assert c.update() is True
            assert_version_2(c, sites)
            assert c.last_check.source == 0
            assert [(s.served_head, s.demoted, s.requests, s.last) for s in c.sources()][1] == (False, False, 0, "not asked")
        # A differential update on top: ranges, all from the primary.
        with assetpatch.Client(str(tmp_path / "old"), manifest_url=farm.url("stale"), mirrors=farm.url("mirror")) as c:
            assert c.update() is True and c.current_version == 1
        with assetpatch.Client(str(tmp_path / "old"), manifest_url=farm.url("primary"), mirrors=farm.url("mirror")) as c:
            assert c.update() is True
            assert_version_2(c, sites)
    finally:
        farm.stop()
    assert farm.requests("mirror") == [], "a mirror was asked while the primary was healthy"
    assert any(r[2] for r in farm.requests("primary")), "the second update used no range: not a differential update"


class BlackHole:
    """A port whose listen queue is full: the kernel drops every new SYN, so a connection
    attempt hangs until its timeout, like a host behind a firewall that drops packets."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.fillers = []
        for _ in range(3):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", self.port))
            self.fillers.append(s)
        time.sleep(0.1)

    def close(self):
        for s in self.fillers:
            s.close()
        self.sock.close()


class Silent:
    """A port that accepts connections and never answers: the request goes out, nothing comes back."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def close(self):
        self.sock.close()


@pytest.mark.parametrize("how", ["refused", "black-hole", "silent", "503", "html"])
def test_the_update_completes_from_the_mirror_whatever_the_primary_does(tmp_path, sites, how):
    extra = {"503": "location / { return 503; }",
             "html": 'location / { default_type text/html; return 200 "<html><body>Please log in</body></html>"; }'}.get(how, "")
    farm = Farm(sites, tmp_path / "nginx", primary_extra=extra)
    hole = BlackHole() if how == "black-hole" else Silent() if how == "silent" else None
    if how == "refused":
        primary = f"http://127.0.0.1:{free_port()}/repo/head.json"
    elif hole:
        primary = f"http://127.0.0.1:{hole.port}/repo/head.json"
    else:
        primary = farm.url("broken")
    try:
        data = str(tmp_path / "client")
        # Timeouts far longer than the hedge: an update that waited for them would take minutes.
        with assetpatch.Client(data, manifest_url=primary, mirrors=farm.url("mirror"), connect_timeout_ms=120_000,
                               stall_timeout_ms=120_000) as c:
            began = time.monotonic()
            assert c.update() is True
            took = time.monotonic() - began
            assert_version_2(c, sites)
            # What the host is told: the head came from the first mirror; the primary was
            # demoted with its failure, the mirror served every byte.
            assert c.last_check.source == 1
            primary, mirror = c.sources()
            assert primary.demoted and not primary.served_head and (primary.bytes == 0) == (how != "html"), primary
            assert how != "html" or "HTML" in primary.last, primary
            assert not mirror.demoted and mirror.served_head and mirror.bytes > 0 and mirror.url == farm.url("mirror"), mirror
        assert took < 60, f"the update waited {took:.1f} s: the hedge did not act"
    finally:
        farm.stop()
        if hole:
            hole.close()
    assert any(r[0].endswith(".zip") for r in farm.requests("mirror")), "the mirror served no archive byte"
    if how in ("503", "html"):
        # The primary answered the head wrongly: it got no archive request afterwards.
        assert not any(r[0].endswith(".zip") for r in farm.requests("broken")), farm.requests("broken")


def update_past_a_faulty_primary(tmp_path, sites, mode, **options):
    """Version 1 installed, then the update to 2 from the tests' own server, whose third archive
    request from then on misbehaves (`mode`), before the nginx mirror; one range at a time, so
    the order is known. Returns that server's archive log and the farm (stopped)."""
    farm = Farm(sites, tmp_path / "nginx")
    bad = FaultServer(str(sites / "fresh"), str(tmp_path))
    try:
        data = str(tmp_path / "client")
        with assetpatch.Client(data, manifest_url=farm.url("stale")) as c:
            assert c.update() is True and c.current_version == 1
        bad.reset()
        bad.control(mode=mode, n=3, times=1)
        with assetpatch.Client(data, manifest_url=f"{bad.base}/repo/head.json", mirrors=farm.url("mirror"), parallel_downloads=1,
                               **options) as c:
            assert c.update() is True
            assert_version_2(c, sites)
        return bad.stats()["archive_log"], farm
    finally:
        farm.stop()
        bad.stop()


def test_a_mirror_that_corrupts_a_range_costs_one_file_and_gets_no_more_ranges(tmp_path, sites):
    # The corrupting source is the primary (a server of the tests' own that flips the last byte
    # of one range); the nginx mirror is second. One range at a time: the order is known.
    log, farm = update_past_a_faulty_primary(tmp_path, sites, "corrupt-nth")
    assert len(log) == 3, f"the corrupting source got requests after its bad range: {log}"
    corrupt = log[-1]
    mirror = [r for r in farm.requests("mirror") if r[0].endswith(".zip") and r[2]]
    assert mirror, "the mirror served nothing"
    # Bytes asked for again: the mirror's ranges overlapping the corrupted one. At most the
    # file the flipped byte fell in (its entry: header and data), never the whole range.
    manifest = json.load(open(sites / "fresh" / "repo" / "manifest.json"))
    largest = max(f["zip"]["compressed_size"] + f["zip"]["data_offset"] - f["zip"]["header_offset"]
                  for f in manifest["files"] if "zip" in f)
    overlap = 0
    for _, _, rng, _ in mirror:
        a, b = (int(x) for x in rng.split("=")[1].split("-"))
        overlap += max(0, min(b, corrupt["end"]) - max(a, corrupt["start"]) + 1)
    assert 0 < overlap <= largest, (overlap, largest, corrupt, mirror)


def test_a_mirror_a_version_behind_is_never_taken_for_the_newest(tmp_path, sites):
    farm = Farm(sites, tmp_path / "nginx")
    down = f"http://127.0.0.1:{free_port()}/repo/head.json"
    try:
        # The primary down, the first mirror a version behind, the second current: a new client
        # installs version 2 and never version 1; one at version 2 reports CURRENT, not OLDER.
        mirrors = farm.url("stale") + "," + farm.url("mirror")
        with assetpatch.Client(str(tmp_path / "new"), manifest_url=down, mirrors=mirrors) as c:
            assert c.update() is True
            assert_version_2(c, sites)
            for _ in range(3):
                assert c.update() is False
                assert c.last_check.reason == assetpatch.NoUpdateReason.CURRENT
        # The primary itself a version behind (a stale edge): the mirror's newer head wins.
        with assetpatch.Client(str(tmp_path / "new"), manifest_url=farm.url("stale"), mirrors=farm.url("mirror")) as c:
            assert c.update() is False
            assert c.last_check.reason == assetpatch.NoUpdateReason.CURRENT
        releases = os.listdir(tmp_path / "new" / "releases")
    finally:
        farm.stop()
    assert [r.split("-")[0] for r in releases] == ["2"], releases
    assert not any(r[0].endswith(".zip") for r in farm.requests("stale")), "the stale mirror served archive bytes"


def test_kill_9_in_a_multi_source_update_then_the_next_one_resumes(tmp_path, sites):
    # Two sources in every update: the head from the nginx primary, which answers 404 for the
    # archive; its ranges then from the mirror, a server of the tests' own, slow (50 KB/s a
    # response), so the kills land while they arrive. Each kill leaves one whole release
    # served; the next update, from whichever source answers, goes on from what was verified.
    farm = Farm(sites, tmp_path / "nginx", primary_extra="location /repo/archives/ { return 404; }")
    slow = FaultServer(str(sites / "fresh"), str(tmp_path))
    data = str(tmp_path / "client")
    rnd = random.Random(9)
    try:
        with assetpatch.Client(data, manifest_url=farm.url("stale")) as c:
            assert c.update() is True and c.current_version == 1
        slow.control(rate=50_000)
        env = dict(os.environ, ASSETPATCH_TEST_MIRRORS=f"{slow.base}/repo/head.json")
        for _ in range(4):
            p = subprocess.Popen([sys.executable, os.path.join(HERE, "child_update.py"), data, farm.url("broken")],
                                 stdout=subprocess.PIPE, env=env)
            time.sleep(rnd.uniform(0.3, 2.0))
            p.kill()
            p.wait()
            p.stdout.close()
            with assetpatch.Client(data) as c:
                assert c.current_version in (1, 2)
                for name in files(c.current_version):
                    assert sha256_file(c.resolve(name)) == sha256_file(sites / f"src{c.current_version}" / name)
        killed_log = slow.stats()["archive_log"]
        slow.control(rate=0)
        with assetpatch.Client(data, manifest_url=farm.url("broken"), mirrors=f"{slow.base}/repo/head.json") as c:
            c.update()
            assert_version_2(c, sites)
    finally:
        farm.stop()
        slow.stop()
    assert any(r[0].endswith(".zip") and r[1] == 404 for r in farm.requests("broken")), "the primary was not asked for the archive"
    assert killed_log, "the mirror served nothing before the kills"


def test_the_cli_names_each_source_and_its_last_result(tmp_path, sites):
    farm = Farm(sites, tmp_path / "nginx")
    down = f"http://127.0.0.1:{free_port()}/repo/head.json"
    try:
        r = subprocess.run([CLI, "update", "--data-dir", str(tmp_path / "d"), "--url", down, "--mirror", farm.url("mirror"), "--json"],
                           capture_output=True, text=True)
    finally:
        farm.stop()
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "installed" and out["current_version"] == 2
    primary, mirror = out["sources"]
    assert primary["demoted"] is True and "connect" in primary["last"].lower(), primary
    assert mirror["demoted"] is False and mirror["bytes"] > 0 and mirror["requests"] >= 2, mirror


def test_a_channel_head_finds_its_archive_on_the_mirror(tmp_path, sites):
    # A channel's head names its archive as ../../archives/<sha256>.zip: the mirror's copy is
    # found by the same reference from the mirror's head, the primary being down.
    farm = Farm(sites, tmp_path / "nginx")
    down = f"http://127.0.0.1:{free_port()}/repo/channels/beta/head.json"
    try:
        with assetpatch.Client(str(tmp_path / "c"), manifest_url=down, channel="beta",
                               mirrors=farm.url("mirror").replace("head.json", "channels/beta/head.json")) as c:
            assert c.update() is True and c.current_version == 3
            for name in files(3):
                assert sha256_file(c.resolve(name)) == sha256_file(sites / "src3" / name), name
    finally:
        farm.stop()
    assert any(r[0].startswith("/repo/archives/") for r in farm.requests("mirror")), farm.requests("mirror")


def test_headers_for_the_primary_never_reach_a_mirror(tmp_path, sites):
    farm = Farm(sites, tmp_path / "nginx", primary_extra="location / { return 503; }")
    try:
        with assetpatch.Client(str(tmp_path / "c"), manifest_url=farm.url("broken"), mirrors=farm.url("mirror"),
                               header="X-Secret: s3cr3t") as c:
            assert c.update() is True
            assert_version_2(c, sites)
    finally:
        farm.stop()
    assert {r[4] for r in farm.requests("broken", secrets=True)} == {"s3cr3t"}
    mirror = farm.requests("mirror", secrets=True)
    assert mirror and {r[4] for r in mirror} == {""}, mirror


def test_a_source_that_stalls_mid_update_hands_its_range_over(tmp_path, sites):
    # The primary answers a range with its head, then nothing: after stall_timeout_ms it is
    # demoted and the range comes from the mirror; the update does not fail.
    log, farm = update_past_a_faulty_primary(tmp_path, sites, "stall-nth", stall_timeout_ms=1500)
    assert len(log) == 3, f"the stalled source got requests after its stall: {log}"
    assert any(r[0].endswith(".zip") and r[2] for r in farm.requests("mirror"))


def test_under_a_cap_a_source_without_the_archive_hands_its_ranges_over(tmp_path, sites):
    # Under max_recv_speed a response's first piece is often held, and judged when let go on:
    # the primary's 404 for the archive must demote it there too, not fail the update.
    extra = "location /repo/archives/ { return 404; }"
    farm = Farm(sites, tmp_path / "nginx", primary_extra=extra)
    try:
        data = str(tmp_path / "client")
        with assetpatch.Client(data, manifest_url=farm.url("stale")) as c:
            assert c.update() is True and c.current_version == 1
        with assetpatch.Client(data, manifest_url=farm.url("broken"), mirrors=farm.url("mirror"), max_recv_speed=2_000_000) as c:
            assert c.update() is True
            assert_version_2(c, sites)
    finally:
        farm.stop()
    assert any(r[0].endswith(".zip") and r[1] == 404 for r in farm.requests("broken"))
    assert any(r[0].endswith(".zip") and r[2] for r in farm.requests("mirror"))


def test_a_mirror_replaying_another_channels_newer_signed_head_is_passed_over(tmp_path):
    # Every head here is signed by the publisher's key. One mirror serves, at the stable
    # channel's URL, channel beta's head of a higher version (a replay): the client follows
    # stable, so that head is not one it takes; the newest it takes, version 2 on the honest
    # mirror, is installed, and the update does not fail.
    base = tmp_path / "signed"
    key = str(tmp_path / "release.key")
    subprocess.run([CLI, "keygen", "--out", key], check=True, stdout=subprocess.DEVNULL)
    public = open(key + ".pub").read().strip()
    repo = base / "fresh" / "repo"
    for v, channel in ((1, "stable"), (2, "stable"), (3, "beta")):
        make_tree(base / f"src{v}", files(v))
        subprocess.run([CLI, "publish", str(base / f"src{v}"), "--repo", str(repo), "--package", "mirrors", "--version", str(v),
                        "--channel", channel, "--key", key], check=True, stdout=subprocess.DEVNULL)
    shutil.copytree(repo, base / "mirror" / "repo")
    shutil.copytree(repo, base / "stale" / "repo")
    shutil.copy(base / "stale" / "repo" / "channels" / "beta" / "head.json", base / "stale" / "repo" / "head.json")
    farm = Farm(base, tmp_path / "nginx")
    down = f"http://127.0.0.1:{free_port()}/repo/head.json"
    try:
        with assetpatch.Client(str(tmp_path / "c"), manifest_url=down, public_keys=[public], channel="stable",
                               mirrors=[farm.url("stale"), farm.url("mirror")]) as c:
            assert c.update() is True and c.current_version == 2
            assert c.update() is False and c.last_check.reason == assetpatch.NoUpdateReason.CURRENT
    finally:
        farm.stop()
    assert not any(r[0].endswith(".zip") for r in farm.requests("stale")), farm.requests("stale")


def test_a_host_the_signed_head_lists_is_reached_without_an_app_update(tmp_path):
    # The publisher lists the mirror (publish --mirror ROOT) in the signed head. A client that
    # verifies keeps the list; when its manifest_url fails later, it updates from that host,
    # though the app never named it. Off with head_mirrors=0, and never for a client that
    # verifies nothing (an unsigned head could name any host).
    base = tmp_path / "listed"
    for d in ("fresh", "mirror", "stale"):
        os.makedirs(base / d)
    key = str(tmp_path / "release.key")
    subprocess.run([CLI, "keygen", "--out", key], check=True, stdout=subprocess.DEVNULL)
    public = open(key + ".pub").read().strip()
    farm = Farm(base, tmp_path / "nginx")
    repo = base / "fresh" / "repo"
    listed = f"http://127.0.0.1:{farm.ports['mirror']}/repo/"

    def publish(v, *signing):
        make_tree(base / f"src{v}", files(v))
        subprocess.run([CLI, "publish", str(base / f"src{v}"), "--repo", str(repo), "--package", "mirrors", "--version", str(v),
                        "--mirror", listed, *signing], check=True, stdout=subprocess.DEVNULL)
        shutil.rmtree(base / "mirror" / "repo", ignore_errors=True)
        shutil.copytree(repo, base / "mirror" / "repo")

    down = f"http://127.0.0.1:{free_port()}/repo/head.json"
    signed, unsigned = str(tmp_path / "signed"), str(tmp_path / "unsigned")
    try:
        publish(1, "--key", key)
        assert json.load(open(repo / "head.json"))["payload"]  # signed: an envelope
        with assetpatch.Client(signed, manifest_url=farm.url("primary"), public_keys=[public]) as c:
            assert c.update() is True and c.current_version == 1
        with assetpatch.Client(unsigned, manifest_url=farm.url("primary")) as c:
            assert c.update() is True and c.current_version == 1
        assert open(os.path.join(signed, "mirrors")).read() == listed + "head.json\n"
        assert not os.path.exists(os.path.join(unsigned, "mirrors"))
        publish(2, "--key", key)
        with assetpatch.Client(signed, manifest_url=down, public_keys=[public], head_mirrors=False) as c:
            with pytest.raises(assetpatch.NetworkError):
                c.update()
        with assetpatch.Client(unsigned, manifest_url=down) as c:
            with pytest.raises(assetpatch.NetworkError):
                c.update()
        with assetpatch.Client(signed, manifest_url=down, public_keys=[public]) as c:
            assert c.update() is True and c.current_version == 2
            assert c.last_check.source == 1 and c.sources()[1].url == listed + "head.json"
    finally:
        farm.stop()
    assert any(r[0].endswith(".zip") for r in farm.requests("mirror"))


class SlowHost:
    """A plain static server of the tests' own whose every answer starts after `delay` seconds:
    a primary slower than the hedge, not down."""

    def __init__(self, root, delay):
        import functools
        import http.server
        import threading

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):
                time.sleep(delay)
                super().do_GET()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_a_fast_mirror_answering_html_does_not_cut_off_a_slow_primary(tmp_path, sites):
    # The mirror answers at once, with a captive portal's page; the primary answers after 1.5 s,
    # past the hedge and the time slower sources get once a head has arrived. A head the client
    # refuses is that mirror's failure: it does not end the primary's time to answer, and the
    # check finds version 2 instead of failing with the portal's ERR_MANIFEST.
    farm = Farm(sites, tmp_path / "nginx", primary_extra='location / { default_type text/html; return 200 "<html>log in</html>"; }')
    slow = SlowHost(sites / "fresh", 1.5)
    try:
        with assetpatch.Client(str(tmp_path / "c"), manifest_url=f"http://127.0.0.1:{slow.port}/repo/head.json",
                               mirrors=farm.url("broken")) as c:
            found = c.check()
            assert found is not None and found[0] == 2, found
            assert c.last_check.source == 0
            primary, portal = c.sources()
            # (Demoted afterwards: this server answers the index pages' ranges with 200s.)
            assert primary.served_head, primary
            assert portal.demoted and "HTML" in portal.last, portal
    finally:
        slow.close()
        farm.stop()
