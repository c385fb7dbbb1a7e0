"""Archives over --part-size go up in parts of one size, through a fault-injecting relay in
front of each server: a push killed mid-upload is resumed from the parts the store holds, a
refused part aborts the upload, and gc aborts what a kill left."""
import datetime
import json
import os
import random
import signal
import subprocess
import time

import assetpatch
from conftest import CLI
from s3relay import Relay
from s3servers import KEYS, publish, push, s3  # noqa: F401 (s3: the fixture)


MiB = 1 << 20


def large_release(tmp_path, s3):
    """A repository whose version 1 is in the bucket and whose version 2 has a 23 MiB archive
    (random bytes: it does not compress), five parts of 5 MiB."""
    repo = tmp_path / "repo"
    publish(tmp_path, repo, 1, {"a.txt": b"one"})
    push(repo, s3)
    big = random.Random(7).randbytes(23 * MiB)
    publish(tmp_path, repo, 2, {"a.txt": b"two", "big.bin": big})
    return repo, big


def assert_clients_get(tmp_path, s3, version, big=None):
    with assetpatch.Client(tmp_path / f"data{version}", manifest_url=s3.url("game/head.json")) as c:
        assert c.update() is True and c.current_version == version
        if big is not None:
            assert open(c.resolve("big.bin"), "rb").read() == big


def test_a_large_archive_goes_up_in_equal_parts_and_a_killed_upload_resumes(s3, tmp_path):
    """Killed with two parts up and the third in flight: the heads still name version 1, the
    store holds one unfinished upload; the next push checks and keeps those two parts, sends
    the other three, and every part but the last has one size (R2 refuses anything else)."""
    repo, big = large_release(tmp_path, s3)
    relay = Relay(s3.port)
    try:
        relay.hold_after = 2
        args = [CLI, "push", str(repo), f"s3://{s3.bucket}/game", "--endpoint", relay.endpoint, "--part-size", str(5 * MiB)]
        p = subprocess.Popen(args + (["--acl", "public-read"] if s3.kind == "moto" else []), env={**os.environ, **KEYS},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert relay.held.wait(120), "the push never reached its third part"
        p.send_signal(signal.SIGKILL)
        p.wait()
        first = list(relay.parts)
        assert [n for n, _ in first] == [1, 2] and all(size == 5 * MiB for _, size in first), first
        assert_clients_get(tmp_path, s3, 1)
        archive = next(k for k in os.listdir(repo / "archives") if os.path.getsize(repo / "archives" / k) > MiB)
        assert s3.pending_uploads() == [f"game/archives/{archive}"]

        kept = [1, 2]
        if s3.kind == "moto":  # rclone streams parts to its backend: one sent can't be replaced
            # Part 2 of the open upload overwritten with other bytes of its size (a lying store,
            # a bug): it is not kept on its number, but checked, found wrong and sent again.
            upload_id = s3.pending_upload_ids()[0]
            wrong = tmp_path / "wrong-part"
            wrong.write_bytes(b"\0" * (5 * MiB))
            s3.signed_upload(f"game/archives/{archive}?partNumber=2&uploadId={upload_id}", wrong)
            kept = [1]
        relay.hold_after, relay.parts = None, []
        out = json.loads(push(repo, s3, "game", "--part-size", str(5 * MiB), endpoint=relay.endpoint).stdout)
        assert (out["multipart"], out["parts"], out["parts_resumed"]) == (1, 5, len(kept)), out
        size = os.path.getsize(repo / "archives" / archive)
        assert relay.parts == [(n, 5 * MiB) for n in range(len(kept) + 1, 5)] + [(5, size - 4 * 5 * MiB)], relay.parts
    finally:
        relay.close()
    assert s3.pending_uploads() == []
    assert_clients_get(tmp_path, s3, 2, big)
    # Pushed again: the object is there whole (by its sha256 kept as metadata), nothing is sent.
    again = json.loads(push(repo, s3, "game", "--part-size", str(5 * MiB)).stdout)
    assert again["uploaded"] == [] and again["parts"] == 0, again


def test_a_refused_part_aborts_the_upload_and_gc_aborts_what_a_kill_left(s3, tmp_path):
    repo, big = large_release(tmp_path, s3)
    relay = Relay(s3.port)
    try:
        relay.refuse_part = 3
        failed = push(repo, s3, "game", "--part-size", str(5 * MiB), endpoint=relay.endpoint, check=False)
        assert failed.returncode != 0 and "part 3" in failed.stderr, failed.stderr
        assert s3.pending_uploads() == []  # aborted, nothing left for the store to keep
        assert_clients_get(tmp_path, s3, 1)
        # A kill leaves one behind; gc aborts it once it is past the grace period.
        relay.refuse_part, relay.hold_after = None, 1
        p = subprocess.Popen([CLI, "push", str(repo), f"s3://{s3.bucket}/game", "--endpoint", relay.endpoint, "--part-size", str(5 * MiB)],
                             env={**os.environ, **KEYS}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert relay.held.wait(120)
        p.send_signal(signal.SIGKILL)
        p.wait()
    finally:
        relay.close()
    assert len(s3.pending_uploads()) == 1

    def gc(*args):
        r = subprocess.run([CLI, "gc", f"s3://{s3.bucket}/game", "--endpoint", s3.endpoint, "--json", *args],
                           env={**os.environ, **KEYS}, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    begun = datetime.datetime.fromisoformat(s3.pending_uploads_begun()[0][1].replace("Z", "+00:00")).timestamp()
    if abs(time.time() - begun) < 3600:  # moto says every upload began in 2010: its grace can't be tested
        assert gc("--grace", "1h")["aborted_uploads"] == [] and len(s3.pending_uploads()) == 1
    assert len(gc("--grace", "0s")["aborted_uploads"]) == 1 and s3.pending_uploads() == []
    # A busy store (503 SlowDown on a part, past the retries): the upload is left open, and the
    # next push resumes it from the parts that went up.
    relay = Relay(s3.port)
    try:
        relay.refuse_part, relay.refuse_status = 3, 503
        busy = push(repo, s3, "game", "--part-size", str(5 * MiB), endpoint=relay.endpoint, check=False)
        assert busy.returncode == 3 and "left open" in busy.stderr, busy.stderr
        assert len(s3.pending_uploads()) == 1
    finally:
        relay.close()
    out = json.loads(push(repo, s3, "game", "--part-size", str(5 * MiB)).stdout)
    assert out["parts_resumed"] == 2 and out["parts"] == 5
    assert s3.pending_uploads() == []
    assert_clients_get(tmp_path, s3, 2, big)
