"""Resumable downloads and retries under real faults from the fault-injecting server."""
import os
import subprocess
import threading
import time

import pytest

import assetpatch
from conftest import CLI, archive_log, assert_never_refetched, assert_serves, partial_files, sha256_file


def client(tmp_path, server, repo="v2", **options):
    options.setdefault("stall_timeout_ms", 2000)
    return assetpatch.Client(str(tmp_path / "data"), manifest_url=server.url(repo), **options)


def partial_size(tmp_path):
    parts = partial_files(str(tmp_path / "data"))
    assert len(parts) == 1
    return os.path.getsize(os.path.join(tmp_path, "data", "downloads", parts[0]))


def make_partial(c, fault, tmp_path, at):
    """Leaves exactly `at` bytes of the archive on disk: every attempt of one update is closed
    cleanly there (all bytes before the close arrive, whatever the scheduler does)."""
    fault.control("cut", n=at)
    with pytest.raises(assetpatch.NetworkError):
        c.update()
    fault.reset()
    have = partial_size(tmp_path)
    assert have == at
    return have


def test_cut_mid_transfer_is_retried_and_resumed_within_one_call(tmp_path, fault, repos):
    size = repos["v2"].archive_size
    fault.control("cut", n=size // 3, times=2)
    with client(tmp_path, fault) as c:
        assert c.update() is True
        assert_serves(c, repos["v2"])
    log = archive_log(fault)
    assert [e["start"] for e in log] == [0, size // 3, size // 3], "resumed at the bytes it had, twice"
    assert fault.stats()["bytes_sent"] == size, "every byte sent once: resumed, never re-fetched"


def test_reset_mid_transfer_is_retried_and_resumed_within_one_call(tmp_path, fault, repos):
    # An RST may discard bytes the client had not read yet: how many arrived depends on the
    # scheduler, so this asserts what the client asked for, not what the server wrote.
    size = repos["v2"].archive_size
    fault.control("reset", n=size // 3, times=2)
    with client(tmp_path, fault) as c:
        assert c.update() is True
        assert_serves(c, repos["v2"])
    log = archive_log(fault)
    assert len(log) == 3
    assert_never_refetched(log, size)


def kept_files(tmp_path):
    """The files extracted behind the download so far: sha256 -> inode (each checked)."""
    out = {}
    downloads = os.path.join(tmp_path, "data", "downloads")
    for d in os.listdir(downloads):
        if d.endswith(".files"):
            for name in os.listdir(os.path.join(downloads, d)):
                path = os.path.join(downloads, d, name)
                assert not name.startswith("."), f"a half-written file was left: {name}"
                assert sha256_file(path) == name
                out[name] = os.stat(path).st_ino
    return out


def release_inodes(tmp_path):
    out = set()
    for top, _, names in os.walk(os.path.join(tmp_path, "data", "releases")):
        out.update(os.stat(os.path.join(top, n)).st_ino for n in names)
    return out


def test_failed_update_keeps_bytes_and_the_next_call_resumes(tmp_path, fault, repos):
    size = repos["v2"].archive_size
    with client(tmp_path, fault) as c:
        have = make_partial(c, fault, tmp_path, size // 2)
        assert c.current_version == 0
        _, remaining = c.check()
        assert remaining == size - have
    # Files were extracted while the archive arrived: exactly the entries wholly within the
    # bytes that arrived are kept (verified), for the next attempt.
    kept = kept_files(tmp_path)
    within = {f["sha256"] for f in repos["v2"].manifest["files"]
              if f["zip"]["data_offset"] + f["zip"]["compressed_size"] <= have}
    assert within and set(kept) == within
    fault.reset()
    with client(tmp_path, fault) as c:  # a new client: a restart
        progress = []
        assert c.update(progress=progress.append) is True
        assert_serves(c, repos["v2"])
    downloads = [p for p in progress if p.phase == assetpatch.Phase.DOWNLOAD]
    assert downloads[0].bytes_done == have, "progress starts at the resumed offset"
    assert downloads[-1].bytes_done == size
    assert all(a.bytes_done <= b.bytes_done for a, b in zip(downloads, downloads[1:]))
    s = fault.stats()
    assert s["range_requests"] == 1 and s["bytes_sent"] == size - have
    assert set(kept.values()) <= release_inodes(tmp_path), "the files kept before are in the release, not extracted again"


def test_a_content_addressed_archive_resumes_when_its_validator_changed(tmp_path, fault, repos):
    # Another origin node's copy behind a load balancer, or a proxy rewriting validators: the
    # same bytes with another ETag. The archive is named and checked by its sha256, so the resume
    # asks with Range alone and keeps the bytes it has.
    size = repos["v2"].archive_size
    with client(tmp_path, fault, differential="off") as c:
        have = make_partial(c, fault, tmp_path, size // 2)
        fault.control("etag-change", times=1)
        assert c.update() is True
        assert_serves(c, repos["v2"])
    assert [(e["start"], e["status"]) for e in archive_log(fault)] == [(have, 206)]


def test_a_wrong_splice_costs_one_restart_never_a_wrong_file(tmp_path, fault, repos, caplog):
    # The resumed bytes are not those of the file begun (a server that changed it without
    # saying so): the archive's sha256 catches it, and the download starts over once.
    import logging
    caplog.set_level(logging.DEBUG, logger="assetpatch")
    size = repos["v2"].archive_size
    with client(tmp_path, fault, differential="off") as c:
        have = make_partial(c, fault, tmp_path, size // 2)
        fault.control("corrupt", times=1)
        assert c.update() is True
        assert_serves(c, repos["v2"])
    assert [(e["start"], e["status"]) for e in archive_log(fault)] == [(have, 206), (0, 200)]
    assert any("restarting the download from byte 0" in r.getMessage() and "digest" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("mode", ["ignore-range", "wrong-range", "416"])
def test_server_answers_that_force_a_clean_restart(tmp_path, fault, repos, mode):
    size = repos["v2"].archive_size
    with client(tmp_path, fault) as c:
        make_partial(c, fault, tmp_path, size // 2)
        fault.control(mode, times=1)
        assert c.update() is True
        assert_serves(c, repos["v2"])
    s = fault.stats()
    assert s["statuses"].get("206", 0) == 0 or mode == "wrong-range"
    # The restart fetched the whole archive once more, never appended a second copy.
    assert s["bytes_sent"] <= 2 * size


def test_503_then_ok_is_retried(tmp_path, fault, repos):
    fault.control("503", times=2)
    with client(tmp_path, fault) as c:
        assert c.update() is True
        assert_serves(c, repos["v2"])
    assert fault.stats()["statuses"]["503"] == 2


def test_persistent_503_fails_with_http_after_bounded_retries(tmp_path, fault, repos):
    fault.control("503")
    with client(tmp_path, fault) as c:
        with pytest.raises(assetpatch.HTTPError) as e:
            c.update()
        assert "503" in e.value.message
    assert fault.stats()["statuses"]["503"] == 4  # the first try and 3 retries


def test_content_length_larger_than_body_is_a_truncation(tmp_path, fault, repos):
    fault.control("long-length", times=1)
    with client(tmp_path, fault) as c:
        assert c.update() is True
        assert_serves(c, repos["v2"])
    # The body was complete although the connection closed early: nothing is fetched twice.
    assert fault.stats()["bytes_sent"] == repos["v2"].archive_size


def test_stalled_transfer_times_out_and_resumes(tmp_path, fault, repos):
    size = repos["v2"].archive_size
    fault.control("stall", n=size // 4, times=1)
    with client(tmp_path, fault, stall_timeout_ms=500) as c:
        assert c.update() is True
        assert_serves(c, repos["v2"])
    log = archive_log(fault)
    assert len(log) >= 2 and log[1]["start"] > 0, "the retry resumed"
    assert_never_refetched(log, size)


def test_captive_portal_page_never_replaces_a_partial(tmp_path, fault, repos):
    size = repos["v2"].archive_size
    with client(tmp_path, fault) as c:
        have = make_partial(c, fault, tmp_path, size // 2)
        fault.control("portal")
        with pytest.raises(assetpatch.HTTPError):
            c.update()
        assert partial_size(tmp_path) == have, "the portal's page must not touch the partial"
        fault.reset()
        assert c.update() is True
        assert_serves(c, repos["v2"])


def test_cancel_stops_a_stalled_transfer(tmp_path, fault, repos):
    # The transfer stalls for good (the stall timeout is an hour): only cancel can end it. The
    # wait's bound is a deadlock guard, not a speed claim; promptness is measured in bench/.
    fault.control("stall", n=1000, times=1)
    with client(tmp_path, fault, stall_timeout_ms=3_600_000) as c:
        started = threading.Event()
        c.start_update(progress=lambda p: started.set() if p.phase == assetpatch.Phase.DOWNLOAD else None)
        assert started.wait(120)
        c.cancel()
        with pytest.raises(assetpatch.CancelledError):
            c.wait(timeout=120)
        assert c.current_version == 0


def test_exception_in_progress_callback_cancels_and_reraises(tmp_path, fault, repos):
    class Boom(Exception):
        pass

    def progress(p):
        if p.phase == assetpatch.Phase.DOWNLOAD:
            raise Boom()

    with client(tmp_path, fault) as c:
        with pytest.raises(Boom):
            c.update(progress=progress)
        assert c.current_version == 0


def test_second_process_gets_busy_and_a_killed_updater_releases_the_lock(tmp_path, fault, repos):
    data = str(tmp_path / "data")
    fault.control("stall", n=1000, times=1)
    first = subprocess.Popen([CLI, "update", "--data-dir", data, "--url", fault.url("v2")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Until the first process holds the lock and waits on its stalled download.
        deadline = time.monotonic() + 120
        while fault.stats()["archive_requests"] < 1:
            assert first.poll() is None and time.monotonic() < deadline, "the first updater never reached its download"
            time.sleep(0.02)
        second = subprocess.run([CLI, "update", "--data-dir", data, "--url", fault.url("v2")], capture_output=True, text=True)
        assert second.returncode == 3
        assert "ASSETPATCH_ERR_BUSY" in second.stderr
    finally:
        first.kill()
        first.wait()
    third = subprocess.run([CLI, "update", "--data-dir", data, "--url", fault.url("v2")], capture_output=True, text=True)
    assert third.returncode == 0, third.stderr
    with assetpatch.Client(data) as c:
        assert_serves(c, repos["v2"])


def test_a_fresh_download_never_truncates_its_empty_partial(tmp_path, fault, repos):
    # ext4 takes a truncation to zero for a file about to be replaced and, when the file is
    # closed, writes all of its new content out (auto_da_alloc): for the partial archive, deleted
    # once the release is active, that was the whole archive written to disk for nothing. The
    # file-system calls of a real update, recorded by the crash explorer's tracer, show whether
    # the partial is ever truncated.
    tracer = tmp_path / "fstrace.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(tracer),
                    os.path.join(os.path.dirname(__file__), "..", "crash", "fstrace.c"), "-ldl", "-lpthread"], check=True)
    data, log = tmp_path / "data", tmp_path / "trace.log"
    os.makedirs(data)
    env = dict(os.environ, LD_PRELOAD=str(tracer), ASSETPATCH_FSTRACE=str(log), ASSETPATCH_FSTRACE_ROOT=str(data))
    subprocess.run([CLI, "update", "--data-dir", str(data), "--url", fault.url("v2")], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    ops = [line.split("\t") for line in open(log).read().splitlines()]
    part = [op for op in ops if len(op) > 1 and op[1].endswith(".part") and "/downloads/" in op[1]]
    assert any(op[0] == "write" for op in part), "the trace shows the partial archive being written"
    assert [op for op in part if op[0] == "truncate"] == []
    assert archive_log(fault)[0]["start"] == 0
