"""Helpers for the trust-model tests: the CLI, keys, a publisher's repository and what a CDN
edge or a mirror serves of it (a copy that may lag behind or be replaced), and manifests signed
by hand."""
import base64
import json
import shutil
import subprocess
import tempfile

from conftest import CLI, make_tree

MANIFEST_TYPE = b"application/vnd.assetpatch.manifest+json"


def cli(*args, check=True):
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"assetpatch {' '.join(map(str, args))}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return r


def keygen(path):
    """A key pair; returns the public key (base64)."""
    cli("keygen", "--out", path)
    return open(f"{path}.pub").read().strip()


def publish(src, repo, text, *args):
    """Publishes a release whose level.txt says `text`."""
    make_tree(src, {"level.txt": text.encode()})
    return cli("publish", src, "--repo", repo, *args)


def payload(path):
    """A manifest file's payload (an envelope's, unverified), as JSON."""
    j = json.load(open(path))
    return json.loads(base64.b64decode(j["payload"])) if "payload" in j else j


def sync(repo, edge):
    """The edge catches up with the publisher: it now serves the repository as it is."""
    shutil.copytree(repo, edge, dirs_exist_ok=True)


def served(client):
    """What the client serves for level.txt; None for the bundle only."""
    try:
        return open(client.resolve("level.txt")).read()
    except Exception:  # noqa: BLE001 - NotFoundError: nothing but the (empty) bundle
        return None


def sign(key_file, body):
    """A DSSE envelope around `body` (bytes) signed with an assetpatch key file, by openssl."""
    seed = base64.b64decode(open(key_file).read())
    pae = b"DSSEv1 %d %s %d %s" % (len(MANIFEST_TYPE), MANIFEST_TYPE, len(body), body)
    der = bytes.fromhex("302e020100300506032b657004220420") + seed
    with tempfile.NamedTemporaryFile(suffix=".der") as k, tempfile.NamedTemporaryFile() as m:
        k.write(der)
        k.flush()
        m.write(pae)
        m.flush()
        sig = subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", k.name, "-keyform", "DER", "-rawin", "-in", m.name],
                             check=True, capture_output=True).stdout
    return {"payloadType": MANIFEST_TYPE.decode(), "payload": base64.b64encode(body).decode(),
            "signatures": [{"sig": base64.b64encode(sig).decode()}]}


def chained_repo(tmp, package, first):
    """A repository whose clients pin `pinned`: version 1 (level.txt `first`) signed by it, then
    key document 1 naming root key `root` and signing key `s1` (signed by `pinned` and `root`).
    Keys pinned, root, s1 and s2 are made in `tmp`; returns (repo, src, {name: public key})."""
    repo, src = tmp / "repo", tmp / "src"
    keys = {name: keygen(tmp / f"{name}.key") for name in ("pinned", "root", "s1", "s2")}
    publish(src, repo, first, "--package", package, "--key", tmp / "pinned.key")
    cli("keys", "create", "--repo", repo, "--root-key", tmp / "root.key.pub", "--signing-key", tmp / "s1.key.pub")
    for signer in ("pinned", "root"):
        cli("keys", "sign", repo / "keys" / "staged.json", "--key", tmp / f"{signer}.key")
    cli("keys", "publish", "--repo", repo, "--pinned-key", tmp / "pinned.key.pub")
    return repo, src, keys


