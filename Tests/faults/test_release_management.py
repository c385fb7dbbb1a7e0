"""Release management over HTTP against a real nginx: key documents fetched along the chain
(and counted: a check that needs no new document fetches none), channels served from
channels/NAME/, a rollout share rewritten on the way, and a remote manifest that may not point
key documents at local files."""
import base64
import json
import os
import subprocess
import sys

import pytest

import assetpatch
from conftest import CLI, ROOT, make_tree

sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx  # noqa: E402

LOG = "log_format uris escape=none '$request_uri $status';"


def cli(*args):
    return subprocess.run([CLI, *map(str, args)], check=True, capture_output=True, text=True).stdout


def keygen(path):
    cli("keygen", "--out", path)
    return open(f"{path}.pub").read().strip()


def requests(work):
    return [line.split() for line in open(f"{work}/access.log").read().splitlines()]


def test_the_key_chain_is_followed_over_http_once(tmp_path):
    repo, src = tmp_path / "repo", tmp_path / "src"
    pinned = keygen(tmp_path / "pinned.key")
    keygen(tmp_path / "root.key")
    keygen(tmp_path / "s1.key")
    keygen(tmp_path / "s2.key")
    make_tree(src, {"a.txt": b"one"})
    cli("publish", src, "--repo", repo, "--package", "chain", "--key", tmp_path / "pinned.key")
    for version, signing, signers in ((1, "s1", ["pinned", "root"]), (2, "s2", ["root"])):
        cli("keys", "create", "--repo", repo, "--root-key", tmp_path / "root.key.pub", "--signing-key", tmp_path / f"{signing}.key.pub")
        for s in signers:
            cli("keys", "sign", repo / "keys" / "staged.json", "--key", tmp_path / f"{s}.key")
        cli("keys", "publish", "--repo", repo, "--pinned-key", tmp_path / "pinned.key.pub")
    make_tree(src, {"a.txt": b"two"})
    cli("publish", src, "--repo", repo, "--key", tmp_path / "s2.key")
    work = tmp_path / "nginx"
    os.makedirs(work)
    with Nginx(str(tmp_path), str(work), http=LOG, access_log=f"{work}/access.log uris") as n:
        with assetpatch.Client(tmp_path / "data", manifest_url=n.url("repo/head.json"), public_keys=[pinned]) as c:
            assert c.update() is True and open(c.resolve("a.txt")).read() == "two"
            assert c.release_info().signature_verified
            assert c.update() is False
    uris = [u for u, _ in requests(work)]
    assert [u for u in uris if "/keys/" in u] == ["/repo/keys/1.json", "/repo/keys/2.json"], uris
    kept_dir = tmp_path / "data" / "key-documents"
    assert len(os.listdir(kept_dir)) == 1  # one anchor, one document followed from it
    kept = json.load(open(kept_dir / os.listdir(kept_dir)[0]))
    assert json.loads(base64.b64decode(kept["document"]["payload"]))["version"] == 2


def test_a_remote_manifest_may_not_name_local_key_documents(tmp_path):
    repo, src = tmp_path / "repo", tmp_path / "src"
    pinned = keygen(tmp_path / "pinned.key")
    make_tree(src, {"a.txt": b"one"})
    cli("publish", src, "--repo", repo, "--package", "local", "--key", tmp_path / "pinned.key")
    # A manifest, signed by the pinned key, whose "keys" points at file:///...
    manifest = json.load(open(repo / "head.json"))
    payload = json.loads(base64.b64decode(manifest["payload"]))
    payload["keys"] = {"version": 1, "url": f"file://{tmp_path}/"}
    body = (json.dumps(payload, indent=2) + "\n").encode()
    (tmp_path / "payload.json").write_bytes(body)
    seed = base64.b64decode(open(tmp_path / "pinned.key").read())
    sig = subprocess.run([sys.executable, "-c", SIGN, str(tmp_path / "pinned.key"), str(tmp_path / "payload.json")],
                         check=True, capture_output=True, text=True).stdout.strip()
    assert seed and sig
    envelope = {"payloadType": "application/vnd.assetpatch.manifest+json", "payload": base64.b64encode(body).decode(),
                "signatures": [{"sig": sig}]}
    (repo / "head.json").write_text(json.dumps(envelope))
    work = tmp_path / "nginx"
    os.makedirs(work)
    with Nginx(str(tmp_path), str(work)) as n:
        with assetpatch.Client(tmp_path / "data", manifest_url=n.url("repo/head.json"), public_keys=[pinned]) as c:
            # Another origin than the manifest's: refused before anything is fetched.
            with pytest.raises(assetpatch.SignatureError, match="not on its own origin"):
                c.update()
            # Even where the host allows other origins, never a local file.
            c.set("allow_cross_origin_keys", True)
            with pytest.raises(assetpatch.ManifestError, match="file:// key documents"):
                c.update()
            assert c.current_version == 0


# Signs a file's bytes as a DSSE manifest payload with an assetpatch key file, with openssl.
SIGN = r"""
import base64, subprocess, sys, tempfile
seed = base64.b64decode(open(sys.argv[1]).read())
payload = open(sys.argv[2], "rb").read()
t = b"application/vnd.assetpatch.manifest+json"
pae = b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)
der = bytes.fromhex("302e020100300506032b657004220420") + seed
with tempfile.NamedTemporaryFile(suffix=".der") as k, tempfile.NamedTemporaryFile() as m:
    k.write(der); k.flush(); m.write(pae); m.flush()
    sig = subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", k.name, "-keyform", "DER", "-rawin", "-in", m.name],
                         check=True, capture_output=True).stdout
print(base64.b64encode(sig).decode())
"""


def test_channels_over_http_and_a_lying_rollout(tmp_path):
    repo, src = tmp_path / "repo", tmp_path / "src"
    key = tmp_path / "k.key"
    pub = keygen(key)
    make_tree(src, {"a.txt": b"one"})
    cli("publish", src, "--repo", repo, "--package", "ch", "--key", key)
    make_tree(src, {"a.txt": b"two"})
    cli("publish", src, "--repo", repo, "--channel", "beta", "--rollout", "0", "--key", key)
    work = tmp_path / "nginx"
    os.makedirs(work)
    with Nginx(str(tmp_path), str(work)) as n:
        with assetpatch.Client(tmp_path / "data", manifest_url=n.url("repo/head.json"), public_keys=[pub]) as c:
            assert c.update() is True and c.current_version == 1
            c.set("manifest_url", n.url("repo/channels/beta/head.json"))
            c.set("channel", "beta")
            assert c.update() is False and c.last_check.reason is assetpatch.NoUpdateReason.NOT_IN_ROLLOUT
            assert c.last_check.rollout_percent == 0.0
    # A server that rewrites the share in the payload (signature kept): refused, nothing moves.
    good = (repo / "channels" / "beta" / "head.json").read_bytes()
    env = json.loads(good)
    payload = base64.b64decode(env["payload"]).replace(b'"percent": 0', b'"percent": 100')
    env["payload"] = base64.b64encode(payload).decode()
    (repo / "channels" / "beta" / "head.json").write_text(json.dumps(env))
    with Nginx(str(tmp_path), str(work)) as n:
        with assetpatch.Client(tmp_path / "data", manifest_url=n.url("repo/channels/beta/head.json"), public_keys=[pub],
                               channel="beta") as c:
            with pytest.raises(assetpatch.SignatureError):
                c.update()
            assert c.current_version == 1 and open(c.resolve("a.txt")).read() == "one"
