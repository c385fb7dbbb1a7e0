"""Trust anchors and the data directory, black-box through the C ABI: a key document pinned
after a keyless build, clients pinning different anchors on one data directory, a keyless
co-tenant, and a forged manifest that must not make a verifying client fetch anything before
what can be checked is checked."""
import json
import os
import shutil
import socket
import sys
import threading

import pytest

import assetpatch
from conftest import ROOT
import trust
from trust import cli, publish, served, sign

sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx  # noqa: E402


def chained_repo(tmp_path):
    """Clients pin `pinned` (or ship key document 1); document 1 names signing key s1; version 1
    is signed by s1."""
    repo, src, keys = trust.chained_repo(tmp_path, "anchor", "zero")
    publish(src, repo, "one", "--key", tmp_path / "s1.key")
    return repo, src, keys


def unsigned_copy(tmp_path, repo, text, version):
    """A copy of the repository offering an unsigned release (a host that verified nothing took it)."""
    fake = tmp_path / f"unsigned-{version}"
    shutil.copytree(repo, fake)
    shutil.rmtree(fake / "keys")
    publish(tmp_path / "fake-src", fake, text, "--version", str(version))
    return fake


def test_a_key_document_set_later_distrusts_what_was_installed_without_verification(tmp_path):
    repo, src, _ = chained_repo(tmp_path)
    fake = unsigned_copy(tmp_path, repo, "unsigned three", 3)
    publish(src, repo, "three", "--key", tmp_path / "s1.key")
    data = tmp_path / "data"
    # The keyless build of the app.
    with assetpatch.Client(data, manifest_url=f"file://{fake}/head.json") as c:
        assert c.update() is True and served(c) == "unsigned three"
    # The next build ships key document 1 and pins it.
    with assetpatch.Client(data, key_document=str(repo / "keys" / "1.json")) as c:
        assert served(c) != "unsigned three"
        c.set("manifest_url", f"file://{repo}/head.json")
        assert c.update() is True and served(c) == "three" and c.release_info().signature_verified


def test_clients_pinning_different_anchors_keep_their_own_key_documents(tmp_path):
    repo, src, keys = chained_repo(tmp_path)
    stolen = tmp_path / "stolen"
    shutil.copytree(repo, stolen)
    publish(tmp_path / "evil-src", stolen, "evil", "--version", "50", "--key", tmp_path / "s1.key")
    # Document 2 retires s1.
    cli("keys", "create", "--repo", repo, "--root-key", tmp_path / "root.key.pub", "--signing-key", tmp_path / "s2.key.pub")
    cli("keys", "sign", repo / "keys" / "staged.json", "--key", tmp_path / "root.key")
    cli("keys", "publish", "--repo", repo)
    publish(src, repo, "three", "--key", tmp_path / "s2.key")
    data = tmp_path / "data"
    with assetpatch.Client(data, manifest_url=f"file://{repo}/head.json", public_keys=[keys["pinned"]]) as a:
        assert a.update() is True and served(a) == "three"
    # Another build of the app pins key document 1 instead, on the same data directory.
    with assetpatch.Client(data, manifest_url=f"file://{repo}/head.json", key_document=str(repo / "keys" / "1.json")) as b:
        assert b.update() is False
    # The first still knows s1 is retired.
    with assetpatch.Client(data, manifest_url=f"file://{stolen}/head.json", public_keys=[keys["pinned"]]) as a:
        with pytest.raises(assetpatch.SignatureError):
            a.update()
        assert served(a) == "three"


def test_a_keyless_cotenant_does_not_freeze_a_verifying_client(tmp_path):
    repo, src, keys = chained_repo(tmp_path)
    data = tmp_path / "data"
    with assetpatch.Client(data, manifest_url=f"file://{repo}/head.json", public_keys=[keys["pinned"]]) as v:
        assert v.update() is True and served(v) == "one"
        fake = unsigned_copy(tmp_path, repo, "unsigned three", 3)
        publish(src, repo, "three", "--key", tmp_path / "s1.key")
        # A keyless client (the CLI without --public-key, a debug build) on the same data directory.
        with assetpatch.Client(data, manifest_url=f"file://{fake}/head.json") as keyless:
            assert keyless.update() is True and served(keyless) == "unsigned three"
        # The genuine version 3 is not "current" because an unsigned one of that number is there.
        assert v.update() is True
        assert served(v) == "three" and v.release_info().signature_verified


class Listener:
    """A TCP listener that counts the connections made to it (and answers none)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self):
        self.sock.close()


@pytest.mark.parametrize("signatures", ["none", "forged"])
def test_a_forged_manifest_fetches_no_key_document_from_another_host(tmp_path, signatures):
    repo, _, keys = chained_repo(tmp_path)
    listener = Listener()
    body = b'{"format": 2, "package": "anchor", "version": 9, "archive": {"url": "archives/x.zip", "size": 1, "sha256": "' \
        + b"0" * 64 + b'"}, "index": {"offset": 0, "size": 1, "root": "' + b"0" * 64 + b'", "root_size": 1, "chunk_size": 8192},' \
        + b' "keys": {"version": 5, "url": "http://127.0.0.1:%d/keys/"}}' % listener.port
    envelope = sign(tmp_path / "s2.key", body)  # a key nobody trusts
    if signatures == "none":
        envelope["signatures"] = []
    (repo / "head.json").write_text(json.dumps(envelope))
    work = tmp_path / "nginx"
    os.makedirs(work)
    try:
        with Nginx(str(tmp_path), str(work)) as n, \
                assetpatch.Client(tmp_path / "data", manifest_url=n.url("repo/head.json"), public_keys=[keys["pinned"]]) as c:
            with pytest.raises(assetpatch.SignatureError):
                c.update()
    finally:
        listener.close()
    assert listener.connections == 0


def test_a_key_document_request_is_not_redirected_to_another_host(tmp_path):
    repo, _, keys = chained_repo(tmp_path)
    listener = Listener()
    work = tmp_path / "nginx"
    os.makedirs(work)
    locations = "location /repo/keys/ {{ return 302 http://127.0.0.1:%d/keys/1.json; }}" % listener.port
    try:
        with Nginx(str(tmp_path), str(work), locations=locations) as n, \
                assetpatch.Client(tmp_path / "data", manifest_url=n.url("repo/head.json"), public_keys=[keys["pinned"]]) as c:
            with pytest.raises(assetpatch.HTTPError, match="302"):
                c.update()
            assert c.current_version == 0
    finally:
        listener.close()
    assert listener.connections == 0
