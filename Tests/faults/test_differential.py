"""Differential updates over HTTP: only the changed entries' byte ranges are asked for, and every
misbehaving server (ignored ranges, wrong ranges, wrong bytes, resets, 503s) ends in the new
release or in a clean failure that keeps the old one; verified files are never asked for again."""
import json
import os
import random
import shutil
import subprocess
import sys
import time

import pytest

import assetpatch
from conftest import CLI, ROOT, Repo, archive_log, assert_serves, make_tree, without_head

sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx  # noqa: E402

FILE_SIZE = 50_000  # more than the coalescing gap (32 KiB): unchanged neighbours are never fetched


def delta_releases():
    rnd = random.Random(11)
    v1 = {f"pack/{i:03}.bin": rnd.randbytes(FILE_SIZE) for i in range(60)}
    v1.update({f"text/{i:02}.txt": (f"line of text {i}\n" * 4000).encode() for i in range(4)})
    v2 = dict(v1)
    for i in (5, 20, 21, 40):                    # changed (20 and 21 are neighbours: one request)
        v2[f"pack/{i:03}.bin"] = rnd.randbytes(FILE_SIZE)
    del v2["pack/050.bin"]                       # removed
    v2["new/added.bin"] = rnd.randbytes(FILE_SIZE)  # added
    v2["new/copy.bin"] = v1["pack/007.bin"]      # an installed content at a new path
    return v1, v2


@pytest.fixture(scope="session")
def delta(repos):
    """Repositories d1 and d2 (d1's archive kept next to d2's) under the fault server's root,
    and a data directory with d1 installed, to be copied per test."""
    base = repos["base"]
    v1, v2 = delta_releases()
    for name, files, version in (("d1", v1, 1), ("d2", v2, 2)):
        src = os.path.join(base, f"src-{name}")
        make_tree(src, files)
        if name == "d2":
            shutil.copytree(os.path.join(base, "d1"), os.path.join(base, "d2"))
        subprocess.run([CLI, "publish", src, "--repo", os.path.join(base, name), "--package", "delta",
                        "--version", str(version)], check=True, stdout=subprocess.DEVNULL)
        without_head(os.path.join(base, name, "manifest.json"))
    pristine = os.path.join(base, "delta-pristine")
    subprocess.run([CLI, "update", "--data-dir", pristine, "--url", "file://" + os.path.join(base, "d1", "manifest.json")],
                   check=True, stdout=subprocess.DEVNULL)
    r1, r2 = Repo(os.path.join(base, "d1"), v1, 1), Repo(os.path.join(base, "d2"), v2, 2)
    old = {f["sha256"] for f in r1.manifest["files"]}
    fetched = {}
    for f in r2.manifest["files"]:
        if f["sha256"] not in old and f["sha256"] not in fetched:
            z = f["zip"]
            fetched[f["sha256"]] = (z["header_offset"], z["data_offset"] + z["compressed_size"] - 1, f["path"])
    needed = sorted(fetched.values())
    # The requests the client is expected to make: neighbours at most 32 KiB apart share one
    # while the gaps stay within 1/20 of the wanted bytes (or 512 bytes).
    requests, wanted = [], 0
    for start_, end, _ in needed:
        if requests:
            between = start_ - requests[-1][1] - 1
            gaps = (requests[-1][1] - requests[-1][0] + 1 - wanted) + between
            if between <= 32 * 1024 and gaps <= max(512, (wanted + end - start_ + 1) // 20):
                requests[-1] = (requests[-1][0], end)
                wanted += end - start_ + 1
                continue
        requests.append((start_, end))
        wanted = end - start_ + 1
    return {"v1": r1, "v2": r2, "pristine": pristine, "needed": needed, "requests": requests}


def start(tmp_path, fault, delta, **options):
    data = str(tmp_path / "data")
    shutil.copytree(delta["pristine"], data)
    options.setdefault("stall_timeout_ms", 5000)
    return assetpatch.Client(data, manifest_url=fault.url("d2"), **options)


def needed_bytes(delta):
    return sum(end - start + 1 for start, end, _ in delta["needed"])


def ranges_asked(log):
    return [(e["start"], e["end"]) for e in log]


def manifest_requests(fault):
    s = fault.stats()
    return s["requests"] - s["archive_requests"]


def test_only_the_changed_entries_are_asked_for(tmp_path, fault, delta):
    with start(tmp_path, fault, delta) as c:
        version, planned = c.check()
        assert version == 2 and planned == needed_bytes(delta), (planned, needed_bytes(delta))
        phases, seen = [], []
        assert c.update(progress=lambda p: (phases.append((p.phase, p.bytes_done, p.bytes_total, p.files_done, p.files_total)),
                                            seen.append(p)) and None)
        assert_serves(c, delta["v2"])
    log = archive_log(fault)
    assert all(e["status"] == 206 for e in log), log
    # 20 and 21 lie side by side: one request; the others one each.
    assert len(delta["requests"]) == len(delta["needed"]) - 1
    assert sorted(ranges_asked(log)) == delta["requests"]
    asked = sum(end - start + 1 for start, end in ranges_asked(log))
    assert asked == needed_bytes(delta), "exactly the changed and added entries, headers included"
    for start_, end, path in delta["needed"]:
        assert any(s <= start_ and end <= e for s, e in ranges_asked(log)), path
    download = [p for p in phases if p[0] == assetpatch.Phase.DOWNLOAD]
    assert all(p[2] == planned and p[4] == len(delta["needed"]) for p in download)
    assert [p[1] for p in download] == sorted(p[1] for p in download), "progress never goes back"
    assert download[-1][1] == planned and download[-1][3] == len(delta["needed"])
    # The install tells what came from disk apart: every file whose content release 1 has
    # (copy.bin among them), and nothing else.
    installed = {f["sha256"] for f in delta["v1"].manifest["files"]}
    on_disk = [f for f in delta["v2"].manifest["files"] if f["sha256"] in installed]
    last = [p for p in seen if p.phase == assetpatch.Phase.INSTALL][-1]
    assert (last.files_done, last.files_total) == (len(delta["v2"].manifest["files"]),) * 2
    assert last.files_reused == len(on_disk) == len(delta["v2"].manifest["files"]) - 5, last
    assert last.bytes_reused == sum(f["size"] for f in on_disk), last
    assert all(p.files_reused == 0 and p.bytes_reused == 0 for p in seen if p.phase != assetpatch.Phase.INSTALL)


@pytest.mark.parametrize("mode", ["ignore-range", "wrong-range", "416", "gzip"])
def test_a_server_that_mishandles_ranges_gets_the_whole_archive_in_the_same_call(tmp_path, fault, delta, mode):
    fault.control(mode)
    with start(tmp_path, fault, delta) as c:
        assert c.update() is True
        assert_serves(c, delta["v2"])
    log = archive_log(fault)
    whole = [e for e in log if e["start"] == 0 and e["end"] == delta["v2"].archive_size - 1]
    assert whole, f"no whole-archive request after the failed ranges: {log}"
    assert manifest_requests(fault) == 1, "the fallback reuses the manifest it has"


def test_wrong_bytes_in_a_range_are_caught_by_the_file_hash_and_the_whole_archive_used(tmp_path, fault, delta):
    fault.control("corrupt", times=1)
    with start(tmp_path, fault, delta, parallel_downloads=1) as c:
        assert c.update() is True
        assert_serves(c, delta["v2"])
    log = archive_log(fault)
    assert log[-1]["start"] == 0 and log[-1]["status"] == 200 and log[-1]["end"] == delta["v2"].archive_size - 1
    assert manifest_requests(fault) == 1


def test_a_server_corrupting_everything_fails_cleanly_and_keeps_the_old_release(tmp_path, fault, delta):
    fault.control("corrupt")
    with start(tmp_path, fault, delta) as c:
        with pytest.raises(assetpatch.IntegrityError):
            c.update()
        assert_serves(c, delta["v1"])
    data = str(tmp_path / "data")
    assert not os.listdir(os.path.join(data, "staging")), "nothing half-built is left"


def test_resets_mid_range_are_retried_and_verified_files_never_asked_again(tmp_path, fault, delta):
    # The reset hits the first request that reaches the middle of the third request; sequential
    # requests make the order, and so the assertion, exact.
    third = delta["requests"][2]
    fault.control("reset", n=(third[0] + third[1]) // 2, times=2)
    with start(tmp_path, fault, delta, parallel_downloads=1) as c:
        assert c.update() is True
        assert_serves(c, delta["v2"])
    asked = ranges_asked(archive_log(fault))
    # Every range once, but the reset one three times (two resets, then success).
    counts = {r: asked.count(r) for r in set(asked)}
    assert counts[(third[0], third[1])] == 3, asked
    assert all(n == 1 for r, n in counts.items() if r != (third[0], third[1])), asked
    assert sum(end - start + 1 for start, end in set(asked)) == needed_bytes(delta)


def test_503s_are_retried(tmp_path, fault, delta):
    fault.control("503", times=2)
    with start(tmp_path, fault, delta) as c:
        assert c.update() is True
        assert_serves(c, delta["v2"])
    log = archive_log(fault)
    assert sum(e["status"] == 503 for e in log) == 2 and all(e["status"] in (206, 503) for e in log)


def test_a_failed_update_keeps_what_it_verified_and_the_next_process_skips_it(tmp_path, fault, delta):
    # Every request from the third on is cut before its end, four times: the first update
    # fails after its retries having verified what the first two requests brought.
    third = delta["requests"][2]
    fault.control("cut", n=third[0] + 100, times=4)
    with start(tmp_path, fault, delta, parallel_downloads=1) as c:
        with pytest.raises(assetpatch.NetworkError):
            c.update()
        assert_serves(c, delta["v1"])
    first = ranges_asked(archive_log(fault))
    fault.reset()
    data = str(tmp_path / "data")
    # A new process (as after a crash or a restart) resumes from the files on disk.
    out = subprocess.run([CLI, "update", "--data-dir", data, "--url", fault.url("d2")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    second = ranges_asked(archive_log(fault))
    done_before = {r for r in first if r[1] < third[0]}
    assert done_before and not done_before & set(second), (first, second)
    assert min(s for s, _ in second) == third[0]
    with assetpatch.Client(data) as c:
        assert_serves(c, delta["v2"])
    assert not [n for n in os.listdir(os.path.join(data, "downloads")) if n.endswith(".files")], "fetched files dropped"


def test_differential_off_downloads_the_whole_archive(tmp_path, fault, delta):
    with start(tmp_path, fault, delta, differential="off") as c:
        assert c.check()[1] == delta["v2"].archive_size
        assert c.update() is True
        assert_serves(c, delta["v2"])
    assert ranges_asked(archive_log(fault)) == [(0, delta["v2"].archive_size - 1)]


@pytest.fixture(scope="module")
def delta_nginx(delta, repos, tmp_path_factory):
    """A real nginx over the same repositories: plain HTTP with gzip on for every type (ranges
    asked for identity must still be ranges), HTTP/2 over TLS, and a server without ranges.
    The access log records each request's Range and protocol."""
    from test_hostile_servers import make_pki
    d = str(tmp_path_factory.mktemp("delta-nginx"))
    make_pki(d)
    http = """log_format ranges '$request "$http_range" $status $body_bytes_sent';
  gzip on; gzip_types *; gzip_min_length 1;"""
    servers = """
  server {{ listen 127.0.0.1:{tls} ssl http2; ssl_certificate {dir}/good.pem; ssl_certificate_key {dir}/good.key; root {root}; }}
  server {{ listen 127.0.0.1:{noranges}; root {root}; max_ranges 0; }}
"""
    with Nginx(repos["base"], d, servers=servers, http=http, ports=("tls", "noranges"),
               access_log=f"{d}/access.log ranges") as n:
        yield {"http": n.port, "ca": f"{d}/ca.pem", "log": f"{d}/access.log", **n.ports}


def archive_lines(nginx, since):
    with open(nginx["log"]) as f:
        return [line for line in f.readlines()[since:] if "/d2/archives/" in line]


def log_length(nginx):
    with open(nginx["log"]) as f:
        return len(f.readlines())


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_nginx_serves_exactly_the_changed_ranges(tmp_path, delta, delta_nginx, scheme):
    port = delta_nginx["http"] if scheme == "http" else delta_nginx["tls"]
    data = str(tmp_path / "data")
    shutil.copytree(delta["pristine"], data)
    before = log_length(delta_nginx)
    with assetpatch.Client(data, manifest_url=f"{scheme}://127.0.0.1:{port}/d2/manifest.json", ca_file=delta_nginx["ca"]) as c:
        assert c.update() is True
        assert_serves(c, delta["v2"])
    lines = archive_lines(delta_nginx, before)
    assert len(lines) == len(delta["requests"]) and all(" 206 " in line for line in lines), lines
    asked = sorted(tuple(int(x) for x in line.split('"bytes=')[1].split('"')[0].split("-")) for line in lines)
    assert asked == delta["requests"]
    protocol = "HTTP/2.0" if scheme == "https" else "HTTP/1.1"
    assert all(protocol in line for line in lines), lines


def test_nginx_without_ranges_gets_the_whole_archive_once(tmp_path, delta, delta_nginx):
    data = str(tmp_path / "data")
    shutil.copytree(delta["pristine"], data)
    before = log_length(delta_nginx)
    with assetpatch.Client(data, manifest_url=f"http://127.0.0.1:{delta_nginx['noranges']}/d2/manifest.json") as c:
        assert c.update() is True
        assert_serves(c, delta["v2"])
    lines = archive_lines(delta_nginx, before)
    # The range requests (answered 200, abandoned at their heads: at most the parallel ones ran)
    # and one request without a Range for the whole archive. What nginx logs as sent for the
    # abandoned ones depends on socket buffers, so only the requests are counted.
    whole = [line for line in lines if '"-"' in line]
    assert len(whole) == 1 and f" 200 {delta['v2'].archive_size}" in whole[0], lines
    assert 1 <= len(lines) - 1 <= 4, lines


def test_a_check_that_finds_nothing_costs_one_304(tmp_path, delta, delta_nginx):
    data = str(tmp_path / "data")
    shutil.copytree(delta["pristine"], data)
    url = f"http://127.0.0.1:{delta_nginx['http']}/d2/manifest.json"
    # Validators are kept only from a manifest a second older than the response (the racy
    # rule): one published in the second the test starts would be fetched in full, rightly.
    path = os.path.join(os.path.dirname(delta["pristine"]), "d2", "manifest.json")
    os.utime(path, (time.time() - 30, time.time() - 30))
    with assetpatch.Client(data, manifest_url=url) as c:
        assert c.check()[0] == 2
        assert c.update() is True
        before = log_length(delta_nginx)
        assert c.check() is None and c.update() is False
    with open(delta_nginx["log"]) as f:
        lines = [line for line in f.readlines()[before:] if "/d2/manifest.json" in line]
    assert len(lines) == 2 and all(" 304 0" in line for line in lines), lines
    # Another URL is another cache entry: fetched in full.
    before = log_length(delta_nginx)
    with assetpatch.Client(data, manifest_url=f"https://127.0.0.1:{delta_nginx['tls']}/d2/manifest.json", ca_file=delta_nginx["ca"]) as c:
        assert c.check() is None
    with open(delta_nginx["log"]) as f:
        lines = [line for line in f.readlines()[before:] if "/d2/manifest.json" in line]
    assert len(lines) == 1 and " 200 " in lines[0], lines
