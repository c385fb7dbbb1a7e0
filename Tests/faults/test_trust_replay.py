"""Release management against a hostile CDN edge or mirror (TUF's rollback, freeze and
fast-forward attacks), black-box through the C ABI: a halt that a replay of the manifests signed
before it must not undo, over file:// and as a 304 naming a copy kept from before the halt; a
release installed with a stolen key that the key's retirement must end; a mirror that serves
another channel's signed head."""
import base64
import json
import os
import shutil
import time

import pytest

import assetpatch
from conftest import ROOT
from trust import chained_repo, cli, keygen, payload, publish, served, sync

import sys
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx  # noqa: E402


def test_a_halt_holds_against_the_manifests_signed_before_it(tmp_path):
    repo, edge, src, key = tmp_path / "repo", tmp_path / "edge", tmp_path / "src", tmp_path / "k.key"
    pub = keygen(key)
    publish(src, repo, "one", "--package", "halt", "--key", key)
    sync(repo, edge)
    with assetpatch.Client(tmp_path / "data", manifest_url=f"file://{edge}/head.json", public_keys=[pub]) as c:
        assert c.update() is True and served(c) == "one"
        publish(src, repo, "two", "--key", key)
        sync(repo, edge)
        before = tmp_path / "before-halt"
        shutil.copytree(edge, before)
        cli("rollout", "--repo", repo, "--halt", "--key", key)
        sync(repo, edge)
        assert c.update() is False and c.last_check.reason is assetpatch.NoUpdateReason.NOT_IN_ROLLOUT
        # An edge (or a mirror) serves what it held before the halt: both files, validly signed.
        for name in ("head.json", "manifest.json"):
            shutil.copy(before / name, edge / name)
            c.set("manifest_url", f"file://{edge}/{name}")
            assert c.update() is False, name
            assert c.last_check.reason is assetpatch.NoUpdateReason.OLDER, name
            assert c.current_version == 1 and served(c) == "one"
        # The publisher raises the rollout again: newer than the halt, it installs.
        cli("rollout", "--repo", repo, "--percent", "100", "--key", key)
        sync(repo, edge)
        c.set("manifest_url", f"file://{edge}/head.json")
        assert c.update() is True and c.current_version == 2 and served(c) == "two"
    # Every signing of a channel is ordered: the halt's revision is above the publish's.
    assert payload(before / "head.json")["revision"] < payload(repo / "head.json")["revision"]


def test_a_304_never_brings_back_a_copy_signed_before_the_halt(tmp_path):
    """The client sends every kept copy's ETag; an edge that still holds the copy signed before
    the halt answers 304 naming it. nginx's ETag is the file's mtime and size, so restoring the
    old bytes and mtime makes nginx answer exactly that."""
    repo, edge, src, key = tmp_path / "repo", tmp_path / "edge", tmp_path / "src", tmp_path / "k.key"
    pub = keygen(key)
    publish(src, repo, "one", "--package", "etag", "--key", key)
    now = int(time.time())

    def sync_at(t):
        sync(repo, edge)
        os.utime(edge / "head.json", (t, t))

    sync_at(now - 300)
    work = tmp_path / "nginx"
    os.makedirs(work)
    with Nginx(str(edge), str(work)) as n, \
            assetpatch.Client(tmp_path / "data", manifest_url=n.url("head.json"), public_keys=[pub]) as c:
        assert c.update() is True and c.current_version == 1
        publish(src, repo, "two", "--key", key)
        sync_at(now - 200)
        old = (edge / "head.json").read_bytes()
        assert c.check() is not None  # seen (and kept with its ETag), not installed
        cli("rollout", "--repo", repo, "--halt", "--key", key)
        sync_at(now - 100)
        assert c.check() is None and c.last_check.reason is assetpatch.NoUpdateReason.NOT_IN_ROLLOUT
        (edge / "head.json").write_bytes(old)
        os.utime(edge / "head.json", (now - 200, now - 200))
        assert c.update() is False
        assert c.last_check.reason is assetpatch.NoUpdateReason.OLDER
        assert c.current_version == 1 and served(c) == "one"


def rotation_repo(tmp_path):
    """A repository whose clients pin `pinned`; key document 1 names root key `root` and signing
    key `s1`; versions 1 to 3 are signed by s1."""
    repo, src, keys = chained_repo(tmp_path, "rot", "one")
    for text in ("two", "three"):
        publish(src, repo, text, "--key", tmp_path / "s1.key")
    return repo, src, keys


def retire_s1(tmp_path, repo):
    """Key document 2: s2 signs manifests, s1 is retired (the docs' "Retiring a key")."""
    cli("keys", "create", "--repo", repo, "--root-key", tmp_path / "root.key.pub", "--signing-key", tmp_path / "s2.key.pub")
    cli("keys", "sign", repo / "keys" / "staged.json", "--key", tmp_path / "root.key")
    cli("keys", "publish", "--repo", repo)


def test_a_release_installed_with_a_stolen_key_ends_when_the_key_is_retired(tmp_path):
    repo, src, keys = rotation_repo(tmp_path)
    stolen = tmp_path / "stolen"
    shutil.copytree(repo, stolen)
    # The thief, holding s1, fast-forwards the client to the highest version there is.
    publish(tmp_path / "evil-src", stolen, "evil", "--version", str(2**63 - 1), "--key", tmp_path / "s1.key")
    data = tmp_path / "data"
    with assetpatch.Client(data, manifest_url=f"file://{repo}/head.json", public_keys=[keys["pinned"]]) as c:
        assert c.update() is True and served(c) == "three"
        c.set("manifest_url", f"file://{stolen}/head.json")
        assert c.update() is True and served(c) == "evil"
    # The publisher retires s1 and signs the channel again with s2.
    retire_s1(tmp_path, repo)
    cli("resign", "--repo", repo, "--key", tmp_path / "s2.key")
    with assetpatch.Client(data, manifest_url=f"file://{repo}/head.json", public_keys=[keys["pinned"]]) as c:
        c.update()
        # Vouched for by s1 alone, the thief's release is no longer served: version 3, which
        # the channel offers again under s2, is (without a download: it is kept on disk).
        assert served(c) == "three" and c.current_version == 3
        assert c.release_info().signature_verified
        # The recovery release installs: the thief's version no longer counts as accepted.
        publish(src, repo, "four", "--key", tmp_path / "s2.key")
        assert c.update() is True and served(c) == "four"
        c.set("manifest_url", f"file://{stolen}/head.json")
        with pytest.raises(assetpatch.SignatureError):
            c.update()
    with assetpatch.Client(data, public_keys=[keys["pinned"]]) as c:
        assert served(c) == "four"
        c.reset()
        c.set("manifest_url", f"file://{repo}/head.json")
        assert c.update() is True and served(c) == "four"


def test_a_retired_key_ends_what_it_alone_vouched_for_even_without_a_new_release(tmp_path):
    """The chain moves on (document 2) while the client serves the thief's release: the next
    check that follows it stops serving that release, and reopening does not bring it back."""
    repo, src, keys = rotation_repo(tmp_path)
    stolen = tmp_path / "stolen"
    shutil.copytree(repo, stolen)
    publish(tmp_path / "evil-src", stolen, "evil", "--version", "1000", "--key", tmp_path / "s1.key")
    data = tmp_path / "data"
    with assetpatch.Client(data, manifest_url=f"file://{stolen}/head.json", public_keys=[keys["pinned"]], keep_versions=0) as c:
        assert c.update() is True and served(c) == "evil"
    retire_s1(tmp_path, repo)
    publish(src, repo, "four", "--key", tmp_path / "s2.key")
    with assetpatch.Client(data, manifest_url=f"file://{repo}/head.json", public_keys=[keys["pinned"]]) as c:
        assert c.check() is not None  # version 4 is newer than anything still vouched for
        assert served(c) is None and c.current_version == 0
    with assetpatch.Client(data, public_keys=[keys["pinned"]]) as c:
        assert served(c) is None


def test_a_mirror_cannot_move_a_client_to_another_channel(tmp_path):
    # The mirror's own layout puts the archives where beta's head (../../archives/) finds them.
    repo, mirror, src, key = tmp_path / "repo", tmp_path / "site" / "game" / "stable", tmp_path / "src", tmp_path / "k.key"
    pub = keygen(key)
    publish(src, repo, "stable one", "--package", "ch", "--key", key)
    publish(src, repo, "beta two", "--channel", "beta", "--key", key)
    publish(src, repo, "stable three", "--key", key)
    publish(src, repo, "beta four", "--channel", "beta", "--key", key)
    sync(repo, mirror)
    sync(repo / "archives", tmp_path / "site" / "archives")
    data = tmp_path / "data"
    with assetpatch.Client(data, manifest_url=f"file://{mirror}/head.json", public_keys=[pub]) as c:
        assert c.update() is True and served(c) == "stable three"
        # The mirror serves beta's signed head (and manifest) at stable's URL.
        for name in ("head.json", "manifest.json"):
            shutil.copy(repo / "channels" / "beta" / name, mirror / name)
        for name in ("head.json", "manifest.json"):
            c.set("manifest_url", f"file://{mirror}/{name}")
            with pytest.raises(assetpatch.ManifestError, match="channel"):
                c.update()
            assert served(c) == "stable three"
    with assetpatch.Client(data, manifest_url=f"file://{repo}/head.json", public_keys=[pub]) as c:
        assert c.update() is False and c.last_check.reason is assetpatch.NoUpdateReason.CURRENT
        # The host names the channel: the move is explicit.
        c.set("manifest_url", f"file://{repo}/channels/beta/head.json")
        c.set("channel", "beta")
        assert c.update() is True and served(c) == "beta four"
    # Pinned to beta now: stable's head is another channel's, until the host names stable.
    with assetpatch.Client(data, manifest_url=f"file://{repo}/head.json", public_keys=[pub]) as c:
        with pytest.raises(assetpatch.ManifestError, match="channel"):
            c.update()
        c.set("channel", "stable")
        assert c.update() is True and served(c) == "stable three"


def test_a_forged_manifest_naming_a_newer_key_document_changes_nothing(tmp_path):
    """Key document 2 retires k1, which signed the halt. An edge serves a forged envelope that
    names document 2: refused, and the client must not have kept document 2 (judging by it, the
    halt would stop counting), so the copy signed before the halt stays older."""
    repo, edge, src = tmp_path / "repo", tmp_path / "edge", tmp_path / "src"
    keys = {n: keygen(tmp_path / f"{n}.key") for n in ("pinned", "root", "k1", "k2")}
    publish(src, repo, "one", "--package", "forged", "--key", tmp_path / "pinned.key")
    cli("keys", "create", "--repo", repo, "--root-key", tmp_path / "root.key.pub", "--signing-key", tmp_path / "k1.key.pub",
        "--signing-key", tmp_path / "k2.key.pub")
    for signer in ("pinned", "root"):
        cli("keys", "sign", repo / "keys" / "staged.json", "--key", tmp_path / f"{signer}.key")
    cli("keys", "publish", "--repo", repo, "--pinned-key", tmp_path / "pinned.key.pub")
    cli("resign", "--repo", repo, "--key", tmp_path / "k1.key")
    sync(repo, edge)
    data = tmp_path / "data"
    with assetpatch.Client(data, manifest_url=f"file://{edge}/head.json", public_keys=[keys["pinned"]]) as c:
        assert c.update() is True and served(c) == "one"
        publish(src, repo, "two", "--key", tmp_path / "k2.key")
        before = (repo / "head.json").read_bytes()
        cli("rollout", "--repo", repo, "--halt", "--key", tmp_path / "k1.key")
        sync(repo, edge)
        assert c.update() is False and c.last_check.reason is assetpatch.NoUpdateReason.NOT_IN_ROLLOUT
        cli("keys", "create", "--repo", repo, "--root-key", tmp_path / "root.key.pub", "--signing-key", tmp_path / "k2.key.pub")
        cli("keys", "sign", repo / "keys" / "staged.json", "--key", tmp_path / "root.key")
        cli("keys", "publish", "--repo", repo)
        sync(repo, edge)
        forged = json.loads(before)
        body = base64.b64decode(forged["payload"]).replace(b'"version": 1,\n    "url"', b'"version": 2,\n    "url"')
        assert b'"version": 2,\n    "url"' in body
        forged["payload"] = base64.b64encode(body).decode()
        (edge / "head.json").write_text(json.dumps(forged))
        with pytest.raises(assetpatch.SignatureError):
            c.update()
        (edge / "head.json").write_bytes(before)
        assert c.update() is False and c.last_check.reason is assetpatch.NoUpdateReason.OLDER
        assert served(c) == "one"


def test_a_retirement_holds_when_the_recovery_manifest_is_refused_later(tmp_path):
    """The manifest that leads the client to the retirement is refused after it was judged (it
    needs a newer app): what the retired key alone vouched for stays ended."""
    repo, src, keys = rotation_repo(tmp_path)
    stolen = tmp_path / "stolen"
    shutil.copytree(repo, stolen)
    publish(tmp_path / "evil-src", stolen, "evil", "--version", "1000", "--key", tmp_path / "s1.key")
    data = tmp_path / "data"
    with assetpatch.Client(data, manifest_url=f"file://{stolen}/head.json", public_keys=[keys["pinned"]], app_version="1.0") as c:
        assert c.update() is True and served(c) == "evil"
        retire_s1(tmp_path, repo)
        publish(src, repo, "four", "--key", tmp_path / "s2.key", "--min-app-version", "2.0")
        c.set("manifest_url", f"file://{repo}/head.json")
        with pytest.raises(assetpatch.IncompatibleError):
            c.update()
        assert served(c) != "evil"
    with assetpatch.Client(data, public_keys=[keys["pinned"]]) as c:
        assert served(c) != "evil"
