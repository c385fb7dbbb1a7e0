"""Fixtures: release repositories made by the e2e fixture generator with the real CLI, served
over file:// and by a private nginx on 127.0.0.1 (started and stopped by pid)."""
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PREFIX = os.environ.get("ASSETPATCH_PREFIX", os.path.join(ROOT, "build", "prefix"))
CLI = os.path.join(PREFIX, "bin", "assetpatch")


@pytest.fixture(scope="session")
def fixtures(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("fx"))
    subprocess.run([sys.executable, os.path.join(ROOT, "Tests", "e2e", "fixtures.py"), "--cli", CLI, "--out", out], check=True)
    return out


@pytest.fixture(scope="session")
def nginx_base(fixtures, tmp_path_factory):
    d = str(tmp_path_factory.mktemp("nginx"))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    os.makedirs(f"{d}/tmp")
    user = "user root;" if os.geteuid() == 0 else ""
    with open(f"{d}/nginx.conf", "w") as f:
        f.write(f"""{user}
worker_processes 1; daemon off; pid {d}/nginx.pid; error_log {d}/error.log warn;
events {{ worker_connections 64; }}
http {{ access_log off; default_type application/octet-stream;
  client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;
  server {{ listen 127.0.0.1:{port}; root {fixtures}; }} }}
""")
    proc = subprocess.Popen(["/usr/sbin/nginx", "-p", d, "-c", f"{d}/nginx.conf", "-e", f"{d}/error.log"])
    base = f"http://127.0.0.1:{port}/repos"
    for _ in range(200):
        try:
            urllib.request.urlopen(base + "/v1/manifest.json", timeout=1).read()
            break
        except OSError:
            time.sleep(0.05)
    yield base
    proc.terminate()
    proc.wait(10)


@pytest.fixture(params=["file", "http"])
def base_url(request, fixtures):
    if request.param == "file":
        return "file://" + os.path.join(fixtures, "repos")
    return request.getfixturevalue("nginx_base")


@pytest.fixture
def bundle(fixtures):
    return os.path.join(fixtures, "bundle")


def read(path):
    with open(path, "rb") as f:
        return f.read()
