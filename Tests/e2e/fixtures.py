#!/usr/bin/env python3
"""Builds the end-to-end fixtures: example asset sets, a bundle, good release repositories
published with the real CLI, and hostile repositories (bad manifests, bad archives) whose
archives are real zip files made here byte by byte where zipfile won't.

    fixtures.py --cli PATH/TO/assetpatch --out DIR
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import struct
import subprocess
import zipfile
import zlib


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def make_assets(out):
    rnd = random.Random(20261122)
    v1, v2, bundle = (os.path.join(out, d) for d in ("assets-v1", "assets-v2", "bundle"))
    for d in (v1, v2, bundle):
        shutil.rmtree(d, ignore_errors=True)
    image1 = bytes(rnd.getrandbits(8) for _ in range(150_000))
    image2 = bytes(rnd.getrandbits(8) for _ in range(180_000))
    write(f"{v1}/readme.txt", b"release one\n")
    write(f"{v1}/sub/sample@2x.png", image1)
    write(f"{v1}/levels/level1.json", json.dumps({"level": 1, "tiles": list(range(2000))}).encode())
    write(f"{v1}/text/lorem.txt", b"lorem ipsum dolor sit amet\n" * 4000)
    write(f"{v2}/readme.txt", b"release two\n")
    write(f"{v2}/sub/sample@2x.png", image2)
    write(f"{v2}/sub/sample@3x.png", image1)
    write(f"{v2}/levels/level2.json", json.dumps({"level": 2, "tiles": list(range(3000))}).encode())
    write(f"{v2}/text/lorem.txt", b"lorem ipsum dolor sit amet\n" * 4000)
    write(f"{bundle}/readme.txt", b"shipped bundle\n")
    write(f"{bundle}/levels/level1.json", b'{"level": 1, "from": "bundle"}')
    write(f"{bundle}/sub/only-bundle.txt", b"only in the bundle\n")
    write(f"{bundle}/sub/sample.png", b"bundle sample 1x\n")


def publish(cli, src, repo, *extra):
    subprocess.run([cli, "publish", src, "--repo", repo, "--package", "demo", *extra], check=True,
                   stdout=subprocess.DEVNULL)


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def hostile_repo(root, name, archive_bytes, files, version=3, tweak=None):
    """A repository whose manifest honestly describes `archive_bytes` (so the failure is in the
    archive itself) and lists `files` [(path, bytes)]."""
    repo = os.path.join(root, name)
    shutil.rmtree(repo, ignore_errors=True)
    digest = sha256(archive_bytes)
    write(f"{repo}/archives/{digest}.zip", archive_bytes)
    manifest = {
        "format": 1, "package": "demo", "version": version,
        "archive": {"url": f"archives/{digest}.zip", "size": len(archive_bytes), "sha256": digest},
        "files": [{"path": p, "size": len(b), "sha256": sha256(b)} for p, b in files],
    }
    if tweak:
        tweak(manifest, repo)
    write(f"{repo}/manifest.json", json.dumps(manifest, indent=1).encode())
    return repo


def zip_bytes(entries):
    """entries: [(name, data, dict(method=..., symlink=...))] -> zip built by zipfile."""
    path = "/tmp/.assetpatch-fixture.zip"
    with zipfile.ZipFile(path, "w") as z:
        for name, data, opts in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = opts.get("method", zipfile.ZIP_DEFLATED)
            info.create_system = 3
            info.external_attr = (opts.get("mode", 0o100644)) << 16
            z.writestr(info, data)
    with open(path, "rb") as f:
        data = f.read()
    os.unlink(path)
    return data


def corrupt_deflate(name, data):
    """A zip whose one deflated entry has an invalid block type (first byte 0xFF)."""
    z = bytearray(zip_bytes([(name, data, {})]))
    # Local header: 30 bytes + name; the data follows (no extra field from writestr).
    start = 30 + len(name.encode())
    z[start] = 0xFF
    return bytes(z)


def make_hostile(out):
    root = os.path.join(out, "repos")
    ok = b"a perfectly fine file\n" * 100
    good = [("ok.txt", ok)]
    hostile_repo(root, "bad-sha", zip_bytes([("ok.txt", ok, {})]), good,
                 tweak=lambda m, r: m["archive"].update(sha256="0" * 64))
    # The server holds a truncated archive; the manifest describes the whole one.
    whole = zip_bytes([("ok.txt", ok, {"method": zipfile.ZIP_STORED}), ("ok2.txt", ok * 3, {"method": zipfile.ZIP_STORED})])
    def truncate(m, r):
        path = os.path.join(r, m["archive"]["url"])
        with open(path, "r+b") as f:
            f.truncate(len(whole) // 2)
    hostile_repo(root, "truncated", whole, [("ok.txt", ok), ("ok2.txt", ok * 3)], tweak=truncate)
    hostile_repo(root, "corrupt-deflate", corrupt_deflate("ok.txt", ok), good)
    hostile_repo(root, "missing-entry", zip_bytes([("ok.txt", ok, {})]), good + [("gone.txt", b"x")])
    hostile_repo(root, "extra-entry", zip_bytes([("ok.txt", ok, {}), ("sneaky.txt", b"x", {})]), good)
    hostile_repo(root, "wrong-content", zip_bytes([("ok.txt", ok.replace(b"fine", b"evil"), {})]), good)
    for name, evil in (("traversal", "../../../../../../tmp/assetpatch-evil.txt"), ("absolute", "/tmp/assetpatch-evil.txt"),
                       ("backslash", "..\\..\\assetpatch-evil.txt"), ("dotdot-inner", "sub/../../assetpatch-evil.txt")):
        hostile_repo(root, name, zip_bytes([("ok.txt", ok, {}), (evil, b"pwned\n", {})]), good)
    hostile_repo(root, "symlink", zip_bytes([("ok.txt", ok, {}), ("link", b"/etc/passwd", {"mode": 0o120777})]), good)
    # Stored entry whose central directory claims fewer bytes than the manifest.
    hostile_repo(root, "size-mismatch", zip_bytes([("ok.txt", ok[:-1], {})]), good)

    # Bad manifests.
    def manifest_repo(name, text):
        repo = os.path.join(root, name)
        shutil.rmtree(repo, ignore_errors=True)
        write(f"{repo}/manifest.json", text)
    manifest_repo("not-json", b"<html>captive portal</html>")
    manifest_repo("missing-fields", json.dumps({"format": 1, "package": "demo", "version": 3}).encode())
    manifest_repo("wrong-types", json.dumps({"format": 1, "package": "demo", "version": "3",
                                             "archive": {"url": "a.zip", "size": 1, "sha256": "0" * 64}, "files": []}).encode())
    manifest_repo("unknown-format", json.dumps({"format": 2, "package": "demo", "version": 3}).encode())
    manifest_repo("unsafe-path", json.dumps({"format": 1, "package": "demo", "version": 3,
                                             "archive": {"url": "a.zip", "size": 1, "sha256": "0" * 64},
                                             "files": [{"path": "../x", "size": 1, "sha256": "0" * 64}]}).encode())
    manifest_repo("big-manifest", json.dumps({"format": 1, "pad": "x" * 5000}).encode())
    manifest_repo("ftp-archive", json.dumps({"format": 1, "package": "demo", "version": 3,
                                             "archive": {"url": "ftp://example.invalid/a.zip", "size": 1, "sha256": "0" * 64},
                                             "files": []}).encode())


def make_legacy(out, good_repo):
    """The seed's {url, md5} manifest over a zip made by Info-ZIP-compatible zipfile."""
    root = os.path.join(out, "repos", "legacy")
    shutil.rmtree(root, ignore_errors=True)
    src = os.path.join(out, "assets-v1")
    entries = []
    for dirpath, _, names in os.walk(src):
        for n in sorted(names):
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                entries.append((os.path.relpath(p, src), f.read(), {}))
    data = zip_bytes(entries)
    write(f"{root}/patch.zip", data)
    write(f"{root}/manifest.json", json.dumps({"url": "patch.zip", "md5": hashlib.md5(data).hexdigest()}).encode())


def make_plugin_repo(cli, out):
    """repos/plug: an unsigned release with a plugin built here by the C compiler, whose entry
    returns 42 and which also exports plugin_name."""
    src = os.path.join(out, "assets-plug")
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(os.path.join(src, "plugins"))
    c = os.path.join(out, "plug.c")
    with open(c, "w") as f:
        f.write('int plugin_entry(void) { return 42; }\nconst char *plugin_name(void) { return "fixture plugin"; }\n')
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", os.path.join(src, "plugins", "fixture.so"), c], check=True)
    repo = os.path.join(out, "repos", "plug")
    shutil.rmtree(repo, ignore_errors=True)
    subprocess.run([cli, "publish", src, "--repo", repo, "--package", "plug", "--plugin", "fixture=plugins/fixture.so:plugin_entry",
                    "--plugin-version", "fixture=2.1", "--plugin-abi", "fixture=fixture-abi-1"], check=True, stdout=subprocess.DEVNULL)
    # repos/signed1 and signed2: the C example plugin (examples/plugin/greeter.c) in versions 1
    # and 2, signed with plugin-key (public key in plugin-key.pub).
    key = os.path.join(out, "plugin-key")
    for f in (key, key + ".pub"):
        if os.path.exists(f):
            os.remove(f)
    subprocess.run([cli, "keygen", "--out", key], check=True, stdout=subprocess.DEVNULL)
    greeter = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "plugin", "greeter.c")
    for version in (1, 2):
        src = os.path.join(out, f"assets-signed{version}")
        shutil.rmtree(src, ignore_errors=True)
        os.makedirs(os.path.join(src, "plugins"))
        subprocess.run(["cc", "-shared", "-fPIC", f"-DGREETER_VERSION={version}", "-o", os.path.join(src, "plugins", "greeter.so"),
                        greeter], check=True)
        repo = os.path.join(out, "repos", f"signed{version}")
        shutil.rmtree(repo, ignore_errors=True)
        if version == 2:
            shutil.copytree(os.path.join(out, "repos", "signed1"), repo)
        subprocess.run([cli, "publish", src, "--repo", repo, "--package", "signed", "--key", key,
                        "--plugin", "greeter=plugins/greeter.so:greeter_greet"], check=True, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    make_assets(a.out)
    repos = os.path.join(a.out, "repos")
    for r in ("v1", "v2"):
        shutil.rmtree(os.path.join(repos, r), ignore_errors=True)
    publish(a.cli, os.path.join(a.out, "assets-v1"), os.path.join(repos, "v1"), "--label", "first")
    shutil.copytree(os.path.join(repos, "v1"), os.path.join(repos, "v2"))
    notes = os.path.join(a.out, "notes-v2.txt")
    with open(notes, "w", encoding="utf-8") as f:
        f.write("Winter event: two new levels.\nÜmlauts and emoji ❄ survive.\n")
    publish(a.cli, os.path.join(a.out, "assets-v2"), os.path.join(repos, "v2"), "--label", "second", "--notes", notes,
            "--mandatory")
    make_hostile(a.out)
    make_legacy(a.out, os.path.join(repos, "v1"))
    make_plugin_repo(a.cli, a.out)


if __name__ == "__main__":
    main()
