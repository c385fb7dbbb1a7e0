"""The publisher's side of the trust model, through the CLI: the history says which channels
offered each version, one version names one archive, private keys others can read are refused,
a root-key holder sees what they sign, the first key document needs a pinned key's signature,
channel names fit the ABI's fields, manifests expire unless told otherwise, and the rollout id
is private."""
import base64
import hashlib
import json
import re
import os
import stat
import time

import pytest

import assetpatch
from trust import cli, keygen, payload, publish


def test_promote_refuses_a_version_the_channel_never_offered(tmp_path):
    repo, src, key = tmp_path / "repo", tmp_path / "src", tmp_path / "k.key"
    keygen(key)
    publish(src, repo, "stable one", "--package", "prom", "--key", key)
    publish(src, repo, "qa two", "--channel", "qa", "--key", key)
    publish(src, repo, "beta three", "--channel", "beta", "--key", key)
    r = cli("promote", "--repo", repo, "--from", "beta", "--to", "stable", "--version", "2", "--key", key, check=False)
    assert r.returncode == 3 and "never offered version 2" in r.stderr, r.stderr
    assert payload(repo / "manifest.json")["version"] == 1
    # qa did offer it.
    cli("promote", "--repo", repo, "--from", "qa", "--to", "stable", "--version", "2", "--key", key)
    assert payload(repo / "manifest.json")["version"] == 2
    # Channels that offered version 2 now: qa, then stable (by the promotion).
    assert json.load(open(repo / "history" / "2" / "channels.json"))["channels"] == ["qa", "stable"]


def test_one_version_number_names_one_archive(tmp_path):
    repo, src, key = tmp_path / "repo", tmp_path / "src", tmp_path / "k.key"
    keygen(key)
    publish(src, repo, "beta one", "--package", "once", "--channel", "beta", "--key", key)
    before = (repo / "history" / "1" / "manifest.json").read_bytes()
    r = cli("publish", src, "--repo", repo, "--channel", "qa", "--version", "1", "--key", key, check=False)
    assert r.returncode == 3 and "version 1" in r.stderr, r.stderr
    assert (repo / "history" / "1" / "manifest.json").read_bytes() == before
    assert not (repo / "channels" / "qa").exists()


def test_a_private_key_others_can_read_is_refused(tmp_path):
    repo, src, key = tmp_path / "repo", tmp_path / "src", tmp_path / "k.key"
    keygen(key)
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    os.chmod(key, 0o644)
    (src).mkdir()
    (src / "level.txt").write_text("one")
    r = cli("publish", src, "--repo", repo, "--package", "perm", "--key", key, check=False)
    assert r.returncode == 3 and "readable" in r.stderr, r.stderr
    assert not (repo / "head.json").exists()
    cli("publish", src, "--repo", repo, "--package", "perm", "--key", key, "--allow-readable-key")
    os.chmod(key, 0o640)
    r = cli("rollout", "--repo", repo, "--halt", "--key", key, check=False)
    assert r.returncode == 3 and "readable" in r.stderr, r.stderr
    r = cli("keys", "create", "--repo", repo, "--root-key", f"{key}.pub", "--signing-key", f"{key}.pub")
    r = cli("keys", "sign", repo / "keys" / "staged.json", "--key", key, check=False)
    assert r.returncode == 3 and "readable" in r.stderr, r.stderr


def test_a_root_key_holder_sees_the_document_before_signing(tmp_path):
    repo, src = tmp_path / "repo", tmp_path / "src"
    pubs = {n: keygen(tmp_path / f"{n}.key") for n in ("pinned", "root", "s1", "s2")}
    publish(src, repo, "one", "--package", "show", "--key", tmp_path / "pinned.key")
    cli("keys", "create", "--repo", repo, "--root-key", tmp_path / "root.key.pub", "--signing-key", tmp_path / "s1.key.pub",
        "--signing-key", tmp_path / "s2.key.pub", "--expires", "30d")
    out = cli("keys", "sign", repo / "keys" / "staged.json", "--key", tmp_path / "root.key").stdout
    ids = {n: hashlib.sha256(base64.b64decode(k)).hexdigest()[:16] for n, k in pubs.items()}
    assert "key document 1" in out and "expires" in out
    assert f"root keys (1 of 1 needed): {ids['root']}" in out, out
    assert ids["s1"] in out and ids["s2"] in out and "signing keys (1 of 2 needed)" in out, out
    # The first document needs the signature of a key clients pin, unless told it needs none.
    r = cli("keys", "publish", "--repo", repo, check=False)
    assert r.returncode == 3 and "--pinned-key" in r.stderr, r.stderr
    cli("keys", "sign", repo / "keys" / "staged.json", "--key", tmp_path / "pinned.key")
    cli("keys", "publish", "--repo", repo, "--pinned-key", tmp_path / "pinned.key.pub")
    # Document 2 drops s2: shown as what changes.
    cli("keys", "create", "--repo", repo, "--root-key", tmp_path / "root.key.pub", "--signing-key", tmp_path / "s1.key.pub")
    out = cli("keys", "sign", repo / "keys" / "staged.json", "--key", tmp_path / "root.key", "--repo", repo).stdout
    assert f"signing key {ids['s2']} removed" in out, out
    assert not (repo / "keys" / "staged.json").read_text() == ""


def test_channel_names_fit_the_abi(tmp_path):
    repo, src, key = tmp_path / "repo", tmp_path / "src", tmp_path / "k.key"
    keygen(key)
    (src).mkdir()
    (src / "level.txt").write_text("one")
    r = cli("publish", src, "--repo", repo, "--package", "len", "--channel", "c" * 64, check=False)
    assert r.returncode == 3
    cli("publish", src, "--repo", repo, "--package", "len", "--channel", "c" * 63)
    with assetpatch.Client(tmp_path / "data") as c:
        with pytest.raises(assetpatch.ArgumentError):
            c.set("channel", "c" * 64)
        c.set("channel", "c" * 63)
        c.set("manifest_url", f"file://{repo}/channels/{'c' * 63}/head.json")
        assert c.update() is True
        assert c.release_info().channel == "c" * 63 and c.last_check.channel == "c" * 63


def test_manifests_expire_unless_told_and_every_signing_renews_them(tmp_path):
    repo, src, key = tmp_path / "repo", tmp_path / "src", tmp_path / "k.key"
    keygen(key)
    publish(src, repo, "one", "--package", "exp", "--key", key)
    now = time.time()
    head = payload(repo / "head.json")
    from datetime import datetime
    expires = datetime.fromisoformat(head["expires"].replace("Z", "+00:00")).timestamp()
    assert 89 * 86400 < expires - now < 91 * 86400, head
    cli("rollout", "--repo", repo, "--percent", "50", "--key", key, "--expires", "10d")
    renewed = datetime.fromisoformat(payload(repo / "head.json")["expires"].replace("Z", "+00:00")).timestamp()
    assert 9 * 86400 < renewed - now < 11 * 86400
    # A signing without --expires keeps the channel's lifetime (10 days), counted from now.
    cli("resign", "--repo", repo, "--key", key)
    again = datetime.fromisoformat(payload(repo / "head.json")["expires"].replace("Z", "+00:00")).timestamp()
    assert 9 * 86400 < again - now < 11 * 86400
    publish(src, repo, "two", "--key", key, "--expires", "never")
    assert "expires" not in payload(repo / "head.json")
    out = cli("inspect", repo).stdout
    assert re.search(r"expires:\s+never", out), out
    out = cli("status", "--data-dir", tmp_path / "data", "--url", f"file://{repo}/head.json").stdout
    assert "offered:  version 2, expires never" in out, out
    cli("rollout", "--repo", repo, "--percent", "100", "--key", key, "--expires", "2d")
    out = cli("status", "--data-dir", tmp_path / "data", "--url", f"file://{repo}/head.json").stdout
    assert re.search(r"offered:  version 2, expires \S+, in (47|48) hours: sign the channel again", out), out


def test_the_rollout_id_is_private(tmp_path):
    repo, src = tmp_path / "repo", tmp_path / "src"
    publish(src, repo, "one", "--package", "rid", "--rollout", "50")
    with assetpatch.Client(tmp_path / "data", manifest_url=f"file://{repo}/head.json") as c:
        c.check()
    assert stat.S_IMODE(os.stat(tmp_path / "data" / "rollout-id").st_mode) == 0o600
