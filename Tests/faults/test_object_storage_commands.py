"""Commands that write a repository given --repo s3://..., and the lock object pushes take on
a store that ignores conditional writes."""
import base64
import json
import os
import subprocess
import urllib.request

import pytest

import assetpatch
from conftest import CLI, make_tree
from s3servers import KEYS, publish, push, s3, s3_keys  # noqa: F401 (s3: the fixture)


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
    # Version 1 is in the history, which keeps no signature, and no head names it now: it is
    # signed again only when the publisher vouches for the bucket.
    unchecked = run("rollback-release", "--to", "1", "--key", key, check=False)
    assert unchecked.returncode == 3 and "history/1 came from the bucket unchecked" in unchecked.stderr, unchecked.stderr
    run("rollback-release", "--to", "1", "--key", key, "--trust-bucket")
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
    assert broken["heads"] == ["head.json", "manifest.json"] and ".assetpatch-lock" not in s3_keys(s3, "game/")
    # A killed push's lock lapses.
    publish(tmp_path, repo, 3, {"x.txt": b"three"})
    plant("2020-01-01T00:00:00Z")
    push(repo, s3)
    with assetpatch.Client(tmp_path / "data3", manifest_url=s3.url("game/head.json")) as c:
        assert c.update() is True and c.current_version == 3


def test_what_someone_else_plants_in_the_bucket_is_not_signed_again(s3, tmp_path):
    """Someone who can write to the bucket but holds no release key plants a release of their
    own (signed with their key) in the history, then as the heads. The publisher's next
    rollback-release and rollout, given --repo s3://, refuse it before writing anything: no
    head signed with the publisher's key ever names the planted archive."""
    keys = {}
    for name in ("publisher", "intruder"):
        subprocess.run([CLI, "keygen", "--out", tmp_path / f"{name}.key"], check=True, stdout=subprocess.DEVNULL)
        keys[name] = open(tmp_path / f"{name}.key.pub").read().strip()
    bucket = f"s3://{s3.bucket}/planted"
    where = ["--endpoint", s3.endpoint] + (["--acl", "public-read"] if s3.kind == "moto" else [])

    def run(*args):
        return subprocess.run([CLI, *map(str, args), "--repo", bucket, *where, "--key", tmp_path / "publisher.key"],
                              env={**os.environ, **KEYS}, capture_output=True, text=True)

    make_tree(tmp_path / "src1", {"level.txt": b"one"})
    assert run("publish", tmp_path / "src1", "--package", "planted").returncode == 0
    # The intruder's release 99, signed with their key, put in the history by hand.
    theirs = tmp_path / "theirs"
    make_tree(tmp_path / "evil", {"level.txt": b"evil"})
    subprocess.run([CLI, "publish", tmp_path / "evil", "--repo", theirs, "--package", "planted", "--version", "99",
                    "--key", tmp_path / "intruder.key"], check=True, capture_output=True)
    for name in ("manifest.json", "head.json"):
        subprocess.run(["curl", "-sf", "-T", theirs / "history" / "99" / name, "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                        f"{KEYS['AWS_ACCESS_KEY_ID']}:{KEYS['AWS_SECRET_ACCESS_KEY']}",
                        f"{s3.endpoint}/{s3.bucket}/planted/history/99/{name}"], check=True)
    refused = run("rollback-release", "--to", "99")
    assert refused.returncode == 3 and "history/99 came from the bucket unchecked" in refused.stderr, refused.stderr
    # Then as the heads (their own push, forced).
    forced = push(theirs, s3, "planted", "--force")
    assert json.loads(forced.stdout)["heads"] == ["head.json", "manifest.json"]
    refused = run("rollout", "--percent", "50")
    assert refused.returncode == 3 and "not signed by a key this command trusts" in refused.stderr, refused.stderr

    def signer(key):
        head = json.loads(urllib.request.urlopen(s3.url(f"planted/{key}"), timeout=10).read())
        return {s["keyid"] for s in head["signatures"]}

    theirs_id = signer("head.json")
    assert signer("manifest.json") == theirs_id  # still the intruder's signature, never the publisher's
    # A client pinning the publisher's key refuses what is there, and keeps nothing of it.
    with assetpatch.Client(tmp_path / "data", manifest_url=s3.url("planted/head.json"), public_keys=[keys["publisher"]],
                           package="planted") as c:
        with pytest.raises(assetpatch.SignatureError):
            c.update()
        assert not c.current_version


def test_moved_altered_or_inflated_releases_are_not_signed_again(s3, tmp_path):
    """Three more things a bucket writer without a key tries: a head signed for beta copied
    over stable's, a current release's history entry altered (a field added), a history entry
    numbered Int64's maximum. Each is refused or ignored; the untouched entry is accepted."""
    key = tmp_path / "k.key"
    subprocess.run([CLI, "keygen", "--out", key], check=True, stdout=subprocess.DEVNULL)
    where = ["--endpoint", s3.endpoint] + (["--acl", "public-read"] if s3.kind == "moto" else [])

    def run(prefix, *args):
        return subprocess.run([CLI, *map(str, args), "--repo", f"s3://{s3.bucket}/{prefix}", *where, "--key", key],
                              env={**os.environ, **KEYS}, capture_output=True, text=True)

    def get(k):
        return urllib.request.urlopen(s3.url(k), timeout=10).read()

    def put(k, data):
        f = tmp_path / "put"
        f.write_bytes(data)
        s3.signed_upload(k, f)

    for prefix in ("moved", "altered", "inflated"):
        for v in (1, 2):
            make_tree(tmp_path / f"{prefix}{v}", {"level.txt": f"{prefix} {v}".encode()})
            assert run(prefix, "publish", tmp_path / f"{prefix}{v}", "--package", prefix).returncode == 0
    # Moved: beta's head (signed for beta) copied over stable's.
    assert run("moved", "promote", "--from", "stable", "--to", "beta").returncode == 0
    for name in ("manifest.json", "head.json"):
        put(f"moved/{name}", get(f"moved/channels/beta/{name}"))
    moved = run("moved", "rollout", "--percent", "50")
    assert moved.returncode == 3 and 'signed for channel "beta", not "stable"' in moved.stderr, moved.stderr
    # Altered: version 2, which stable's head names, made mandatory in the history.
    original = get("altered/history/2/manifest.json")
    altered = json.loads(original)
    altered["mandatory"] = True
    put("altered/history/2/manifest.json", json.dumps(altered).encode())
    refused = run("altered", "rollback-release", "--to", "2")
    assert refused.returncode == 3 and "history/2 came from the bucket unchecked" in refused.stderr, refused.stderr
    put("altered/history/2/manifest.json", original)
    accepted = run("altered", "rollback-release", "--to", "2")
    assert accepted.returncode == 0, accepted.stderr
    # Inflated: a release numbered 2^63-1 in the history sets no version.
    put("inflated/history/9223372036854775807/manifest.json", get("inflated/history/2/manifest.json"))
    make_tree(tmp_path / "inflated3", {"level.txt": b"inflated 3"})
    third = run("inflated", "publish", tmp_path / "inflated3")
    assert third.returncode == 0, third.stderr
    head = json.loads(get("inflated/head.json"))
    assert json.loads(base64.b64decode(head["payload"]))["version"] == 3
