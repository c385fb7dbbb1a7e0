"""Fixtures for the fault tests: the installed library and CLI (build/prefix), release
repositories published with the CLI, and the fault-injecting server, started and stopped by pid."""
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PREFIX = os.path.join(ROOT, "build", "prefix")
CLI = os.path.join(PREFIX, "bin", "assetpatch")
os.environ.setdefault("ASSETPATCH_LIBRARY", os.path.join(PREFIX, "lib", "libassetpatch.so.1"))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import assetpatch  # noqa: E402


def make_tree(path, files):
    for name, data in files.items():
        full = os.path.join(path, name)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)


def release_files(seed, count, size):
    rnd = random.Random(seed)
    files = {}
    for i in range(count):
        if i % 4 == 0:
            files[f"text/{i:03}.txt"] = (f"line {i} of release {seed}\n" * (size // 30)).encode()
        else:
            files[f"img/{i % 7}/{i:03}.bin"] = rnd.randbytes(size)
    files["readme.txt"] = f"release {seed}\n".encode()
    return files


class Repo:
    def __init__(self, root, files, version):
        self.root = root
        self.files = files
        self.version = version
        with open(os.path.join(root, "manifest.json")) as f:
            self.manifest = json.load(f)
        # The release index is listed as a file for clients before 0.4; it is not a resource.
        self.manifest["files"] = [f for f in self.manifest["files"] if f["path"] != ".assetpatch/index"]
        self.archive_size = self.manifest["archive"]["size"]
        self.hashes = {f["path"]: f["sha256"] for f in self.manifest["files"]}


def without_head(path):
    """The manifest.json as a publisher before heads wrote it (no "head"), its time kept: what
    these repositories test is a format-1 manifest read as such (test_named_head.py tests the
    head it names)."""
    st = os.stat(path)
    with open(path) as f:
        manifest = json.load(f)
    manifest.pop("head", None)
    with open(path, "w") as f:
        json.dump(manifest, f, indent=2)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.fixture(scope="session")
def repos(tmp_path_factory):
    """Two repositories of one package: small v1 and a larger v2 (about 6 MB, mostly random)."""
    base = tmp_path_factory.mktemp("repos")
    v1 = release_files(1, 8, 20_000)
    v2 = release_files(2, 60, 100_000)
    for name, files, version in (("v1", v1, 1), ("v2", v2, 2)):
        src = base / f"src-{name}"
        make_tree(src, files)
        if name == "v2":
            shutil.copytree(base / "v1", base / "v2")
        subprocess.run([CLI, "publish", str(src), "--repo", str(base / name), "--package", "faults",
                        "--version", str(version)], check=True, stdout=subprocess.DEVNULL)
        without_head(str(base / name / "manifest.json"))
    return {"v1": Repo(str(base / "v1"), v1, 1), "v2": Repo(str(base / "v2"), v2, 2), "base": str(base)}


class FaultServer:
    def __init__(self, root, workdir):
        port_file = os.path.join(workdir, "port")
        self.proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "faultserver.py"), root, port_file])
        for _ in range(200):
            if os.path.exists(port_file):
                break
            time.sleep(0.02)
        with open(port_file) as f:
            self.port = int(f.read())
        self.base = f"http://127.0.0.1:{self.port}"

    def url(self, repo):
        return f"{self.base}/{repo}/manifest.json"

    def get(self, path):
        with urllib.request.urlopen(self.base + path, timeout=10) as r:
            return json.loads(r.read())

    def control(self, mode="normal", n=0, times=1 << 30, rate=0):
        return self.get(f"/_control?mode={mode}&n={n}&times={times}&rate={rate}")

    def stats(self):
        return self.get("/_stats")

    def reset(self):
        return self.get("/_reset")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def server(repos, tmp_path_factory):
    s = FaultServer(repos["base"], str(tmp_path_factory.mktemp("server")))
    yield s
    s.stop()


@pytest.fixture
def fault(server):
    server.reset()
    yield server
    server.reset()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def assert_serves(client, repo):
    """Every file of `repo` resolves to bytes with the manifest's sha256."""
    assert client.current_version == repo.version
    for name, digest in repo.hashes.items():
        assert sha256_file(client.resolve(name)) == digest, name


def archive_log(server):
    """The archive requests the client made, in order: start offset asked for, status, bytes
    the server wrote, X-Client."""
    return server.stats()["archive_log"]


def assert_never_refetched(log, size):
    """What the client asked for: each request started where the bytes it already had ended,
    so the start offsets never go back, and the last request ran to the end of the archive.
    (Unlike the server's byte count, this does not depend on what sat in socket buffers.)"""
    starts = [e["start"] for e in log]
    assert starts == sorted(starts), f"a request went back: starts {starts}"
    last = log[-1]
    assert last["status"] in (200, 206) and last["start"] + last["sent"] == size, log


def partial_files(data_dir):
    d = os.path.join(data_dir, "downloads")
    return [f for f in os.listdir(d) if f.endswith(".part")] if os.path.isdir(d) else []
