"""Format-2 updates over HTTP: a client reads the signed head, fetches only the index pages it
lacks and only the new chunks of a changed pack file by range, and rebuilds the pack byte for
byte; every misbehaving server (ignored ranges, wrong ranges, wrong bytes, resets) ends in the
new release or in a clean failure that keeps the old one."""
import glob
import hashlib
import os
import random
import shutil
import subprocess
import sys
import time
import zipfile

import pytest

import assetpatch
from conftest import CLI, ROOT, archive_log, make_tree, sha256_file

sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx  # noqa: E402

RECORD_SIZES = (4096, 16384, 65536)
CHUNK_SIZE = 4096  # the smallest average: the tightest bounds on what travels


def pack_records(seed, count):
    """Records of 4, 16 or 64 KiB, half random bytes and half word-like text."""
    rnd = random.Random(seed)
    words = [b"texture", b"mesh", b"sound", b"level", b"bank", b"shader", b"of", b"asset", b"frame"]
    records = []
    for i in range(count):
        size = rnd.choice(RECORD_SIZES)
        if i % 2:
            text = b""
            while len(text) < size:
                text += rnd.choice(words) + (b"\n" if rnd.random() < 0.1 else b" ")
            records.append(text[:size])
        else:
            records.append(rnd.randbytes(size))
    return records


def chunked_releases():
    """v1: an 8 MiB-ish pack and small files. v2: six 64 KiB records rewritten in place, one new
    64 KiB record inserted (shifting everything after it), one record deleted, one small file
    changed. The new bytes: 7 x 64 KiB of random data (448 KiB) and a few bytes of text."""
    records = pack_records(3, 300)
    rnd = random.Random(4)
    v1 = {"data/pack.bin": b"".join(records), "readme.txt": b"release 1\n", "levels/a.json": b"{}"}
    changed = list(records)
    big = [i for i, r in enumerate(records) if len(r) == 65536]
    for i in big[5:60:10]:
        changed[i] = rnd.randbytes(65536)
    changed.insert(150, rnd.randbytes(65536))
    del changed[220]
    v2 = dict(v1)
    v2["data/pack.bin"] = b"".join(changed)
    v2["readme.txt"] = b"release 2\n"
    return v1, v2, 7 * 65536


@pytest.fixture(scope="session")
def chunked(repos):
    """Repositories c1 and c2 (c1's archive kept next to c2's) under the fault server's root,
    and a data directory with c1 installed from its head, to be copied per test."""
    base = repos["base"]
    v1, v2, new_bytes = chunked_releases()
    for name, files, version in (("c1", v1, 1), ("c2", v2, 2)):
        src = os.path.join(base, f"src-{name}")
        make_tree(src, files)
        if name == "c2":
            shutil.copytree(os.path.join(base, "c1"), os.path.join(base, "c2"))
        subprocess.run([CLI, "publish", src, "--repo", os.path.join(base, name), "--package", "chunked",
                        "--version", str(version), "--chunk-size", str(CHUNK_SIZE), "--chunk-threshold", str(1 << 20),
                        "--deltas", "0"],  # the chunks' route (test_deltas.py has the deltas')
                       check=True, stdout=subprocess.DEVNULL)
    pristine = os.path.join(base, "chunked-pristine")
    subprocess.run([CLI, "update", "--data-dir", pristine, "--url", "file://" + os.path.join(base, "c1", "head.json")],
                   check=True, stdout=subprocess.DEVNULL)
    size = os.path.getsize(os.path.join(base, "c2", "archives",
                                        [n for n in os.listdir(os.path.join(base, "c2", "archives"))
                                         if n.endswith(".zip") and n not in os.listdir(os.path.join(base, "c1", "archives"))][0]))
    return {"v1": v1, "v2": v2, "new_bytes": new_bytes, "pristine": pristine, "archive_size": size}


def head_url(fault, repo):
    return f"{fault.base}/{repo}/head.json"


def start(tmp_path, fault, chunked, **options):
    data = str(tmp_path / "data")
    shutil.copytree(chunked["pristine"], data)
    options.setdefault("stall_timeout_ms", 5000)
    return assetpatch.Client(data, manifest_url=head_url(fault, "c2"), **options)


def assert_serves(client, files, version):
    assert client.current_version == version
    for name, data in files.items():
        with open(client.resolve(name), "rb") as f:
            assert f.read() == data, name


def asked_bytes(log):
    return sum(e["end"] - e["start"] + 1 for e in log)


def test_only_new_pages_and_new_chunks_are_asked_for(tmp_path, fault, chunked):
    with start(tmp_path, fault, chunked) as c:
        version, planned = c.check()
        pages = archive_log(fault)
        assert version == 2
        # The head's index: the root, the file-table page of the changed files, the chunk pages
        # around the edits. A few KiB, every page asked for once.
        assert 0 < asked_bytes(pages) <= 64 * 1024, pages
        # The new chunks: the new records (random bytes: they do not compress) plus the chunks
        # straddling the eight edits (about one average chunk each side; three allowed), and
        # the changed small file.
        assert chunked["new_bytes"] <= planned <= chunked["new_bytes"] + 8 * 3 * CHUNK_SIZE + 4096, planned
        assert planned * 10 < chunked["archive_size"]
        assert c.update() is True
        assert_serves(c, chunked["v2"], 2)
    log = archive_log(fault)
    data_requests = log[len(pages):]
    assert all(e["status"] == 206 for e in log), log
    assert asked_bytes(data_requests) == planned, "exactly the planned chunk and file ranges"
    assert asked_bytes(log) <= 1.25 * chunked["new_bytes"], (asked_bytes(log), chunked["new_bytes"])


def test_the_pack_is_rebuilt_while_the_small_files_arrive(tmp_path, fault, chunked, repos):
    """The chunked pack is rebuilt from its chunks on a thread of its own while the whole files'
    ranges are fetched: the request for the changed small file is held until the rebuilt pack
    is among the update's fetched files, which it can only be if its rebuild does not wait for
    the fetch (held at most two minutes, then let go: the update still ends, and the test fails)."""
    archives = os.path.join(repos["base"], "c2", "archives")
    name = next(n for n in os.listdir(archives)
                if n.endswith(".zip") and n not in os.listdir(os.path.join(repos["base"], "c1", "archives")))
    with zipfile.ZipFile(os.path.join(archives, name)) as z:
        readme = next(i for i in z.infolist() if i.filename.endswith("readme.txt"))
    rebuilt = os.path.join(str(tmp_path / "data"), "downloads", "*.files", hashlib.sha256(chunked["v2"]["data/pack.bin"]).hexdigest())
    transport = assetpatch.HTTPClientTransport()
    held = []

    def perform(method, url, headers, response):
        asked = [h.split("=", 1)[1] for h in headers if h.lower().startswith("range:")]
        if asked and "," not in asked[0]:
            first, last = (int(x) for x in asked[0].split("-"))
            if first <= readme.header_offset <= last:
                deadline = time.monotonic() + 120
                while not glob.glob(rebuilt) and time.monotonic() < deadline:
                    time.sleep(0.01)
                held.append(bool(glob.glob(rebuilt)))
        transport(method, url, headers, response)
    with start(tmp_path, fault, chunked) as c:
        c.set_transport(perform)
        assert c.update() is True
        assert_serves(c, chunked["v2"], 2)
    transport.close()
    assert held == [True], "the pack was rebuilt while the small file's range was held"
    assert asked_bytes(archive_log(fault)) <= 1.25 * chunked["new_bytes"], "the pack came by its new chunks, not whole"


def test_a_check_that_finds_nothing_asks_for_no_page(tmp_path, fault, chunked):
    data = str(tmp_path / "data")
    shutil.copytree(chunked["pristine"], data)
    with assetpatch.Client(data, manifest_url=head_url(fault, "c1")) as c:
        assert c.check() is None
        assert c.update() is False
    assert archive_log(fault) == []


@pytest.mark.parametrize("mode", ["ignore-range", "wrong-range", "416", "gzip"])
def test_a_server_that_mishandles_ranges_gets_the_whole_archive_in_the_same_call(tmp_path, fault, chunked, mode):
    fault.control(mode)
    with start(tmp_path, fault, chunked) as c:
        assert c.update() is True
        assert_serves(c, chunked["v2"], 2)
    log = archive_log(fault)
    assert [e for e in log if e["start"] == 0 and e["end"] == chunked["archive_size"] - 1], log
    stats = fault.stats()
    assert stats["requests"] - stats["archive_requests"] == 1, "the head is fetched once"


@pytest.mark.parametrize("first", ["page", "chunk"])
def test_one_wrong_byte_in_a_range_costs_the_whole_archive_never_a_wrong_file(tmp_path, fault, chunked, first):
    # The first range request gets its last byte flipped: an index page's, or (the pages read
    # by a check before) a chunk's.
    with start(tmp_path, fault, chunked, parallel_downloads=1) as c:
        if first == "chunk":
            c.check()
        fault.control("corrupt", times=1)
        assert c.update() is True
        assert_serves(c, chunked["v2"], 2)
    log = archive_log(fault)
    assert log[-1]["start"] == 0 and log[-1]["end"] == chunked["archive_size"] - 1, log


def test_a_server_corrupting_everything_fails_cleanly_and_keeps_the_old_release(tmp_path, fault, chunked):
    fault.control("corrupt")
    with start(tmp_path, fault, chunked) as c:
        with pytest.raises(assetpatch.IntegrityError):
            c.update()
        assert_serves(c, chunked["v1"], 1)
    data = str(tmp_path / "data")
    assert not os.listdir(os.path.join(data, "staging")), "nothing half-built is left"


def test_a_failed_update_keeps_its_chunks_and_the_next_process_does_not_ask_for_them(tmp_path, fault, chunked):
    # The index sits at the archive's end: a check reads it first (pages are kept in the data
    # directory). Then every request reaching past the middle of the archive is cut there,
    # four times: the update fails after its retries, keeping the chunks that arrived whole
    # (chunks are fetched before whole files, and the pack lies before the small files).
    middle = chunked["archive_size"] // 2
    with start(tmp_path, fault, chunked, parallel_downloads=1) as c:
        assert c.check()[0] == 2
        fault.reset()
        fault.control("cut", n=middle, times=4)
        with pytest.raises(assetpatch.NetworkError):
            c.update()
        assert_serves(c, chunked["v1"], 1)
    first = [(e["start"], e["end"]) for e in archive_log(fault)]
    fault.reset()
    out = subprocess.run([CLI, "update", "--data-dir", str(tmp_path / "data"), "--url", head_url(fault, "c2")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    second = [(e["start"], e["end"]) for e in archive_log(fault)]
    done_before = {r for r in first if r[1] < middle}
    assert done_before and not done_before & set(second), (first, second)
    assert all(e >= middle for _, e in second), (second, middle)
    with assetpatch.Client(str(tmp_path / "data")) as c:
        assert_serves(c, chunked["v2"], 2)


@pytest.fixture(scope="module")
def chunked_nginx(chunked, repos, tmp_path_factory):
    """A real nginx over the repositories, gzip on for every type, and HTTP/2 over TLS."""
    from test_hostile_servers import make_pki
    d = str(tmp_path_factory.mktemp("chunked-nginx"))
    make_pki(d)
    http = """log_format ranges '$request "$http_range" $status $body_bytes_sent $bytes_sent';
  gzip on; gzip_types *; gzip_min_length 1;"""
    servers = """
  server {{ listen 127.0.0.1:{tls} ssl http2; ssl_certificate {dir}/good.pem; ssl_certificate_key {dir}/good.key; root {root}; }}
"""
    with Nginx(repos["base"], d, servers=servers, http=http, ports=("tls",), access_log=f"{d}/access.log ranges") as n:
        yield {"http": n.port, "ca": f"{d}/ca.pem", "log": f"{d}/access.log", **n.ports}


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_nginx_sends_little_more_than_the_new_bytes_every_byte_counted(tmp_path, chunked, chunked_nginx, scheme):
    port = chunked_nginx["http"] if scheme == "http" else chunked_nginx["tls"]
    data = str(tmp_path / "data")
    shutil.copytree(chunked["pristine"], data)
    with open(chunked_nginx["log"]) as f:
        before = len(f.readlines())
    with assetpatch.Client(data, manifest_url=f"{scheme}://127.0.0.1:{port}/c2/head.json", ca_file=chunked_nginx["ca"]) as c:
        assert c.update() is True
        assert_serves(c, chunked["v2"], 2)
    with open(chunked_nginx["log"]) as f:
        lines = f.readlines()[before:]
    sent = sum(int(line.split()[-1]) for line in lines)   # $bytes_sent: headers and bodies
    archive = [line for line in lines if "/c2/archives/" in line]
    assert archive and all(" 206 " in line for line in archive), lines
    assert sent <= 1.25 * chunked["new_bytes"], (sent, chunked["new_bytes"], lines)
